//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// Issue 25, fresh readers: a replica whose link to the primary is silently
// cut (a black hole: no RST, no ICMP) keeps saying Slave_IO_Running=Yes and
// Seconds_Behind_Master=0 until slave_net_timeout (MariaDB's 60 s, which
// these tests keep). shoal must judge it by the GTID positions the agents
// gossip and take it out with reason stale within max_lag of the first
// write it lacks, on every agent.
//
// One cluster serves the four scenarios: db1 primary, db2 its only replica
// (so that the reader floor's writer fallback shows), two app hosts with
// HAProxy. The wrong-source scenario adds a server outside the cluster.
//
//	go test -tags e2e -count=1 -v -run '^TestFresh' ./test/e2e/

// freshMaxLag is the pool's max_lag in these scenarios: small, for speed
// (pool.max_lag's minimum is 1 s; a replica publishes its position at most
// every second, so a healthy, busy replica can seem that far behind).
const freshMaxLag = 3 * time.Second

// freshWriteEvery is the pace of the writes to the primary.
const freshWriteEvery = 100 * time.Millisecond

// mariaDBNetTimeout is MariaDB's default slave_net_timeout, which users
// run with: a test that lowered it would test another system.
const mariaDBNetTimeout = 60

// freshRig is the scenarios' shared cluster and what they did to it.
type freshRig struct {
	c        *Cluster
	db1, db2 *DBHost
	load     *writeLoad // nil when no writes run
	cut      bool       // db2's replication link to db1 is cut
	source   *DBHost    // db2 replicates from this server, not db1 (nil: db1)
}

func TestFreshReaders(t *testing.T) {
	Require(t)
	c := NewCluster(t, Options{DBHosts: 2, AppHosts: 2, AgentFlags: []string{
		"--max-lag=" + freshMaxLag.String(), "--min-readers=1", "--read-fallback=writer",
	}})
	r := &freshRig{c: c, db1: c.DBs[0], db2: c.DBs[1]}
	t.Cleanup(r.stopLoad)
	t.Run("silent_cut_caught", r.testSilentCut)
	t.Run("back_in", r.testBackIn)
	t.Run("idle_not_stale", r.testIdle)
	t.Run("wrong_source_within_1s", r.testWrongSource)
}

