package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
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

// TestLimitListenerBoundsConnections: with a bound of 2, a third
// connection is served only once one of the first two closes.
func TestLimitListenerBoundsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(api.LimitListener(ln, 2)) }()
	defer srv.Close()
	addr := ln.Addr().String()

	get := func(c net.Conn) (string, error) {
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return "", err
		}
		b := make([]byte, 512)
		n, err := c.Read(b)
		return string(b[:n]), err
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if out, err := get(c); err != nil || !strings.Contains(out, "200 OK") {
			t.Fatalf("first connections: %q, %v", out, err)
		}
		held = append(held, c) // kept alive
	}
	third, err := net.Dial("tcp", addr) // the kernel queues it
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if out, err := get(third); err == nil {
		t.Fatalf("a third connection was served over the bound of 2: %q", out)
	}
	held[0].Close()
	_ = third.SetDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 512)
	n, err := third.Read(b) // the request written above is answered now
	if err != nil || !strings.Contains(string(b[:n]), "200 OK") {
		t.Fatalf("after a slot freed: %q, %v", b[:n], err)
	}
}
