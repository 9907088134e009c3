//go:build e2e

package e2e

import (
	"context"
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

// agentKill: kill -9 of an agent, restarted 1-5 s later (with its usual
// --join). The db node is out meanwhile; the agent's own pool is rebuilt.
func (r *soakRun) agentKill() soakcheck.Fault {
	h := r.anyHost()
	a := r.agentOf(h.name)
	f := soakcheck.Fault{Target: h.name, Start: time.Now(), Observers: []string{h.name}}
	if h.db != nil {
		f.Nodes = []string{h.name}
	}
	a.Kill()
	time.Sleep(r.between(time.Second, 5*time.Second))
	a.Start(r.t, true)
	f.Heal = time.Now()
	return f
}

// mysqldKill: kill -9 of a mysqld, restarted 1-5 s later.
func (r *soakRun) mysqldKill() soakcheck.Fault {
	d := r.anyDB()
	f := soakcheck.Fault{Target: d.Name, Start: time.Now(), Nodes: r.dbFaultNodes(d)}
	d.Server.Kill()
	time.Sleep(r.between(time.Second, 5*time.Second))
	d.Server.Restart()
	f.Heal = time.Now()
	return f
}

// mysqldStop: SIGSTOP of a mysqld for 1-10 s.
func (r *soakRun) mysqldStop() soakcheck.Fault {
	d := r.anyDB()
	hold := r.between(time.Second, 10*time.Second)
	f := soakcheck.Fault{Target: fmt.Sprintf("%s for %s", d.Name, hold.Round(100*time.Millisecond)), Start: time.Now(), Nodes: r.dbFaultNodes(d)}
	d.Server.Stop()
	time.Sleep(hold)
	d.Server.Cont()
	f.Heal = time.Now()
	return f
}

// linkCut: a host's cable pulled for 1-15 s. The others lose it; it loses
// the others.
func (r *soakRun) linkCut() soakcheck.Fault {
	h := r.anyHost()
	hold := r.between(time.Second, 15*time.Second)
	f := soakcheck.Fault{Target: fmt.Sprintf("%s for %s", h.name, hold.Round(100*time.Millisecond)), Start: time.Now(), Observers: []string{h.name}}
	if h.db != nil {
		f.Nodes = r.dbFaultNodes(h.db)
	}
	r.must("link down", h.host.LinkDown())
	time.Sleep(hold)
	r.must("link up", h.host.LinkUp())
	f.Heal = time.Now()
	return f
}

// partition: the hosts split in two random non-empty sides for 5-30 s.
// Replicas cut off from the primary stop replicating.
func (r *soakRun) partition() soakcheck.Fault {
	hs := r.hosts()
	var sides [2][]string
	var hosts [2][]*Host
	for {
		sides, hosts = [2][]string{}, [2][]*Host{}
		for _, h := range hs {
			i := r.rng.IntN(2)
			sides[i] = append(sides[i], h.name)
			hosts[i] = append(hosts[i], h.host)
		}
		if len(sides[0]) > 0 && len(sides[1]) > 0 {
			break
		}
	}
	hold := r.between(5*time.Second, 30*time.Second)
	f := soakcheck.Fault{Target: fmt.Sprintf("%s | %s for %s", strings.Join(sides[0], " "), strings.Join(sides[1], " "), hold.Round(100*time.Millisecond)),
		Start: time.Now(), Sides: sides}
	p := r.c.Primary().Name
	for _, d := range r.c.DBs {
		if slices.Contains(sides[0], p) != slices.Contains(sides[0], d.Name) {
			f.Nodes = append(f.Nodes, d.Name)
		}
	}
	r.must("partition", Partition(hosts[0], hosts[1]))
	time.Sleep(hold)
	for _, h := range hs {
		r.must("heal partition", h.host.ClearRules())
	}
	f.Heal = time.Now()
	return f
}

// packetLoss: 5-20 % of the packets into one host dropped for 30 s. It
// explains no removal: gossip and replication must ride it out.
func (r *soakRun) packetLoss() soakcheck.Fault {
	h := r.anyHost()
	p := 0.05 + 0.15*r.rng.Float64()
	f := soakcheck.Fault{Target: fmt.Sprintf("%s %.0f%%", h.name, 100*p), Start: time.Now()}
	r.must("loss", h.host.SetLoss(p))
	time.Sleep(30 * time.Second)
	r.must("clear loss", h.host.ClearRules())
	f.Heal = time.Now()
	return f
}

// switchover: read_only moves from the primary to a random replica. Every
// db node may be out meanwhile (no writer, replication re-pointed).
func (r *soakRun) switchover() soakcheck.Fault {
	reps := r.c.Replicas()
	next := reps[r.rng.IntN(len(reps))]
	old := r.c.Primary()
	f := soakcheck.Fault{Target: old.Name + " → " + next.Name, Start: time.Now(), Nodes: r.dbFaultNodes(old)}
	writable := r.c.Switchover(r.t, next)
	r.primaries = append(r.primaries, soakcheck.Primary{At: writable, Name: next.Name})
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
	r.switchovers = append(r.switchovers, w)
	return f
}

// maintenance: a db node in maintenance for 3-10 s, then out of it.
func (r *soakRun) maintenance() soakcheck.Fault {
	d := r.anyDB()
	cl, err := d.Agent.Client()
	r.must("api client", err)
	f := soakcheck.Fault{Target: d.Name, Start: time.Now(), Nodes: []string{d.Name}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cl.SetMaint(ctx, true, "soak")
	r.must("maint enable on "+d.Name, err)
	time.Sleep(r.between(3*time.Second, 10*time.Second))
	_, err = cl.SetMaint(ctx, false, "")
	r.must("maint disable on "+d.Name, err)
	f.Heal = time.Now()
	return f
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
