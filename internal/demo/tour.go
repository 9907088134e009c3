package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoaldb/shoal/internal/mariadb/launch"
	"github.com/shoaldb/shoal/pkg/client"
)

// StepBound is how long the tour waits for a fault to be reflected.
const StepBound = 15 * time.Second

// hxPoll is how often the tour reads HAProxy's state.
const hxPoll = 10 * time.Millisecond

// tour runs the scripted faults against a running demo.
type tour struct {
	l      *Layout
	out    io.Writer
	failed []string
	// cutExplained: the note on "invalid connection" was printed.
	cutExplained bool
}

// Tour runs the narrated fault tour against the running demo: each step
// does one thing, then says when every agent saw it (its history event time
// minus the moment of the fault) and when HAProxy's state changed (from
// `show servers state`, polled every 10 ms), and how many errors the load
// client saw meanwhile. It ends with the demo as healthy as it found it and
// fails naming every step that was not reflected within StepBound.
func (l *Layout) Tour(ctx context.Context, out io.Writer) error {
	if running := l.Running(); len(running) < len(procNames()) {
		what := "none"
		if len(running) > 0 {
			what = "only " + strings.Join(running, ", ")
		}
		return fmt.Errorf("the demo is not (fully) running in %s: %d of %d processes run (%s); start it with make demo",
			l.Dir, len(running), len(procNames()), what)
	}
	if err := l.startsFromDB1(ctx); err != nil {
		return err
	}
	if err := l.waitHealthy(ctx, DBNodes[0], 30*time.Second); err != nil {
		return fmt.Errorf("the demo is not healthy before the tour: %w", err)
	}
	bins, err := launch.FindBinaries()
	if err != nil {
		return err
	}
	t := &tour{l: l, out: out}
	fmt.Fprintf(out, "Tour of %s: times are the agents' own (history event time - fault time, per agent) and HAProxy's\n"+
		"(runtime API `show servers state`, polled every %s); each step waits at most %s.\n", l.Dir, hxPoll, StepBound)

	// 1 and 2: a replica's server crashes, then comes back.
	t.step(ctx, "1. kill -9 the mariadbd of db2 (a replica)", false, func() (time.Time, error) {
		hx := t.watch(map[string]string{BackendRO + "/db2": "maint"})
		t0 := time.Now()
		_, err := l.signal("mariadb-db2", syscall.SIGKILL)
		if err != nil {
			return t0, err
		}
		t.expectOut(ctx, t0, "db2", "critical", l.Nodes(), hx)
		return t0, nil
	})
	t.step(ctx, "2. restart db2's mariadbd", true, func() (time.Time, error) {
		hx := t.watch(map[string]string{BackendRO + "/db2": "ready"})
		t0 := time.Now()
		if err := l.startMariaDB(ctx, bins, "db2"); err != nil {
			return t0, err
		}
		fmt.Fprintf(out, "   mariadbd answers after %s\n", ms(time.Since(t0)))
		t.expectIn(ctx, t0, "db2", "reader", l.Nodes(), hx)
		return t0, nil
	})
	// 3: a hung server.
	t.step(ctx, "3. SIGSTOP the mariadbd of db3 (hung), then SIGCONT", true, func() (time.Time, error) {
		hx := t.watch(map[string]string{BackendRO + "/db3": "maint"})
		t0 := time.Now()
		if _, err := l.signal("mariadb-db3", syscall.SIGSTOP); err != nil {
			return t0, err
		}
		t.expectOut(ctx, t0, "db3", "critical", l.Nodes(), hx)
		hx = t.watch(map[string]string{BackendRO + "/db3": "ready"})
		t1 := time.Now()
		if _, err := l.signal("mariadb-db3", syscall.SIGCONT); err != nil {
			return t0, err
		}
		fmt.Fprintln(out, "   SIGCONT:")
		t.expectIn(ctx, t1, "db3", "reader", l.Nodes(), hx)
		return t0, nil
	})
	// 4: maintenance.
	t.step(ctx, "4. shoal maint enable on db2, then disable", true, func() (time.Time, error) {
		hx := t.watch(map[string]string{BackendRO + "/db2": "maint"})
		t0 := time.Now()
		if _, err := l.Client("db2").SetMaint(ctx, true, "demo tour"); err != nil {
			return t0, err
		}
		t.expectOut(ctx, t0, "db2", "maintenance", l.Nodes(), hx)
		hx = t.watch(map[string]string{BackendRO + "/db2": "ready"})
		t1 := time.Now()
		if _, err := l.Client("db2").SetMaint(ctx, false, ""); err != nil {
			return t0, err
		}
		fmt.Fprintln(out, "   maint disable:")
		t.expectIn(ctx, t1, "db2", "reader", l.Nodes(), hx)
		return t0, nil
	})
	// 5: switchover and back.
	t.step(ctx, "5. read_only switchover db1 -> db2 (and back to db1)", true, func() (time.Time, error) {
		start := time.Now()
		for _, sw := range [][2]string{{"db1", "db2"}, {"db2", "db1"}} {
			from, to := sw[0], sw[1]
			hx := t.watch(map[string]string{BackendRW + "/" + to: "ready", BackendRW + "/" + from: "maint"})
			t0 := time.Now()
			promoted, err := l.Switchover(ctx, from, to)
			if err != nil {
				return start, err
			}
			fmt.Fprintf(out, "   %s read_only=ON, %s caught up and promoted (read_only=OFF) %s later, the third repointed with GTID:\n",
				from, to, ms(promoted.Sub(t0)))
			t.expectIn(ctx, promoted, to, "writer", l.Nodes(), hx)
			if err := l.waitHealthy(ctx, to, StepBound); err != nil {
				t.fail(err.Error())
			} else {
				fmt.Fprintf(out, "   pool everywhere: writer %s, the two others readers\n", to)
			}
			// Let the client write to the new primary for a while.
			settled := time.Now()
			time.Sleep(2200 * time.Millisecond)
			fmt.Fprintf(out, "   client writes in the next 2 s landed on: %s\n", t.writesBy(settled, time.Now()))
		}
		return start, nil
	})
	// 5b: the same by shoal switchover, run on db3's agent (a voter).
	t.step(ctx, "5b. shoal switchover db1 -> db2 (and back to db1), run on db3", true, func() (time.Time, error) {
		start := time.Now()
		for _, sw := range [][2]string{{"db1", "db2"}, {"db2", "db1"}} {
			from, to := sw[0], sw[1]
			hx := t.watch(map[string]string{BackendRW + "/" + to: "ready", BackendRW + "/" + from: "maint"})
			t0 := time.Now()
			res, err := l.Client("db3").Switchover(ctx, client.SwitchoverRequest{To: to})
			if err != nil {
				return start, err
			}
			if res.Error != "" {
				return start, fmt.Errorf("shoal switchover --to %s: %s", to, res.Error)
			}
			took := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
			fmt.Fprintf(out, "   shoal switchover --to %s: term %d, no server took writes for %s, applied on %d/%d routers in %s:\n",
				to, res.Term, ms(took(res.ReadOnlySeconds)), len(res.Routers.Applied), len(res.Routers.Applied)+len(res.Routers.Pending), ms(took(res.Routers.Seconds)))
			t.expectIn(ctx, t0, to, "writer", l.Nodes(), hx)
			if err := l.waitHealthy(ctx, to, StepBound); err != nil {
				t.fail(err.Error())
			} else {
				fmt.Fprintf(out, "   pool everywhere: writer %s, the two others readers (re-pointed by their agents)\n", to)
			}
			settled := time.Now()
			time.Sleep(2200 * time.Millisecond)
			fmt.Fprintf(out, "   client writes in the next 2 s landed on: %s\n", t.writesBy(settled, time.Now()))
		}
		return start, nil
	})
	// 6: a db host's agent dies.
	t.step(ctx, "6. kill -9 db3's shoal agent, then restart it", true, func() (time.Time, error) {
		hx := t.watch(map[string]string{BackendRO + "/db3": "maint"})
		t0 := time.Now()
		if _, err := l.signal("agent-db3", syscall.SIGKILL); err != nil {
			return t0, err
		}
		others := []string{"db1", "db2", App}
		t.expectOut(ctx, t0, "db3", "agent-failed", others, hx)
		t.expectMember(ctx, "db3", "failed", others)
		hx = t.watch(map[string]string{BackendRO + "/db3": "ready"})
		t1 := time.Now()
		if err := l.startAgent("db3"); err != nil {
			return t0, err
		}
		fmt.Fprintln(out, "   agent restarted:")
		t.expectIn(ctx, t1, "db3", "reader", l.Nodes(), hx)
		t.expectMember(ctx, "db3", "alive", l.Nodes())
		return t0, nil
	})

	if err := l.waitHealthy(ctx, DBNodes[0], 30*time.Second); err != nil {
		t.fail("end: " + err.Error())
	} else {
		fmt.Fprintf(out, "\nEnd: healthy as before (writer db1, readers db2 and db3, on every agent and in HAProxy).\n")
	}
	if len(t.failed) > 0 {
		return fmt.Errorf("tour: %d problem(s):\n  %s", len(t.failed), strings.Join(t.failed, "\n  "))
	}
	return nil
}

