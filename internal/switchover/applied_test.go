package switchover

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// termPool is a pool of one cluster with the given term (0: the cluster
// requires none) and writer ("" for none).
func termPool(cluster string, term uint64, writer string) *pool.Pool {
	c := pool.Cluster{Name: cluster}
	if term != 0 {
		c.Term = &pool.Term{Cluster: cluster, Number: term, Writer: writer}
	}
	if writer != "" {
		c.Writers = []pool.Node{{Name: writer, Addr: writer + ":3306"}}
	}
	return &pool.Pool{Clusters: []pool.Cluster{c}}
}

func TestAppliedLogReadsTheAppliedGeneration(t *testing.T) {
	l := NewRecord()
	l.Add(1, termPool("main", 6, "dbp"))
	l.Add(2, termPool("main", 6, "dbp")) // no change: no entry
	l.Add(3, termPool("main", 7, ""))    // term granted, the new holder not yet passing here
	l.Add(4, termPool("main", 7, "dbn"))
	l.Add(4, termPool("main", 9, "x")) // a generation seen already (another sink's copy)
	l.Add(2, termPool("main", 9, "x")) // an older one
	for gen, want := range map[uint64]appliedTerm{
		0: {},
		1: {Gen: 1, Term: 6, Writer: "dbp", Addr: "dbp:3306"},
		2: {Gen: 1, Term: 6, Writer: "dbp", Addr: "dbp:3306"},
		3: {Gen: 3, Term: 7},
		4: {Gen: 4, Term: 7, Writer: "dbn", Addr: "dbn:3306"},
		9: {Gen: 4, Term: 7, Writer: "dbn", Addr: "dbn:3306"},
	} {
		if got, ok := l.at("main", gen); !ok || got != want {
			t.Errorf("generation %d: %+v %v, want %+v", gen, got, ok, want)
		}
	}
	if got, ok := l.at("other", 4); !ok || got != (appliedTerm{}) {
		t.Errorf("a cluster never in the pool: %+v %v", got, ok)
	}
	// A cluster that leaves the pool is forgotten.
	l.Add(5, termPool("other", 1, "o1"))
	if got := l.names(); !slices.Equal(got, []string{"other"}) {
		t.Errorf("clusters %v after main left the pool", got)
	}
}

// TestAppliedLogIsBounded: per cluster only the newest changes are kept,
// and a generation older than them is unknown, not "no term"; the
// clusters recorded are bounded too.
func TestAppliedLogIsBounded(t *testing.T) {
	l := NewRecord()
	for gen := uint64(1); gen <= appliedEntries+10; gen++ {
		l.Add(gen, termPool("main", gen, "db1"))
	}
	if n := len(l.clusters["main"].entries); n != appliedEntries {
		t.Fatalf("%d entries kept, want %d", n, appliedEntries)
	}
	if _, ok := l.at("main", 10); ok {
		t.Error("generation 10 was trimmed but reads as known")
	}
	if got, ok := l.at("main", 11); !ok || got.Term != 11 {
		t.Errorf("generation 11: %+v %v", got, ok)
	}
	big := &pool.Pool{}
	for i := range appliedClusters + 5 {
		big.Clusters = append(big.Clusters, pool.Cluster{Name: fmt.Sprintf("c%05d", i)})
	}
	l.Add(1000, big)
	if n := len(l.names()); n != appliedClusters {
		t.Errorf("%d clusters recorded, want %d", n, appliedClusters)
	}
}

