package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestFenceCollectors: the counters read the agent's at scrape time, the
// two results under one name.
func TestFenceCollectors(t *testing.T) {
	ok, bad, killed := uint64(2), uint64(3), uint64(7)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewFenceCollectors(FenceCounts{OK: func() uint64 { return ok }, Error: func() uint64 { return bad }, Killed: func() uint64 { return killed }})...)
	want := `
# HELP shoal_fence_connections_killed_total Client connections this db agent killed on its own server when it fenced it.
# TYPE shoal_fence_connections_killed_total counter
shoal_fence_connections_killed_total 7
# HELP shoal_fence_total Fencing attempts of this db agent on its own server (set read-only, kill the client connections), by result: ok or error.
# TYPE shoal_fence_total counter
shoal_fence_total{result="error"} 3
shoal_fence_total{result="ok"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
