package hooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// serfScript is written the way Serf's own tests and docs write handlers:
// it reads the SERF_* environment and stdin and appends them to a file.
const serfScript = `#!/usr/bin/env bash
RESULT_FILE=%q
{
	echo "$SERF_SELF_NAME $SERF_SELF_ROLE"
	echo "$SERF_TAG_DC"
	echo "$SERF_EVENT|$SERF_USER_EVENT|$SERF_USER_LTIME|$SERF_QUERY_NAME|$SERF_QUERY_LTIME"
	while IFS= read -r line; do
		printf '%%s\n' "$line"
	done
	echo "--"
} >> "$RESULT_FILE"
if [ "$SERF_EVENT" = query ]; then
	echo "pong from $SERF_SELF_NAME"
fi
`

func TestSerfStyleScript(t *testing.T) {
	dir := t.TempDir()
	result := filepath.Join(dir, "result")
	script := filepath.Join(dir, "handler.sh")
	if err := os.WriteFile(script, fmt.Appendf(nil, serfScript, result), 0o755); err != nil {
		t.Fatal(err)
	}
	responses := make(chan string, 4)
	r, _ := newTestRunner(t, Config{
		Respond: func(q *serf.Query, resp []byte) error { responses <- q.Name + ":" + string(resp); return nil },
	}, shQuote(script))
	raw := shQuote(script)

	r.Enqueue(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{
		{Name: "mitchellh.local", Addr: net.ParseIP("127.0.0.1"), Tags: map[string]string{"role": "web", "datacenter": "east"}},
		{Name: "db2", Addr: net.ParseIP("10.0.0.2"), Tags: map[string]string{"role": "db"}},
	}})
	r.Enqueue(serf.UserEvent{Name: "deploy", LTime: 42, Payload: []byte("v1.2.3")})
	testkit.WaitFor(t, 30*time.Second, "two runs", func() bool { return stats(t, r, raw).Ran == 2 })

	resp, err := r.Query(context.Background(), &serf.Query{Name: "ping", LTime: 7, Payload: []byte("are you there")})
	if err != nil || string(resp) != "pong from db1\n" {
		t.Fatalf("Query = %q, %v; want the script's stdout", resp, err)
	}
	// A query through the queue is answered through Respond.
	r.Enqueue(&serf.Query{Name: "ping", LTime: 8})
	select {
	case got := <-responses:
		if got != "ping:pong from db1\n" {
			t.Fatalf("Respond got %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no response to the queued query")
	}
	testkit.WaitFor(t, 30*time.Second, "four runs", func() bool { return stats(t, r, raw).Ran == 4 })

	want := "db1 db\neast\nmember-join||||\n" +
		"mitchellh.local\t127.0.0.1\tweb\tdatacenter=east,role=web\n" +
		"db2\t10.0.0.2\tdb\trole=db\n--\n" +
		"db1 db\neast\nuser|deploy|42||\nv1.2.3\n--\n" +
		"db1 db\neast\nquery|||ping|7\nare you there\n--\n" +
		"db1 db\neast\nquery|||ping|8\n--\n"
	if got := readFile(t, result); got != want {
		t.Errorf("result file:\n%s\nwant:\n%s", got, want)
	}
	if s := stats(t, r, raw); s.Failed != 0 || s.LastExitCode != 0 || s.LastError != "" {
		t.Errorf("stats %+v", s)
	}
}