// testSilentCut: db2's replication link to db1 frozen, writes going on:
// db2 out with reason stale on every agent by t_miss + max_lag + 1 s
// (t_miss: the commit of the first write db2 lacks) while its IO thread
// still says Yes; db1 serves reads (fallback), HAProxy's read backend
// stops routing to db2.
func (r *freshRig) testSilentCut(t *testing.T) {
	s := Scenario(t, "fresh_silent_cut")
	c, db1, db2 := r.c, r.db1, r.db2
	r.reset(s)
	for _, d := range []*DBHost{db1, db2} {
		if v := netTimeout(s, d); v != mariaDBNetTimeout {
			s.Fatalf("%s: slave_net_timeout is %d, want MariaDB's default %d (the silent case is about the default)", d.Name, v, mariaDBNetTimeout)
		}
	}
	r.startLoad(s)
	// Busy and healthy: db2 must not seem stale (a replica publishes its
	// position at most every second).
	t0 := time.Now()
	time.Sleep(2 * freshMaxLag)
	r.checkLoad(s)
	r.alwaysReader(s, "writes, link up", t0, time.Now())

	tCut := time.Now()
	if err := CutTCP(db2.Host, db1.Host, MySQLPort); err != nil {
		s.Fatalf("cut db2's replication link: %v", err)
	}
	r.cut = true
	time.Sleep(time.Second) // writes go on; db2 gets none of them
	miss, have := r.firstMissed(s)
	tMiss := miss.Done
	s.Note("cut at %s; db2 has id %d, t_miss = commit of id %d, %s after the cut",
		tCut.Format("15:04:05.000"), have, miss.ID, tMiss.Sub(tCut).Round(time.Millisecond))

	bound := freshMaxLag + time.Second
	res := c.Obs.WaitAgents(c.AgentNames(), tMiss, limitFor(bound), staleWithFallback(db1.Name, db2.Name))
	seen := time.Now()
	ok := within(s, "stale_on_every_agent", res, bound)
	for _, a := range c.AgentNames() {
		if d, found := res.Per[a]; found {
			s.Note("%s: db2 stale at t_miss%+.3fs = t_miss+max_lag%+.3fs", a, d.Seconds(), (d - freshMaxLag).Seconds())
		}
	}
	// The silent case: db2's IO thread still says Yes when shoal has
	// already taken it out (or, on failure, while it is still a reader).
	st, err := db2.Server.SlaveStatus()
	switch {
	case err != nil:
		s.Errorf("db2 slave status: %v", err)
	case st["Slave_IO_Running"] != "Yes":
		s.Errorf("db2 says Slave_IO_Running=%q at %s after the cut: not the silent case", st["Slave_IO_Running"], seen.Sub(tCut).Round(time.Millisecond))
	default:
		s.Note("db2 at +%s after the cut: Slave_IO_Running=%s Seconds_Behind_Master=%q", seen.Sub(tCut).Round(time.Millisecond),
			st["Slave_IO_Running"], st["Seconds_Behind_Master"])
	}
	if now, _ := maxID(db2); now != have {
		s.Errorf("db2 went from id %d to %d during the cut: the link was not cut", have, now)
	}
	r.noteLag(s, db2.Name)
	if !ok {
		failWithState(s, c, fmt.Sprintf("db2 not out with reason stale (db1 serving reads as fallback) on every agent by t_miss+%s", bound))
		return
	}
	// HAProxy's read backend follows the pool: db1 only (the sink applies
	// a pool within milliseconds; 250 ms for it).
	for _, a := range c.Apps {
		hx := c.Obs.WaitHAProxy(a.Name, tMiss, limitFor(bound), func(h HXSnap) bool {
			return slices.Equal(h.Ready(ROBackend), []string{db1.Name})
		})
		within(s, "haproxy_reads_on_db1_"+a.Name, hx, bound+250*time.Millisecond)
		for i := 0; i < 5; i++ {
			id, err := QueryOnce(a.Host, ROPort, "SELECT @@server_id")
			if err != nil || id != int64(db1.Server.ServerID()) {
				s.Errorf("%s: read port reached server_id %d (err %v), want db1's %d (writer fallback)", a.Name, id, err, db1.Server.ServerID())
				break
			}
		}
	}
	r.checkLoad(s)
}

// testBackIn: the link healed, db2 catches up (its GTID position reaches
// db1's at the heal) and is back among the readers on every agent within
// 10 s of that.
func (r *freshRig) testBackIn(t *testing.T) {
	s := Scenario(t, "fresh_back_in")
	c, db1, db2 := r.c, r.db1, r.db2
	if !r.cut || r.load == nil {
		// Run alone: make the state the previous scenario leaves.
		r.reset(s)
		r.startLoad(s)
		if err := CutTCP(db2.Host, db1.Host, MySQLPort); err != nil {
			s.Fatalf("cut db2's replication link: %v", err)
		}
		r.cut = true
		if w := c.Obs.WaitAgents(c.AgentNames(), time.Now(), 20*time.Second, isOutFor(db2.Name, "stale")); !w.OK {
			failWithState(s, c, "db2 not stale after a cut; cannot test its way back")
		}
	}
	target := gtidPos(s, db1.Server)
	tHeal := time.Now()
	if err := HealTCP(db2.Host, db1.Host, MySQLPort); err != nil {
		s.Fatalf("heal db2's replication link: %v", err)
	}
	r.cut = false
	// TCP's retransmission back-off decides when the frozen connection
	// moves again; the IO thread would reconnect by slave_net_timeout.
	if err := reachGTID(db2.Server, target, time.Duration(mariaDBNetTimeout+30)*time.Second); err != nil {
		s.Fatalf("after the heal: %v", err)
	}
	tCaught := time.Now()
	info(s, "caught_up_after_heal", WaitResult{OK: true, Took: tCaught.Sub(tHeal)})
	const bound = 10 * time.Second
	res := c.Obs.WaitAgents(c.AgentNames(), tCaught, limitFor(bound), func(sn Snap) bool {
		return sn.OK() && sn.Role(db2.Name) == "reader" && sn.Out[db2.Name] == "" && len(sn.Fallback) == 0
	})
	if !within(s, "back_in_after_catch_up", res, bound) {
		failWithState(s, c, "db2 not back among the readers on every agent")
	}
	for _, a := range c.AgentNames() {
		if d, found := res.Per[a]; found {
			s.Note("%s: db2 a reader again at catch-up%+.3fs (heal%+.3fs)", a, d.Seconds(), (d + tCaught.Sub(tHeal)).Seconds())
		}
	}
	r.checkLoad(s)
}