// startsFromDB1 refuses at once a demo whose writer is not db1 (say,
// after a shoal switchover by hand), which the tour would otherwise wait
// 30 s for: it names the writer the app agent routes to and how to move
// it back.
func (l *Layout) startsFromDB1(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	p, err := l.Client(App).Pool(ctx, Cluster)
	if err != nil || len(p.Writers) != 1 || p.Writers[0].Name == DBNodes[0] {
		return nil // no pool or no single writer: waitHealthy says what it sees
	}
	w := printable(p.Writers[0].Name)
	return fmt.Errorf("the tour starts from %s as the writer, but the pool's writer is %s (a switchover moved it):\n"+
		"  move it back: %s switchover --to %s --http-addr %s --token-file %s\n"+
		"  or start afresh: make demo",
		DBNodes[0], w, l.Shoal, DBNodes[0], l.HTTPAddr(DBNodes[2]), l.Path("api-token"))
}

func (t *tour) fail(msg string) {
	fmt.Fprintf(t.out, "   FAILED: %s\n", msg)
	t.failed = append(t.failed, msg)
}

// step runs one step, then (if the step heals what it broke) waits for the
// demo to be healthy again, and reports the load client's errors during it.
func (t *tour) step(ctx context.Context, title string, heals bool, run func() (time.Time, error)) {
	fmt.Fprintf(t.out, "\n== %s\n", title)
	before := len(t.failed)
	t0, err := run()
	if err != nil {
		t.fail(fmt.Sprintf("%s: %v", title, err))
	}
	if heals {
		if err := t.l.waitHealthy(ctx, DBNodes[0], 30*time.Second); err != nil {
			t.fail(fmt.Sprintf("%s: after the step: %v", title, err))
		}
	}
	end := time.Now()
	// The client's second that covers the end is written up to 1 s later.
	time.Sleep(1100 * time.Millisecond)
	e := t.l.clientErrors(t0, end)
	fmt.Fprintf(t.out, "   client during the step (%d s): %s\n", e.Seconds, e.describe())
	if e.WriteCut+e.ReadCut > 0 && !t.cutExplained {
		t.cutExplained = true
		fmt.Fprintln(t.out, "   (\"invalid connection\" is go-sql-driver's error for a connection closed under it: when a server\n"+
			"   crashes, when a fence kills the old writer's clients, when HAProxy shuts the sessions of a server\n"+
			"   it takes out, or turns a new connection away while no writer is ready. Expected during these\n"+
			"   steps: the client's next operation opens a new connection.)")
	}
	for i := before; i < len(t.failed); i++ {
		t.failed[i] = strings.TrimPrefix(t.failed[i], title+": ")
		t.failed[i] = title + ": " + t.failed[i]
	}
}