func TestAppliedAnswer(t *testing.T) {
	l := NewRecord()
	l.Add(1, termPool("main", 6, "dbp"))
	l.Add(4, termPool("main", 7, "dbn"))
	l.Add(5, termPool("main", 7, "dbn"))
	ok := func(name string, gen uint64) view.SinkStatus {
		return view.SinkStatus{Name: name, State: view.SinkOK, AppliedGeneration: gen}
	}
	failing := view.SinkStatus{Name: "haproxy", State: view.SinkFailing, LastError: "dial: refused", AppliedGeneration: 3}
	frozen := view.SinkStatus{Name: "file", State: view.SinkOK, Frozen: true, AppliedGeneration: 2}
	for _, tc := range []struct {
		name  string
		sinks []view.SinkStatus
		want  consensus.AppliedAnswer
	}{
		{"no sinks", nil, consensus.AppliedAnswer{Node: "app1", Cluster: "main"}},
		{"all applied", []view.SinkStatus{ok("haproxy", 5), ok("file", 5)},
			consensus.AppliedAnswer{Node: "app1", Cluster: "main", Term: 7, Writer: "dbn", Addr: "dbn:3306", Sinks: 2}},
		{"one sink behind: the oldest counts", []view.SinkStatus{ok("haproxy", 5), ok("file", 4)},
			consensus.AppliedAnswer{Node: "app1", Cluster: "main", Term: 7, Writer: "dbn", Addr: "dbn:3306", Sinks: 2,
				Why: "file: applying (generation 4 of 5)"}},
		{"failing and frozen", []view.SinkStatus{failing, frozen},
			consensus.AppliedAnswer{Node: "app1", Cluster: "main", Term: 6, Writer: "dbp", Addr: "dbp:3306", Sinks: 2,
				Why: "haproxy: failing: dial: refused; file: frozen (isolated)"}},
		{"nothing applied", []view.SinkStatus{{Name: "file", State: view.SinkPending}},
			consensus.AppliedAnswer{Node: "app1", Cluster: "main", Sinks: 1, Why: "file: nothing applied yet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := appliedAnswer("app1", "main", l, tc.sinks, 5); got != tc.want {
				t.Errorf("answer %+v, want %+v", got, tc.want)
			}
		})
	}
	// A router more than appliedEntries changes behind says it does not know.
	for gen := uint64(6); gen < 6+appliedEntries; gen++ {
		l.Add(gen, termPool("main", gen+2, "dbn"))
	}
	got := appliedAnswer("app1", "main", l, []view.SinkStatus{ok("file", 2)}, 69)
	if got.Term != 0 || got.Writer != "" || !strings.Contains(got.Why, "generation 2 is older than this router's record") {
		t.Errorf("far behind: %+v", got)
	}
	if _, err := consensus.EncodeAppliedAnswer(got); err != nil {
		t.Errorf("far behind: %v", err)
	}
}

func TestAppliedTerms(t *testing.T) {
	l := NewRecord()
	p := termPool("main", 3, "db1")
	p.Clusters = append(p.Clusters, pool.Cluster{Name: "plain", Writers: []pool.Node{{Name: "p1", Addr: "p1:3306"}}})
	l.Add(1, p)
	l.Add(2, &pool.Pool{Clusters: append([]pool.Cluster{termPool("main", 4, "db2").Clusters[0]}, p.Clusters[1])})
	sinks := []view.SinkStatus{{Name: "haproxy", AppliedGeneration: 2}, {Name: "file", AppliedGeneration: 1}}
	if got, want := AppliedTerms(l, sinks), map[string]uint64{"main": 3, "plain": 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("applied terms %v, want %v", got, want)
	}
	if got := AppliedTerms(l, nil); got != nil {
		t.Errorf("without sinks: %v", got)
	}
}

// fakeSink checks, at each Update, that the applied record already has
// the update's generation.
type fakeSink struct {
	log  *Record
	seen []uint64
}

func (f *fakeSink) Start(context.Context) {}
func (f *fakeSink) Close() error          { return nil }
func (f *fakeSink) Status() view.SinkStatus {
	return view.SinkStatus{Name: "fake"}
}
func (f *fakeSink) Update(u sink.Update) {
	f.log.mu.Lock()
	f.seen = append(f.seen, f.log.last)
	f.log.mu.Unlock()
}

func TestRecordedSinkRecordsFirst(t *testing.T) {
	l := NewRecord()
	f := &fakeSink{log: l}
	var s sink.Sink = RecordedSink{Sink: f, Log: l}
	s.Update(sink.Update{Pool: termPool("main", 1, "db1"), Generation: 1})
	s.Update(sink.Update{Pool: termPool("main", 2, "db2"), Generation: 2})
	if !slices.Equal(f.seen, []uint64{1, 2}) {
		t.Errorf("the record held generations %v when the sink got 1 and 2", f.seen)
	}
}

func answerFrom(t *testing.T, a consensus.AppliedAnswer) serf.NodeResponse {
	t.Helper()
	b, err := consensus.EncodeAppliedAnswer(a)
	if err != nil {
		t.Fatal(err)
	}
	return serf.NodeResponse{From: a.Node, Payload: b}
}

