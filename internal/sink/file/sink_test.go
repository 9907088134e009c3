package file

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/testutil/pooltest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/pkg/poolschema"
)

func addr(name string) string { return name + ".db:3306" }

func nodes(names []string) []pool.Node {
	out := make([]pool.Node, len(names))
	for i, n := range names {
		out[i] = pool.Node{Name: n, Addr: addr(n)}
	}
	return out
}

func out(name string, reason pool.Reason, detail string) pool.Node {
	return pool.Node{Name: name, Addr: addr(name), Reason: reason, Detail: detail}
}

func cluster(name string, writers, readers []string, outs ...pool.Node) pool.Cluster {
	return pool.Cluster{Name: name, Writers: nodes(writers), Readers: nodes(readers), Out: outs}
}

func testPool(cs ...pool.Cluster) *pool.Pool { return &pool.Pool{Clusters: cs} }

type testSink struct {
	*Sink
	cfg   Config
	dir   string
	clock *clockwork.FakeClock
	logs  *testkit.SyncBuffer
}

var testNow = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)

// newTestSink returns a sink writing dir/pool.json and lists in dir/lists.
func newTestSink(t *testing.T, dir string, mods ...func(*Config)) *testSink {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(filepath.Join(dir, "lists"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Path: filepath.Join(dir, "pool.json"), ListsDir: filepath.Join(dir, "lists")}
	for _, m := range mods {
		m(&cfg)
	}
	logs := &testkit.SyncBuffer{}
	clock := clockwork.NewFakeClockAt(testNow)
	s, err := New(cfg, "agent1", sink.Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:  clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &testSink{Sink: s, cfg: cfg, dir: dir, clock: clock, logs: logs}
}

// tick fires the loop's timer and returns once the loop has handled it.
func (s *testSink) tick(t *testing.T) {
	t.Helper()
	testkit.Tick(t, s.clock, s.Sink.cfg.Interval)
}

func (s *testSink) list(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "lists", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (s *testSink) doc(t *testing.T) Document {
	t.Helper()
	b, err := os.ReadFile(s.cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%v in\n%s", err, b)
	}
	return d
}

func mustApply(t *testing.T, s *testSink, p *pool.Pool, frozen bool) {
	t.Helper()
	if err := s.Apply(sink.Update{Pool: p, Frozen: frozen}); err != nil {
		t.Fatal(err)
	}
}

// fileID identifies one version of a file: a rewrite renames a new inode
// over it.
type fileID struct {
	ino   uint64
	mtime time.Time
}

func idOf(t *testing.T, path string) fileID {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileID{fi.Sys().(*syscall.Stat_t).Ino, fi.ModTime()}
}

func TestJSONDocument(t *testing.T) {
	s := newTestSink(t, "")
	main := cluster("main", []string{"db1"}, []string{"db1", "db2"},
		out("db3", pool.ReasonLag, "12s behind"), out("db4", pool.ReasonConflict, ""))
	main.Conflict = []string{"db1", "db4"}
	p := testPool(cluster("empty", nil, nil), main)
	mustApply(t, s, p, false)

	m := readJSON(t, s.cfg.Path)
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if got := keys(m); !slices.Equal(got, []string{"clusters", "frozen", "node", "updated_at", "version"}) {
		t.Errorf("top-level keys %q", got)
	}
	if m["version"] != 1.0 || m["node"] != "agent1" || m["frozen"] != false || m["updated_at"] != "2025-01-02T03:04:05.000000006Z" {
		t.Errorf("header %v", m)
	}
	clusters := m["clusters"].([]any)
	empty := clusters[0].(map[string]any)
	if got := keys(empty); !slices.Equal(got, []string{"conflict", "name", "out", "readers", "writers"}) {
		t.Errorf("empty cluster keys %q", got)
	}
	for _, k := range []string{"writers", "readers", "out", "conflict"} {
		if a, ok := empty[k].([]any); !ok || len(a) != 0 {
			t.Errorf("empty cluster %s = %#v, want []", k, empty[k])
		}
	}
	c := clusters[1].(map[string]any)
	if got := keys(c); !slices.Equal(got, []string{"conflict", "name", "out", "readers", "writers"}) {
		t.Errorf("cluster keys %q", got)
	}
	w := c["writers"].([]any)[0].(map[string]any)
	if got := keys(w); !slices.Equal(got, []string{"addr", "name"}) || w["name"] != "db1" || w["addr"] != "db1.db:3306" {
		t.Errorf("writer %v", w)
	}
	o := c["out"].([]any)
	if got := o[0].(map[string]any); got["reason"] != "lag" || got["detail"] != "12s behind" {
		t.Errorf("out[0] %v", got)
	}
	if got := keys(o[1].(map[string]any)); !slices.Equal(got, []string{"addr", "name", "reason"}) {
		t.Errorf("out[1] keys %q (empty detail must be omitted)", got)
	}

	d := s.doc(t)
	type node = poolschema.Node
	want := Document{Version: 1, UpdatedAt: testNow, Node: "agent1", Clusters: []Cluster{
		{Cluster: poolschema.Cluster{Name: "empty", Writers: []node{}, Readers: []node{}, Out: []node{}, Conflict: []string{}}},
		{Cluster: poolschema.Cluster{Name: "main",
			Writers:  []node{{Name: "db1", Addr: "db1.db:3306"}},
			Readers:  []node{{Name: "db1", Addr: "db1.db:3306"}, {Name: "db2", Addr: "db2.db:3306"}},
			Out:      []node{{Name: "db3", Addr: "db3.db:3306", Reason: "lag", Detail: "12s behind"}, {Name: "db4", Addr: "db4.db:3306", Reason: "conflict"}},
			Conflict: []string{"db1", "db4"}}},
	}}
	if !bytes.Equal(encode(d), encode(want)) {
		t.Errorf("document\n%s\nwant\n%s", encode(d), encode(want))
	}

	// A nil pool is an empty document, clusters an empty array.
	mustApply(t, s, nil, false)
	raw, _ := os.ReadFile(s.cfg.Path)
	if !strings.Contains(string(raw), `"clusters": []`) {
		t.Errorf("nil pool:\n%s", raw)
	}
}

func TestLists(t *testing.T) {
	s := newTestSink(t, "")
	p := testPool(
		cluster("c1", []string{"db1"}, []string{"db3", "db2", "db1"}, out("db4", pool.ReasonCritical, "")),
		cluster("c2", nil, nil, out("db9", pool.ReasonNoHealth, "")),
	)
	mustApply(t, s, p, false)
	for name, want := range map[string]string{
		"c1-writers.txt": "db1.db:3306\n",
		"c1-readers.txt": "db1.db:3306\ndb2.db:3306\ndb3.db:3306\n",
		"c2-writers.txt": "",
		"c2-readers.txt": "",
	} {
		if got := s.list(t, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(s.dir, "lists"))
	if len(entries) != 4 {
		t.Errorf("%d files in lists_dir, want 4 (no temp files left)", len(entries))
	}
	if st := s.Stats(); st.Writes != 5 || st.Applies != 1 || st.Skipped != 0 || st.Failures != 0 || st.LastSuccess != testNow {
		t.Errorf("status %+v", st)
	}

	// No lists_dir: the JSON file only.
	s2 := newTestSink(t, "", func(c *Config) { c.ListsDir = "" })
	mustApply(t, s2, p, false)
	if entries, _ := os.ReadDir(filepath.Join(s2.dir, "lists")); len(entries) != 0 {
		t.Errorf("lists written without lists_dir: %v", entries)
	}
	if st := s2.Stats(); st.Writes != 1 {
		t.Errorf("status %+v", st)
	}
}

func TestMode(t *testing.T) {
	dir := t.TempDir()
	s := newTestSink(t, dir, func(c *Config) { c.Mode = "0640" })
	p := testPool(cluster("c1", []string{"db1"}, nil))
	mustApply(t, s, p, false)
	for _, path := range []string{s.cfg.Path, filepath.Join(dir, "lists", "c1-writers.txt")} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: %v %v", path, fi.Mode(), err)
		}
	}
	// A restart with another mode rewrites the files even though their
	// content is the same.
	s2 := newTestSink(t, dir, func(c *Config) { c.Mode = "0600" })
	mustApply(t, s2, p, false)
	if fi, err := os.Stat(s.cfg.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after restart: %v %v", fi.Mode(), err)
	}
	if st := s2.Stats(); st.Writes != 3 {
		t.Errorf("restart with new mode wrote %d files, want 3", st.Writes)
	}
}

func TestNoRewriteWhenUnchanged(t *testing.T) {
	dir := t.TempDir()
	s := newTestSink(t, dir)
	p := testPool(cluster("c1", []string{"db1"}, []string{"db2"}, out("db3", pool.ReasonLag, "")))
	mustApply(t, s, p, false)
	paths := []string{s.cfg.Path, filepath.Join(dir, "lists", "c1-writers.txt"), filepath.Join(dir, "lists", "c1-readers.txt")}
	ids := map[string]fileID{}
	for _, path := range paths {
		ids[path] = idOf(t, path)
	}
	time.Sleep(10 * time.Millisecond) // so a rewrite would show in the mtime too

	mustApply(t, s, p.Clone(), false)
	if st := s.Stats(); st.Writes != 3 || st.Applies != 2 || st.Skipped != 1 {
		t.Errorf("status %+v", st)
	}
	// A restarted agent, at another time, keeps the files it finds right.
	s2 := newTestSink(t, dir)
	s2.clock.Advance(time.Hour)
	mustApply(t, s2, p, false)
	if st := s2.Stats(); st.Writes != 0 || st.Skipped != 1 {
		t.Errorf("restarted sink status %+v", st)
	}
	for _, path := range paths {
		if got := idOf(t, path); got != ids[path] {
			t.Errorf("%s rewritten: %v, was %v", path, got, ids[path])
		}
	}
	if d := s2.doc(t); !d.UpdatedAt.Equal(testNow) {
		t.Errorf("updated_at %v", d.UpdatedAt)
	}

	// A file removed behind the sink's back is written again.
	if err := os.Remove(paths[1]); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s2, p, false)
	if st := s2.Stats(); st.Writes != 1 {
		t.Errorf("removed file: status %+v", st)
	}
	if got := s2.list(t, "c1-writers.txt"); got != "db1.db:3306\n" {
		t.Errorf("rewritten list %q", got)
	}

	// An unparsable JSON file is rewritten at the first apply.
	if err := os.WriteFile(s.cfg.Path, []byte(`{"version": 1, "clus`), 0o644); err != nil {
		t.Fatal(err)
	}
	s3 := newTestSink(t, dir)
	mustApply(t, s3, p, false)
	if st := s3.Stats(); st.Writes != 1 {
		t.Errorf("after a truncated file: status %+v", st)
	}
	s3.doc(t)
}

func TestRewriteOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	s := newTestSink(t, dir)
	p := testPool(cluster("c1", []string{"db1"}, []string{"db2"}, out("db3", pool.ReasonLag, "")))
	mustApply(t, s, p, false)
	writers, readers := filepath.Join(dir, "lists", "c1-writers.txt"), filepath.Join(dir, "lists", "c1-readers.txt")
	jsonID, wID, rID := idOf(t, s.cfg.Path), idOf(t, writers), idOf(t, readers)

	// db3 is still out, for another reason: only the JSON file changes.
	p.Clusters[0].Out[0].Reason, p.Clusters[0].Out[0].Detail = pool.ReasonCritical, "disk full"
	mustApply(t, s, p, false)
	if idOf(t, s.cfg.Path) == jsonID {
		t.Error("JSON file not rewritten")
	}
	if idOf(t, writers) != wID || idOf(t, readers) != rID {
		t.Error("unchanged lists rewritten")
	}
	if d := s.doc(t); d.Clusters[0].Out[0].Reason != "critical" || d.Clusters[0].Out[0].Detail != "disk full" {
		t.Errorf("out %+v", d.Clusters[0].Out)
	}
	if st := s.Stats(); st.Writes != 4 {
		t.Errorf("status %+v", st)
	}

	// db3 becomes a reader: the readers list and the JSON file change.
	jsonID = idOf(t, s.cfg.Path)
	p = testPool(cluster("c1", []string{"db1"}, []string{"db2", "db3"}))
	mustApply(t, s, p, false)
	if idOf(t, writers) != wID || idOf(t, readers) == rID || idOf(t, s.cfg.Path) == jsonID {
		t.Error("wrong files rewritten")
	}
	if got := s.list(t, "c1-readers.txt"); got != "db2.db:3306\ndb3.db:3306\n" {
		t.Errorf("readers %q", got)
	}
}

