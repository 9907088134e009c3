package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// TestTourNamesDamping: when an agent holds a node out as flapping (reason
// damped) past StepBound, the tour waits for the hold to end instead of
// failing, marks that agent's time as damped and explains why pools
// differed; an agent with no damping state (restarted) is not marked. The
// agents are fake HTTP servers on the demo's ports.
func TestTourNamesDamping(t *testing.T) {
	t0 := time.Now()
	until := t0.Add(StepBound + 2*time.Second) // longer than a step may take
	l := fakeAgents(t, map[string]func(now time.Time) client.PoolResponse{
		"db1": holdsDB3Until(until), "db2": holdsDB3Until(until), App: holdsDB3Until(until),
		"db3": func(time.Time) client.PoolResponse { return readerDB3() }, // restarted: no damping state
	}, until)
	var out bytes.Buffer
	tr := &tour{l: l, out: &out}
	done := make(chan struct{})
	close(done)
	hx := &hxWatch{done: done, want: map[string]string{}, seen: map[string]time.Time{}}
	tr.expectIn(context.Background(), t0, "db3", "reader", l.Nodes(), hx)
	got := out.String()
	if len(tr.failed) != 0 {
		t.Fatalf("the tour failed a damped step: %v\n%s", tr.failed, got)
	}
	for _, want := range []string{
		"db1 17", "(held out as flapping: damped)",
		"db1, db2, app1 held db3 out as flapping (reason damped)",
		"restarted since has none",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "db3 0 ms (held") || !strings.Contains(got, "db3 0 ms") {
		t.Errorf("db3 (no damping state) reported wrong:\n%s", got)
	}
}

func readerDB3() client.PoolResponse {
	return client.PoolResponse{Readers: []client.PoolNode{{Name: "db3"}}}
}

// holdsDB3Until is an agent that holds db3 out as damped until until.
func holdsDB3Until(until time.Time) func(time.Time) client.PoolResponse {
	return func(now time.Time) client.PoolResponse {
		if now.Before(until) {
			return client.PoolResponse{Out: []client.PoolNode{{Name: "db3", Reason: "damped", Until: until}}}
		}
		return readerDB3()
	}
}

// fakeAgents serves /v1/pool and /v1/history for each node on the HTTP
// ports of a free port base. Damped agents' history shows db3 back at
// until, the others' at once.
func fakeAgents(t *testing.T, pools map[string]func(time.Time) client.PoolResponse, until time.Time) *Layout {
	t.Helper()
	start := time.Now()
	for try := 0; try < 50; try++ {
		l := &Layout{Dir: t.TempDir(), PortBase: 20000 + rand.IntN(40000)}
		var lns []net.Listener
		for _, n := range l.Nodes() {
			ln, err := net.Listen("tcp", l.HTTPAddr(n))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) < len(l.Nodes()) {
			for _, ln := range lns {
				_ = ln.Close()
			}
			continue
		}
		for i, n := range l.Nodes() {
			pool := pools[n]
			back := start
			if len(pool(start).Out) > 0 {
				back = until
			}
			mux := http.NewServeMux()
			mux.HandleFunc("/v1/pool", func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(pool(time.Now()))
			})
			mux.HandleFunc("/v1/history", func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(client.HistoryResponse{Entries: []client.HistoryEntry{
					{Time: back, Kind: "pool", Node: "db3", From: "out", To: "reader"}}})
			})
			srv := &http.Server{Handler: mux}
			go func() { _ = srv.Serve(lns[i]) }()
			t.Cleanup(func() { _ = srv.Close() })
		}
		return l
	}
	t.Fatal(fmt.Errorf("no free port base for %d fake agents", len(pools)))
	return nil
}
