package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shoaldb/shoal/pkg/client"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var sampleMembers = []client.Member{
	{Name: "db1", Addr: "10.0.0.11", Port: 7946, Status: "alive", Tags: map[string]string{"role": "db", "cluster": "main"},
		Lag: &client.Lag{Source: "sbm", Seconds: ptr(0.0)}},
	{Name: "db2-with-a-long-name", Addr: "10.0.0.12", Port: 7946, Status: "failed", Tags: map[string]string{"role": "db"}},
	{Name: "app1", Addr: "10.0.1.5", Port: 7947, Status: "left", Tags: map[string]string{}},
	{Name: "evil", Addr: "10.0.1.6", Port: 7946, Status: "alive", Tags: map[string]string{"x": "a\tb\nc\x1b[31m"}},
}

func TestMembersGolden(t *testing.T) {
	for _, tc := range []struct {
		file, format string
		cols         []string
	}{
		{"members.table", "table", nil},
		{"members.columns", "table", []string{"role", "cluster"}},
		{"members.json", "json", nil},
	} {
		var b bytes.Buffer
		if err := writeMembers(&b, sampleMembers, tc.format, tc.cols); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, b.Bytes())
	}
	var b bytes.Buffer
	if err := writeMembers(&b, nil, "json", nil); err != nil || b.String() != "{\n  \"members\": []\n}\n" {
		t.Fatalf("empty json = %q, %v", b.String(), err)
	}
}

func TestInfoGolden(t *testing.T) {
	in := &client.Info{
		Node: "db1", Addr: "10.0.0.11:7946", Status: "alive", Version: "1.2.3", GoVersion: "go1.26",
		Uptime: "1h0m0s", Tags: map[string]string{"role": "db"}, Encrypted: true, KeyringFile: "/var/lib/shoal/keyring",
		Started: time.Unix(0, 0).UTC(),
		Join:    client.JoinStatus{Addrs: []string{"10.0.0.12"}, Joined: false, Attempts: 3, LastError: "no installed keys could decrypt the message"},
		Profile: "fast", Timings: client.Timings{ProbeInterval: "150ms", ProbeTimeout: "100ms", SuspicionMult: 3, GossipInterval: "50ms", RetransmitMult: 8},
		Serf:    client.SerfStats{Members: 3, Failed: 1, Left: 0},
		RPCAddr: "127.0.0.1:7373", APITokenFile: "/var/lib/shoal/api-token",
		Publish: client.PublishStatus{OK: true},
	}
	var b bytes.Buffer
	if err := writeInfo(&b, in); err != nil {
		t.Fatal(err)
	}
	golden(t, "info.table", b.Bytes())
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"version"}, ExitOK, "shoal "},
		{[]string{"keygen"}, ExitOK, "="},
		{[]string{"members", "--format", "yaml"}, ExitUsage, `--format "yaml": want table or json`},
		{[]string{"members", "--bogus"}, ExitUsage, "unknown flag: --bogus"},
		{[]string{"force-leave"}, ExitUsage, "want one node name"},
		{[]string{"keys", "install", "c2hvcnQ="}, ExitUsage, "keys install: KEY argument: key is 5 bytes; must be 16, 24 or 32 bytes"},
		{[]string{"members", "--http-addr", "127.0.0.1:1"}, ExitError, "no shoal agent reachable at 127.0.0.1:1"},
		{[]string{"agent", "--node", "x", "--profile", "turbo"}, ExitUsage, `profile (--profile) "turbo"`},
		{[]string{"agent", "--node", "x"}, ExitUsage, "gossip encryption is required"},
	} {
		var out, errb bytes.Buffer
		code := Execute(t.Context(), tc.args, &out, &errb)
		if code != tc.code || !bytes.Contains(append(out.Bytes(), errb.Bytes()...), []byte(tc.want)) {
			t.Errorf("%v: exit %d (want %d)\nstdout %s\nstderr %s\nwant %q", tc.args, code, tc.code, out.String(), errb.String(), tc.want)
		}
	}
}