// testIdle: an idle cluster is never stale, cut link or not; writes during
// the cut then make db2 stale (so this scenario can fail).
func (r *freshRig) testIdle(t *testing.T) {
	s := Scenario(t, "fresh_idle_not_stale")
	c, db1, db2 := r.c, r.db1, r.db2
	r.stopLoad()
	r.reset(s)
	waitGTID(s, db2.Server, gtidPos(s, db1.Server), 30*time.Second)

	t0 := time.Now()
	time.Sleep(3 * freshMaxLag)
	r.alwaysReader(s, "idle, link up", t0, time.Now())

	if err := CutTCP(db2.Host, db1.Host, MySQLPort); err != nil {
		s.Fatalf("cut db2's replication link: %v", err)
	}
	r.cut = true
	t1 := time.Now()
	time.Sleep(3 * freshMaxLag)
	r.alwaysReader(s, "idle, link cut", t1, time.Now())

	have, err := maxID(db2)
	if err != nil {
		s.Fatal(err)
	}
	r.startLoad(s)
	time.Sleep(time.Second)
	miss, _ := r.firstMissed(s)
	if miss.ID <= have || miss.Start.Before(t1) {
		s.Fatalf("the first write db2 lacks is id %d, not one of the writes resumed during the cut (db2 had %d)", miss.ID, have)
	}
	bound := freshMaxLag + time.Second
	res := c.Obs.WaitAgents(c.AgentNames(), miss.Done, limitFor(bound), isOutFor(db2.Name, "stale"))
	if !within(s, "stale_once_writes_resume", res, bound) {
		failWithState(s, c, "db2 not stale on every agent once writes resumed during the cut")
	}
	for _, a := range c.AgentNames() {
		if d, found := res.Per[a]; found {
			s.Note("%s: db2 stale at t_miss%+.3fs = t_miss+max_lag%+.3fs", a, d.Seconds(), (d - freshMaxLag).Seconds())
		}
	}
	r.checkLoad(s)
	r.stopLoad()
}

// testWrongSource: db2 re-pointed at a server outside the cluster (db3,
// itself a replica of db1): out with reason wrong-source on every agent
// within 1 s of START SLAVE returning.
func (r *freshRig) testWrongSource(t *testing.T) {
	s := Scenario(t, "fresh_wrong_source")
	c, db1, db2 := r.c, r.db1, r.db2
	r.stopLoad()
	r.reset(s)
	db3 := &DBHost{Name: "db3", Host: c.AddHost(s)}
	db3.Server = startServer(s, db3.Name, db3.Host)
	db3.Server.ReplicateFrom(db1.Server)
	waitGTID(s, db3.Server, gtidPos(s, db1.Server), 30*time.Second)

	db2.Server.MustExec("STOP SLAVE")
	r.source = db3
	db2.Server.MustExec(changeMaster(db3))
	db2.Server.MustExec("START SLAVE")
	t0 := time.Now()
	const bound = time.Second
	res := c.Obs.WaitAgents(c.AgentNames(), t0, limitFor(bound), isOutFor(db2.Name, "wrong-source"))
	if !within(s, "wrong_source_on_every_agent", res, bound) {
		failWithState(s, c, "db2 not out with reason wrong-source on every agent")
	}
	for _, a := range c.AgentNames() {
		if d, found := res.Per[a]; found {
			s.Note("%s: db2 wrong-source at START SLAVE%+.3fs", a, d.Seconds())
		}
	}
	if st, err := db2.Server.SlaveStatus(); err == nil {
		s.Note("db2 replicates from server_id %s (db3 is %d, db1 %d), IO=%s", st["Master_Server_Id"], db3.Server.ServerID(),
			db1.Server.ServerID(), st["Slave_IO_Running"])
	}
	r.reset(s) // back to db1 while db3 still runs
}

