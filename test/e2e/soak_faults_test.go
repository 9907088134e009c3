//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/soakcheck"
)

// soakFault is one kind of fault: run injects it, waits, heals it and
// returns its window and what it explains.
type soakFault struct {
	name string
	run  func(r *soakRun) soakcheck.Fault
}

// soakFaults are the fault kinds, drawn with equal chances.
var soakFaults = []soakFault{
	{"agent-kill", (*soakRun).agentKill},
	{"mysqld-kill", (*soakRun).mysqldKill},
	{"mysqld-sigstop", (*soakRun).mysqldStop},
	{"link-cut", (*soakRun).linkCut},
	{"partition", (*soakRun).partition},
	{"packet-loss", (*soakRun).packetLoss},
	{"switchover", (*soakRun).switchover},
	{"maintenance", (*soakRun).maintenance},
	{"agent-sighup", (*soakRun).sighup},
	{"haproxy-restart", (*soakRun).haproxyRestart},
	{"silent-cut", (*soakRun).silentCut},
	{"second-writable", (*soakRun).secondWritable},
	{"writer-agent-kill", (*soakRun).writerAgentKill},
}

// soakKinds are the fault kinds named in spec (SOAK_FAULTS: comma-separated
// names), or every kind for "".
func soakKinds(spec string) ([]soakFault, error) {
	if spec == "" {
		return soakFaults, nil
	}
	var out, names = []soakFault(nil), []string(nil)
	for _, f := range soakFaults {
		names = append(names, f.name)
	}
	for _, n := range strings.Split(spec, ",") {
		i := slices.Index(names, strings.TrimSpace(n))
		if i < 0 {
			return nil, fmt.Errorf("SOAK_FAULTS=%q: no fault kind %q (kinds: %s)", spec, n, strings.Join(names, ", "))
		}
		out = append(out, soakFaults[i])
	}
	return out, nil
}

// soakHost is a host of the cluster by agent name: a db host or an app host.
type soakHost struct {
	name string
	host *Host
	db   *DBHost // nil for an app host
}

func (r *soakRun) hosts() []soakHost {
	var out []soakHost
	for _, d := range r.c.DBs {
		out = append(out, soakHost{d.Name, d.Host, d})
	}
	for _, a := range r.c.Apps {
		out = append(out, soakHost{a.Name, a.Host, nil})
	}
	return out
}

func (r *soakRun) anyHost() soakHost {
	hs := r.hosts()
	return hs[r.rng.IntN(len(hs))]
}

func (r *soakRun) anyDB() *DBHost { return r.c.DBs[r.rng.IntN(len(r.c.DBs))] }

func (r *soakRun) agentOf(name string) *Agent {
	for _, a := range r.c.Agents() {
		if a.Name == name {
			return a
		}
	}
	r.t.Fatalf("soak: no agent %s", name)
	return nil
}

// dbFaultNodes is what a fault of db host d explains out everywhere: d;
// when d is the primary, every db node (the replicas' replication breaks).
func (r *soakRun) dbFaultNodes(d *DBHost) []string {
	if d != r.c.Primary() {
		return []string{d.Name}
	}
	var all []string
	for _, x := range r.c.DBs {
		all = append(all, x.Name)
	}
	return all
}

func (r *soakRun) must(what string, err error) {
	if err != nil {
		r.t.Fatalf("soak: %s: %v", what, err)
	}
}

// hold injects a fault, keeps it for d and heals it: f's Start is just
// before inject, its Heal just after heal.
func (r *soakRun) hold(f soakcheck.Fault, inject func() error, d time.Duration, heal func() error) soakcheck.Fault {
	f.Start = time.Now()
	r.must(f.Target+": inject", inject())
	time.Sleep(d)
	r.must(f.Target+": heal", heal())
	f.Heal = time.Now()
	return f
}

