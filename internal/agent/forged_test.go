package agent

import (
	"crypto/rand"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
)

// On an encrypted cluster, random bytes sent from a killed member's exact
// gossip address do not count as answers from it: the failure confirmation
// is not held up to its 10 s maximum (on the old code, which counted any
// packet, it took about 15 s).
func TestForgedPacketsDoNotDelayFailure(t *testing.T) {
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	nodes := startCluster(t, 3, "fast", key)
	victim, survivors := nodes[2], nodes[:2]
	vm := victim.a.Serf().LocalMember()
	victimAddr := &net.UDPAddr{IP: vm.Addr, Port: int(vm.Port)}
	subs := make([]*Subscription, len(survivors))
	for i, s := range survivors {
		subs[i] = s.a.Subscribe(1024)
		defer subs[i].Close()
	}

	start := time.Now()
	victim.a.Shutdown()
	var forger *net.UDPConn
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if forger, err = net.ListenUDP("udp", victimAddr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bind the victim's address %s: %v", victimAddr, err)
		}
	}
	defer forger.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b := make([]byte, 200)
		for {
			for _, s := range survivors {
				_, _ = rand.Read(b)
				b[0] = 1 // memberlist's current encryption version
				sm := s.a.Serf().LocalMember()
				_, _ = forger.WriteTo(b, &net.UDPAddr{IP: sm.Addr, Port: int(sm.Port)})
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	const bound = 8 * time.Second
	for i, sub := range subs {
		d, ok := waitFailed(sub, victim.cfg.Node, start, bound)
		if !ok {
			t.Fatalf("survivor %s: no member-failed for %s within %s while its address sprays random bytes",
				survivors[i].cfg.Node, victim.cfg.Node, bound)
		}
		t.Logf("survivor %s saw %s failed after %s", survivors[i].cfg.Node, victim.cfg.Node, d.Round(time.Millisecond))
	}
	if st := statusOf(survivors[0].a, victim.cfg.Node); st != serf.StatusFailed {
		t.Fatalf("status %s after member-failed", st)
	}
}