func TestHostileDataNeverReachesAShell(t *testing.T) {
	hostile := "$(touch PWNED)`touch PWNED`; touch PWNED && touch PWNED | touch PWNED\n" +
		"touch PWNED\t'; touch PWNED; '\"; touch PWNED; \"\\ $HOME ${IFS}*"
	var bin []byte
	for b := 1; b < 256; b++ {
		bin = append(bin, byte(b))
	}
	binary := string(bin)

	dir := t.TempDir()
	direct := filepath.Join(dir, "direct")
	directUser := filepath.Join(dir, "direct-user")
	for _, d := range []string{direct, directUser} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	shellSpec := `member-join=sh -c 'cat > member.out; printf %s "$SERF_SELF_NAME" > self.out; printf %s "$SERF_TAG_EVIL" > tag.out; printf %s "$SHOAL_TAG_BIN" > bin.out'`
	userShellSpec := `user=sh -c 'cat > user.out; printf %s "$SERF_USER_EVENT" > name.out'`
	self := serf.Member{Name: hostile, Tags: map[string]string{"role": hostile, "evil": hostile, "bin": binary}}
	r, _ := newTestRunner(t, Config{Dir: dir, Self: func() serf.Member { return self }},
		helperSpec(t, "member-join", direct), helperSpec(t, "user", directUser), shellSpec, userShellSpec)

	r.Enqueue(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{
		{Name: hostile, Addr: net.ParseIP("10.0.0.9"), Tags: map[string]string{"role": hostile, "x": binary}},
	}})
	payload := hostile + binary
	r.Enqueue(serf.UserEvent{Name: hostile, LTime: 1, Payload: []byte(payload)})
	testkit.WaitFor(t, 30*time.Second, "all four handlers", func() bool {
		for _, s := range r.Stats() {
			if s.Ran != 1 {
				return false
			}
		}
		return true
	})
	for _, s := range r.Stats() {
		if s.Failed != 0 {
			t.Errorf("%s failed: %s", s.Spec, s.LastError)
		}
	}

	clean := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\t", `\t`), "\n", `\n`) }
	wantMember := clean(hostile) + "\t10.0.0.9\t" + clean(hostile) + "\t" + clean("role="+hostile+",x="+binary) + "\n"
	wantUser := payload + "\n"

	// Direct exec: environment and stdin verbatim.
	if got := readFile(t, filepath.Join(direct, "stdin")); got != wantMember {
		t.Errorf("direct member stdin:\n%q\nwant\n%q", got, wantMember)
	}
	env := strings.Split(readFile(t, filepath.Join(direct, "env")), "\x00")
	for _, kv := range []string{"SERF_SELF_NAME=" + hostile, "SERF_SELF_ROLE=" + hostile, "SERF_TAG_EVIL=" + hostile,
		"SHOAL_TAG_EVIL=" + hostile, "SERF_TAG_BIN=" + binary, "SERF_EVENT=member-join"} {
		if !slices.Contains(env, kv) {
			t.Errorf("direct env lacks %q", kv)
		}
	}
	if got := readFile(t, filepath.Join(directUser, "stdin")); got != wantUser {
		t.Errorf("direct user stdin:\n%q\nwant\n%q", got, wantUser)
	}
	env = strings.Split(readFile(t, filepath.Join(directUser, "env")), "\x00")
	if !slices.Contains(env, "SERF_USER_EVENT="+hostile) {
		t.Errorf("direct user env lacks SERF_USER_EVENT")
	}

	// An explicit sh -c: the data is only ever in its environment and stdin.
	for file, want := range map[string]string{
		"member.out": wantMember, "self.out": hostile, "tag.out": hostile, "bin.out": binary,
		"user.out": wantUser, "name.out": hostile,
	} {
		if got := readFile(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s:\n%q\nwant\n%q", file, got, want)
		}
	}

	cwd, _ := os.Getwd()
	for _, d := range []string{dir, direct, directUser, cwd, os.TempDir()} {
		if fileExists(filepath.Join(d, "PWNED")) {
			t.Errorf("PWNED created in %s", d)
		}
	}
}

func TestMinimalEnvironment(t *testing.T) {
	t.Setenv("SHOAL_HOOKS_TEST_SECRET", "s3cret")
	t.Setenv("SHOAL_HOOKS_TEST_ALLOWED", "yes")
	t.Setenv("LANG", "C.UTF-8")
	dir := t.TempDir()
	r, _ := newTestRunner(t, Config{EnvAllow: []string{"SHOAL_HOOKS_TEST_ALLOWED"}}, helperSpec(t, "user", dir))
	r.Enqueue(serf.UserEvent{Name: "x"})
	testkit.WaitFor(t, 30*time.Second, "the run", func() bool { return fileExists(filepath.Join(dir, "env")) })
	env := strings.Split(readFile(t, filepath.Join(dir, "env")), "\x00")
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "SERF_") && !strings.HasPrefix(name, "SHOAL_") && !slices.Contains(InheritedEnv, name) {
			if name != "SHOAL_HOOKS_TEST_ALLOWED" {
				t.Errorf("unexpected variable %q", kv)
			}
		}
	}
	for _, kv := range []string{"SHOAL_HOOKS_TEST_ALLOWED=yes", "LANG=C.UTF-8", "PATH=" + os.Getenv("PATH")} {
		if !slices.Contains(env, kv) {
			t.Errorf("env lacks %q", kv)
		}
	}
	if slices.Contains(env, "SHOAL_HOOKS_TEST_SECRET=s3cret") {
		t.Error("a variable outside the allowlist was passed on")
	}
}

