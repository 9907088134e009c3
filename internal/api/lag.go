package api

import (
	"github.com/shoaldb/shoal/internal/view"
	"github.com/shoaldb/shoal/pkg/client"
)

// toLag converts a replica's lag; nil (a node without one) stays nil, and
// so do its unknown figures (null in the JSON).
func toLag(l *view.Lag) *client.Lag {
	if l == nil {
		return nil
	}
	return &client.Lag{Source: l.Source, Seconds: l.Seconds, AtLeast: l.AtLeast, Transactions: l.Transactions}
}

// withLags sets each member's lag from lags (by node name), for the members
// the agent has one for.
func withLags(ms []client.Member, lags map[string]view.Lag) {
	for i := range ms {
		if l, ok := lags[ms[i].Name]; ok && ms[i].Invalid == nil {
			ms[i].Lag = toLag(&l)
		}
	}
}
