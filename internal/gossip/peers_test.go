package gossip

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/backoff"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// rejoinTest runs Rejoin over a peers file naming one peer, with no alive
// member and a join that fails until ok says otherwise, on a fake clock.
type rejoinTest struct {
	clock *clockwork.FakeClock
	joins atomic.Int32
	done  chan struct{}
	cfg   PeersConfig
}

func startRejoin(t *testing.T, ok func(attempt int32) bool) *rejoinTest {
	t.Helper()
	path := filepath.Join(t.TempDir(), "serf.snapshot.peers")
	if err := os.WriteFile(path, []byte(`["10.0.0.1:7946"]`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := &rejoinTest{clock: clockwork.NewFakeClock(), done: make(chan struct{})}
	rt.cfg = PeersConfig{
		Path: path, Self: "me", Clock: rt.clock,
		Members: func() []serf.Member { return nil },
		Join: func(addrs []string) (int, error) {
			if len(addrs) != 1 || addrs[0] != "10.0.0.1:7946" {
				t.Errorf("joined %v", addrs)
			}
			if ok(rt.joins.Add(1)) {
				return 1, nil
			}
			return 0, net.ErrClosed
		},
		RetryInterval: time.Second, RetryMaxWait: 30 * time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(rt.done)
		NewPeers(rt.cfg).Rejoin(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-rt.done
	})
	return rt
}

// advance waits until Rejoin waits on the clock, then moves the clock by
// d. It returns the joins made before that wait.
func (rt *rejoinTest) advance(t *testing.T, d time.Duration) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("Rejoin never waited on the clock (after %d joins): %v", rt.joins.Load(), err)
	}
	n := rt.joins.Load()
	rt.clock.Advance(d)
	return n
}

// wait waits for Rejoin to return.
func (rt *rejoinTest) wait(t *testing.T) {
	t.Helper()
	select {
	case <-rt.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Rejoin did not return (after %d joins)", rt.joins.Load())
	}
}

// TestRejoinBacksOffUntilAPeerAnswers: the first join waits RetryInterval
// (serf's snapshot rejoin goes first), each failure waits the back-off's
// next wait on the clock, and the first success ends Rejoin.
func TestRejoinBacksOffUntilAPeerAnswers(t *testing.T) {
	rt := startRejoin(t, func(n int32) bool { return n == 4 })
	p := backoff.Policy{Initial: rt.cfg.RetryInterval, Max: rt.cfg.RetryMaxWait}
	if n := rt.advance(t, rt.cfg.RetryInterval); n != 0 {
		t.Fatalf("%d joins before the first wait", n)
	}
	for n := 1; n <= 3; n++ {
		// The jittered wait is at most the planned one.
		if got := rt.advance(t, p.Delay(n)); got != int32(n) {
			t.Fatalf("wait %d after %d joins, want %d", n, got, n)
		}
	}
	rt.wait(t)
	if got := rt.joins.Load(); got != 4 {
		t.Errorf("%d joins, want 4", got)
	}
}

// TestRejoinGivesUpAfterTheWindow: a rejoin that never succeeds stops
// after peersRejoinWindow, its waits growing to RetryMaxWait: joins at 1,
// 2, 4, 8, 16 and 32 s, then every 30 s up to 572 s; the wait after that
// ends past the 10 minutes.
func TestRejoinGivesUpAfterTheWindow(t *testing.T) {
	rt := startRejoin(t, func(int32) bool { return false })
	p := backoff.Policy{Initial: rt.cfg.RetryInterval, Max: rt.cfg.RetryMaxWait}
	rt.advance(t, rt.cfg.RetryInterval)
	for n := 1; n <= 24; n++ {
		rt.advance(t, p.Delay(n))
	}
	rt.wait(t)
	if got := rt.joins.Load(); got != 24 {
		t.Errorf("%d joins in the window, want 24", got)
	}
}

// TestPeersRunWritesAlivePeers: a member event leads, after the write
// delay on the clock, to the peers file listing the alive peers but self.
func TestPeersRunWritesAlivePeers(t *testing.T) {
	clock := clockwork.NewFakeClock()
	path := filepath.Join(t.TempDir(), "serf.snapshot.peers")
	members := []serf.Member{
		{Name: "me", Addr: net.IPv4(10, 0, 0, 9), Port: 7946, Status: serf.StatusAlive},
		{Name: "b", Addr: net.IPv4(10, 0, 0, 2), Port: 7946, Status: serf.StatusAlive},
		{Name: "a", Addr: net.IPv4(10, 0, 0, 1), Port: 7946, Status: serf.StatusAlive},
		{Name: "c", Addr: net.IPv4(10, 0, 0, 3), Port: 7946, Status: serf.StatusFailed},
	}
	p := NewPeers(PeersConfig{Path: path, Self: "me", Clock: clock, Members: func() []serf.Member { return members }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	p.MarkDirty()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := clock.BlockUntilContext(wctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("peers file written before the write delay")
	}
	clock.Advance(peersWriteDelay)
	want := `["10.0.0.1:7946","10.0.0.2:7946"]` + "\n"
	testkit.WaitFor(t, 10*time.Second, "the peers file "+want, func() bool {
		b, _ := os.ReadFile(path)
		return string(b) == want
	})
}