// TestStartConfigErrorsExit2: configuration errors the agent finds only at
// start (a corrupt tags file, a keyring readable by others) are usage
// errors, exit status 2, which the shipped unit does not restart in a loop.
func TestStartConfigErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	badTags := filepath.Join(dir, "tags.json")
	os.WriteFile(badTags, []byte(`{"role":`), 0o600)
	keyring := filepath.Join(dir, "keyring.json")
	os.WriteFile(keyring, []byte(`["c2hvYWwtdGVzdC1rZXktMTYhIQ=="]`), 0o644)
	base := []string{"agent", "--node", "x", "--bind", "127.0.0.1:0", "--http-addr", "", "--rpc-addr", "",
		"--api-token-file", filepath.Join(dir, "api-token")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(slices.Clone(base), "--insecure-no-encryption", "--tags-file", badTags), `tags_file (--tags-file) "` + badTags + `": want a JSON object`},
		{append(slices.Clone(base), "--keyring-file", keyring), "chmod 600"},
	} {
		var out, errb bytes.Buffer
		code := Execute(t.Context(), tc.args, &out, &errb)
		if code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d (want %d)\nstderr %s\nwant %q", tc.args[len(tc.args)-2:], code, ExitUsage, errb.String(), tc.want)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("node: db1\ninsecure_no_encryption: true\nprofile: fast\n"), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("node: db1\nprofle: fast\n"), 0o600)
	var out, errb bytes.Buffer
	if code := Execute(t.Context(), []string{"agent", "--config-check", good}, &out, &errb); code != 0 || !bytes.Contains(out.Bytes(), []byte("is valid")) {
		t.Fatalf("good: %d %s %s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := Execute(t.Context(), []string{"agent", "--config-check", bad}, &out, &errb); code != ExitUsage || !bytes.Contains(errb.Bytes(), []byte(`line 2: unknown key "profle"`)) {
		t.Fatalf("bad: %d %s %s", code, out.String(), errb.String())
	}
}

// A mysql.timeout the probe would refuse is refused when the configuration
// is loaded, by the agent and by --config-check alike: exit 2, naming the
// file, the line, the key and its flag (it used to pass the configuration
// and fail at start as the probe's "probe timeout", with no key or line).
func TestMySQLTimeoutRefusedAtLoad(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("node: db1\nmysql:\n  addr: 127.0.0.1:3306\n  timeout: 20s\n  user: shoal\n"), 0o600)
	want := "config file " + cfg + `, line 4: mysql.timeout (--mysql-timeout) "20s": must be from 10ms to 10s`
	common := []string{"--insecure-no-encryption", "--bind", "127.0.0.1:0", "--http-addr", "", "--rpc-addr", "", "--api-token-file", filepath.Join(dir, "api-token")}
	for _, args := range [][]string{{"agent", "--config", cfg}, {"agent", "--config-check", cfg}} {
		var out, errb bytes.Buffer
		if code := Execute(t.Context(), append(args, common...), &out, &errb); code != ExitUsage || !strings.Contains(errb.String(), want) {
			t.Errorf("%v: exit %d (want %d)\nstderr %s\nwant %q", args, code, ExitUsage, errb.String(), want)
		}
	}
}

// utcLocal makes the writers' .Local() times deterministic for this test.
func utcLocal(t *testing.T) {
	t.Helper()
	old := time.Local
	time.Local = time.UTC
	t.Cleanup(func() { time.Local = old })
}

// hostile is text from the cluster (node names, details, errors) that must
// not reach the terminal raw: a newline would forge a row, an escape
// sequence would recolour or rewrite the screen.
const hostile = "db9\nwriter  db1\x1b[2J\x1b[31m\r"

// checkSanitized fails if out holds a raw control character other than the
// newlines ending wantLines lines.
func checkSanitized(t *testing.T, out []byte, wantLines int) {
	t.Helper()
	if i := bytes.IndexFunc(out, func(r rune) bool { return r != '\n' && (r < 0x20 || r == 0x7f) }); i >= 0 {
		t.Errorf("raw control character %q at byte %d in:\n%s", out[i], i, out)
	}
	if n := bytes.Count(out, []byte("\n")); n != wantLines {
		t.Errorf("%d lines, want %d (a node name forged a line?):\n%s", n, wantLines, out)
	}
	if !bytes.Contains(out, []byte(`db9\nwriter  db1\x1b[2J\x1b[31m\r`)) {
		t.Errorf("the hostile text is not shown escaped:\n%s", out)
	}
}

var (
	sinkOK      = time.Date(2024, 5, 1, 12, 0, 1, 250_000_000, time.UTC)
	sinkFailed  = time.Date(2024, 5, 1, 12, 0, 3, 500_000_000, time.UTC)
	historyTime = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
)