func TestBurstNeverBlocksAndCountsDrops(t *testing.T) {
	const n = 10000
	r, logs := newTestRunner(t, Config{}, "member-join=sleep 0.1")
	raw := "member-join=sleep 0.1"

	events := make([]serf.MemberEvent, n)
	for i := range events {
		events[i] = serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{{Name: strconv.Itoa(i)}}}
	}
	start := time.Now()
	for _, e := range events {
		r.Enqueue(e)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("enqueueing %d events took %v, want < 1s", n, d)
	}
	s := stats(t, r, raw)
	if s.Queued != n {
		t.Errorf("queued %d, want %d", s.Queued, n)
	}
	if s.QueueDepth > DefaultQueueSize || s.QueueHigh > DefaultQueueSize || s.QueueMax != DefaultQueueSize {
		t.Errorf("queue depth %d, high %d, max %d: over the bound %d", s.QueueDepth, s.QueueHigh, s.QueueMax, DefaultQueueSize)
	}
	if s.Dropped != n-s.Started-uint64(s.QueueDepth) {
		t.Errorf("dropped %d, want exactly %d - %d started - %d queued", s.Dropped, n, s.Started, s.QueueDepth)
	}
	if s.DroppedByReason[DropQueueFull] != s.Dropped || s.Dropped < n-DefaultQueueSize-100 {
		t.Errorf("dropped %d, by reason %v", s.Dropped, s.DroppedByReason)
	}
	// The drops were logged, once, not 9000 times.
	if got := logs.records("hook queue full, dropping events"); len(got) != 1 || got[0]["handler"] != raw {
		t.Errorf("first-drop log records: %v", got)
	}
	r.Close()
	s = stats(t, r, raw)
	if s.Dropped != s.Queued-s.Started || s.DroppedByReason[DropClosed] == 0 {
		t.Errorf("after Close: %+v", s)
	}
	if got := logs.records("hook events dropped"); len(got) == 0 {
		t.Error("drops at close not logged")
	}
}

func TestBurstKeepsNewestMemberEvents(t *testing.T) {
	dir := t.TempDir()
	spec := `member-join=sh -c 'while [ ! -e release ]; do sleep 0.02; done; cut -f1 >> seen'`
	r, _ := newTestRunner(t, Config{Dir: dir, QueueSize: 5}, spec)
	for i := range 100 {
		r.Enqueue(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{{Name: strconv.Itoa(i)}}})
		if i == 0 {
			testkit.WaitFor(t, 30*time.Second, "the first run", func() bool { return stats(t, r, spec).Started == 1 })
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "six runs", func() bool { return stats(t, r, spec).Ran == 6 })
	if got := readFile(t, filepath.Join(dir, "seen")); got != "0\n95\n96\n97\n98\n99\n" {
		t.Errorf("handled %q, want the first and the 5 newest", got)
	}
}