// heldFor describes a target held for d.
func heldFor(target string, d time.Duration) string {
	return fmt.Sprintf("%s for %s", target, d.Round(100*time.Millisecond))
}

// agentKill: kill -9 of an agent, restarted 1-5 s later (with its usual
// --join). The db node is out meanwhile; the agent's own pool is rebuilt
// (with terms, an app host's HAProxy may lose the writer until then).
func (r *soakRun) agentKill() soakcheck.Fault {
	h := r.anyHost()
	a := r.agentOf(h.name)
	f := soakcheck.Fault{Target: h.name, Observers: []string{h.name}}
	if h.db != nil {
		f.Nodes = []string{h.name}
	} else if r.terms != nil {
		// With writer terms a restarted agent routes no writes until it
		// has learnt the term (about half a second after it joins): its
		// HAProxy loses the writer meanwhile, and only the writer.
		f.OutOn = map[string][]string{"hx:" + h.name: {r.holder().Name}}
	}
	return r.hold(f, func() error { a.Kill(); return nil }, r.between(time.Second, 5*time.Second),
		func() error { a.Start(r.t, true); return nil })
}

// mysqldKill: kill -9 of a mysqld, restarted 1-5 s later.
func (r *soakRun) mysqldKill() soakcheck.Fault {
	d := r.anyDB()
	f := soakcheck.Fault{Target: d.Name, Nodes: r.dbFaultNodes(d)}
	return r.hold(f, func() error { d.Server.Kill(); return nil }, r.between(time.Second, 5*time.Second),
		func() error { d.Server.Restart(); return nil })
}

// mysqldStop: SIGSTOP of a mysqld for 1-10 s.
func (r *soakRun) mysqldStop() soakcheck.Fault {
	d := r.anyDB()
	hold := r.between(time.Second, 10*time.Second)
	f := soakcheck.Fault{Target: heldFor(d.Name, hold), Nodes: r.dbFaultNodes(d)}
	return r.hold(f, func() error { d.Server.Stop(); return nil }, hold, func() error { d.Server.Cont(); return nil })
}

// linkCut: a host's cable pulled for 1-15 s. The others lose it; it loses
// the others: its agent's view, and on an app host its HAProxy's too (cut
// off, it reaches no server whatever its states say).
func (r *soakRun) linkCut() soakcheck.Fault {
	h := r.anyHost()
	hold := r.between(time.Second, 15*time.Second)
	f := soakcheck.Fault{Target: heldFor(h.name, hold), Observers: []string{h.name}}
	if h.db != nil {
		f.Nodes = r.dbFaultNodes(h.db)
	} else {
		f.Observers = append(f.Observers, "hx:"+h.name)
	}
	caught := ""
	primary := h.db != nil && h.db == r.c.Primary()
	if primary && r.terms != nil && hold >= soakLease-soakFenceMargin {
		f.Unfence = soakFenceAfter
	}
	f = r.hold(f, h.host.LinkDown, hold, func() error {
		if err := h.host.LinkUp(); err != nil {
			return err
		}
		if primary {
			for _, a := range r.c.Apps {
				r.cutOff = append(r.cutOff, soakCut{client: a.Name, primary: h.name, from: f.Start, heal: time.Now()})
			}
		}
		if h.db != nil {
			caught = r.catchUp(f.Target)
		}
		return nil
	})
	if f.Unfence > 0 {
		r.readOnly = append(r.readOnly, fenceWindow(f))
	}
	f.Target += caught
	return f
}

// fenceWindow is the time in which a lease-fenced primary may refuse
// writes: from the fault's start until soakFenceAfter past its heal (the
// writer lifts its fence once a raft leader reaches it again, and routers
// may send it writes as soon as gossip does).
func fenceWindow(f soakcheck.Fault) soakcheck.Window {
	return soakcheck.Window{From: f.Start, To: f.Heal.Add(soakFenceAfter)}
}

// soakCatchUp bounds the wait for replicas to catch up after a cut heals.
const soakCatchUp = 90 * time.Second