// reset heals what an earlier scenario left (a cut link, another source)
// and waits for the healthy pool: db1 writer, db2 reader.
func (r *freshRig) reset(s *S) {
	s.Helper()
	if r.cut {
		if err := HealTCP(r.db2.Host, r.db1.Host, MySQLPort); err != nil {
			s.Fatalf("heal db2's replication link: %v", err)
		}
		r.cut = false
	}
	if r.source != nil {
		r.db2.Server.MustExec("STOP SLAVE")
		r.db2.Server.MustExec(changeMaster(r.db1))
		r.db2.Server.MustExec("START SLAVE")
		r.source = nil
	}
	// A healed link waits for TCP's back-off or the IO thread's
	// reconnection (slave_net_timeout).
	limit := time.Duration(mariaDBNetTimeout+30) * time.Second
	if h := r.c.WaitHealthy(time.Now(), limit); !h.OK {
		s.Fatalf("the cluster is not healthy within %s:\n%s", limit, r.c.Describe())
	}
}

// changeMaster points a replica at src, by GTID.
func changeMaster(src *DBHost) string {
	return fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', "+
		"MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1",
		src.Host.IP, MySQLPort, mariadbtest.ReplUser, mariadbtest.ReplPassword)
}

// staleWithFallback: replica out with reason stale, the writer the only
// reader, with reason fallback (pool.read_fallback: writer).
func staleWithFallback(writer, replica string) func(Snap) bool {
	return func(sn Snap) bool {
		return sn.OK() && sn.Out[replica] == "stale" && slices.Equal(sn.Writers, []string{writer}) &&
			slices.Equal(sn.Readers, []string{writer}) && slices.Equal(sn.Fallback, []string{writer})
	}
}

// alwaysReader fails the scenario if any agent's sample in [from, to]
// shows db2 anything but a plain reader, or anything out. Samples the
// agent did not answer are skipped, but most must have answered.
func (r *freshRig) alwaysReader(s *S, what string, from, to time.Time) {
	s.Helper()
	want := int(to.Sub(from) / PollInterval / 2)
	for _, a := range r.c.AgentNames() {
		n := 0
		for _, sn := range r.c.Obs.Snaps(a, from, to) {
			if !sn.OK() {
				continue
			}
			n++
			if sn.Role(r.db2.Name) != "reader" || len(sn.Out) > 0 || len(sn.Fallback) > 0 {
				s.Errorf("%s: %s's pool at +%s: %s, want db2 a reader throughout", what, a,
					sn.At.Sub(from).Round(time.Millisecond), sn.Pool())
				r.noteLag(s, r.db2.Name)
				break
			}
		}
		if n < want {
			s.Errorf("%s: %s answered %d polls in %s, want at least %d", what, a, n, to.Sub(from).Round(time.Millisecond), want)
		}
	}
	s.Note("%s: db2 a reader on every agent for %s", what, to.Sub(from).Round(time.Millisecond))
}