// hxWatch polls HAProxy until each server has its wanted state.
type hxWatch struct {
	start time.Time
	mu    sync.Mutex
	seen  map[string]time.Time
	want  map[string]string
	done  chan struct{}
}

// watch starts polling HAProxy every hxPoll; call it just before the fault.
func (t *tour) watch(want map[string]string) *hxWatch {
	w := &hxWatch{start: time.Now(), seen: map[string]time.Time{}, want: want, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		deadline := time.Now().Add(StepBound + 5*time.Second)
		for time.Now().Before(deadline) {
			st, err := t.l.HAProxyStates()
			now := time.Now()
			if err == nil {
				w.mu.Lock()
				for k, v := range w.want {
					if _, ok := w.seen[k]; !ok && st[k] == v {
						w.seen[k] = now
					}
				}
				n := len(w.seen)
				w.mu.Unlock()
				if n == len(w.want) {
					return
				}
			}
			time.Sleep(hxPoll)
		}
	}()
	return w
}

// report waits for the watch and prints when each server changed.
func (t *tour) reportHAProxy(w *hxWatch, t0 time.Time) {
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range sortedKeys(w.want) {
		at, ok := w.seen[k]
		if !ok {
			t.fail(fmt.Sprintf("HAProxy %s not %s within %s", k, w.want[k], StepBound))
			continue
		}
		fmt.Fprintf(t.out, "   HAProxy %s -> %s after %s (show servers state, polled every %s)\n", k, w.want[k], ms(at.Sub(t0)), hxPoll)
	}
}