// catchUp waits, after a cut between replicas and their primary heals,
// until every replica has applied what the primary had written by then:
// until it has, the fault is not over (a cut-off replica misses the writes
// made meanwhile, and its IO thread may take until its TCP retransmission
// back-off or slave_net_timeout to resume, after which it reports the
// lag it really has). It returns the wait, to add to the fault's target.
func (r *soakRun) catchUp(target string) string {
	t0 := time.Now()
	p := r.c.Primary()
	// A write of our own first: when nothing was written during the cut,
	// the replicas already have the primary's position, yet their IO thread
	// may still be stuck in TCP's retransmission back-off (seen: resumed
	// 10.5 s after a 15 s partition healed, so the next writes made the
	// replica rightly stale after the allowance). Only a transaction that
	// crosses the healed link shows the stream flows again.
	if err := p.Server.Exec("INSERT INTO e2e.t (v) VALUES (0)"); err != nil {
		r.t.Logf("soak: %s: marker write on %s: %v", target, p.Name, err)
	}
	pos, err := readGTIDPos(p.Server)
	if err != nil {
		r.t.Logf("soak: %s: %v: not waiting for replicas", target, err)
		return ""
	}
	behind := []string{}
	for _, d := range r.c.DBs {
		if d == p {
			continue
		}
		if err := reachGTID(d.Server, pos, max(soakCatchUp-time.Since(t0), time.Second)); err != nil {
			r.t.Logf("soak: %s: replica %s: %v", target, d.Name, err)
			behind = append(behind, d.Name)
		}
	}
	took := time.Since(t0).Round(10 * time.Millisecond)
	if len(behind) > 0 {
		return fmt.Sprintf(", %s not caught up %s after the heal", strings.Join(behind, " "), took)
	}
	return fmt.Sprintf(", replicas caught up %s after the heal", took)
}

// partition: the hosts split in two random non-empty sides for 5-30 s.
// Replicas cut off from the primary stop replicating.
func (r *soakRun) partition() soakcheck.Fault {
	hs := r.hosts()
	var sides [2][]string
	var hosts [2][]*Host
	for len(sides[0]) == 0 || len(sides[1]) == 0 {
		sides, hosts = [2][]string{}, [2][]*Host{}
		for _, h := range hs {
			i := r.rng.IntN(2)
			sides[i] = append(sides[i], h.name)
			hosts[i] = append(hosts[i], h.host)
		}
	}
	hold := r.between(5*time.Second, 30*time.Second)
	f := soakcheck.Fault{Target: heldFor(strings.Join(sides[0], " ")+" | "+strings.Join(sides[1], " "), hold), Sides: sides}
	p := r.c.Primary().Name
	with := 0 // db hosts (the voters) on the primary's side
	for _, d := range r.c.DBs {
		if slices.Contains(sides[0], p) != slices.Contains(sides[0], d.Name) {
			f.Nodes = append(f.Nodes, d.Name)
		} else {
			with++
		}
	}
	// With writer terms, a primary cut off from the voters' majority
	// fences itself when its lease runs out (docs/consensus.md): it is then
	// out on its own side too, until contact is back for fence_after. The
	// clients on its side see their writes fail fast, some of them with
	// read-only refusals (between the fence and their HAProxy dropping the
	// writer), as a switchover's do.
	fences := r.terms != nil && 2*with <= len(r.c.DBs)
	if fences {
		f.Nodes = append(f.Nodes, p)
		if hold >= soakLease-soakFenceMargin {
			f.Unfence = soakFenceAfter
		}
	}
	caught := ""
	f = r.hold(f, func() error { return Partition(hosts[0], hosts[1]) }, hold, func() error {
		for _, h := range hs {
			if err := h.host.ClearRules(); err != nil {
				return err
			}
		}
		for _, a := range r.c.Apps {
			if slices.Contains(sides[0], p) != slices.Contains(sides[0], a.Name) {
				r.cutOff = append(r.cutOff, soakCut{client: a.Name, primary: p, from: f.Start, heal: time.Now()})
			}
		}
		if len(f.Nodes) > 0 {
			caught = r.catchUp(f.Target)
		}
		return nil
	})
	if fences {
		r.readOnly = append(r.readOnly, fenceWindow(f))
	}
	f.Target += caught
	return f
}