func TestFrozen(t *testing.T) {
	s := newTestSink(t, "")
	mustApply(t, s, testPool(cluster("c1", []string{"db1"}, []string{"db2", "db3"})), false)

	// Frozen: db1 loses the writer role to db2, db3 goes out, db4 comes in.
	// The lists lose nobody; the JSON file has the pool as computed.
	frozen := testPool(cluster("c1", []string{"db2"}, []string{"db2", "db4"},
		out("db1", pool.ReasonAgentFailed, ""), out("db3", pool.ReasonAgentFailed, "")))
	mustApply(t, s, frozen, true)
	if got := s.list(t, "c1-writers.txt"); got != "db1.db:3306\ndb2.db:3306\n" {
		t.Errorf("frozen writers %q", got)
	}
	if got := s.list(t, "c1-readers.txt"); got != "db2.db:3306\ndb3.db:3306\ndb4.db:3306\n" {
		t.Errorf("frozen readers %q", got)
	}
	d := s.doc(t)
	c := d.Clusters[0]
	if !d.Frozen || !slices.Equal(c.Held, []string{"db1", "db3"}) || len(c.Writers) != 1 || c.Writers[0].Name != "db2" ||
		len(c.Readers) != 2 || len(c.Out) != 2 {
		t.Errorf("frozen document %s", encode(d))
	}
	if st := s.Stats(); !st.Frozen || !slices.Equal(st.Held, []string{"c1/db1", "c1/db3"}) {
		t.Errorf("status %+v", st)
	}

	// Still frozen, db4 goes out too (its health tag is gone, which an
	// isolated view cannot tell from news it missed): it was written, so it
	// is held as well.
	mustApply(t, s, testPool(cluster("c1", []string{"db2"}, []string{"db2"},
		out("db1", pool.ReasonAgentFailed, ""), out("db3", pool.ReasonAgentFailed, ""), out("db4", pool.ReasonNoHealth, ""))), true)
	if got := s.list(t, "c1-readers.txt"); got != "db2.db:3306\ndb3.db:3306\ndb4.db:3306\n" {
		t.Errorf("frozen readers %q", got)
	}
	if got := s.doc(t).Clusters[0].Held; !slices.Equal(got, []string{"db1", "db3", "db4"}) {
		t.Errorf("held %q", got)
	}

	// Unfrozen: the lists follow the pool again.
	mustApply(t, s, frozen, false)
	if got := s.list(t, "c1-writers.txt"); got != "db2.db:3306\n" {
		t.Errorf("unfrozen writers %q", got)
	}
	if got := s.list(t, "c1-readers.txt"); got != "db2.db:3306\ndb4.db:3306\n" {
		t.Errorf("unfrozen readers %q", got)
	}
	raw, _ := os.ReadFile(s.cfg.Path)
	if strings.Contains(string(raw), "held") || !strings.Contains(string(raw), `"frozen": false`) {
		t.Errorf("unfrozen document:\n%s", raw)
	}
	if st := s.Stats(); st.Frozen || len(st.Held) != 0 {
		t.Errorf("status %+v", st)
	}
	logs := s.logs.String()
	for _, want := range []string{"file sink frozen", "nodes kept in lists while frozen", "file sink unfrozen", "file sink holds no nodes any more"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %q in logs:\n%s", want, logs)
		}
	}
}

