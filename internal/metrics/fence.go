package metrics

import "github.com/prometheus/client_golang/prometheus"

// FenceCounts reads a db agent's fencing counters (docs/consensus.md,
// "Fencing"): attempts that succeeded, attempts that failed, and the
// client connections killed.
type FenceCounts struct {
	OK, Error, Killed func() uint64
}

// NewFenceCollectors returns shoal_fence_total{result="ok|error"} and
// shoal_fence_connections_killed_total, read at scrape time.
func NewFenceCollectors(f FenceCounts) []prometheus.Collector {
	const totalHelp = "Fencing attempts of this db agent on its own server (set read-only, kill the client connections), by result: ok or error."
	return counterFuncs(
		counter{"fence_total", totalHelp, prometheus.Labels{"result": "ok"}, f.OK},
		counter{"fence_total", totalHelp, prometheus.Labels{"result": "error"}, f.Error},
		counter{"fence_connections_killed_total", "Client connections this db agent killed on its own server when it fenced it.", nil, f.Killed},
	)
}