// packetLoss: 5-20 % of the packets into one host dropped for 30 s. It
// explains no removal: gossip and replication must ride it out.
func (r *soakRun) packetLoss() soakcheck.Fault {
	h := r.anyHost()
	p := 0.05 + 0.15*r.rng.Float64()
	f := soakcheck.Fault{Target: fmt.Sprintf("%s %.0f%%", h.name, 100*p)}
	return r.hold(f, func() error { return h.host.SetLoss(p) }, 30*time.Second, h.host.ClearRules)
}

// shoalSwitchover runs `shoal switchover --to next` on a random db agent
// and records when next became writable (the command's start plus the
// time no server took writes: no later than the real moment). It reports
// whether next is the primary now; a failed command fails the soak.
func (r *soakRun) shoalSwitchover(next *DBHost) bool {
	on := r.c.DBs[r.rng.IntN(len(r.c.DBs))]
	start := time.Now()
	out, code := ShoalCLI(r.t, on.Agent, "switchover", "--to", next.Name, "--format", "json")
	var res struct {
		ReadOnly float64 `json:"read_only_seconds"`
		Error    string  `json:"error"`
	}
	_ = json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &res)
	if code != 0 {
		r.t.Errorf("soak: shoal switchover --to %s on %s: exit %d: %s", next.Name, on.Name, code, out)
	}
	var ro bool
	if err := next.Server.DB().QueryRow("SELECT @@global.read_only").Scan(&ro); err != nil || ro {
		r.t.Errorf("soak: %s is not writable after shoal switchover (%v)", next.Name, err)
		return false
	}
	old := r.c.Primary()
	r.c.SetPrimary(next)
	r.primaries = append(r.primaries, soakcheck.Primary{At: start.Add(time.Duration(res.ReadOnly * float64(time.Second))), Name: next.Name})
	// The former writer replicates with the server's defaults
	// (MASTER_CONNECT_RETRY 60 s; docs/consensus.md, Switchover): give it
	// the settings every other replica here has, as that doc tells an
	// operator to. Left at 60 s, a 1.4 s mysqld-kill of the new primary
	// kept it out (replication-stopped) for 49 s in an hour-long soak.
	old.Server.SetReplicationTimers()
	for _, d := range r.c.DBs {
		if d != next {
			d.Server.WaitReplicating(30 * time.Second)
		}
	}
	return true
}

// switchover: read_only moves from the primary to a random replica. Every
// db node may be out meanwhile (no writer, replication re-pointed).
func (r *soakRun) switchover() soakcheck.Fault {
	reps := r.c.Replicas()
	next := reps[r.rng.IntN(len(reps))]
	old := r.c.Primary()
	f := soakcheck.Fault{Target: old.Name + " → " + next.Name, Start: time.Now(), Nodes: r.dbFaultNodes(old), Holder: old.Name, Other: next.Name}
	// With writer terms, every other switchover is `shoal switchover`, run
	// on a random db agent; the others flip read_only by hand (an outside
	// promotion, as Orchestrator or an operator would).
	if r.terms != nil && r.rng.IntN(2) == 0 {
		f.Target += " (shoal switchover)"
		if !r.shoalSwitchover(next) {
			f.Heal = time.Now()
			return f
		}
	} else {
		if r.terms != nil {
			f.Target += " (read_only flip)"
		}
		writable := r.c.Switchover(r.t, next)
		r.primaries = append(r.primaries, soakcheck.Primary{At: writable, Name: next.Name})
	}
	f.Heal = time.Now()
	// The window in which writes may still reach the old, read-only
	// primary: until every HAProxy has the new writer alone.
	w := soakcheck.Window{From: f.Start, To: f.Heal}
	for _, a := range r.c.Apps {
		h := r.c.Obs.WaitHAProxy(a.Name, f.Heal, 15*time.Second, func(s HXSnap) bool { return slices.Equal(s.Ready(RWBackend), []string{next.Name}) })
		if to := f.Heal.Add(h.Took); to.After(w.To) {
			w.To = to
		}
	}
	r.readOnly = append(r.readOnly, w)
	return f
}

