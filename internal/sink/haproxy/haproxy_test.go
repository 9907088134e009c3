package haproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/testutil/haproxytest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// These tests run a real HAProxy (Debian package haproxy). Without it they
// skip, except under CI=true, where they fail.

// haproxyConfig has a writer and a reader backend with three servers each on
// ports nothing listens on (no checks, so HAProxy never connects), and a
// spare reader server that maps to no pool node.
const haproxyConfig = `global
    stats socket %s mode 600 level admin
defaults
    mode tcp
    timeout connect 1s
    timeout client 10s
    timeout server 10s
backend db_rw
    server db1 127.0.0.1:33061
    server db2 127.0.0.1:33062
    server db3 127.0.0.1:33063
backend db_ro
    server db1 127.0.0.1:33061
    server db2 127.0.0.1:33062
    server db3 127.0.0.1:33063
    server spare 127.0.0.1:33069
`

// haproxyProc is a real HAProxy with the sink package's readers.
type haproxyProc struct {
	*haproxytest.Proc
	t    *testing.T
	addr string
}

// startHAProxy starts HAProxy with haproxyConfig; t.Cleanup kills it.
func startHAProxy(t *testing.T) *haproxyProc {
	t.Helper()
	p := haproxytest.Start(t, func(p *haproxytest.Proc) string { return fmt.Sprintf(haproxyConfig, p.Sock) })
	return &haproxyProc{Proc: p, t: t, addr: p.Addr}
}