func samplePool() *client.PoolResponse {
	return &client.PoolResponse{
		Isolated:   true,
		Isolation:  "this agent sees 3 of 5 members it had failed: it assumes it is the one cut off and freezes removals in its local sinks",
		UpdatedAt:  sinkOK,
		Generation: 41,
		Clusters: []client.ClusterPool{
			{
				Name:    "main",
				Writers: []client.PoolNode{{Name: "db1", Addr: "10.0.0.11:3306", Reason: "floor", Detail: "warning: disk-full"}},
				Readers: []client.PoolNode{
					{Name: "db2", Addr: "10.0.0.12:3306", Lag: &client.Lag{Source: "gtid", Seconds: ptr(1.23), Transactions: ptr(uint64(3))}},
					{Name: "db3", Addr: "10.0.0.13:3306", Reason: "floor", Detail: "lag: lag 42s > max 10s", Lag: &client.Lag{Source: "sbm", Seconds: ptr(42.0)}}},
				Out: []client.PoolNode{{Name: "db4", Addr: "10.0.0.14:3306", Reason: "maintenance", Detail: "kernel upgrade"}, {Name: "db5", Addr: "10.0.0.15:3306", Reason: "conflict", Detail: "writable: db1, db5"},
					{Name: "db6", Addr: "10.0.0.16:3306", Reason: "stale", Detail: "behind the writer db1 by more than max_lag 10s (gtid)",
						Lag: &client.Lag{Source: "gtid", Seconds: ptr(600.0), AtLeast: true, Transactions: ptr(uint64(1204))}},
					{Name: "db7", Addr: "10.0.0.17:3306", Reason: "lag", Detail: "lag unknown", Lag: &client.Lag{Source: "sbm"}}},
				Conflict: []string{"db1", "db5"},
				Term:     &client.Term{Cluster: "main", Term: 3, Writer: "db1", Addr: "10.0.0.11:3306", Granted: time.Date(2024, 5, 1, 11, 58, 2, 0, time.UTC), Why: "first term"},
			},
			{
				Name:    "shard2",
				Unsafe:  "no writer term",
				Writers: []client.PoolNode{{Name: "s2a", Addr: "10.0.2.1:3306"}},
				Readers: []client.PoolNode{},
				Out: []client.PoolNode{{Name: "s2b", Addr: "10.0.2.2:3306", Reason: "damped", Detail: "flapping: penalty 2685, re-entry below 1000",
					Until: time.Date(2024, 5, 1, 12, 1, 26, 600_000_000, time.UTC)}},
			},
		},
		Sinks: []client.SinkStatus{
			{Name: "haproxy", Target: "unix:/run/haproxy/admin.sock", State: "failing", LastSuccess: sinkOK,
				LastError: "set server be_main/db3 state ready: No such server.", LastErrorAt: sinkFailed, Failures: 7, AppliedGeneration: 41,
				Notes: []string{"server be_main/db9 maps to no node", "node db3 has no server in be_main"}},
			{Name: "file", Target: "/var/lib/shoal/pool.json", State: "ok", LastSuccess: sinkOK, Frozen: true, AppliedGeneration: 40,
				Notes: []string{"withheld removal of db4 from main readers: this agent looks isolated"}},
			{Name: "file", Target: "/var/lib/shoal/other.json", State: "pending"},
		},
	}
}

func TestPoolGolden(t *testing.T) {
	utcLocal(t)
	for _, tc := range []struct {
		file string
		p    *client.PoolResponse
	}{
		{"pool.table", samplePool()},
		// A cluster that needs no writer term (Galera): no term, not unsafe.
		{"pool.plain", &client.PoolResponse{Clusters: []client.ClusterPool{{Name: "main",
			Writers: []client.PoolNode{{Name: "db1", Addr: "10.0.0.11:3306"}},
			Readers: []client.PoolNode{{Name: "db2", Addr: "10.0.0.12:3306"}}}}}},
		// A replication cluster whose db agents do not vote.
		{"pool.unsafe", unsafePool()},
		{"pool.empty", &client.PoolResponse{Clusters: []client.ClusterPool{}}},
		{"pool.no-term", &client.PoolResponse{Clusters: []client.ClusterPool{{Name: "main",
			Readers: []client.PoolNode{{Name: "db2", Addr: "10.0.0.12:3306"}},
			Out:     []client.PoolNode{{Name: "db1", Addr: "10.0.0.11:3306", Reason: "no-term", Detail: "no writer term known yet"}},
			Term:    &client.Term{Cluster: "main"}}}}},
	} {
		var b bytes.Buffer
		if err := writePool(&b, tc.p); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, b.Bytes())
	}
}