func TestAppliedWaitReport(t *testing.T) {
	m := func(name, role string, st serf.MemberStatus) serf.Member {
		tg := map[string]string{}
		if role != "" {
			tg[tags.KeyRole] = role
		}
		return serf.Member{Name: name, Tags: tg, Status: st}
	}
	members := []serf.Member{
		m("app1", tags.RoleApp, serf.StatusAlive),        // applied
		m("app2", tags.RoleApp, serf.StatusAlive),        // an older term
		m("app3", tags.RoleApp, serf.StatusAlive),        // no answer
		m("app4", tags.RoleApp, serf.StatusAlive),        // no sinks: not a router
		m("app5", tags.RoleApp, serf.StatusFailed),       // unreachable
		m("app6", tags.RoleApp, serf.StatusLeft),         // unreachable
		m("db1", tags.RoleDB, serf.StatusAlive),          // drives a sink, applied
		m("db2", tags.RoleDB, serf.StatusAlive),          // no answer: not expected
		m("db3", tags.RoleDB, serf.StatusFailed),         // answered with sinks earlier, now failed
		m("serf1", "", serf.StatusAlive),                 // a stock serf agent, even with a valid answer
		m("bad\x01name", tags.RoleApp, serf.StatusAlive), // shown in its escaped form
	}
	isMember := func(n string) bool {
		return slices.ContainsFunc(members, func(m serf.Member) bool { return m.Name == n })
	}
	w := newAppliedWait("main", 8, "dbn")
	applied := consensus.AppliedAnswer{Cluster: "main", Term: 8, Writer: "dbn", Addr: "10.0.0.9:3306", Sinks: 1}
	for _, r := range []struct {
		ans  consensus.AppliedAnswer
		kept bool
	}{
		{with(applied, "app1"), true},
		{consensus.AppliedAnswer{Node: "app2", Cluster: "main", Term: 7, Writer: "dbp", Addr: "10.0.0.8:3306", Sinks: 2, Why: "haproxy: failing: x"}, true},
		{consensus.AppliedAnswer{Node: "app4", Cluster: "main"}, true},
		{with(applied, "db1"), true},
		{with(applied, "db3"), true},
		{with(applied, "serf1"), true},
		{with(applied, "stranger"), false}, // not a member
	} {
		if got := w.observe(answerFrom(t, r.ans), isMember); got != r.kept {
			t.Errorf("answer of %s kept %v, want %v", r.ans.Node, got, r.kept)
		}
	}
	// An answer naming another node than its sender, or another cluster,
	// or that does not decode, is not kept.
	spoofed := answerFrom(t, with(applied, "app3"))
	spoofed.From = "app1"
	other := with(applied, "app3")
	other.Cluster = "shard2"
	for _, r := range []serf.NodeResponse{spoofed, answerFrom(t, other), {From: "app3", Payload: []byte("{")}} {
		if w.observe(r, isMember) {
			t.Errorf("kept %s's %q", r.From, r.Payload)
		}
	}
	got := w.report(members, 3*time.Second)
	want := AppliedReport{
		Applied:     []string{"app1", "db1"},
		Pending:     map[string]string{"app2": "applied term 7 (writer dbp): haproxy: failing: x", "app3": "no answer", `bad\x01name`: "no answer"},
		Unreachable: map[string]string{"app5": "failed", "app6": "left", "db3": "failed"},
		Took:        3 * time.Second,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("report\n%+v\nwant\n%+v", got, want)
	}
	if got.Done() {
		t.Error("done with routers pending")
	}
	// A newer term with the same writer counts as applied; the writer
	// must match.
	w = newAppliedWait("main", 8, "dbn")
	newer := with(applied, "app1")
	newer.Term = 9
	w.observe(answerFrom(t, newer), isMember)
	if r := w.report(members[:1], 0); !r.Done() || !slices.Equal(r.Applied, []string{"app1"}) {
		t.Errorf("term 9: %+v", r)
	}
	w = newAppliedWait("main", 8, "dbx")
	w.observe(answerFrom(t, newer), isMember)
	if r := w.report(members[:1], 0); r.Done() || r.Pending["app1"] != "applied term 9 (writer dbn)" {
		t.Errorf("another writer: %+v", r)
	}
}

func with(a consensus.AppliedAnswer, node string) consensus.AppliedAnswer {
	a.Node = node
	return a
}
