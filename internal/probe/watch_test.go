package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// pair returns a connected client/server pair on network ("tcp" or "unix").
func pair(t *testing.T, network string) (client, server net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s.sock")
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial(network, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestWatchIdle(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network+"/deadline", func(t *testing.T) {
			c, _ := pair(t, network)
			t0 := time.Now()
			if err := watchIdle(context.Background(), c, t0.Add(50*time.Millisecond)); err != nil {
				t.Fatalf("watchIdle: %v", err)
			}
			if d := time.Since(t0); d < 45*time.Millisecond {
				t.Errorf("returned after %s, before the deadline", d)
			}
		})
		t.Run(network+"/peer closes", func(t *testing.T) {
			c, s := pair(t, network)
			closedAt := make(chan time.Time, 1)
			go func() {
				time.Sleep(20 * time.Millisecond)
				closedAt <- time.Now()
				s.Close()
			}()
			err := watchIdle(context.Background(), c, time.Now().Add(5*time.Second))
			d := time.Since(<-closedAt)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("watchIdle: %v, want EOF", err)
			}
			t.Logf("close noticed after %s", d)
			if d > time.Second {
				t.Errorf("close noticed after %s", d)
			}
		})
		t.Run(network+"/unsolicited data is not consumed", func(t *testing.T) {
			c, s := pair(t, network)
			if _, err := s.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := watchIdle(context.Background(), c, time.Now().Add(5*time.Second)); !errors.Is(err, errUnsolicited) {
				t.Fatalf("watchIdle: %v, want errUnsolicited", err)
			}
			c.SetReadDeadline(time.Now().Add(time.Second))
			b := make([]byte, 1)
			if n, err := c.Read(b); n != 1 || b[0] != 'x' {
				t.Fatalf("peeked byte was consumed: %d %v", n, err)
			}
		})
		t.Run(network+"/cancel", func(t *testing.T) {
			c, _ := pair(t, network)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			t0 := time.Now()
			if err := watchIdle(ctx, c, t0.Add(5*time.Second)); err != nil {
				t.Fatalf("watchIdle: %v", err)
			}
			if d := time.Since(t0); d > time.Second {
				t.Errorf("cancel took %s", d)
			}
		})
	}
	t.Run("tcp/reset", func(t *testing.T) {
		c, s := pair(t, "tcp")
		s.(*net.TCPConn).SetLinger(0) // close sends RST
		s.Close()
		err := watchIdle(context.Background(), c, time.Now().Add(5*time.Second))
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("watchIdle: %v, want ECONNRESET", err)
		}
	})
}

// Once watchIdle returns, its ctx can no longer touch the socket: a read
// right after it, with a deadline of its own, never times out because
// the ended watch moved the deadline to the past (the driver then fails
// with "invalid connection" and the probe reconnects; seen in CI). The
// probe ends a watch with both the kernel's deadline and its clock's
// timer at the same instant; the test does the same, many times.
func TestWatchIdleLeavesNoDeadlineBehind(t *testing.T) {
	c, s := pair(t, "tcp")
	stopSpin := make(chan struct{})
	defer close(stopSpin)
	for range 2 { // a loaded machine: the watch's cancel runs late
		go func() {
			for {
				select {
				case <-stopSpin:
					return
				default:
					runtime.Gosched()
				}
			}
		}()
	}
	for i := range 300 {
		until := time.Now().Add(2 * time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		tm := time.AfterFunc(time.Until(until), cancel)
		if err := watchIdle(ctx, c, until); err != nil {
			t.Fatalf("round %d: watchIdle: %v", i, err)
		}
		if _, err := s.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		_, err := io.ReadFull(c, b[:])
		tm.Stop()
		cancel()
		if err != nil {
			t.Fatalf("round %d: a read after the watch ended failed: %v", i, err)
		}
	}
}