func TestOrderAndIsolation(t *testing.T) {
	dir := t.TempDir()
	const n = 200
	fast := `user=sh -c 'cat >> seq'`
	slow := `user=sleep 1000`
	r, _ := newTestRunner(t, Config{Dir: dir}, slow, fast)
	for i := range n {
		r.Enqueue(serf.UserEvent{Name: "seq", Payload: []byte(strconv.Itoa(i))})
	}
	testkit.WaitFor(t, 30*time.Second, "all events on the fast handler", func() bool { return stats(t, r, fast).Ran == n })
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if got := readFile(t, filepath.Join(dir, "seq")); got != want.String() {
		t.Errorf("events out of order:\n%s", got)
	}
	// The slow handler is still on its first event and held nobody up.
	if s := stats(t, r, slow); s.Ran != 0 || !s.Running || s.QueueDepth != n-1 {
		t.Errorf("slow handler: %+v", s)
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	for _, tt := range []struct{ name, script string }{
		{"term", `sleep 1000 & echo $$ $! > pids.tmp; mv pids.tmp pids; sleep 1000`},
		// Ignoring SIGTERM (inherited by the children) leads to SIGKILL.
		{"kill", `trap "" TERM; sleep 1000 & echo $$ $! > pids.tmp; mv pids.tmp pids; wait`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			spec, err := ParseSpec("user=sh -c " + shQuote(tt.script))
			if err != nil {
				t.Fatal(err)
			}
			spec.Timeout = 500 * time.Millisecond
			logs := &logBuffer{}
			r, err := New(Config{Dir: dir, KillGrace: 500 * time.Millisecond, Self: func() serf.Member { return testSelf },
				Logger: newJSONLogger(logs)}, []Spec{spec})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeWithin(t, r) })
			r.Enqueue(serf.UserEvent{Name: "x"})
			testkit.WaitFor(t, 30*time.Second, "the pids", func() bool { return fileExists(filepath.Join(dir, "pids")) })
			pids := readPIDs(t, filepath.Join(dir, "pids"))
			killOnCleanup(t, pids)
			if len(pids) != 2 {
				t.Fatalf("pids %v", pids)
			}
			testkit.WaitFor(t, 30*time.Second, "the timeout", func() bool { return stats(t, r, spec.Raw).Ran == 1 })
			s := stats(t, r, spec.Raw)
			if s.TimedOut != 1 || s.Failed != 1 || s.LastExitCode != -1 || !strings.Contains(s.LastError, "timed out after 500ms") {
				t.Errorf("stats %+v", s)
			}
			for _, pid := range pids {
				testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("pid %d to be gone", pid), func() bool { return !alive(pid) })
			}
			if got := logs.records("hook timed out"); len(got) != 1 || got[0]["exit_code"] != float64(-1) {
				t.Errorf("timeout log: %v", got)
			}
		})
	}
}

func TestCloseKillsRunningGroup(t *testing.T) {
	dir := t.TempDir()
	spec := `user=sh -c 'sleep 1000 & echo $$ $! > pids.tmp; mv pids.tmp pids; wait'`
	r, _ := newTestRunner(t, Config{Dir: dir, KillGrace: time.Second}, spec)
	r.Enqueue(serf.UserEvent{Name: "x"})
	r.Enqueue(serf.UserEvent{Name: "y"})
	testkit.WaitFor(t, 30*time.Second, "the pids", func() bool { return fileExists(filepath.Join(dir, "pids")) })
	pids := readPIDs(t, filepath.Join(dir, "pids"))
	killOnCleanup(t, pids)

	done := make(chan struct{})
	go func() { _ = r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return")
	}
	for _, pid := range pids {
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("pid %d to be gone", pid), func() bool { return !alive(pid) })
	}
	s := stats(t, r, spec)
	if s.Ran != 1 || s.TimedOut != 0 || !strings.Contains(s.LastError, "canceled") || s.DroppedByReason[DropClosed] != 1 {
		t.Errorf("stats %+v", s)
	}
	// Close is idempotent, and a closed runner refuses work quietly.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r.Enqueue(serf.UserEvent{Name: "z"})
	if _, err := r.Query(context.Background(), &serf.Query{Name: "q"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Query after Close: %v", err)
	}
	if err := r.Reload(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Reload after Close: %v", err)
	}
}

func TestBackgroundChildren(t *testing.T) {
	t.Run("holding stdout is killed", func(t *testing.T) {
		dir := t.TempDir()
		spec := `user=sh -c 'sleep 1000 & echo $! > pid.tmp; mv pid.tmp pid; echo started'`
		r, logs := newTestRunner(t, Config{Dir: dir}, spec)
		r.Enqueue(serf.UserEvent{Name: "x"})
		testkit.WaitFor(t, 30*time.Second, "the run to finish", func() bool { return stats(t, r, spec).Ran == 1 })
		pids := readPIDs(t, filepath.Join(dir, "pid"))
		killOnCleanup(t, pids)
		testkit.WaitFor(t, 30*time.Second, "the background child to be gone", func() bool { return !alive(pids[0]) })
		if s := stats(t, r, spec); s.Failed != 0 || s.LastExitCode != 0 {
			t.Errorf("stats %+v", s)
		}
		got := logs.records("hook ran")
		if len(got) != 1 || got[0]["killed_leftovers"] != true || got[0]["output"] != "started\n" {
			t.Errorf("log %v", got)
		}
	})
	t.Run("detached keeps running as with serf", func(t *testing.T) {
		dir := t.TempDir()
		spec := `user=sh -c 'sleep 1000 >/dev/null 2>&1 & echo $! > pid.tmp; mv pid.tmp pid'`
		r, logs := newTestRunner(t, Config{Dir: dir}, spec)
		r.Enqueue(serf.UserEvent{Name: "x"})
		testkit.WaitFor(t, 30*time.Second, "the run to finish", func() bool { return stats(t, r, spec).Ran == 1 })
		pids := readPIDs(t, filepath.Join(dir, "pid"))
		killOnCleanup(t, pids)
		if !alive(pids[0]) {
			t.Error("the detached child was killed")
		}
		if got := logs.records("hook ran"); len(got) != 1 || got[0]["killed_leftovers"] != nil {
			t.Errorf("log %v", got)
		}
	})
}

