package metrics

import (
	"net"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/view"
)

// hostile strings as they arrive from other machines, before any escaping.
var hostile = []string{"db\xff", "main\n\x1b[31mX", "c\xff", "\u202egpj", "\x00", "", `a\b`}

// Every collector built from remote data gathers on a registry even when
// the view holds raw invalid UTF-8 and control characters, and every label
// value it produces is printable UTF-8.
func TestCollectorsGatherHostileNames(t *testing.T) {
	var pv view.Pool
	sec, tx := 1.5, uint64(2)
	var members []serf.Member
	for _, s := range hostile {
		pv.Clusters = append(pv.Clusters, view.ClusterPool{
			Name:     s,
			Writers:  []view.PoolNode{{Name: s + "w"}},
			Readers:  []view.PoolNode{{Name: s + "r", Lag: &view.Lag{Source: s, Seconds: &sec, Transactions: &tx}}},
			Out:      []view.PoolNode{{Name: s + "o", Reason: s}},
			Conflict: []string{s, s + "2"},
		})
		pv.Sinks = append(pv.Sinks, view.SinkStatus{Name: s + "sink", State: "ok"})
		members = append(members, serf.Member{Name: s, Addr: net.IPv4(127, 0, 0, 1), Status: serf.StatusAlive, Tags: map[string]string{"cluster": s}})
	}
	hooks := []HookState{{Handler: "member-join=/bin/\xff"}}

	reg := prometheus.NewRegistry()
	ag := NewAgent()
	reg.MustRegister(ag.Collectors()...)
	reg.MustRegister(
		NewPoolCollector(func() view.Pool { return pv }),
		NewMembersCollector(func() []serf.Member { return members }, func() int { return 0 }),
		NewStateCollector(func() (ProbeState, bool) { return ProbeState{State: "passing"}, true }, func() []HookState { return hooks }),
	)
	for _, s := range hostile {
		ag.PoolTransitions.WithLabelValues(Label(s), "out", Label(s)).Inc()
		ag.PoolConflicts.WithLabelValues(Label(s)).Inc()
	}
	if n := checkLabelsPrintable(t, reg); n == 0 {
		t.Fatal("no labels gathered")
	}
}

// checkLabelsPrintable gathers reg, reports every label value that is not
// printable UTF-8, and returns how many labels it saw.
func checkLabelsPrintable(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				n++
				if v := l.GetValue(); !utf8.ValidString(v) || !member.Printable(v) {
					t.Errorf("%s: label %s=%q is not printable UTF-8", mf.GetName(), l.GetName(), v)
				}
			}
		}
	}
	return n
}

func TestLabel(t *testing.T) {
	for in, want := range map[string]string{"main": "main", "db\xff": `db\xff`, `db\xff`: `db\xff`, "a\nb": `a\nb`} {
		if got := Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}