// maintenance: a db node in maintenance for 3-10 s, then out of it.
func (r *soakRun) maintenance() soakcheck.Fault {
	d := r.anyDB()
	cl, err := d.Agent.Client()
	r.must("api client", err)
	f := soakcheck.Fault{Target: d.Name, Nodes: []string{d.Name}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	setMaint := func(on bool, reason string) func() error {
		return func() error { _, err := cl.SetMaint(ctx, on, reason); return err }
	}
	return r.hold(f, setMaint(true, "soak"), r.between(3*time.Second, 10*time.Second), setMaint(false, ""))
}

// sighup: an agent reloads its configuration. It explains nothing.
func (r *soakRun) sighup() soakcheck.Fault {
	h := r.anyHost()
	f := soakcheck.Fault{Target: h.name, Start: time.Now()}
	r.must("SIGHUP "+h.name, r.agentOf(h.name).Signal(syscall.SIGHUP))
	f.Heal = time.Now()
	return f
}

// haproxyRestart: an app host's HAProxy restarted (runtime state lost);
// that HAProxy's view is wrong until the sink reconciles.
func (r *soakRun) haproxyRestart() soakcheck.Fault {
	a := r.c.Apps[r.rng.IntN(len(r.c.Apps))]
	f := soakcheck.Fault{Target: a.Name, Start: time.Now(), Observers: []string{"hx:" + a.Name}}
	a.HAProxy.Restart(r.t)
	f.Heal = time.Now()
	return f
}

// silentCut: a replica's replication link to the primary frozen for
// 20-40 s while the writes go on: every packet of the connection between
// the replica and the primary's MySQL port dropped on arrival, on both
// hosts, so that neither side sees a reset or an ICMP error. The replica's
// IO thread stays connected and its SQL thread idle, so it reports
// Slave_IO_Running Yes and Seconds_Behind_Master 0 until slave_net_timeout
// (MariaDB's default, 60 s: the harness does not lower it) while it falls
// behind. Gossip and the clients' connections are untouched. The replica
// may be out meanwhile (stale) and until it has caught up after the heal.
func (r *soakRun) silentCut() soakcheck.Fault {
	reps := r.c.Replicas()
	d := reps[r.rng.IntN(len(reps))]
	p := r.c.Primary()
	hold := r.between(20*time.Second, 40*time.Second)
	f := soakcheck.Fault{Target: heldFor(d.Name+" ⇸ "+p.Name, hold), Nodes: []string{d.Name}}
	port := fmt.Sprint(MySQLPort)
	rules := func(op string) func() error {
		return func() error {
			// On the replica: what the primary's MySQL port sends; on the
			// primary: what the replica sends to it.
			if err := d.Host.IPTables(op, "INPUT", "-s", p.Host.IP, "-p", "tcp", "--sport", port, "-j", "DROP"); err != nil {
				return err
			}
			return p.Host.IPTables(op, "INPUT", "-s", d.Host.IP, "-p", "tcp", "--dport", port, "-j", "DROP")
		}
	}
	caught := ""
	f = r.hold(f, rules("-A"), hold, func() error {
		if err := rules("-D")(); err != nil {
			return err
		}
		caught = r.catchUp(f.Target)
		return nil
	})
	f.Target += caught
	return f
}