// unsafePool is a replication cluster whose db agents have no consensus
// key: the old rule's writer, marked unsafe.
func unsafePool() *client.PoolResponse {
	return &client.PoolResponse{Clusters: []client.ClusterPool{{Name: "main", Unsafe: "no writer term",
		Writers:  []client.PoolNode{{Name: "db1", Addr: "10.0.0.11:3306"}},
		Readers:  []client.PoolNode{{Name: "db2", Addr: "10.0.0.12:3306"}},
		Out:      []client.PoolNode{},
		Conflict: []string{}}},
		Writers: []client.PoolNode{{Cluster: "main", Name: "db1", Addr: "10.0.0.11:3306"}},
		Readers: []client.PoolNode{{Cluster: "main", Name: "db2", Addr: "10.0.0.12:3306"}},
		Out:     []client.PoolNode{}, Sinks: []client.SinkStatus{}, Generation: 1}
}

// TestPoolUnsafeJSON: --format json says unsafe per cluster, and nothing
// for a cluster that is not.
func TestPoolUnsafeJSON(t *testing.T) {
	var b bytes.Buffer
	if err := writeJSONOut(&b, unsafePool()); err != nil {
		t.Fatal(err)
	}
	golden(t, "pool.unsafe.json", b.Bytes())
	b.Reset()
	p := unsafePool()
	p.Clusters[0].Unsafe = ""
	if err := writeJSONOut(&b, p); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "unsafe") {
		t.Fatalf("a cluster that is not unsafe: %s", b.String())
	}
}

func TestPoolSanitizesHostileText(t *testing.T) {
	p := &client.PoolResponse{
		Clusters: []client.ClusterPool{{
			Name:     "main",
			Writers:  []client.PoolNode{{Name: hostile, Addr: "10.0.0.11:3306"}},
			Out:      []client.PoolNode{{Name: "db2", Addr: "10.0.0.12:3306", Reason: "stale", Detail: hostile, Lag: &client.Lag{Source: hostile}}},
			Conflict: []string{hostile, "db2"},
			Term:     &client.Term{Cluster: hostile, Term: 2, Writer: hostile},
		}},
		Sinks: []client.SinkStatus{{Name: "haproxy", Target: "127.0.0.1:9999", State: "failing",
			LastError: hostile, LastErrorAt: sinkFailed, Failures: 1, Notes: []string{hostile}}},
	}
	var b bytes.Buffer
	if err := writePool(&b, p); err != nil {
		t.Fatal(err)
	}
	// cluster, term, conflict, header, 2 rows, blank, sink header, sink row, note
	checkSanitized(t, b.Bytes(), 10)
}

func sampleHistory() *client.HistoryResponse {
	at := func(ms int) time.Time { return historyTime.Add(time.Duration(ms) * time.Millisecond) }
	return &client.HistoryResponse{
		Capacity: 1000, Total: 5,
		Entries: []client.HistoryEntry{
			{Seq: 1, Time: at(0), Kind: "health", Node: "db3", From: "passing", To: "critical", Reason: "connect-failed", Detail: "dial tcp 10.0.0.13:3306: connection refused"},
			{Seq: 2, Time: at(125), Kind: "pool", Cluster: "main", Node: "db3", From: "reader", To: "out", Reason: "critical", Detail: "connect-failed"},
			{Seq: 3, Time: at(60_000), Kind: "conflict", Cluster: "main", From: "db1", To: "db1, db5"},
			{Seq: 4, Time: at(61_001), Kind: "isolation", From: "connected", To: "isolated", Detail: "3 of 5 members failed"},
			{Seq: 5, Time: at(3_600_000), Kind: "maint", Node: "db4", From: "off", To: "on", Reason: "kernel upgrade"},
		},
	}
}

func TestHistoryGolden(t *testing.T) {
	utcLocal(t)
	evicted := sampleHistory()
	evicted.Evicted, evicted.Total = 2995, 3000
	withFile := sampleHistory()
	withFile.Evicted, withFile.Total, withFile.File = 2995, 3000, "/var/log/shoal/history.jsonl"
	for _, tc := range []struct {
		file string
		h    *client.HistoryResponse
	}{
		{"history.table", sampleHistory()},
		{"history.empty", &client.HistoryResponse{Entries: []client.HistoryEntry{}, Capacity: 1000}},
		{"history.evicted", evicted},
		{"history.evicted-file", withFile},
		{"history.empty-evicted", &client.HistoryResponse{Entries: []client.HistoryEntry{}, Capacity: 10, Total: 12, Evicted: 12}},
	} {
		var b bytes.Buffer
		if err := writeHistory(&b, tc.h); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, b.Bytes())
	}
}