// expectOut waits until node is out with reason in every given agent's pool
// and reports each agent's time, then HAProxy's.
func (t *tour) expectOut(ctx context.Context, t0 time.Time, node, reason string, agents []string, hx *hxWatch) {
	t.expect(ctx, t0, node, "out", agents, hx, func(p *client.PoolResponse) bool {
		for _, n := range p.Out {
			if n.Name == node && n.Reason == reason {
				return true
			}
		}
		return false
	}, fmt.Sprintf("%s out (%s)", node, reason))
}

// expectIn waits until node has role (reader or writer) in every given
// agent's pool.
func (t *tour) expectIn(ctx context.Context, t0 time.Time, node, role string, agents []string, hx *hxWatch) {
	t.expect(ctx, t0, node, role, agents, hx, func(p *client.PoolResponse) bool {
		list := p.Readers
		if role == "writer" {
			list = p.Writers
		}
		for _, n := range list {
			if n.Name == node {
				return true
			}
		}
		return false
	}, fmt.Sprintf("%s in as %s", node, role))
}

// maxDampWait bounds how long expect follows a damping hold beyond
// StepBound.
const maxDampWait = 2 * time.Minute

func (t *tour) expect(ctx context.Context, t0 time.Time, node, to string, agents []string, hx *hxWatch, cond func(*client.PoolResponse) bool, what string) {
	// Every agent is watched at once, so that a damping hold is seen on
	// each agent that has one, not only on the first waited for.
	type result struct {
		held time.Time
		ok   bool
	}
	results := make([]result, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].held, results[i].ok = t.waitAgent(ctx, t0, a, node, cond)
		}()
	}
	wg.Wait()
	var parts, damped []string
	for i, a := range agents {
		held, ok := results[i].held, results[i].ok
		if !ok {
			t.fail(fmt.Sprintf("%s: not %s within %s", a, what, StepBound))
			parts = append(parts, a+" -")
			continue
		}
		note := ""
		if !held.IsZero() {
			note = " (held out as flapping: damped)"
			damped = append(damped, a)
		}
		at, found := t.historyTime(ctx, a, node, to, t0)
		if !found {
			parts = append(parts, a+" ? (no history event)"+note)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s%s", a, ms(at.Sub(t0)), note))
	}
	fmt.Fprintf(t.out, "   %s on every agent (%d of %d checked): %s\n", what, len(agents), len(t.l.Nodes()), strings.Join(parts, ", "))
	if len(damped) > 0 {
		fmt.Fprintf(t.out, "   %s held %s out as flapping (reason damped) until its penalty decayed: they remember its earlier\n"+
			"   removals (this tour's or a previous run's). Damping state lives in each agent's memory: an agent\n"+
			"   restarted since has none and takes %s back at once, so pools differ until the hold ends (docs/demo.md).\n",
			strings.Join(damped, ", "), node, node)
	}
	t.reportHAProxy(hx, t0)
}

