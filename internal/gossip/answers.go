package gossip

import (
	"context"

	"github.com/hashicorp/serf/serf"
)

// EachAnswer calls f with each answer to a query until the query ends,
// ctx ends or f returns false, then closes the query.
func EachAnswer(ctx context.Context, resp *serf.QueryResponse, f func(serf.NodeResponse) bool) {
	defer resp.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case r, ok := <-resp.ResponseCh():
			if !ok || !f(r) {
				return
			}
		}
	}
}
