package metrics

import "github.com/prometheus/client_golang/prometheus"

// TermCounts reads the counters of the agent's writer-term loop
// (internal/agent/terms.go).
type TermCounts struct {
	Learned, NotNewer, BadSignature, Malformed, Dropped, Asked, Answered func() uint64
}

// NewTermCollectors returns the writer-term counters.
func NewTermCollectors(t TermCounts) []prometheus.Collector {
	var cs []prometheus.Collector
	for _, c := range []struct {
		name, help string
		n          func() uint64
	}{
		{"terms_learned_total", "Writer terms this agent learned: verified and newer than the one it knew for the cluster.", t.Learned},
		{"terms_not_newer_total", "Verified writer terms that were not newer than the one this agent knew (repeats, replays, answers from several voters).", t.NotNewer},
		{"terms_bad_signature_total", "Writer terms refused because their signature does not verify with any term key (forged, or signed with another consensus key).", t.BadSignature},
		{"terms_malformed_total", "Writer term messages and queries refused as malformed.", t.Malformed},
		{"terms_dropped_total", "Writer term events and queries dropped because the term loop's queue was full.", t.Dropped},
		{"terms_queries_total", "Queries this agent sent to ask the voters for a cluster's term (its pool said a newer term may exist).", t.Asked},
		{"terms_answers_total", "Term queries this voter answered with a signed term.", t.Answered},
	} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: c.name, Help: c.help},
			func() float64 { return float64(c.n()) }))
	}
	return cs
}