func TestOutputCapKeepsTail(t *testing.T) {
	spec := `user=sh -c 'i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done; echo to-stderr >&2'`
	r, logs := newTestRunner(t, Config{OutputLimit: 1000}, spec)
	r.Enqueue(serf.UserEvent{Name: "x"})
	testkit.WaitFor(t, 30*time.Second, "the run", func() bool { return stats(t, r, spec).Ran == 1 })
	got := logs.records("hook ran")
	if len(got) != 1 {
		t.Fatalf("log %v", got)
	}
	out, _ := got[0]["output"].(string)
	var total int
	for i := range 3000 {
		total += len(fmt.Sprintf("line-%d\n", i))
	}
	total += len("to-stderr\n")
	if len(out) != 1000 || !strings.HasSuffix(out, "line-2999\nto-stderr\n") ||
		got[0]["output_bytes"] != float64(total) || got[0]["output_truncated"] != true ||
		got[0]["handler"] != spec || got[0]["event"] != "user:x" || got[0]["exit_code"] != float64(0) {
		t.Errorf("record %v (output %d bytes)", got[0], len(out))
	}
}

func TestTailAndHeadBuffers(t *testing.T) {
	tb := &tailBuffer{limit: 5}
	for _, s := range []string{"ab", "cd", "efg", "", "hijklmnop", "q"} {
		_, _ = tb.Write([]byte(s))
	}
	if b, n := tb.bytes(); string(b) != "mnopq" || n != 17 {
		t.Errorf("tail %q %d", b, n)
	}
	hb := &headBuffer{limit: 5}
	for _, s := range []string{"ab", "cdef", "g"} {
		_, _ = hb.Write([]byte(s))
	}
	if b, n := hb.bytes(); string(b) != "abcde" || n != 7 {
		t.Errorf("head %q %d", b, n)
	}
}

