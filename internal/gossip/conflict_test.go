package gossip

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

func TestParseConflict(t *testing.T) {
	for _, tc := range []struct {
		component, msg, addr string
		ok                   bool
	}{
		{"serf", "Node name conflicts with another node at 10.0.0.2:7946. Names must be unique! (Resolution enabled: false)", "10.0.0.2:7946", true},
		{"serf", "Node name conflicts with another node at [::1]:7946. Names must be unique! (Resolution enabled: true)", "[::1]:7946", true},
		{"memberlist", "Node name conflicts with another node at 10.0.0.2:7946. Names must be unique!", "", false},
		{"serf", "Name conflict for 'db1' both 10.0.0.1:7946 and 10.0.0.2:7946 are claiming", "", false},
	} {
		addr, ok := ParseConflict(tc.component, tc.msg)
		if addr != tc.addr || ok != tc.ok {
			t.Errorf("ParseConflict(%q, %q) = %q, %v; want %q, %v", tc.component, tc.msg, addr, ok, tc.addr, tc.ok)
		}
	}
}

// conflictSerf is a serf member named name on 127.0.0.1, configured as
// shoal configures it (serf's own resolution off), whose log lines go
// through the agent's log parser to a Conflicts vote.
type conflictSerf struct {
	s    *serf.Serf
	c    *Conflicts
	logs *testkit.SyncBuffer
	mu   sync.Mutex
	seen []string // conflict addresses the parser saw
	lost error
}

func startConflictSerf(t *testing.T, name string, joining func() bool) *conflictSerf {
	t.Helper()
	cs := &conflictSerf{logs: &testkit.SyncBuffer{}}
	cs.c = NewConflicts(ConflictConfig{Node: name, Joining: joining, Lost: func(err error) {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		cs.lost = err
	}, Log: slog.New(slog.NewTextHandler(cs.logs, nil))})
	out := &logging.StdWriter{Logger: slog.New(slog.NewTextHandler(cs.logs, nil)), Observe: func(_ slog.Level, component, msg string) {
		if addr, ok := ParseConflict(component, msg); ok {
			cs.mu.Lock()
			cs.seen = append(cs.seen, addr)
			cs.mu.Unlock()
		}
		cs.c.Observe(component, msg)
	}}
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = "127.0.0.1", 0, 0
	mc.LogOutput = out
	sc := serf.DefaultConfig()
	sc.NodeName = name
	sc.MemberlistConfig = mc
	sc.LogOutput = out
	sc.EnableNameConflictResolution = false // as SerfConfig sets it
	s, err := serf.Create(sc)
	if err != nil {
		t.Fatal(err)
	}
	cs.s = s
	cs.c.Attach(s)
	t.Cleanup(func() {
		_ = s.Shutdown()
		cs.c.Close()
		if t.Failed() {
			t.Logf("--- log of %s at %s ---\n%s", name, cs.addr(), cs.logs.String())
		}
	})
	return cs
}

func (cs *conflictSerf) addr() string {
	ln := cs.s.Memberlist().LocalNode()
	return net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
}

func (cs *conflictSerf) state() ([]string, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]string(nil), cs.seen...), cs.lost
}

// A real serf driven into a name conflict logs the line ParseConflict
// reads, and the vote that follows keeps the established node and stops
// the newcomer (nobody else answers: the joining side loses). This fails
// when serf changes its log line (serf/serf.go handleNodeConflict), which
// is the only way serf reports a conflict over our own name.
func TestConflictWithRealSerf(t *testing.T) {
	old := startConflictSerf(t, "dup", nil)
	var joining sync.Mutex
	inJoin := false
	newcomer := startConflictSerf(t, "dup", func() bool {
		joining.Lock()
		defer joining.Unlock()
		return inJoin
	})
	joining.Lock()
	inJoin = true
	joining.Unlock()
	_, joinErr := newcomer.s.Join([]string{old.addr()}, false)
	joining.Lock()
	inJoin = false
	joining.Unlock()
	t.Logf("join: %v", joinErr)

	testkit.WaitFor(t, 30*time.Second, "a side sees the conflict in serf's log", func() bool {
		a, _ := old.state()
		b, _ := newcomer.state()
		return len(a)+len(b) > 0
	})
	seenOld, _ := old.state()
	seenNew, _ := newcomer.state()
	for _, addr := range seenOld {
		if addr != newcomer.addr() {
			t.Errorf("established node parsed the other address as %q, want %q", addr, newcomer.addr())
		}
	}
	for _, addr := range seenNew {
		if addr != old.addr() {
			t.Errorf("newcomer parsed the other address as %q, want %q", addr, old.addr())
		}
	}
	if len(seenNew) == 0 {
		t.Fatalf("the newcomer never saw the conflict (established node saw %v)", seenOld)
	}
	testkit.WaitFor(t, 30*time.Second, "the newcomer loses the vote", func() bool {
		_, lost := newcomer.state()
		return lost != nil
	})
	_, lost := newcomer.state()
	if want := fmt.Sprintf("already used by a live member at %s", old.addr()); lost == nil || !strings.Contains(lost.Error(), want) {
		t.Errorf("newcomer's error %q does not say %q", lost, want)
	}
	if got := newcomer.c.Lost(); got != old.addr() {
		t.Errorf("Lost() = %q, want %q", got, old.addr())
	}
	// The established node keeps its name whatever it saw: give its vote,
	// if any, the query timeout to end.
	old.c.Close()
	if _, lostOld := old.state(); lostOld != nil {
		t.Errorf("the established node lost the vote: %v", lostOld)
	}
}
