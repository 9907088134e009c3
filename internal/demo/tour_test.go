package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

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

// TestTourStartsFromDB1: after a switchover left db2 the writer, the tour
// refuses at once, naming the writer and the command that moves it back.
func TestTourStartsFromDB1(t *testing.T) {
	db2Writes := func(time.Time) client.PoolResponse {
		return client.PoolResponse{Writers: []client.PoolNode{{Name: "db2"}}, Readers: []client.PoolNode{{Name: "db1"}, {Name: "db3"}}}
	}
	l := fakeAgents(t, map[string]func(time.Time) client.PoolResponse{"db1": db2Writes, "db2": db2Writes, "db3": db2Writes, App: db2Writes}, time.Now())
	l.Shoal = "bin/shoal"
	err := l.startsFromDB1(t.Context())
	if err == nil || !strings.Contains(err.Error(), "the pool's writer is db2 (a switchover moved it)") ||
		!strings.Contains(err.Error(), "bin/shoal switchover --to db1 --http-addr "+l.HTTPAddr("db3")+" --token-file "+l.Path("api-token")) {
		t.Fatalf("startsFromDB1 = %v; want the writer named and the way back", err)
	}
}

// TestHasRole: a target that is the writer and serves reads (writer+reader,
// right after a switchover) has its writer event found.
func TestHasRole(t *testing.T) {
	for _, tc := range []struct {
		to, role string
		want     bool
	}{{"writer", "writer", true}, {"writer+reader", "writer", true}, {"writer+reader", "reader", true}, {"reader", "writer", false}, {"out", "writer", false}} {
		if got := hasRole(tc.to, tc.role); got != tc.want {
			t.Errorf("hasRole(%q, %q) = %v, want %v", tc.to, tc.role, got, tc.want)
		}
	}
}

// TestClientErrorsExplained: go-sql-driver's "invalid connection" and the
// other ways a connection is closed under the client are counted apart
// from writes refused as read-only, and the step line says which were which.
func TestClientErrorsExplained(t *testing.T) {
	var tl tally
	tl.s = newSecond()
	for _, err := range []error{mysql.ErrInvalidConn, &mysql.MySQLError{Number: erReadOnly}, fmt.Errorf("dial: %w", syscall.ECONNREFUSED),
		&mysql.MySQLError{Number: erConnectionKilled}, errors.New("something else")} {
		tl.add(true, "", err)
	}
	tl.add(false, "", mysql.ErrInvalidConn)
	s := tl.take(time.Now())
	if s.WriteErrors != 5 || s.ReadOnly != 1 || s.WriteCut != 3 || s.ReadErrors != 1 || s.ReadCut != 1 {
		t.Fatalf("second %+v: want 5 write errors, 1 read-only, 3 cut, 1 read error cut", s)
	}
	e := stepErrors{Seconds: 1, Write: s.WriteErrors, ReadOnly: s.ReadOnly, WriteCut: s.WriteCut, Read: s.ReadErrors, ReadCut: s.ReadCut}
	want := `5 write errors (1 refused as read-only, ER 1290; 3 on a connection closed under it, "invalid connection"; 1 other), 1 read errors (1 "invalid connection")`
	if got := e.describe(); got != want {
		t.Errorf("describe = %s\nwant       %s", got, want)
	}
	if got := (stepErrors{}).describe(); got != "0 write errors, 0 read errors" {
		t.Errorf("no errors: %s", got)
	}
}
