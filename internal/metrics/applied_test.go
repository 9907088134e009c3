package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAppliedTermCollector(t *testing.T) {
	for _, tc := range []struct {
		name  string
		terms map[string]uint64
		want  string
	}{
		{"no sinks", nil, ""},
		{"router", map[string]uint64{"main": 7, "shard2": 0}, `
shoal_router_applied_term{cluster="main"} 7
shoal_router_applied_term{cluster="shard2"} 0
`},
		// Two names with one display form are one series: the first in
		// byte order ("a" and U+0001 before "a\").
		{"same label", map[string]uint64{"a\x01": 2, `a\x01`: 3}, `
shoal_router_applied_term{cluster="a\\x01"} 2
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewAppliedTermCollector(func() map[string]uint64 { return tc.terms })
			if err := testutil.CollectAndCompare(c, strings.NewReader(withMeta(t, c, tc.want))); err != nil {
				t.Error(err)
			}
			if n, err := testutil.CollectAndLint(c); err != nil || len(n) > 0 {
				t.Errorf("lint: %v %v", n, err)
			}
		})
	}
}
