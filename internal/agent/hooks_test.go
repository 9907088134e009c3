package agent

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/internal/view"
	"github.com/shoaldb/shoal/pkg/client"
)

// writeScript writes an executable script into dir.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHooksInAgent runs Serf-style handlers in a real agent: member events
// with Serf's environment and stdin, a user event with a hostile payload
// that must reach the script verbatim and never a shell, a query answered by
// a script on another node, and `shoal hooks test`.
func TestHooksInAgent(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "events.log")
	record := writeScript(t, dir, "record.sh", `{
  printf 'EVENT=%s SELF=%s ROLE=%s UE=%s TEAM=%s\n' "$SERF_EVENT" "$SERF_SELF_NAME" "$SERF_SELF_ROLE" "$SERF_USER_EVENT" "$SERF_TAG_TEAM"
  cat
  printf '\n--\n'
} >> "$OUT"
`)
	pong := writeScript(t, dir, "pong.sh", `printf 'pong from %s' "$SERF_SELF_NAME"`+"\n")
	ca := testConfig(t, "hk1", "fast", "")
	ca.Tags = map[string]string{"team": "db"}
	ca.EventHandlers = []string{"member-join,member-failed,user:deploy=" + record, "query:ping=" + pong}
	ca.Hooks.Env = []string{"OUT"}
	t.Setenv("OUT", out)
	if err := ca.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startNode(t, ca)
	b := startNode(t, testConfig(t, "hk2", "fast", "", ca.Bind))

	read := func() string {
		data, _ := os.ReadFile(out)
		return string(data)
	}
	defer func() {
		if t.Failed() {
			t.Logf("events.log:\n%q", read())
		}
	}()
	testkit.WaitFor(t, 20*time.Second, "member-join for hk2 recorded", func() bool {
		return strings.Contains(read(), "EVENT=member-join SELF=hk1 ROLE=app UE= TEAM=db\n") &&
			strings.Contains(read(), "hk2\t127.0.0.1\tapp\tcluster=default,role=app\n")
	})

	hostile := "$(touch " + filepath.Join(dir, "PWNED") + "); `touch " + filepath.Join(dir, "PWNED2") + "`\n'\";|&"
	if err := b.a.UserEvent("deploy", []byte(hostile), false); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "user event recorded", func() bool {
		return strings.Contains(read(), "EVENT=user SELF=hk1 ROLE=app UE=deploy TEAM=db\n"+hostile+"\n\n--\n") // serf adds the missing final newline
	})
	for _, f := range []string{"PWNED", "PWNED2"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Fatalf("%s exists: a payload reached a shell", f)
		}
	}

	// A query from hk2 is answered by hk1's script.
	resp, err := b.a.Query("ping", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var answer string
	for r := range resp.ResponseCh() {
		if r.From == "hk1" {
			answer = string(r.Payload)
		}
	}
	if answer != "pong from hk1" {
		t.Errorf("query answer %q, want pong from hk1", answer)
	}

	// shoal hooks test: runs the matching handler once and reports it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := a.a.TestHook(ctx, view.HookTest{Event: "user", Name: "deploy", Payload: []byte("test-payload")})
	if err != nil || len(tr.Handlers) != 1 || tr.Handlers[0].LastExitCode != 0 || tr.TimedOut {
		t.Fatalf("hooks test: %+v %v", tr, err)
	}
	if !strings.Contains(read(), "UE=deploy TEAM=db\ntest-payload\n\n--\n") {
		t.Error("hooks test run not recorded")
	}
	if tr, err := a.a.TestHook(ctx, view.HookTest{Event: "query", Name: "ping"}); err != nil || string(tr.Response) != "pong from hk1" {
		t.Errorf("hooks test query: %+v %v", tr, err)
	}
	if _, err := a.a.TestHook(ctx, view.HookTest{Event: "member-joined"}); err != ErrBadHookEvent {
		t.Errorf("bad event: %v", err)
	}

	// member-failed when hk2 dies without leaving.
	b.a.Shutdown()
	testkit.WaitFor(t, 20*time.Second, "member-failed recorded", func() bool {
		return strings.Contains(read(), "EVENT=member-failed SELF=hk1")
	})
	st := a.a.HookStats()
	if len(st) != 2 || st[0].Ran < 4 || st[0].Failed != 0 || st[0].Dropped != 0 {
		t.Errorf("hook stats: %+v", st)
	}

	// Reload (SIGHUP): the unchanged handler keeps its counters, the removed
	// one goes, the new one is there; a bad spec changes nothing.
	next := *ca
	next.EventHandlers = []string{ca.EventHandlers[0], "user:other=" + pong}
	a.a.Reload(&next)
	st = a.a.HookStats()
	if len(st) != 2 || st[0].Spec != ca.EventHandlers[0] || st[0].Ran < 4 || st[1].Spec != next.EventHandlers[1] {
		t.Errorf("after reload: %+v", st)
	}
	bad := next
	bad.EventHandlers = []string{"member-jion=" + record}
	a.a.Reload(&bad)
	if st := a.a.HookStats(); len(st) != 2 || st[1].Spec != next.EventHandlers[1] {
		t.Errorf("a bad reload changed the handlers: %+v", st)
	}
}

// TestHookBurstKeepsAgentResponsive: 10,000 events at once for a handler
// that sleeps. They enter through the same call serf's event loop makes;
// queuing never waits for the script, the members API keeps answering,
// the queue stays at its bound and every event is accounted for.
func TestHookBurstKeepsAgentResponsive(t *testing.T) {
	dir := t.TempDir()
	c := testConfig(t, "burst1", "fast", "")
	c.EventHandlers = []string{"user=" + writeScript(t, dir, "slow.sh", "sleep 0.1\n")}
	a := startNode(t, c)
	srv := httptest.NewServer(api.New(a.a, slog.New(slog.DiscardHandler), "", nil))
	defer srv.Close()
	cl := client.New(srv.URL)

	const n = 10_000
	start := time.Now()
	for i := range n {
		a.a.rep.hooks.HandleEvent(serf.UserEvent{LTime: serf.LamportTime(i), Name: "burst", Payload: []byte(strconv.Itoa(i))})
	}
	enqueue := time.Since(start)
	var worst time.Duration
	for range 20 {
		t0 := time.Now()
		if _, err := cl.Members(context.Background(), client.MemberFilter{}); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(t0))
	}
	t.Logf("%d events queued in %s; slowest of 20 members API calls during the backlog: %s", n, enqueue, worst)
	if enqueue > 2*time.Second {
		t.Errorf("queuing %d events took %s: the event path waits for something", n, enqueue)
	}
	if worst > time.Second {
		t.Errorf("members API took %s during the hook backlog", worst)
	}
	st := a.a.HookStats()[0]
	if st.Queued != n || st.Started+uint64(st.QueueDepth)+st.Dropped != n {
		t.Errorf("accounting: queued %d, started %d + waiting %d + dropped %d", st.Queued, st.Started, st.QueueDepth, st.Dropped)
	}
	if st.QueueHigh > st.QueueMax || st.QueueMax != 1000 || st.Dropped < n-1000-10 {
		t.Errorf("queue high %d of max %d, dropped %d", st.QueueHigh, st.QueueMax, st.Dropped)
	}
	if st.DroppedByReason["queue_full"] != st.Dropped {
		t.Errorf("drops by reason %v, total %d", st.DroppedByReason, st.Dropped)
	}
}
