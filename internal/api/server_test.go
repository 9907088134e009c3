package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/pkg/client"
)

// serveLimited serves a's API on a loopback listener with the limits l,
// as shoal agent does, and returns its address.
func serveLimited(t *testing.T, a *agent.Agent, l api.Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewHTTPServer(api.New(a, slog.New(slog.DiscardHandler), ln.Addr().String(), nil), l)
	go func() { _ = srv.Serve(api.LimitListener(ln, l.MaxConns)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestHalfOpenConnectionsAreClosed: 200 connections that send their
// headers and half a body are closed by the server within its read
// timeout, and the server answers a normal request meanwhile.
func TestHalfOpenConnectionsAreClosed(t *testing.T) {
	a, _, _ := startAgent(t, "slow1", "", nil)
	l := api.DefaultLimits()
	l.ReadHeaderTimeout, l.ReadTimeout = 300*time.Millisecond, 500*time.Millisecond
	addr := serveLimited(t, a, l)

	const n = 200
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		half := "PUT /v1/agent/tags HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
			api.TokenHeader + ": " + a.APIToken() + "\r\nContent-Length: 100\r\n\r\n{\"set\":{\"a\":"
		if _, err := io.WriteString(c, half); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	start := time.Now()
	// Meanwhile a normal request is answered.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := client.New(addr).Info(ctx); err != nil {
		t.Fatalf("a normal request during 200 half-open ones: %v", err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The server answers (an error) and closes; read to EOF.
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, c); err != nil {
				errs <- fmt.Errorf("connection %d still open after %s: %v", i, time.Since(start).Round(time.Millisecond), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 3 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d half-open connections were not closed by the server", failed, n)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("closing the half-open connections took %s, read timeout %s", d, l.ReadTimeout)
	}
	if leaveRequested(a) || a.Serf().LocalMember().Tags["a"] != "" {
		t.Error("a half-sent request changed something")
	}
}

// TestMonitorOutlivesReadTimeout: the read timeout bounds reading a
// request, not the /v1/monitor stream.
func TestMonitorOutlivesReadTimeout(t *testing.T) {
	a, _, _ := startAgent(t, "mon1", "", nil)
	l := api.DefaultLimits()
	l.ReadHeaderTimeout, l.ReadTimeout = 200*time.Millisecond, 200*time.Millisecond
	addr := serveLimited(t, a, l)

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var mu sync.Mutex
	var last time.Time
	done := make(chan error, 1)
	go func() {
		done <- client.New(addr, client.WithToken(a.APIToken())).Monitor(ctx, "debug", func(string) {
			mu.Lock()
			last = time.Now()
			mu.Unlock()
		})
	}()
	// Log lines keep coming (each user event logs one) past the timeout.
	cl := client.New(addr, client.WithToken(a.APIToken()))
	for i := 0; ctx.Err() == nil; i++ {
		if err := cl.Event(context.Background(), fmt.Sprintf("tick%d", i), nil, false); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("monitor: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("monitor did not return after its context ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if since := time.Since(last); last.IsZero() || since > 500*time.Millisecond {
		t.Fatalf("the monitor stream stopped delivering %s before the end (read timeout %s)", since.Round(time.Millisecond), l.ReadTimeout)
	}
}

// serveBounded serves h with NewHTTPServer on a LimitListener of n
// connections and returns its address.
func serveBounded(t *testing.T, h http.Handler, n int) string {
	t.Helper()
	return serveBoundedWith(t, h, n, api.DefaultLimits())
}

func serveBoundedWith(t *testing.T, h http.Handler, n int, l api.Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewHTTPServer(h, l)
	go func() { _ = srv.Serve(api.LimitListener(ln, n)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// rawGet sends GET path on c (keep-alive) and returns the status line.
func rawGet(c net.Conn, path string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Status, nil
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestIdleConnectionsMakeRoom: with a bound of 2 held by two idle
// keep-alive connections, a third is served at once, and the connection
// idle the longest is the one closed for it.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	addr := serveBounded(t, ok, 2)
	var held []net.Conn
	for range 2 {
		c := dial(t, addr)
		if st, err := rawGet(c, "/"); err != nil || st != "200 OK" {
			t.Fatalf("first connections: %q, %v", st, err)
		}
		held = append(held, c) // kept alive, idle
		time.Sleep(20 * time.Millisecond)
	}
	// The server marks a connection idle just after its answer: until
	// then a third one gets a reserved slot (503 for "/"), so retry.
	var st string
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if st, err = rawGet(dial(t, addr), "/"); err == nil && st == "200 OK" {
			break
		}
	}
	if err != nil || st != "200 OK" {
		t.Fatalf("a third connection while two idle ones hold the bound of 2: %q, %v", st, err)
	}
	_ = held[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := held[0].Read(make([]byte, 1)); err == nil {
		t.Fatalf("the oldest idle connection is still open (read %d bytes)", n)
	}
	if st, err := rawGet(held[1], "/"); err != nil || st != "200 OK" {
		t.Fatalf("the younger idle connection: %q, %v", st, err)
	}
}

// TestBusySlotsLeaveLiveOnly: when every slot has a request in progress,
// a new connection gets a reserved slot that answers LivePath and nothing
// else; with the reserved slots taken too, it is closed at once.
func TestBusySlotsLeaveLiveOnly(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-release })
	mux.HandleFunc(api.LivePath, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "alive") })
	addr := serveBounded(t, mux, 2)
	for range 2 {
		c := dial(t, addr)
		if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // both requests in progress
	for path, want := range map[string]string{api.LivePath: "200 OK", "/other": "503 Service Unavailable"} {
		c := dial(t, addr)
		if st, err := rawGet(c, path); err != nil || st != want {
			t.Fatalf("%s with every slot busy: %q, %v, want %s", path, st, err, want)
		}
		// Closed after its answer, which frees the reserved slot.
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("a reserved connection stayed open after its answer (read %d bytes)", n)
		}
	}
	// Hold every reserved slot with connections that send nothing.
	for range api.ReservedConns {
		dial(t, addr)
	}
	time.Sleep(200 * time.Millisecond)
	if st, err := rawGet(dial(t, addr), api.LivePath); err == nil {
		t.Fatalf("a connection beyond the reserved slots was served: %q", st)
	}
}

// TestUnreadViewReleasesItsSlot: a client that asks for a view and never
// reads the answer holds its connection ViewWriteTimeout at most.
func TestUnreadViewReleasesItsSlot(t *testing.T) {
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 1024 { // 64 MiB, more than the socket buffers hold
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	l := api.DefaultLimits()
	l.ViewWriteTimeout = 300 * time.Millisecond
	addr := serveBoundedWith(t, big, 4, l)
	c := dial(t, addr)
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // not reading
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection is still open after %d bytes: %v", n, err)
	}
	if n >= 64<<20 {
		t.Fatalf("the whole answer (%d bytes) was written to a client that did not read", n)
	}
}
