package haproxy

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAPI serves a runtime API on a listener: it reads one line and writes
// reply(line), then closes; a reply of "HANG" never answers.
type fakeAPI struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
}

func serveFake(t *testing.T, network string, reply func(string) string) (*fakeAPI, string) {
	t.Helper()
	var addr, address string
	switch network {
	case "unix":
		dir, err := os.MkdirTemp("", "hx") // short: sun_path is 108 bytes
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		addr = filepath.Join(dir, "s")
		address = "unix:" + addr
	default:
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	if network != "unix" {
		address = ln.Addr().String()
	}
	f := &fakeAPI{ln: ln}
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(done); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				line = strings.TrimSuffix(line, "\n")
				f.mu.Lock()
				f.lines = append(f.lines, line)
				f.mu.Unlock()
				r := reply(line)
				if r == "HANG" {
					<-done
					return
				}
				c.Write([]byte(r))
			}()
		}
	}()
	return f, address
}

func (f *fakeAPI) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lines...)
}

func TestClientDo(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			state := readFixture(t, "state-initial.txt")
			f, addr := serveFake(t, network, func(cmd string) string {
				switch cmd {
				case "show servers state":
					return state
				case "set server db_rw/db1 state maint":
					return "\n"
				}
				return "No such server.\n\n"
			})
			c, err := NewClient(addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			servers, err := c.ServersState(ctx)
			if err != nil || len(servers) != 9 {
				t.Fatalf("ServersState: %d servers, %v", len(servers), err)
			}
			if err := c.Exec(ctx, "set server db_rw/db1 state maint"); err != nil {
				t.Errorf("Exec: %v", err)
			}
			err = c.Exec(ctx, "set server db_rw/db9 state maint")
			var re *ResponseError
			if !errors.As(err, &re) || re.Error() != `haproxy refused "set server db_rw/db9 state maint": No such server.` {
				t.Errorf("Exec unknown server: %v", err)
			}
			want := []string{"show servers state", "set server db_rw/db1 state maint", "set server db_rw/db9 state maint"}
			if got := f.received(); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("received %q, want %q", got, want)
			}
		})
	}
}

func TestClientErrors(t *testing.T) {
	_, addr := serveFake(t, "unix", func(cmd string) string {
		if cmd == "show info" {
			return "Permission denied\n\n"
		}
		return "HANG"
	})
	c, err := NewClient(addr, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	start := time.Now()
	_, err = c.Do(ctx, "show servers state")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung server: %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("hung server took %s", d)
	}

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	c.timeout = 10 * time.Second
	if _, err := c.Do(cctx, "show servers state"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context canceled", err)
	}

	if _, err := c.Do(ctx, "show info"); err != nil {
		t.Errorf("show info: %v", err)
	}
	for _, bad := range []string{"", "set server a/b state ready; shutdown", "show info\nshow stat"} {
		if _, err := c.Do(ctx, bad); err == nil || !strings.Contains(err.Error(), "must be one line without ';'") {
			t.Errorf("Do(%q): %v", bad, err)
		}
	}

	gone, err := NewClient("unix:"+filepath.Join(t.TempDir(), "none"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Do(ctx, "show info"); err == nil {
		t.Error("no socket: no error")
	}
	if _, err := NewClient("nowhere", 0); err == nil {
		t.Error("NewClient(nowhere): no error")
	}
}

func TestClientNotAStateDump(t *testing.T) {
	_, addr := serveFake(t, "unix", func(string) string { return "Permission denied\n\n" })
	c, _ := NewClient(addr, time.Second)
	_, err := c.ServersState(context.Background())
	if err == nil || err.Error() != `haproxy show servers state: not a servers state dump: "Permission denied"` {
		t.Errorf("got %v", err)
	}
}