func TestHistorySanitizesHostileText(t *testing.T) {
	h := &client.HistoryResponse{
		Capacity: 1, Total: 3, Evicted: 2, File: "/tmp/" + hostile,
		Entries: []client.HistoryEntry{{Seq: 3, Time: historyTime, Kind: "pool", Cluster: hostile, Node: hostile,
			From: "reader", To: "out", Reason: "critical", Detail: hostile}},
	}
	var b bytes.Buffer
	if err := writeHistory(&b, h); err != nil {
		t.Fatal(err)
	}
	// header, one entry, the evicted note
	checkSanitized(t, b.Bytes(), 3)
}

func TestMaintGolden(t *testing.T) {
	utcLocal(t)
	until := time.Date(2024, 5, 1, 12, 1, 26, 600_000_000, time.UTC)
	for _, tc := range []struct {
		file string
		st   client.MaintStatus
	}{
		// Issue 14: "maintenance off" while the node is held out by damping.
		{"maint.off-damped", client.MaintStatus{Node: "db4", Persisted: true, Damped: true, DampedUntil: until,
			DampDetail: "flapping: penalty 2620, re-entry below 1000"}},
		{"maint.on-damped", client.MaintStatus{Node: "db4", Enabled: true, Reason: "kernel upgrade", Persisted: true,
			Damped: true, DampedUntil: until, DampDetail: "flapping: penalty 2620, re-entry below 1000"}},
		{"maint.on-persisted", client.MaintStatus{Node: "db4", Enabled: true, Reason: "kernel upgrade", Persisted: true}},
		{"maint.on-not-persisted", client.MaintStatus{Node: "db4", Enabled: true, Reason: "kernel upgrade"}},
		{"maint.off", client.MaintStatus{Node: "db4", Persisted: true}},
		// Issue 23: the drain is in effect, the tags file could not be written.
		{"maint.on-not-saved", client.MaintStatus{Node: "db4", Enabled: true, Reason: "kernel upgrade",
			Warning: "maintenance is in effect on every agent but was not saved to tags_file /var/lib/shoal/tags.json (write /var/lib/shoal/tags.json: no space left on device): it ENDS if this agent restarts; fix the file system and run `shoal maint enable` again"}},
	} {
		var b bytes.Buffer
		if err := writeMaintText(&b, &tc.st); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, b.Bytes())
	}
}

func TestMaintSanitizesHostileText(t *testing.T) {
	for _, tc := range []struct {
		st    client.MaintStatus
		lines int
	}{
		{client.MaintStatus{Node: hostile, Enabled: true, Reason: hostile, Persisted: true}, 2},
		{client.MaintStatus{Node: hostile}, 1},
		{client.MaintStatus{Node: hostile, Damped: true, DampDetail: hostile}, 2},
	} {
		var b bytes.Buffer
		if err := writeMaintText(&b, &tc.st); err != nil {
			t.Fatal(err)
		}
		checkSanitized(t, b.Bytes(), tc.lines)
	}
}

// TestHealthServerUnknown: a server the probe never reached has no
// version, server_id or read_only; issue 14 showed "server , server_id 0,
// read_only false".
// TestHealthGTIDPosition: shoal health shows the GTID position, or why it
// is unknown and what judges freshness then, escaped like every value.
func TestHealthGTIDPosition(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    client.LocalHealth
		want string
	}{
		{"known", client.LocalHealth{State: "passing", Reachable: true, GTIDPosition: "0:1234,7:1"},
			"gtid position  0:1234,7:1\n"},
		{"too many domains", client.LocalHealth{State: "passing", Reachable: true, GTIDPositionNote: "3 GTID domains; shoal compares at most 2"},
			"gtid position  unknown (3 GTID domains; shoal compares at most 2): freshness judged by Seconds_Behind_Master\n"},
		{"hostile note", client.LocalHealth{State: "passing", Reachable: true, GTIDPositionNote: "bad\x1b[31m"},
			`gtid position  unknown (bad\x1b[31m)`},
		{"nothing known", client.LocalHealth{State: "critical"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeHealth(&b, &client.HealthResponse{Status: "ok", Node: "db1", Role: "db", Gossip: "alive", MySQL: &tc.m}); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && strings.Contains(b.String(), "gtid") || !strings.Contains(b.String(), tc.want) {
				t.Fatalf("want the line %q in:\n%s", tc.want, b.String())
			}
			if strings.Contains(b.String(), "facts") {
				t.Fatalf("the position shown as a fact too:\n%s", b.String())
			}
		})
	}
}