// noteLag notes how each agent's /v1/pool lists node: its entry as the
// API gives it (reason, detail, lag), JSON as received.
func (r *freshRig) noteLag(s *S, node string) {
	s.Helper()
	for _, a := range r.c.Agents() {
		var pool struct {
			Readers []json.RawMessage `json:"readers"`
			Out     []json.RawMessage `json:"out"`
		}
		if err := r.c.Get(a, "/v1/pool", &pool); err != nil {
			s.Note("%s /v1/pool: %v", a.Name, err)
			continue
		}
		for role, list := range map[string][]json.RawMessage{"reader": pool.Readers, "out": pool.Out} {
			for _, raw := range list {
				var n struct{ Name string }
				if json.Unmarshal(raw, &n) != nil || n.Name != node {
					continue
				}
				var b bytes.Buffer
				if json.Compact(&b, raw) != nil {
					b.Reset()
					b.Write(raw)
				}
				s.Note("%s lists %s as %s: %s", a.Name, node, role, b.String())
			}
		}
	}
}

// startLoad starts the writes to db1 unless they run.
func (r *freshRig) startLoad(s *S) {
	s.Helper()
	if r.load == nil {
		r.load = startWrites(r.db1.Server, freshWriteEvery)
	}
}

// stopLoad stops the writes, if they run.
func (r *freshRig) stopLoad() {
	if r.load != nil {
		r.load.Stop()
		r.load = nil
	}
}

// checkLoad fails the scenario if a write failed (the primary must take
// every write whatever happens to its replica).
func (r *freshRig) checkLoad(s *S) {
	s.Helper()
	if r.load == nil {
		return
	}
	if n, last := r.load.Errors(); n > 0 {
		s.Errorf("%d writes to db1 failed, the last: %s", n, last)
	}
}

// firstMissed returns the first write db2 lacks and the highest id it has.
func (r *freshRig) firstMissed(s *S) (write, int64) {
	s.Helper()
	have, err := maxID(r.db2)
	if err != nil {
		s.Fatal(err)
	}
	w, ok := r.load.FirstAfter(have)
	if !ok {
		s.Fatalf("db2 has id %d, every write so far: the link is not cut or no write ran", have)
	}
	return w, have
}

// maxID is the highest id of the writes table on d.
func maxID(d *DBHost) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var id int64
	if err := d.Server.DB().QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM e2e.t").Scan(&id); err != nil {
		return 0, fmt.Errorf("max id on %s: %w", d.Name, err)
	}
	return id, nil
}

// netTimeout is d's @@slave_net_timeout.
func netTimeout(s *S, d *DBHost) int {
	s.Helper()
	var v int
	if err := d.Server.DB().QueryRow("SELECT @@slave_net_timeout").Scan(&v); err != nil {
		s.Fatalf("slave_net_timeout of %s: %v", d.Name, err)
	}
	return v
}

// write is one row written to the primary.
type write struct {
	ID          int64
	Start, Done time.Time // Done: the commit acknowledged
}

// writeLoad inserts a row into e2e.t on a server at a fixed pace, as root
// over its socket, and records every write.
type writeLoad struct {
	db     *sql.DB
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	writes  []write
	errs    int
	lastErr string
}

func startWrites(srv *mariadbtest.Server, every time.Duration) *writeLoad {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writeLoad{db: srv.DB(), cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, every)
	return w
}

func (w *writeLoad) run(ctx context.Context, every time.Duration) {
	defer close(w.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		start := time.Now()
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		res, err := w.db.ExecContext(qctx, "INSERT INTO e2e.t (v) VALUES (1)")
		cancel()
		done := time.Now()
		if ctx.Err() != nil {
			return
		}
		var id int64
		if err == nil {
			id, err = res.LastInsertId()
		}
		w.mu.Lock()
		if err != nil {
			w.errs++
			w.lastErr = err.Error()
		} else {
			w.writes = append(w.writes, write{ID: id, Start: start, Done: done})
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Stop ends the writes and waits for the last one. Idempotent.
func (w *writeLoad) Stop() {
	w.cancel()
	<-w.done
}

// FirstAfter is the first write with an id above id.
func (w *writeLoad) FirstAfter(id int64) (write, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.writes {
		if x.ID > id {
			return x, true
		}
	}
	return write{}, false
}

// Errors is how many writes failed, and the last error.
func (w *writeLoad) Errors() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs, strings.TrimSpace(w.lastErr)
}
