package haproxy

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
)

// TestMeasureApply measures Apply against the real HAProxy: 100 reconciles
// with no change (one read) and 100 with one change (db3 toggles between
// reader and out: one read plus one or two commands).
func TestMeasureApply(t *testing.T) {
	if os.Getenv("SHOAL_HAPROXY_MEASURE") != "1" {
		t.Skip("measurement; run with SHOAL_HAPROXY_MEASURE=1")
	}
	h := startHAProxy(t)
	s, err := New(Config{Address: h.addr, Backends: []Mapping{
		{Cluster: "c1", Role: RoleWriter, Backend: "db_rw"},
		{Cluster: "c1", Role: RoleReader, Backend: "db_ro"},
	}}, sink.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, out := parsePool("w=db1 r=db2,db3"), parsePool("w=db1 r=db2 o=db3")
	if err := s.Apply(ctx, sink.Update{Pool: in}); err != nil {
		t.Fatal(err)
	}
	measure := func(name string, pick func(i int) *pool.Pool) {
		var d []time.Duration
		sent := s.Stats().Commands
		for i := range 100 {
			start := time.Now()
			if err := s.Apply(ctx, sink.Update{Pool: pick(i)}); err != nil {
				t.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		t.Logf("%s: p50 %s p90 %s max %s (%d commands in 100 applies)",
			name, d[50].Round(time.Microsecond), d[90].Round(time.Microsecond), d[99].Round(time.Microsecond),
			s.Stats().Commands-sent)
	}
	measure("no change", func(int) *pool.Pool { return in })
	measure("one change", func(i int) *pool.Pool {
		if i%2 == 0 {
			return out
		}
		return in
	})
}
