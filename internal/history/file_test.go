package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readLines parses path as JSON lines, failing on any line that is not
// one whole Entry.
func readLines(t *testing.T, path string) []Entry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s does not end in a newline", path)
	}
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e Entry
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("%s line %d %q: %v", path, n, sc.Text(), err)
		}
		if dec.More() {
			t.Fatalf("%s line %d %q: more than one object", path, n, sc.Text())
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func openFile(t *testing.T, cfg Config, log *slog.Logger) *Log {
	t.Helper()
	l, err := Open(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestFileLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	l := openFile(t, Config{File: path}, nil)
	at := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.FixedZone("X", 3600))
	in := []Entry{
		{Time: at, Kind: KindPool, Cluster: "c1", Node: "db1", From: "reader", To: "out", Reason: "lagging", Detail: "lag 12s"},
		{Time: at.Add(time.Second), Kind: KindHealth, Node: "db2", From: "healthy", To: "critical"},
		{Time: at.Add(2 * time.Second), Kind: KindIsolation, From: "", To: "isolated"},
	}
	for _, e := range in {
		l.Add(e)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, path)
	if len(got) != len(in) {
		t.Fatalf("%d lines, want %d", len(got), len(in))
	}
	for i, e := range got {
		w := in[i]
		w.Seq = uint64(i + 1)
		if !e.Time.Equal(w.Time) {
			t.Errorf("line %d time %v, want %v", i, e.Time, w.Time)
		}
		e.Time, w.Time = time.Time{}, time.Time{}
		if e != w {
			t.Errorf("line %d = %+v, want %+v", i, e, w)
		}
	}
	raw, _ := os.ReadFile(path)
	first := strings.SplitN(string(raw), "\n", 2)[0]
	want := `{"seq":1,"time":"2024-05-01T12:00:00.123456789+01:00","kind":"pool","cluster":"c1","node":"db1","from":"reader","to":"out","reason":"lagging","detail":"lag 12s"}`
	if first != want {
		t.Errorf("first line\n got %s\nwant %s", first, want)
	}
	if !strings.Contains(string(raw), `"from":"","to":"isolated"`) {
		t.Errorf("from and to must always be present: %s", raw)
	}
	if s := l.Stats(); s.FileBytes != int64(len(raw)) {
		t.Errorf("Stats.FileBytes = %d, want %d", s.FileBytes, len(raw))
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm&^0o640 != 0 {
		t.Errorf("file mode %v, want at most 0640", perm)
	}
}

func TestFileFieldsCannotBreakLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	l := openFile(t, Config{File: path}, nil)
	nasty := []string{
		"db1\n{\"seq\":999}",
		"a\r\nb",
		"line\u2028sep\u2029para",
		"quote\" back\\slash",
		"nul\x00tab\tesc\x1b",
		"bad utf-8 \xff\xfe",
		strings.Repeat("\n", 50),
	}
	for _, s := range nasty {
		l.Add(Entry{Kind: KindPool, Cluster: s, Node: s, From: s, To: s, Reason: s, Detail: s})
	}
	l.Close()
	raw, _ := os.ReadFile(path)
	if n := bytes.Count(raw, []byte("\n")); n != len(nasty) {
		t.Fatalf("%d newlines in the file, want %d (one per entry)", n, len(nasty))
	}
	got := readLines(t, path)
	for i, e := range got {
		want := string([]rune(nasty[i])) // json.Marshal replaces each invalid byte
		if e.Node != want || e.Reason != want || e.Detail != want || e.Seq != uint64(i+1) {
			t.Errorf("line %d = %+v, want fields %q", i, e, want)
		}
	}
}

func TestFileRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.jsonl")
	const maxBytes, keep = 4096, 2
	// Stale numbered files from an earlier, larger keep are removed.
	for _, n := range []string{".3", ".4"} {
		if err := os.WriteFile(path+n, []byte("old\n"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	l := openFile(t, Config{File: path, MaxBytes: maxBytes, Keep: keep}, nil)
	detail := strings.Repeat("x", 400)
	const total = 100 // about 500 bytes each: 12 files' worth
	for range total {
		l.Add(Entry{Kind: KindHealth, Node: "db1", From: "a", To: "b", Detail: detail})
		for _, n := range []string{".3", ".4", ".5"} {
			if _, err := os.Stat(path + n); err == nil && l.Stats().Rotations > 0 {
				t.Fatalf("%s exists after a rotation with keep %d", path+n, keep)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[h.jsonl h.jsonl.1 h.jsonl.2]" {
		t.Fatalf("files %v, want h.jsonl h.jsonl.1 h.jsonl.2", names)
	}
	// Oldest to newest, the files hold consecutive seqs ending at total.
	var all []Entry
	for _, name := range []string{path + ".2", path + ".1", path} {
		if size := fileSize(t, name); size > maxBytes || size == 0 {
			t.Errorf("%s is %d bytes, want 1-%d", name, size, maxBytes)
		}
		all = append(all, readLines(t, name)...)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq != all[i-1].Seq+1 {
			t.Fatalf("seq %d after %d across files", all[i].Seq, all[i-1].Seq)
		}
	}
	if all[len(all)-1].Seq != total {
		t.Fatalf("last seq %d, want %d", all[len(all)-1].Seq, total)
	}
	s := l.Stats()
	// Each file fills up to a whole number of lines below maxBytes.
	lineLen := fileSize(t, path+".1") / int64(len(readLines(t, path+".1")))
	perFile := maxBytes / lineLen
	if want := uint64((total - 1) / perFile); s.Rotations != want {
		t.Errorf("Rotations = %d, want %d (%d lines of %d bytes a file)", s.Rotations, want, perFile, lineLen)
	}
	if s.FileBytes != fileSize(t, path) || s.FileErrors != 0 {
		t.Errorf("Stats = %+v, current file %d bytes", s, fileSize(t, path))
	}
}

func TestFileKeepOne(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.jsonl")
	l := openFile(t, Config{File: path, MaxBytes: 4096, Keep: 1}, nil)
	for range 50 {
		l.Add(Entry{Detail: strings.Repeat("y", 500)})
	}
	l.Close()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("%d files, want h.jsonl and h.jsonl.1", len(entries))
	}
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Fatal(err)
	}
}

func TestFileOversizeEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	l := openFile(t, Config{File: path, MaxBytes: 4096, Keep: 3}, nil)
	big := strings.Repeat("z", 10000)

	// Into an empty file: written as is, no rotation.
	l.Add(Entry{Node: "first", Detail: big})
	if s := l.Stats(); s.Rotations != 0 || s.FileBytes <= 10000 {
		t.Fatalf("after a big first entry Stats = %+v", s)
	}
	// A small one after it rotates; so does a big one after a small one.
	l.Add(Entry{Node: "small"})
	l.Add(Entry{Node: "second", Detail: big})
	l.Add(Entry{Node: "after"})
	l.Close()

	want := map[string]string{path + ".3": "first", path + ".2": "small", path + ".1": "second", path: "after"}
	for name, node := range want {
		got := readLines(t, name)
		if len(got) != 1 || got[0].Node != node {
			t.Errorf("%s holds %+v, want only %s", name, got, node)
		}
	}
	if s := l.Stats(); s.Rotations != 3 || s.FileErrors != 0 {
		t.Errorf("Stats = %+v", s)
	}
}

func TestFileReopenAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	l := openFile(t, Config{File: path}, nil)
	l.Add(Entry{Node: "a"})
	l.Add(Entry{Node: "b"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	l.Add(Entry{Node: "after close"}) // ring only
	if n := len(readLines(t, path)); n != 2 {
		t.Fatalf("%d lines after Add past Close, want 2", n)
	}
	if n := len(l.Query(Filter{})); n != 3 {
		t.Fatalf("ring has %d entries, want 3", n)
	}

	before := fileSize(t, path)
	l2 := openFile(t, Config{File: path}, nil)
	if s := l2.Stats(); s.FileBytes != before || s.Entries != 0 {
		t.Fatalf("reopened Stats = %+v, want FileBytes %d and an empty ring", s, before)
	}
	l2.Add(Entry{Node: "c"})
	l2.Close()
	got := readLines(t, path)
	if len(got) != 3 || got[0].Node != "a" || got[2].Node != "c" || got[2].Seq != 1 {
		t.Fatalf("after reopen the file holds %+v", got)
	}
}

func TestFileExistingSizeCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	old := bytes.Repeat([]byte(`{"seq":1,"time":"2024-05-01T12:00:00Z","kind":"pool","from":"","to":""}`+"\n"), 56) // 4032 bytes
	if err := os.WriteFile(path, old, 0o640); err != nil {
		t.Fatal(err)
	}
	l := openFile(t, Config{File: path, MaxBytes: 4096}, nil)
	l.Add(Entry{Node: "new"})
	l.Close()
	if s := l.Stats(); s.Rotations != 1 {
		t.Fatalf("Stats = %+v, want one rotation", s)
	}
	if got, _ := os.ReadFile(path + ".1"); !bytes.Equal(got, old) {
		t.Fatal("the old file was not rotated intact")
	}
	if got := readLines(t, path); len(got) != 1 || got[0].Node != "new" {
		t.Fatalf("new file holds %+v", got)
	}
}

func TestFileCutShortLineTerminated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if err := os.WriteFile(path, []byte(`{"seq":1,"time":"2024-05-01T12:00:00Z"}`+"\n"+`{"seq":2,"ti`), 0o640); err != nil {
		t.Fatal(err)
	}
	l := openFile(t, Config{File: path}, nil)
	l.Add(Entry{Node: "new"})
	l.Add(Entry{Node: "newer"})
	l.Close()
	raw, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != 4 || lines[1] != `{"seq":2,"ti` {
		t.Fatalf("file lines %q", lines)
	}
	for _, line := range lines[2:] {
		var e Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil || !strings.HasPrefix(e.Node, "new") {
			t.Fatalf("line %q: %v", line, err)
		}
	}
	if s := l.Stats(); s.FileBytes != int64(len(raw)) {
		t.Fatalf("FileBytes = %d, want %d", s.FileBytes, len(raw))
	}
}

func TestFileErrorsKeepRing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hist")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "h.jsonl")
	var logs bytes.Buffer
	l := openFile(t, Config{File: path, Size: 10}, slog.New(slog.NewTextHandler(&logs, nil)))
	l.Add(Entry{Node: "before"})

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if e := l.Add(Entry{Node: fmt.Sprint("lost", i)}); e.Seq != uint64(i+2) {
			t.Fatalf("Add during failure returned seq %d", e.Seq)
		}
	}
	s := l.Stats()
	if s.FileErrors != 3 || s.Entries != 4 || s.Total != 4 {
		t.Fatalf("while the directory is gone Stats = %+v, want 3 file errors and 4 entries", s)
	}
	if n := strings.Count(logs.String(), "history file error"); n != 1 {
		t.Fatalf("error logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "component=history") || !strings.Contains(logs.String(), "no such file or directory") {
		t.Fatalf("log lacks the component or the cause:\n%s", logs.String())
	}

	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	l.Add(Entry{Node: "after"})
	if got := readLines(t, path); len(got) != 1 || got[0].Node != "after" || got[0].Seq != 5 {
		t.Fatalf("resumed file holds %+v", got)
	}
	if s := l.Stats(); s.FileErrors != 3 || s.Entries != 5 {
		t.Fatalf("after recovery Stats = %+v", s)
	}
	if !strings.Contains(logs.String(), "history file writable again") {
		t.Fatalf("recovery not logged:\n%s", logs.String())
	}
	if got := fmt.Sprint(seqs(l.Query(Filter{}))); got != "[1 2 3 4 5]" {
		t.Fatalf("ring = %s", got)
	}
}

func TestFileMovedAway(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.jsonl")
	l := openFile(t, Config{File: path}, nil)
	l.Add(Entry{Node: "a"})
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	l.Add(Entry{Node: "b"})
	l.Close()
	if got := readLines(t, path+".moved"); len(got) != 1 || got[0].Node != "a" {
		t.Fatalf("moved file holds %+v", got)
	}
	if got := readLines(t, path); len(got) != 1 || got[0].Node != "b" {
		t.Fatalf("new file holds %+v", got)
	}
	if s := l.Stats(); s.FileErrors != 0 {
		t.Fatalf("Stats = %+v", s)
	}
}

func TestOpenFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(Config{File: filepath.Join(dir, "missing", "h.jsonl")}, nil); err == nil || !strings.Contains(err.Error(), "history.file") {
		t.Fatalf("Open with a missing directory = %v", err)
	}
	if _, err := Open(Config{File: "/dev/null"}, nil); err == nil {
		t.Fatal("Open accepted a device as the history file")
	}
}
