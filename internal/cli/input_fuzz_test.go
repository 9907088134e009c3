package cli

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
	filesink "github.com/shoaldb/shoal/internal/sink/file"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
	"github.com/shoaldb/shoal/pkg/client"
)

// listFileRe is the only shape of file name the file sink may create in
// lists_dir.
var listFileRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}-(writers|readers)\.txt$`)

// FuzzHostileMembers drives a member list built from arbitrary names, tags,
// cluster names and bytes (invalid UTF-8 included) through everything that
// turns gossip into output: admission and the pool (member.FromSerf,
// pool.Compute), the API's member view (api.ToMember), the metrics
// collectors gathered on a fresh registry, the file sink writing into a
// temp dir, and the CLI renderers of members and pool. It checks that
// nothing panics, every label is printable UTF-8, every file created is in
// lists_dir with a printable name of the sink's own pattern, the sink never
// fails, and an invalid member is never a writer or a reader.
func FuzzHostileMembers(f *testing.F) {
	f.Add("db\xff", "c\xff", "note", "\x1b[2J", "db2", "main", uint8(0), uint8(0))
	f.Add("evil", "main\n\x1b[31mX", "k", "v", "db\u202e", "main", uint8(3), uint8(0x5a))
	f.Add(strings.Repeat("x", 300), strings.Repeat("c", 300), "a b", "v\xff", "", "", uint8(70), uint8(0xff))
	f.Add("db1", "main", "dc", "eu", "db2", "main", uint8(0), uint8(0x11))
	f.Fuzz(func(t *testing.T, name1, cluster1, key, value, name2, cluster2 string, ntags, flags uint8) {
		members := hostileMembers(name1, cluster1, key, value, name2, cluster2, ntags, flags)
		pms := make([]pool.Member, len(members))
		for i, m := range members {
			pms[i] = member.FromSerf(m).Pool()
		}
		policy := pool.Policy{WriterServesReads: flags&0x80 != 0}
		prev := pool.Compute(pms[:len(pms)/2], policy, nil)
		p := pool.Compute(pms, policy, prev)

		// An invalid member (judged on the raw input) is never routed to.
		for _, m := range members {
			pr := member.Check(m.Name, m.Tags)
			if pr.OK() {
				continue
			}
			for _, c := range p.Clusters {
				for _, n := range append(append([]pool.Node(nil), c.Writers...), c.Readers...) {
					if n.Name == m.Name || n.Name == member.Escape(m.Name) {
						t.Fatalf("invalid member %q (%s: %s) is in %q as writer or reader", n.Name, pr.Reason, pr.Detail, c.Name)
					}
				}
			}
		}

		// The file sink, into a temp dir.
		dir := t.TempDir()
		lists := filepath.Join(dir, "lists")
		if err := os.Mkdir(lists, 0o755); err != nil {
			t.Fatal(err)
		}
		fsink, err := filesink.New(filesink.Config{Path: filepath.Join(dir, "pool.json"), ListsDir: lists}, "fuzz",
			sink.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := fsink.Apply(sink.Update{Pool: prev}); err != nil {
			t.Fatalf("file sink apply (prev): %v", err)
		}
		if err := fsink.Apply(sink.Update{Pool: p, Frozen: flags&0x40 != 0}); err != nil {
			t.Fatalf("file sink apply: %v", err)
		}
		checkFiles(t, dir, lists)

		// The views the API serves, and /metrics.
		pv := poolView(p, fsink)
		var ms []client.Member
		for _, m := range members {
			ms = append(ms, api.ToMember(m))
		}
		gatherAll(t, pv, members, pool.Diff(prev, p))

		// The CLI renderers.
		var out bytes.Buffer
		for _, format := range []string{"table", "json"} {
			if err := writeMembers(&out, ms, format, nil); err != nil {
				t.Fatal(err)
			}
			// --columns comes from the operator, who types keys as shown:
			// escaped (a raw control character here is the operator's own).
			if err := writeMembers(&out, ms, format, []string{member.Escape(key), tags.KeyCluster}); err != nil {
				t.Fatal(err)
			}
		}
		cv := api.ToPool(pv)
		if err := writePool(&out, &cv); err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(out.Bytes()) || bytes.ContainsAny(out.Bytes(), "\x1b\r\x00") {
			t.Fatalf("CLI output is not safe text:\n%q", out.String())
		}
	})
}

// hostileMembers builds four serf members from the fuzz input: two fully
// driven by it, a normal writer that shares the first one's cluster name, and
// a reader in "main".
func hostileMembers(name1, cluster1, key, value, name2, cluster2 string, ntags, flags uint8) []serf.Member {
	health := func(readOnly bool) string {
		return tags.Encode(tags.Health{State: tags.State(flags % 3), ReadOnly: readOnly, Replica: readOnly,
			IORunning: true, SQLRunning: true, LagKnown: true})
	}
	t1 := map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: cluster1, tags.KeyHealth: health(false), key: value}
	for i := range int(ntags) {
		t1[fmt.Sprintf("%s%d", key, i)] = value
	}
	if flags&1 != 0 {
		t1[tags.KeyMaint] = value
	}
	t2 := map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: cluster2, tags.KeyHealth: health(flags&2 != 0)}
	if flags&4 != 0 {
		t2[tags.KeyHealth] = value // a garbage health tag
	}
	// serf's member list holds each name once: two members the fuzzer
	// named alike would make a valid one look like the invalid one.
	seen := map[string]bool{"db-ok": true, "db-r": true}
	unique := func(n string) string {
		for seen[n] {
			n += "~"
		}
		seen[n] = true
		return n
	}
	name1 = unique(name1)
	name2 = unique(name2)
	ip := net.IPv4(10, 0, 0, 1)
	return []serf.Member{
		{Name: name1, Addr: ip, Port: 7946, Tags: t1, Status: serf.MemberStatus(1 + flags>>3%4)},
		{Name: name2, Addr: ip, Port: 7947, Tags: t2, Status: serf.StatusAlive},
		{Name: "db-ok", Addr: ip, Port: 7948, Tags: map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: cluster1,
			tags.KeyHealth: tags.Encode(tags.Health{State: tags.Passing})}, Status: serf.StatusAlive},
		{Name: "db-r", Addr: ip, Port: 7949, Tags: map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main",
			tags.KeyHealth: health(true)}, Status: serf.StatusAlive},
	}
}

// checkFiles: pool.json and, in lists, only list files of the sink's own
// pattern with printable names; nothing else anywhere under dir.
func checkFiles(t *testing.T, dir, lists string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case rel == "." || rel == "lists" || rel == "pool.json":
			return nil
		case filepath.Dir(path) != lists:
			t.Errorf("file outside lists_dir: %q", rel)
		case !member.Printable(d.Name()) || !listFileRe.MatchString(d.Name()):
			t.Errorf("list file with an unexpected name: %q", d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// poolView is the pool as the agent shows it (agent.PoolView).
func poolView(p *pool.Pool, fsink *filesink.Sink) view.Pool {
	nodes := func(ns []pool.Node) []view.PoolNode {
		out := []view.PoolNode{}
		for _, n := range ns {
			out = append(out, view.PoolNode{Name: n.Name, Addr: n.Addr, Reason: string(n.Reason), Detail: n.Detail})
		}
		return out
	}
	v := view.Pool{Clusters: []view.ClusterPool{}}
	for _, c := range p.Clusters {
		v.Clusters = append(v.Clusters, view.ClusterPool{Name: c.Name, Writers: nodes(c.Writers), Readers: nodes(c.Readers),
			Out: nodes(c.Out), Conflict: c.Conflict})
	}
	st := fsink.Stats()
	v.Sinks = []view.SinkStatus{{Name: "file", State: "ok", LastError: st.LastError, Notes: st.NoLists}}
	return v
}

// gatherAll registers the collectors and the pool counters on a fresh
// registry, gathers, and checks every label value.
func gatherAll(t *testing.T, pv view.Pool, members []serf.Member, changes []pool.Change) {
	t.Helper()
	reg := prometheus.NewRegistry()
	ag := metrics.NewAgent()
	reg.MustRegister(ag.Collectors()...)
	reg.MustRegister(
		metrics.NewPoolCollector(func() view.Pool { return pv }),
		metrics.NewMembersCollector(func() []serf.Member { return members }, func() int { return 0 }),
	)
	for _, c := range changes {
		ag.PoolTransitions.WithLabelValues(metrics.Label(c.Cluster), string(c.To), metrics.Label(string(c.Reason))).Inc()
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); !utf8.ValidString(v) || !member.Printable(v) {
					t.Fatalf("%s: label %s=%q is not printable UTF-8", mf.GetName(), l.GetName(), v)
				}
			}
		}
	}
}