func TestHealthServerUnknown(t *testing.T) {
	checked := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		m    client.LocalHealth
		want string
	}{
		{"never reached", client.LocalHealth{State: "critical", Reason: "connect-failed", LastCheck: checked, Checks: 3},
			"server     unknown (not reached in the last check)\n"},
		{"not checked", client.LocalHealth{State: "critical", Reason: "not-checked"},
			"server     unknown (not checked yet)\n"},
		{"reached", client.LocalHealth{State: "passing", LastCheck: checked, Reachable: true, Version: "10.11.6-MariaDB", ServerID: 3, ReadOnly: true},
			"server     10.11.6-MariaDB, server_id 3, read_only true\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeHealth(&b, &client.HealthResponse{Status: "ok", Node: "db1", Role: "db", Gossip: "alive", MySQL: &tc.m}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tc.want) {
				t.Fatalf("want the line %q in:\n%s", tc.want, b.String())
			}
			if tc.m.Version == "" && strings.Contains(b.String(), "server_id") {
				t.Fatalf("zero facts shown as facts:\n%s", b.String())
			}
		})
	}
}

// TestHealthHelpDefinesHealthy: --help says what healthy means, the
// join rule included.
func TestHealthHelpDefinesHealthy(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Execute(t.Context(), []string{"health", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"gossip is alive", "no join address is", "configured (alone on purpose)", "MySQL probe says passing", "Exit status 0 when healthy"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

// TestUsageErrorsNeedNoAgent: bad arguments to the new commands are usage
// errors (exit 2), found before any agent is asked: the address points
// nowhere, and a valid call to it fails with exit 1 instead.
func TestUsageErrorsNeedNoAgent(t *testing.T) {
	nowhere := []string{"--http-addr", "127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"history", "--since", "abc"}, ExitUsage, `--since "abc": want a duration like 10m or an RFC3339 time`},
		{[]string{"history", "--since", "-5m"}, ExitUsage, `--since "-5m": the duration must be positive`},
		{[]string{"history", "--limit", "-1"}, ExitUsage, "--limit -1: must be 0 (all) or more"},
		{[]string{"history", "--limit", "ten"}, ExitUsage, `invalid argument "ten" for "--limit"`},
		{[]string{"history", "--format", "yaml"}, ExitUsage, `--format "yaml": want table or json`},
		{[]string{"history", "db1"}, ExitUsage, "shoal history: want no arguments, got 1 argument(s)"},
		{[]string{"maint", "enable", "extra-arg"}, ExitUsage, "shoal maint enable: want no arguments (the reason goes in --reason), got 1 argument(s)"},
		{[]string{"maint", "enable", "--reason", strings.Repeat("r", 65)}, ExitUsage, "maint enable: --reason: maintenance reason is 65 bytes; the most is 64"},
		{[]string{"maint", "enable", "--reason", "bell\a"}, ExitUsage, "maint enable: --reason: maintenance reason has the non-printable character"},
		{[]string{"maint", "enable", "--reason", strings.Repeat("r", 64)}, ExitError, "no shoal agent reachable at 127.0.0.1:1"},
		{[]string{"maint", "disable", "now"}, ExitUsage, "shoal maint disable: want no arguments, got 1 argument(s)"},
		{[]string{"maint", "on"}, ExitUsage, "want no arguments (or a subcommand: enable, disable)"},
		{[]string{"maint", "--format", "yaml"}, ExitUsage, `--format "yaml": want table or json`},
		{[]string{"pool", "--format", "yaml"}, ExitUsage, `--format "yaml": want table or json`},
		{[]string{"history", "--since", "10m", "--limit", "5"}, ExitError, "no shoal agent reachable at 127.0.0.1:1"},
		{[]string{"maint", "enable", "--reason", "x"}, ExitError, "no shoal agent reachable at 127.0.0.1:1"},
	} {
		var out, errb bytes.Buffer
		code := Execute(t.Context(), append(tc.args, nowhere...), &out, &errb)
		if code != tc.code || !bytes.Contains(errb.Bytes(), []byte(tc.want)) {
			t.Errorf("%v: exit %d (want %d)\nstdout %s\nstderr %s\nwant %q", tc.args, code, tc.code, out.String(), errb.String(), tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%v: wrote to stdout on error: %q", tc.args, out.String())
		}
	}
}

func TestSanitizeC1Controls(t *testing.T) {
	for _, s := range []string{"db1\u009b2J", "db1\u009d0;title\u009c", "db1\x9b2J"} {
		got := sanitize(s)
		if strings.ContainsAny(got, "\u009b\u009c\u009d") || !utf8.ValidString(got) {
			t.Errorf("sanitize(%q) = %q: a terminal control reaches the screen raw", s, got)
		}
	}
}

func TestFormatDrops(t *testing.T) {
	for _, tc := range []struct {
		h    client.HookStats
		want string
	}{
		{client.HookStats{}, "0"},
		{client.HookStats{Dropped: 1100, DroppedByClass: map[string]map[string]uint64{
			"query": {"queue_full": 10}, "user": {"queue_full": 1000, "runner_closed": 90}}}, "1100 (user 1090, query 10)"},
		{client.HookStats{Dropped: 3, DroppedByClass: map[string]map[string]uint64{"member": {"superseded": 2}, "shoal": {"superseded": 1}}}, "3 (member 2, shoal 1)"},
		{client.HookStats{Dropped: 4}, "4"}, // an older agent: no split
	} {
		if got := formatDrops(tc.h); got != tc.want {
			t.Errorf("formatDrops(%+v) = %q, want %q", tc.h, got, tc.want)
		}
	}
}

// TestMembersTableShowsInvalid: a member that breaks the rules for gossiped
// names and tags says so in the table, not only in --format json.
func TestMembersTableShowsInvalid(t *testing.T) {
	var b bytes.Buffer
	ms := []client.Member{
		{Name: `db\xff`, Addr: "10.0.0.9", Port: 7946, Status: "alive", Tags: map[string]string{"role": "db"},
			Invalid: &client.MemberProblem{Reason: "bad-name", Detail: "name is not valid UTF-8"}},
		{Name: "db1", Addr: "10.0.0.11", Port: 7946, Status: "alive", Tags: map[string]string{"role": "db"}},
	}
	if err := writeMembers(&b, ms, "table", nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "alive (bad-name)") || strings.Contains(lines[2], "bad-") {
		t.Fatalf("table:\n%s", b.String())
	}
}

// An IPv6 member's address is shown as [addr]:port, which can be copied
// into --join or any dialer.
func TestMembersTableBracketsIPv6(t *testing.T) {
	var b bytes.Buffer
	ms := []client.Member{{Name: "db6", Addr: "fd00::2", Port: 7946, Status: "alive", Tags: map[string]string{"role": "db"}}}
	if err := writeMembers(&b, ms, "table", nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), " [fd00::2]:7946 ") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func ptr[T any](v T) *T { return &v }

// TestLagText: a lag as the pool and members tables show it.
func TestLagText(t *testing.T) {
	for _, tc := range []struct {
		l    *client.Lag
		want string
	}{
		{nil, "-"},
		{&client.Lag{Source: "gtid", Seconds: ptr(1.25), Transactions: ptr(uint64(3))}, "3 tx / 1.2s (gtid)"},
		{&client.Lag{Source: "gtid", Seconds: ptr(0.0), Transactions: ptr(uint64(0))}, "0 tx / 0s (gtid)"},
		{&client.Lag{Source: "gtid", Seconds: ptr(12.0), AtLeast: true, Transactions: ptr(uint64(40))}, "40 tx / ≥12.0s (gtid)"},
		{&client.Lag{Source: "sbm", Seconds: ptr(0.0)}, "0s (sbm)"},
		{&client.Lag{Source: "sbm", Seconds: ptr(15.0)}, "15s (sbm)"},
		{&client.Lag{Source: "sbm"}, "unknown (sbm)"},
		{&client.Lag{Source: "x\x1b[2J"}, `unknown (x\x1b[2J)`},
	} {
		if got := lagText(tc.l); got != tc.want {
			t.Errorf("lagText(%+v) = %q, want %q", tc.l, got, tc.want)
		}
	}
}
