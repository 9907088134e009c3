//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"time"
)

// limitFor is how long a wait may run for a bound: long enough past the
// bound to measure a slow outcome instead of only reporting a timeout.
func limitFor(bound time.Duration) time.Duration { return 2*bound + 5*time.Second }

// within records a wait result against its bound.
func within(s *S, name string, r WaitResult, bound time.Duration) bool {
	s.Helper()
	ok := r.OK && r.Took <= bound
	s.Measure(name, r.Took, bound, ok)
	return ok
}

// info records a wait result that has no bound of its own; a timeout is
// still a failure.
func info(s *S, name string, r WaitResult) {
	s.Helper()
	s.Measure(name, r.Took, 0, r.OK)
}

// isOut: the node is in no role.
func isOut(node string) func(Snap) bool {
	return func(s Snap) bool { return s.OK() && s.Role(node) == "out" }
}

// isOutFor: the node is out with the given reason.
func isOutFor(node, reason string) func(Snap) bool {
	return func(s Snap) bool { return s.OK() && s.Out[node] == reason }
}

// memberIs: the agent sees node with the given status.
func memberIs(node, status string) func(Snap) bool {
	return func(s Snap) bool { return s.OK() && s.Members[node] == status }
}

// reasons lists each agent's latest reason for node, for notes.
func reasons(c *Cluster, node string, agents []string) string {
	latest := c.Obs.Latest()
	var out []string
	for _, a := range agents {
		out = append(out, fmt.Sprintf("%s:%s", a, latest[a].Out[node]))
	}
	return strings.Join(out, " ")
}

// failWithState reports the cluster's latest samples after a failed wait.
func failWithState(s *S, c *Cluster, what string) {
	s.Helper()
	s.Errorf("%s; latest samples:\n%s", what, c.Describe())
}
