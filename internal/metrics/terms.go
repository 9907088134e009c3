package metrics

import "github.com/prometheus/client_golang/prometheus"

// TermCounts reads the counters of the agent's writer-term loop
// (internal/term).
type TermCounts struct {
	Learned, NotNewer, BadSignature, Malformed, Dropped, Asked, Answered, ForeignGroup func() uint64
}

// NewTermCollectors returns the writer-term counters.
func NewTermCollectors(t TermCounts) []prometheus.Collector {
	return counterFuncs(
		counter{"terms_learned_total", "Writer terms this agent learned: verified and newer than the one it knew for the cluster.", nil, t.Learned},
		counter{"terms_not_newer_total", "Verified writer terms that were not newer than the one this agent knew (repeats, replays, answers from several voters).", nil, t.NotNewer},
		counter{"terms_bad_signature_total", "Writer terms refused because their signature does not verify with any term key (forged, or signed with another consensus key).", nil, t.BadSignature},
		counter{"terms_malformed_total", "Writer term messages and queries refused as malformed.", nil, t.Malformed},
		counter{"terms_dropped_total", "Writer term events and queries dropped because the term loop's queue was full.", nil, t.Dropped},
		counter{"terms_queries_total", "Queries this agent sent to ask the voters for a cluster's term (its pool said a newer term may exist).", nil, t.Asked},
		counter{"terms_answers_total", "Term queries this voter answered with a signed term.", nil, t.Answered},
		counter{"terms_foreign_group_total", "Verified writer terms ignored because another raft group granted them (another fleet with the same consensus key, or voters bootstrapped apart).", nil, t.ForeignGroup},
	)
}