// waitAgent waits until agent's pool satisfies cond, StepBound after t0 or,
// while the agent holds node out as damped, until its hold ends (plus
// StepBound, at most maxDampWait). held is the latest damping hold seen.
func (t *tour) waitAgent(ctx context.Context, t0 time.Time, agent, node string, cond func(*client.PoolResponse) bool) (held time.Time, ok bool) {
	deadline := t0.Add(StepBound)
	c := t.l.Client(agent)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		p, err := c.Pool(pctx, Cluster)
		cancel()
		if err == nil && cond(p) {
			return held, true
		}
		if err == nil {
			if until := dampedUntil(p, node); !until.IsZero() {
				held = until
				deadline = later(deadline, earlier(until.Add(StepBound), t0.Add(maxDampWait)))
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return held, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dampedUntil is when node's damping hold ends in p, zero when it is not
// held out as damped.
func dampedUntil(p *client.PoolResponse, node string) time.Time {
	for _, n := range p.Out {
		if n.Name == node && n.Reason == "damped" {
			if n.Until.IsZero() {
				return time.Now() // held, end unknown
			}
			return n.Until
		}
	}
	return time.Time{}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// historyTime is the time of node's first pool transition to `to` at or
// after t0 in agent's history.
func (t *tour) historyTime(ctx context.Context, agent, node, to string, t0 time.Time) (time.Time, bool) {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	h, err := t.l.Client(agent).History(hctx, client.HistoryFilter{Node: node, Kind: "pool", Since: t0.Add(-time.Second)})
	if err != nil {
		return time.Time{}, false
	}
	for _, e := range h.Entries {
		if hasRole(e.To, to) && !e.Time.Before(t0) {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

// hasRole reports whether a pool transition's To is role: "writer+reader"
// (the writer also serving reads while the readers are stale, as after a
// switchover until they replicate from it) is the writer and a reader.
func hasRole(to, role string) bool {
	return slices.Contains(strings.Split(to, "+"), role)
}

// expectMember waits until every given agent lists node with status.
func (t *tour) expectMember(ctx context.Context, node, status string, agents []string) {
	deadline := time.Now().Add(StepBound)
	for _, a := range agents {
		for {
			mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ms, err := t.l.Client(a).Members(mctx, client.MemberFilter{})
			cancel()
			got := ""
			if err == nil {
				for _, m := range ms {
					if m.Name == node {
						got = m.Status
					}
				}
			}
			if got == status {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.fail(fmt.Sprintf("%s lists %s as %q, want %s", a, node, got, status))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	fmt.Fprintf(t.out, "   member %s %s on %s\n", node, status, strings.Join(agents, ", "))
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// writesBy sums the client's writes per answering server in the seconds
// that ended within (from, to].
func (t *tour) writesBy(from, to time.Time) string {
	secs, err := t.l.ReadSeconds()
	if err != nil {
		return err.Error()
	}
	by := map[string]int{}
	for _, s := range secs {
		if s.Time.After(from.Add(time.Second)) && !s.Time.After(to) {
			for k, v := range s.WritesBy {
				by[k] += v
			}
		}
	}
	var parts []string
	for _, k := range sortedKeys(by) {
		parts = append(parts, fmt.Sprintf("%s %d", k, by[k]))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