func TestQuery(t *testing.T) {
	big := `query:big=sh -c 'printf "%0300d" 0'`
	quiet := `query:quiet=/bin/true`
	failing := `query:fail=sh -c 'echo oops; exit 3'`
	failThenAnswer := `query:two=sh -c 'exit 1'`
	answer := `query:two=echo second`
	var mu sync.Mutex
	var sent [][]byte
	r, logs := newTestRunner(t, Config{
		QueryResponseLimit: 100,
		Respond:            func(q *serf.Query, resp []byte) error { mu.Lock(); sent = append(sent, resp); mu.Unlock(); return nil },
	}, big, quiet, failing, failThenAnswer, answer)
	ctx := context.Background()

	resp, err := r.Query(ctx, &serf.Query{Name: "big"})
	if err != nil || string(resp) != strings.Repeat("0", 100) {
		t.Errorf("big: %q, %v", resp, err)
	}
	if got := logs.records("hook query response truncated"); len(got) != 1 || got[0]["bytes"] != float64(300) || got[0]["limit"] != float64(100) {
		t.Errorf("truncation log %v", got)
	}
	if resp, err := r.Query(ctx, &serf.Query{Name: "quiet"}); resp != nil || err != nil {
		t.Errorf("quiet: %q, %v", resp, err)
	}
	if resp, err := r.Query(ctx, &serf.Query{Name: "fail"}); resp != nil || err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("fail: %q, %v", resp, err)
	}
	if resp, err := r.Query(ctx, &serf.Query{Name: "two"}); string(resp) != "second\n" || err != nil {
		t.Errorf("two: %q, %v", resp, err)
	}
	if _, err := r.Query(ctx, &serf.Query{Name: "none"}); !errors.Is(err, ErrNoHandler) {
		t.Errorf("none: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Query(canceled, &serf.Query{Name: "big"}); err == nil {
		t.Error("Query with a canceled context succeeded")
	}

	// Through the queue: truncated too, and a failing handler never answers.
	r.Enqueue(&serf.Query{Name: "big"})
	r.Enqueue(&serf.Query{Name: "fail"})
	testkit.WaitFor(t, 30*time.Second, "the queued queries", func() bool {
		return stats(t, r, big).Ran == 2 && stats(t, r, failing).Ran == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 || string(sent[0]) != strings.Repeat("0", 100) {
		t.Errorf("responses sent: %q", sent)
	}
}

func TestReloadKeepsQueueOfUnchangedHandler(t *testing.T) {
	dir := t.TempDir()
	kept := `user=sh -c 'while [ ! -e release ]; do sleep 0.02; done; cat >> kept'`
	removed := `user=sh -c 'while [ ! -e release ]; do sleep 0.02; done; cat >> removed'`
	added := `user=sh -c 'cat >> added'`
	r, logs := newTestRunner(t, Config{Dir: dir}, kept, removed)
	for i := 1; i <= 5; i++ {
		r.Enqueue(serf.UserEvent{Name: "n", Payload: []byte(strconv.Itoa(i))})
	}
	testkit.WaitFor(t, 30*time.Second, "both handlers running", func() bool {
		return stats(t, r, kept).Running && stats(t, r, removed).Running
	})

	specs, err := ParseSpecs([]string{added, kept})
	if err != nil {
		t.Fatal(err)
	}
	specs[1].Timeout = time.Minute // new options, same spec string: still kept
	if err := r.Reload(specs); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); len(st) != 2 || st[0].Spec != added || st[1].Spec != kept {
		t.Fatalf("handlers after reload: %+v", st)
	}
	if s := stats(t, r, kept); s.QueueDepth != 4 || s.Queued != 5 || s.Dropped != 0 {
		t.Errorf("kept handler lost its queue: %+v", s)
	}
	got := logs.records("hook events dropped")
	if len(got) != 1 || got[0]["handler"] != removed || got[0]["reason"] != DropRemoved || got[0]["dropped"] != float64(4) {
		t.Errorf("drop log of the removed handler: %v", got)
	}

	r.Enqueue(serf.UserEvent{Name: "n", Payload: []byte("6")})
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the kept handler's queue", func() bool { return stats(t, r, kept).Ran == 6 })
	testkit.WaitFor(t, 30*time.Second, "the removed handler's last run", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "removed"))
		return len(b) > 0
	})
	testkit.WaitFor(t, 30*time.Second, "the added handler", func() bool { return stats(t, r, added).Ran == 1 })
	for file, want := range map[string]string{"kept": "1\n2\n3\n4\n5\n6\n", "removed": "1\n", "added": "6\n"} {
		if got := readFile(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
}

func TestCoalescing(t *testing.T) {
	dir := t.TempDir()
	spec, err := ParseSpec(`sh -c 'echo "$SERF_EVENT" >> out; cut -f1 >> out'`)
	if err != nil {
		t.Fatal(err)
	}
	spec.Coalesce = true
	logs := &logBuffer{}
	r, err := New(Config{Dir: dir, CoalescePeriod: 10 * time.Second, QuiescentPeriod: 300 * time.Millisecond,
		Self: func() serf.Member { return testSelf }, Logger: newJSONLogger(logs)}, []Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(t, r) })
	m := func(typ serf.EventType, names ...string) serf.MemberEvent {
		e := serf.MemberEvent{Type: typ}
		for _, n := range names {
			e.Members = append(e.Members, serf.Member{Name: n})
		}
		return e
	}
	r.Enqueue(m(serf.EventMemberJoin, "a", "b"))
	r.Enqueue(m(serf.EventMemberUpdate, "c"))
	r.Enqueue(m(serf.EventMemberFailed, "a"))
	r.Enqueue(serf.UserEvent{Name: "passes-through"})
	testkit.WaitFor(t, 30*time.Second, "four runs", func() bool { return stats(t, r, spec.Raw).Ran == 4 })
	want := "user\n" + // not coalesced, not delayed
		"member-join\nb\nmember-failed\na\nmember-update\nc\n"
	if got := readFile(t, filepath.Join(dir, "out")); got != want {
		t.Errorf("handled:\n%s\nwant:\n%s", got, want)
	}
	if s := stats(t, r, spec.Raw); s.Coalesced != 1 || s.Queued != 4 {
		t.Errorf("stats %+v", s)
	}
}