func TestFrozenAtStart(t *testing.T) {
	// The lists on disk are the last view: a sink that starts frozen keeps
	// their nodes. A kept address no node has is named by its address.
	dir := t.TempDir()
	lists := filepath.Join(dir, "lists")
	if err := os.MkdirAll(lists, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lists, "c1-readers.txt"), []byte("db2.db:3306\nold.db:3306\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestSink(t, dir)
	mustApply(t, s, testPool(cluster("c1", []string{"db1"}, []string{"db3"}, out("db2", pool.ReasonAgentFailed, ""))), true)
	if got := s.list(t, "c1-readers.txt"); got != "db2.db:3306\ndb3.db:3306\nold.db:3306\n" {
		t.Errorf("readers %q", got)
	}
	if got := s.doc(t).Clusters[0].Held; !slices.Equal(got, []string{"db2", "old.db:3306"}) {
		t.Errorf("held %q", got)
	}
}

// The lists of a cluster gone from the pool are removed; only the sink's
// own files: another file in lists_dir, and a list file of a cluster this
// sink never listed, stay.
func TestStaleClusterListsRemoved(t *testing.T) {
	s := newTestSink(t, "")
	lists := filepath.Join(s.dir, "lists")
	for _, name := range []string{"other.txt", "old-writers.txt"} {
		if err := os.WriteFile(filepath.Join(lists, name), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustApply(t, s, testPool(cluster("c1", []string{"db1"}, nil), cluster("c2", []string{"db5"}, nil)), false)
	if got := s.list(t, "c2-writers.txt"); got != "db5.db:3306\n" {
		t.Errorf("c2 list %q", got)
	}
	for range 2 {
		mustApply(t, s, testPool(cluster("c1", []string{"db1"}, nil)), false)
	}
	if got := listNames(t, lists); got != "c1-readers.txt c1-writers.txt old-writers.txt other.txt" {
		t.Errorf("lists_dir holds %s", got)
	}
	if d := s.doc(t); len(d.Clusters) != 1 {
		t.Errorf("document clusters %+v", d.Clusters)
	}
	if n := strings.Count(s.logs.String(), "cluster left the pool; its list files were removed"); n != 1 {
		t.Errorf("logged %d times:\n%s", n, s.logs)
	}
	// A cluster that comes back gets its lists again.
	mustApply(t, s, testPool(cluster("c1", []string{"db1"}, nil), cluster("c2", []string{"db5"}, nil)), false)
	if got := s.list(t, "c2-writers.txt"); got != "db5.db:3306\n" {
		t.Errorf("c2 list back %q", got)
	}
}

// A frozen sink never removes a list; it does once unfrozen.
func TestStaleClusterListsKeptWhileFrozen(t *testing.T) {
	s := newTestSink(t, "")
	lists := filepath.Join(s.dir, "lists")
	mustApply(t, s, testPool(cluster("c1", []string{"db1"}, nil), cluster("c2", []string{"db5"}, nil)), false)
	mustApply(t, s, testPool(cluster("c1", []string{"db1"}, nil)), true)
	if got := s.list(t, "c2-writers.txt"); got != "db5.db:3306\n" {
		t.Errorf("frozen: c2 list %q", got)
	}
	mustApply(t, s, testPool(cluster("c1", []string{"db1"}, nil)), false)
	if got := listNames(t, lists); got != "c1-readers.txt c1-writers.txt" {
		t.Errorf("unfrozen: lists_dir holds %s", got)
	}
}

func listNames(t *testing.T, dir string) string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// A cluster name that is not a valid cluster name (newline and ESC, a
// path, 300 bytes, invalid UTF-8) never becomes a file name: its lists are
// skipped, said in the status, and the sink stays healthy. The JSON file
// still has the cluster.
func TestBadClusterName(t *testing.T) {
	s := newTestSink(t, "")
	bad := []string{"../x", "main\n\x1b[31mX", strings.Repeat("c", 300), "c\xff", `c\xff`, ""}
	var cs []pool.Cluster
	for _, name := range bad {
		cs = append(cs, cluster(name, []string{"db1"}, nil))
	}
	cs = append(cs, cluster("ok", []string{"db1"}, nil))
	slices.SortFunc(cs, func(a, b pool.Cluster) int { return strings.Compare(a.Name, b.Name) })
	if err := s.Apply(sink.Update{Pool: testPool(cs...)}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	st := s.Stats()
	if st.Failures != 0 || st.LastSuccess.IsZero() || len(st.NoLists) != len(bad) {
		t.Fatalf("status %+v", st)
	}
	for _, n := range st.NoLists {
		if !strings.Contains(n, "not a valid cluster name") || !member.Printable(n) {
			t.Errorf("note %q", n)
		}
	}
	if !slices.Contains(st.NoLists, `cluster main\n\x1b[31mX: not a valid cluster name (1-64 bytes of [A-Za-z0-9._-]); no list files`) {
		t.Errorf("notes %q", st.NoLists)
	}
	if got := listNames(t, filepath.Join(s.dir, "lists")); got != "ok-readers.txt ok-writers.txt" {
		t.Errorf("lists_dir holds %s", got)
	}
	if d := s.doc(t); len(d.Clusters) != len(bad)+1 {
		t.Errorf("document %+v", d)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "x-writers.txt")); err == nil {
		t.Error("wrote outside lists_dir")
	}
}

func TestWriteFailureRetried(t *testing.T) {
	s := newTestSink(t, "")
	s.Start(context.Background())
	p := testPool(cluster("c1", []string{"db1"}, []string{"db2"}))

	// The JSON path turns into a directory: its rename fails, the lists
	// are written all the same.
	if err := os.Mkdir(s.cfg.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	s.Update(sink.Update{Pool: p})
	testkit.WaitFor(t, 5*time.Second, "failed apply", func() bool { return s.Stats().Failures == 1 })
	st := s.Stats()
	if st.Writes != 2 || st.LastError != "write "+s.cfg.Path+": rename temp file: file exists" || st.LastErrorAt != testNow || !st.LastSuccess.IsZero() {
		t.Errorf("status %+v", st)
	}
	if got := s.list(t, "c1-writers.txt"); got != "db1.db:3306\n" {
		t.Errorf("writers %q", got)
	}

	// Each tick retries while it fails; a repeat is logged at debug.
	s.tick(t)
	testkit.WaitFor(t, 5*time.Second, "retry", func() bool { return s.Stats().Failures == 2 })
	if n := strings.Count(s.logs.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d error logs:\n%s", n, s.logs)
	}
	if err := os.Remove(s.cfg.Path); err != nil {
		t.Fatal(err)
	}
	s.tick(t)
	testkit.WaitFor(t, 5*time.Second, "recovery", func() bool { return s.Stats().Applies == 3 })
	st = s.Stats()
	if st.Failures != 2 || st.Writes != 3 || st.LastSuccess != s.clock.Now() { // the ticks moved the clock
		t.Errorf("status %+v", st)
	}
	s.doc(t)
	if !strings.Contains(s.logs.String(), "file sink recovered") {
		t.Errorf("no recovery log:\n%s", s.logs)
	}

	// After a success, ticks do nothing. Each tick returns once the loop is
	// done with it.
	s.tick(t)
	s.tick(t)
	if st := s.Stats(); st.Applies != 3 {
		t.Errorf("ticks after success applied: %+v", st)
	}
}

func TestDirectoryRemoved(t *testing.T) {
	// The whole directory goes away after New; the same pool must fail (the
	// files are gone), then be written again once the directory is back.
	dir := filepath.Join(t.TempDir(), "out")
	s := newTestSink(t, dir)
	s.Start(context.Background())
	p := testPool(cluster("c1", []string{"db1"}, nil))
	s.Update(sink.Update{Pool: p})
	testkit.WaitFor(t, 5*time.Second, "apply", func() bool { return s.Stats().Applies == 1 })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s.Update(sink.Update{Pool: p})
	testkit.WaitFor(t, 5*time.Second, "failed apply", func() bool { return s.Stats().Failures == 1 })
	s.tick(t)
	testkit.WaitFor(t, 5*time.Second, "failed retry", func() bool { return s.Stats().Failures == 2 })
	st := s.Stats()
	if st.Writes != 3 || !strings.Contains(st.LastError, "write "+s.cfg.Path+": create temp file: no such file or directory") {
		t.Errorf("status %+v", st)
	}
	if err := os.MkdirAll(filepath.Join(dir, "lists"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.tick(t)
	testkit.WaitFor(t, 5*time.Second, "retry", func() bool { return s.Stats().Applies == 4 })
	if st := s.Stats(); st.Writes != 6 || st.Failures != 2 || st.LastError == "" {
		t.Errorf("status %+v", st)
	}
	if got := s.list(t, "c1-writers.txt"); got != "db1.db:3306\n" {
		t.Errorf("writers %q", got)
	}
	s.doc(t)
}

func TestFailedWriteNotRecorded(t *testing.T) {
	// A write that fails is not taken for written: the same pool is tried
	// again, and so is a later one.
	s := newTestSink(t, "", func(c *Config) { c.ListsDir = "" })
	var fail atomic.Bool
	s.writeFile = func(path string, data []byte, mode os.FileMode) error {
		if fail.Load() {
			return fmt.Errorf("write %s: no space left on device", path)
		}
		return os.WriteFile(path, data, mode)
	}
	a := testPool(cluster("c1", []string{"db1"}, nil))
	b := testPool(cluster("c1", []string{"db2"}, nil))
	mustApply(t, s, a, false)
	fail.Store(true)
	if err := s.Apply(sink.Update{Pool: b}); err == nil {
		t.Fatal("no error")
	}
	if d := s.doc(t); d.Clusters[0].Writers[0].Name != "db1" {
		t.Errorf("document %+v", d)
	}
	fail.Store(false)
	mustApply(t, s, b, false)
	if d := s.doc(t); d.Clusters[0].Writers[0].Name != "db2" {
		t.Errorf("b not written: %+v", d)
	}
	if st := s.Stats(); st.Writes != 2 || st.Failures != 1 || st.Skipped != 0 {
		t.Errorf("status %+v", st)
	}
}

func TestUpdateCoalesces(t *testing.T) {
	s := newTestSink(t, "")
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	s.writeFile = func(path string, data []byte, mode os.FileMode) error {
		if filepath.Base(path) == "pool.json" {
			entered <- struct{}{}
			<-release
		}
		calls.Add(1)
		return os.WriteFile(path, data, mode)
	}
	s.Start(context.Background())
	s.Update(sink.Update{Pool: testPool(cluster("c1", []string{"db1"}, nil))})
	<-entered // the first apply is writing
	for i := 2; i <= 9; i++ {
		s.Update(sink.Update{Pool: testPool(cluster("c1", []string{fmt.Sprintf("db%d", i)}, nil))})
	}
	returned := make(chan struct{})
	go func() { // Update never blocks, even with an apply pending
		s.Update(sink.Update{Pool: testPool(cluster("c1", []string{"db9"}, nil)), Frozen: true})
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Update blocked")
	}
	release <- struct{}{}
	<-entered // the coalesced apply
	release <- struct{}{}
	testkit.WaitFor(t, 5*time.Second, "two applies", func() bool { return s.Stats().Applies == 2 })
	select {
	case <-entered:
		t.Fatal("a third apply ran")
	case <-time.After(50 * time.Millisecond):
	}
	if d := s.doc(t); !d.Frozen || d.Clusters[0].Writers[0].Name != "db9" {
		t.Errorf("document %+v", d)
	}
	// Frozen: db1, written first, is kept.
	if got := s.list(t, "c1-writers.txt"); got != "db1.db:3306\ndb9.db:3306\n" {
		t.Errorf("writers %q", got)
	}
}

func TestUpdateCopiesPool(t *testing.T) {
	s := newTestSink(t, "")
	p := testPool(cluster("c1", []string{"db1"}, nil))
	s.Update(sink.Update{Pool: p})
	p.Clusters[0].Writers[0] = pool.Node{Name: "db7", Addr: addr("db7")} // the caller reuses its pool
	s.Start(context.Background())
	testkit.WaitFor(t, 5*time.Second, "apply", func() bool { return s.Stats().Applies == 1 })
	if got := s.list(t, "c1-writers.txt"); got != "db1.db:3306\n" {
		t.Errorf("writers %q", got)
	}
}

func TestLoopIgnoresTickWithoutPool(t *testing.T) {
	s := newTestSink(t, "")
	s.Start(context.Background())
	s.tick(t)
	s.tick(t)
	if st := s.Stats(); st.Applies != 0 {
		t.Errorf("status %+v", st)
	}
	if _, err := os.Stat(s.cfg.Path); !os.IsNotExist(err) {
		t.Errorf("tick without a pool wrote: %v", err)
	}
}

func TestRecoversPanic(t *testing.T) {
	s := newTestSink(t, "")
	var panics atomic.Int32
	panics.Store(1)
	s.writeFile = func(path string, data []byte, mode os.FileMode) error {
		if panics.Add(-1) >= 0 {
			panic("boom")
		}
		return os.WriteFile(path, data, mode)
	}
	s.Start(context.Background())
	s.Update(sink.Update{Pool: testPool(cluster("c1", []string{"db1"}, nil))})
	testkit.WaitFor(t, 5*time.Second, "failed apply", func() bool { return s.Stats().Failures == 1 })
	if st := s.Stats(); st.LastError != "apply panicked: boom" {
		t.Errorf("last error %q", st.LastError)
	}
	s.tick(t)
	testkit.WaitFor(t, 5*time.Second, "retry", func() bool { return s.Stats().Applies == 2 })
	if st := s.Stats(); st.Failures != 1 || st.Writes != 3 {
		t.Errorf("status %+v", st)
	}
	s.doc(t)
	if !strings.Contains(s.logs.String(), "file sink apply panicked") {
		t.Errorf("no panic log:\n%s", s.logs)
	}
}

func TestClose(t *testing.T) {
	t.Run("never started", func(t *testing.T) {
		s := newTestSink(t, "")
		s.Close()
		s.Close()
		s.Start(context.Background()) // after Close: no loop
		s.Update(sink.Update{Pool: testPool(cluster("c1", []string{"db1"}, nil))})
		time.Sleep(20 * time.Millisecond)
		if st := s.Stats(); st.Applies != 0 {
			t.Errorf("closed sink applied")
		}
	})
	t.Run("twice", func(t *testing.T) {
		s := newTestSink(t, "")
		s.Start(context.Background())
		s.Start(context.Background())
		done := make(chan struct{})
		go func() { s.Close(); s.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close hung")
		}
	})
	t.Run("context ends the loop", func(t *testing.T) {
		s := newTestSink(t, "")
		ctx, cancel := context.WithCancel(context.Background())
		s.Start(ctx)
		cancel()
		select {
		case <-s.drv.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("loop did not end with its context")
		}
		s.Close()
	})
}

func TestReadersNeverSeePartialFiles(t *testing.T) {
	s := newTestSink(t, "")
	// Big enough that a non-atomic write would be seen half done.
	var many []string
	for i := range 300 {
		many = append(many, fmt.Sprintf("db%03d", i))
	}
	pools := []*pool.Pool{
		testPool(cluster("c1", many[:1], many)),
		testPool(cluster("c1", many[1:2], many[:150], out("db299", pool.ReasonLag, strings.Repeat("x", 1000)))),
	}
	if err := s.Apply(sink.Update{Pool: pools[0]}); err != nil {
		t.Fatal(err)
	}
	readers := filepath.Join(s.dir, "lists", "c1-readers.txt")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(s.cfg.Path)
			if err == nil {
				var d Document
				err = json.Unmarshal(b, &d)
			}
			if err != nil {
				errs <- fmt.Errorf("JSON read: %w", err)
				return
			}
			reads.Add(1)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(readers)
			if err == nil {
				if n := len(parseList(b)); n != 300 && n != 150 {
					err = fmt.Errorf("%d lines", n)
				}
			}
			if err != nil {
				errs <- fmt.Errorf("list read: %w", err)
				return
			}
		}
	}()
	for i := range 200 {
		if err := s.Apply(sink.Update{Pool: pools[(i+1)%2]}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := s.Stats(); st.Failures != 0 || st.Writes != 3+200*3 || reads.Load() == 0 {
		t.Errorf("status %+v, %d reads", st, reads.Load())
	}
}

// The document's clusters are the pool schema plus held.
func TestDocumentIsTheSchemaPlusHeld(t *testing.T) {
	s := newTestSink(t, "")
	mustApply(t, s, pooltest.Fixture(), false)
	m := readJSON(t, s.cfg.Path)
	pooltest.RequireSuperset(t, m["clusters"], "held")
}

// readJSON reads the JSON object in the file at path.
func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// The applied generation advances with each successful unfrozen apply, and
// neither while a write fails nor while frozen (package sink).
func TestAppliedGeneration(t *testing.T) {
	s := newTestSink(t, "")
	p := testPool(cluster("c1", []string{"db1"}, []string{"db2"}))
	apply := func(u sink.Update) {
		t.Helper()
		_ = s.Apply(u)
	}
	apply(sink.Update{Pool: p, Generation: 1})
	if st := s.Stats(); st.AppliedGeneration != 1 || st.State != "ok" {
		t.Fatalf("status %+v", st)
	}
	// The JSON path turns into a directory: the new pool cannot be written.
	if err := os.Remove(s.cfg.Path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.cfg.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	p = testPool(cluster("c1", []string{"db1"}, []string{"db3"}))
	apply(sink.Update{Pool: p, Generation: 2})
	if st := s.Stats(); st.AppliedGeneration != 1 || st.State != "failing" {
		t.Fatalf("failing: status %+v", st)
	}
	if err := os.Remove(s.cfg.Path); err != nil {
		t.Fatal(err)
	}
	apply(sink.Update{Pool: p, Frozen: true, Generation: 3})
	if st := s.Stats(); st.AppliedGeneration != 1 || st.State != "ok" || !st.Frozen {
		t.Fatalf("frozen: status %+v", st)
	}
	apply(sink.Update{Pool: p, Generation: 4})
	if st := s.Stats(); st.AppliedGeneration != 4 || st.Frozen {
		t.Fatalf("unfrozen: status %+v", st)
	}
}

// Issue 26: while frozen, the writer list of a cluster that follows a
// writer term follows the term (one writer, never two); readers are
// still held.
func TestFrozenFollowsTheWriterTerm(t *testing.T) {
	s := newTestSink(t, "")
	mustApply(t, s, testPool(cluster("c1", []string{"db1"}, []string{"db2", "db3"})), false)
	p := testPool(cluster("c1", []string{"db2"}, []string{"db2"}, out("db1", pool.ReasonAgentFailed, ""), out("db3", pool.ReasonAgentFailed, "")))
	p.Clusters[0].Term = &pool.Term{Cluster: "c1", Number: 2, Writer: "db2", Addr: "db2.db:3306"}
	mustApply(t, s, p, true)
	if got := s.list(t, "c1-writers.txt"); got != "db2.db:3306\n" {
		t.Errorf("frozen writers of a term cluster %q, want the holder alone", got)
	}
	if got := s.list(t, "c1-readers.txt"); got != "db2.db:3306\ndb3.db:3306\n" {
		t.Errorf("frozen readers %q, want db3 held", got)
	}
}

// While frozen, a reader out for a reason it reported itself (stale) leaves
// its list; one out because its agent failed is kept.
func TestFrozenAppliesReportedRemovals(t *testing.T) {
	s := newTestSink(t, "")
	mustApply(t, s, testPool(cluster("c1", []string{"db1"}, []string{"db2", "db3"})), false)
	p := testPool(cluster("c1", []string{"db1"}, []string{"db1"}, out("db2", pool.ReasonStale, "28s behind"), out("db3", pool.ReasonAgentFailed, "")))
	mustApply(t, s, p, true)
	if got := s.list(t, "c1-readers.txt"); got != "db1.db:3306\ndb3.db:3306\n" {
		t.Errorf("frozen readers %q, want db2 (stale) out and db3 (agent-failed) held", got)
	}
	if d := s.doc(t); !d.Frozen {
		t.Errorf("document not frozen: %+v", d)
	}
}