// states reads `show servers state` from HAProxy and returns
// "backend/server=state" for every server, in HAProxy's order.
func (h *haproxyProc) states() string {
	h.t.Helper()
	c, err := NewClient(h.addr, time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	servers, err := c.ServersState(context.Background())
	if err != nil {
		h.t.Fatalf("read back servers state: %v", err)
	}
	var out []string
	for _, s := range servers {
		out = append(out, fmt.Sprintf("%s/%s=%s", s.Backend, s.Name, s.Effective()))
	}
	return strings.Join(out, " ")
}

// weights reads the current weights back, "backend/server=N".
func (h *haproxyProc) weights() string {
	h.t.Helper()
	c, _ := NewClient(h.addr, time.Second)
	servers, err := c.ServersState(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, s := range servers {
		out = append(out, fmt.Sprintf("%s/%s=%d", s.Backend, s.Name, s.Weight))
	}
	return strings.Join(out, " ")
}

// want formats expected states: rw and ro list db1, db2, db3's states.
func want(rw, ro [3]State) string {
	var out []string
	for i, st := range rw {
		out = append(out, fmt.Sprintf("db_rw/db%d=%s", i+1, st))
	}
	for i, st := range ro {
		out = append(out, fmt.Sprintf("db_ro/db%d=%s", i+1, st))
	}
	return strings.Join(append(out, "db_ro/spare=ready"), " ")
}

const (
	R = StateReady
	M = StateMaint
	D = StateDrain
)

func TestHAProxyIntegration(t *testing.T) {
	h := startHAProxy(t)
	if got := h.states(); got != want([3]State{R, R, R}, [3]State{R, R, R}) {
		t.Fatalf("fresh haproxy: %s", got)
	}
	cfg := Config{
		Address:  h.addr,
		Interval: MinInterval,
		Weight:   10,
		Backends: []Mapping{
			{Cluster: "c1", Role: RoleWriter, Backend: "db_rw"},
			{Cluster: "c1", Role: RoleReader, Backend: "db_ro"},
		},
	}
	s, err := New(cfg, sink.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	apply := func(p string, frozen bool, rw, ro [3]State) {
		t.Helper()
		if err := s.Apply(ctx, sink.Update{Pool: parsePool(p), Frozen: frozen}); err != nil {
			t.Fatalf("apply %s: %v", p, err)
		}
		if got, want := h.states(), want(rw, ro); got != want {
			t.Fatalf("after %s (frozen %v):\ngot  %s\nwant %s", p, frozen, got, want)
		}
	}

	// db1 writer, db2 and db3 readers.
	apply("w=db1 r=db2,db3", false, [3]State{R, M, M}, [3]State{M, R, R})
	if got, want := h.weights(), "db_rw/db1=10 db_rw/db2=1 db_rw/db3=1 db_ro/db1=1 db_ro/db2=10 db_ro/db3=10 db_ro/spare=1"; got != want {
		t.Errorf("weights: got %s, want %s", got, want)
	}
	if st := s.Stats(); len(st.Unmapped) != 1 || st.Unmapped[0] != "db_ro/spare" {
		t.Errorf("unmapped: %q", st.Unmapped)
	}

	// Steady state: one read, no command.
	before := s.Stats().Commands
	apply("w=db1 r=db2,db3", false, [3]State{R, M, M}, [3]State{M, R, R})
	if n := s.Stats().Commands - before; n != 0 {
		t.Errorf("steady state sent %d commands", n)
	}

	// db3 goes out.
	apply("w=db1 r=db2 o=db3", false, [3]State{R, M, M}, [3]State{M, R, M})

	// Frozen: db2 goes out but stays in; db3 comes back in.
	apply("w=db1 r=db3 o=db2", true, [3]State{R, M, M}, [3]State{M, R, R})
	if st := s.Stats(); !st.Frozen || len(st.Held) != 2 {
		t.Errorf("frozen status: %+v", st)
	}
	// Frozen failover: the new writer goes in, the old one stays.
	apply("w=db2 r=db3 o=db1", true, [3]State{R, R, M}, [3]State{M, R, R})
	// Unfrozen: everything follows.
	apply("w=db2 r=db3 o=db1", false, [3]State{M, R, M}, [3]State{M, M, R})

	// drain_state drain: out servers go from maint to drain.
	dcfg := cfg
	dcfg.DrainState = StateDrain
	ds, err := New(dcfg, sink.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Apply(ctx, sink.Update{Pool: parsePool("w=db2 r=db3 o=db1")}); err != nil {
		t.Fatal(err)
	}
	if got, want := h.states(), want([3]State{D, R, D}, [3]State{D, D, R}); got != want {
		t.Fatalf("drain: got %s, want %s", got, want)
	}

	// The loop: Update applies at once; after a restart (runtime state lost)
	// the periodic reconcile restores the state.
	s.Start(ctx)
	s.Update(sink.Update{Pool: parsePool("w=db1 r=db2,db3")})
	steady := want([3]State{R, M, M}, [3]State{M, R, R})
	testkit.WaitFor(t, 5*time.Second, "update applied", func() bool { return h.states() == steady })

	h.Restart()
	if got := h.states(); got != want([3]State{R, R, R}, [3]State{R, R, R}) {
		t.Fatalf("restarted haproxy kept state: %s", got)
	}
	restarted := time.Now()
	deadline := restarted.Add(2*cfg.Interval + time.Second)
	for h.states() != steady {
		if time.Now().After(deadline) {
			t.Fatalf("state not restored %s after restart: %s\nstatus %+v", time.Since(restarted), h.states(), s.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("state restored %s after restart (interval %s)", time.Since(restarted).Round(time.Millisecond), cfg.Interval)
	// A tick may have hit the restart and failed; the last must succeed.
	testkit.WaitFor(t, 5*time.Second, "a successful reconcile after the restart", func() bool { return s.Stats().LastSuccess.After(restarted) })
}

// TestHAProxyErrors checks what the real HAProxy answers to bad commands
// and a missing backend.
func TestHAProxyErrors(t *testing.T) {
	h := startHAProxy(t)
	c, err := NewClient(h.addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = c.Exec(ctx, "set server db_rw/nosuch state maint")
	if err == nil || err.Error() != `haproxy refused "set server db_rw/nosuch state maint": No such server.` {
		t.Errorf("unknown server: %v", err)
	}
	s, err := New(Config{Address: h.addr, Backends: []Mapping{{Cluster: "c1", Role: RoleReader, Backend: "db_gone"}}}, sink.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, sink.Update{Pool: parsePool("w=db1")}); err == nil || err.Error() != "backend db_gone: not in haproxy or has no servers" {
		t.Errorf("missing backend: %v", err)
	}
}

// parsePool builds cluster c1 from "w=db1 r=db2,db3 o=db4".
func parsePool(s string) *pool.Pool {
	var writer string
	var readers, out []string
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "w":
			writer = v
		case "r":
			readers = strings.Split(v, ",")
		case "o":
			out = strings.Split(v, ",")
		}
	}
	return cluster(writer, readers, out)
}

// testLogger logs through t.Log, shown with -v or on failure.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestHAProxyOutClosesSessions checks against the real HAProxy that
// drain_state maint cuts established connections and drain keeps them.
func TestHAProxyOutClosesSessions(t *testing.T) {
	for _, drainState := range []State{StateMaint, StateDrain} {
		t.Run(string(drainState), func(t *testing.T) {
			db, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			accepted := make(chan net.Conn, 1)
			go func() { // hold the connection open
				if c, err := db.Accept(); err == nil {
					accepted <- c
				}
			}()
			var fe string
			h := haproxytest.Start(t, func(p *haproxytest.Proc) string {
				fe = filepath.Join(p.Dir, "fe.sock")
				return fmt.Sprintf("global\n    stats socket %s mode 600 level admin\n"+
					"defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 30s\n    timeout server 30s\n"+
					"frontend fe\n    bind unix@%s\n    default_backend db_rw\n"+
					"backend db_rw\n    server db1 %s\n", p.Sock, fe, db.Addr())
			})

			client, err := net.Dial("unix", fe)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			// HAProxy connects to the server when the client sends data.
			if _, err := client.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			select {
			case c := <-accepted:
				defer c.Close()
			case <-time.After(5 * time.Second):
				t.Fatal("haproxy did not connect to the server")
			}

			s, err := New(Config{Address: h.Addr, DrainState: drainState,
				Backends: []Mapping{{Cluster: "c1", Role: RoleWriter, Backend: "db_rw"}}}, sink.Options{Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Apply(context.Background(), sink.Update{Pool: parsePool("o=db1")}); err != nil {
				t.Fatal(err)
			}
			client.SetReadDeadline(time.Now().Add(time.Second))
			_, err = client.Read(make([]byte, 1))
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			switch {
			case drainState == StateMaint && timedOut:
				t.Error("maint: the established session is still open after 1s")
			case drainState == StateDrain && !timedOut:
				t.Errorf("drain: the established session ended: %v", err)
			}
		})
	}
}

// TestHAProxyRestartDefaultInterval: with the default interval, a restarted
// HAProxy (every reader server back in, the writers disabled) is restored by
// the periodic reconcile alone, with no pool change, within a couple of
// intervals. (With the old 5 s default the soak test saw pools converge
// only 4.8 s after an HAProxy restart.)
func TestHAProxyRestartDefaultInterval(t *testing.T) {
	h := startHAProxy(t)
	cfg := Config{Address: h.addr, Backends: []Mapping{
		{Cluster: "c1", Role: RoleWriter, Backend: "db_rw"},
		{Cluster: "c1", Role: RoleReader, Backend: "db_ro"},
	}}
	if got := cfg.WithDefaults().Interval; got != DefaultInterval || got > time.Second {
		t.Fatalf("default interval %s, want %s (at most 1 s)", got, DefaultInterval)
	}
	s, err := New(cfg, sink.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Start(context.Background())
	s.Update(sink.Update{Pool: parsePool("w=db1 r=db2,db3")})
	steady := want([3]State{R, M, M}, [3]State{M, R, R})
	testkit.WaitFor(t, 5*time.Second, "update applied", func() bool { return h.states() == steady })

	for i := range 3 {
		h.Restart()
		restarted := time.Now()
		// Three intervals and a half second: generous for a 1 s interval,
		// and below the old 5 s default.
		testkit.WaitFor(t, 3*DefaultInterval+500*time.Millisecond, "state restored after restart", func() bool { return h.states() == steady })
		t.Logf("restart %d: state restored %s after it", i+1, time.Since(restarted).Round(time.Millisecond))
	}
}