func TestShoalEvents(t *testing.T) {
	dir := t.TempDir()
	pool := `pool-change=sh -c 'cat >> pool.json; echo "$SHOAL_EVENT $SERF_EVENT $SHOAL_SELF_NAME" >> env'`
	all := `sh -c 'echo "$SERF_EVENT" >> all'`
	r, _ := newTestRunner(t, Config{Dir: dir}, pool, all)
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := r.EnqueueShoal(Event{Type: PoolChange, Time: at, Data: []byte(`{"cluster":"main"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := r.EnqueueShoal(Event{Type: HealthChange}); err != nil {
		t.Fatal(err)
	}
	if err := r.EnqueueShoal(Event{Type: "nope"}); err == nil {
		t.Error("unknown type accepted")
	}
	r.Enqueue(serf.UserEvent{Name: "u"})
	testkit.WaitFor(t, 30*time.Second, "the runs", func() bool { return stats(t, r, pool).Ran == 1 && stats(t, r, all).Ran == 1 })
	if got, want := readFile(t, filepath.Join(dir, "pool.json")),
		`{"version":1,"event":"pool-change","time":"2025-01-02T03:04:05Z","node":"db1","data":{"cluster":"main"}}`+"\n"; got != want {
		t.Errorf("stdin %s, want %s", got, want)
	}
	if got := readFile(t, filepath.Join(dir, "env")); got != "pool-change pool-change db1\n" {
		t.Errorf("env %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "all")); got != "user\n" {
		t.Errorf("* handler got %q; shoal events must be named explicitly", got)
	}
}

func TestFailuresAreRecorded(t *testing.T) {
	missing := `user=/nonexistent/hook`
	exit := `user=sh -c 'exit 7'`
	calls := 0
	var mu sync.Mutex
	self := func() serf.Member {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			panic("self exploded")
		}
		return testSelf
	}
	panicky := `member-join=/bin/true`
	r, logs := newTestRunner(t, Config{Self: self}, panicky)
	if got := logs.records("hook command not found (yet)"); len(got) != 0 {
		t.Errorf("warned about /bin/true: %v", got)
	}
	r.Enqueue(serf.MemberEvent{Type: serf.EventMemberJoin})
	r.Enqueue(serf.MemberEvent{Type: serf.EventMemberJoin})
	testkit.WaitFor(t, 30*time.Second, "two runs", func() bool { return stats(t, r, panicky).Ran == 2 })
	if s := stats(t, r, panicky); s.Panics != 1 || s.Failed != 1 || s.LastError != "" {
		t.Errorf("after a panic: %+v", s)
	}

	r2, logs2 := newTestRunner(t, Config{}, missing, exit)
	if got := logs2.records("hook command not found (yet)"); len(got) != 1 || got[0]["handler"] != missing {
		t.Errorf("missing command warning: %v", got)
	}
	r2.Enqueue(serf.UserEvent{Name: "x"})
	testkit.WaitFor(t, 30*time.Second, "two runs", func() bool { return stats(t, r2, missing).Ran == 1 && stats(t, r2, exit).Ran == 1 })
	if s := stats(t, r2, missing); s.Failed != 1 || s.LastExitCode != -1 || !strings.Contains(s.LastError, "start") {
		t.Errorf("missing: %+v", s)
	}
	if s := stats(t, r2, exit); s.Failed != 1 || s.LastExitCode != 7 || s.LastError != "exit status 7" || s.LastDuration <= 0 {
		t.Errorf("exit 7: %+v", s)
	}
	if got := logs2.records("hook failed"); len(got) != 2 {
		t.Errorf("failure logs: %v", got)
	}
}

func TestNewValidates(t *testing.T) {
	self := func() serf.Member { return testSelf }
	ok, _ := ParseSpec("/bin/true")
	for _, c := range []struct {
		name  string
		cfg   Config
		specs []Spec
	}{
		{"no self", Config{}, nil},
		{"short timeout", Config{Self: self, Timeout: time.Millisecond}, nil},
		{"negative queue", Config{Self: self, QueueSize: -1}, nil},
		{"bad spec", Config{Self: self}, []Spec{ok, {Raw: "x"}}},
	} {
		if r, err := New(c.cfg, c.specs); err == nil {
			r.Close()
			t.Errorf("%s: New succeeded", c.name)
		}
	}
	r, err := New(Config{Self: self}, []Spec{ok})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Reload([]Spec{{Raw: "x"}}); err == nil {
		t.Error("Reload accepted an invalid spec")
	}
	if st := r.Stats(); len(st) != 1 || st[0].Spec != "/bin/true" {
		t.Errorf("a failed Reload changed the handlers: %+v", st)
	}
}

func TestOnRunReportsEachRun(t *testing.T) {
	type call struct{ spec, event, result string }
	var mu sync.Mutex
	var calls []call
	dir := t.TempDir()
	specs, err := ParseSpecs([]string{"user:ok=/bin/true", "user:bad=/bin/false", "user:slow=/bin/sleep 5"})
	if err != nil {
		t.Fatal(err)
	}
	specs[2].Timeout = MinTimeout
	r, err := New(Config{
		Self:      func() serf.Member { return serf.Member{Name: "n1"} },
		Dir:       dir,
		KillGrace: 100 * time.Millisecond,
		OnRun: func(spec, event, result string, d time.Duration) {
			mu.Lock()
			calls = append(calls, call{spec, event, result})
			mu.Unlock()
		},
	}, specs)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, n := range []string{"ok", "bad", "slow"} {
		r.Enqueue(serf.UserEvent{Name: n})
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("OnRun called %d times, want 3", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := map[string]string{}
	for _, c := range calls {
		if c.event != "user" {
			t.Errorf("event %q, want user", c.event)
		}
		got[c.spec] = c.result
	}
	want := map[string]string{"user:ok=/bin/true": ResultOK, "user:bad=/bin/false": ResultFailed, "user:slow=/bin/sleep 5": ResultTimedOut}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

// TestUserEventFloodNeverDropsMemberEvents is the attack of brief D: anyone
// holding the gossip key floods a slow "*" handler (0.3 s a run, queue 100)
// with 1,200 user events while a node fails. The member-failed must run
// right after the run in progress, and only user events may be dropped.
func TestUserEventFloodNeverDropsMemberEvents(t *testing.T) {
	dir := t.TempDir()
	// Each run records its event and when it started (ns since the epoch).
	spec := `sh -c 'echo "$SERF_EVENT $(date +%s%N)" >> seen; sleep 0.3'`
	r, logs := newTestRunner(t, Config{Dir: dir, QueueSize: 100}, spec)

	const n = 1200
	var queuedAt time.Time
	for i := range n {
		r.Enqueue(serf.UserEvent{Name: "flood", Payload: []byte(strconv.Itoa(i))})
		if i == n/2 {
			queuedAt = time.Now()
			r.Enqueue(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{{Name: "db2"}}})
		}
		time.Sleep(2 * time.Millisecond) // a flood of 2.4 s at least
	}
	var started time.Time
	testkit.WaitFor(t, 30*time.Second, "the member-failed run", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "seen"))
		for _, line := range strings.Split(string(b), "\n") {
			if ns, ok := strings.CutPrefix(line, "member-failed "); ok {
				v, err := strconv.ParseInt(ns, 10, 64)
				if err != nil {
					t.Fatalf("seen: %q: %v", line, err)
				}
				started = time.Unix(0, v)
				return true
			}
		}
		return false
	})
	if d := started.Sub(queuedAt); d > 2*time.Second {
		t.Errorf("member-failed ran %v after it was queued, want < 2s (one run of 0.3 s was in progress)", d)
	} else {
		t.Logf("member-failed ran %v after it was queued", d)
	}

	s := stats(t, r, spec)
	if len(s.DroppedByClass[ClassMember]) != 0 {
		t.Errorf("member events dropped: %v", s.DroppedByClass)
	}
	userDrops := s.DroppedByClass[ClassUser][DropQueueFull]
	if userDrops < n-100-uint64(s.Started) || userDrops != s.Dropped || s.DroppedByReason[DropQueueFull] != userDrops {
		t.Errorf("user drops %d; all drops %d, by class %v, by reason %v", userDrops, s.Dropped, s.DroppedByClass, s.DroppedByReason)
	}
	if s.Queued != n+1 || s.Started+uint64(s.QueueDepth)+s.Dropped != s.Queued {
		t.Errorf("accounting: queued %d, started %d + waiting %d + dropped %d", s.Queued, s.Started, s.QueueDepth, s.Dropped)
	}
	if recs := logs.records("hook queue full, dropping events"); len(recs) != 1 || recs[0]["class"] != ClassUser {
		t.Errorf("first-drop log: %v", recs)
	}
}
