package agent

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
)

// TestDampedNodeFeedsMaint: `shoal maint` reports this node held out by
// damping from the pool, with the hold's end, and nothing for other reasons.
func TestDampedNodeFeedsMaint(t *testing.T) {
	until := time.Date(2024, 5, 1, 12, 1, 26, 0, time.UTC)
	p := &pool.Pool{Clusters: []pool.Cluster{
		{Name: "a", Out: []pool.Node{{Name: "db1", Reason: pool.ReasonMaintenance}}},
		{Name: "b", Out: []pool.Node{
			{Name: "db2", Reason: pool.ReasonLag},
			{Name: "db3", Reason: pool.ReasonDamped, Detail: "flapping: penalty 2620, re-entry below 1000", Until: until},
		}},
	}}
	if n, ok := dampedNode(p, "db3"); !ok || !n.Until.Equal(until) || n.Detail == "" {
		t.Fatalf("db3 = %+v, %v; want damped until %v", n, ok, until)
	}
	for _, name := range []string{"db1", "db2", "db9"} {
		if _, ok := dampedNode(p, name); ok {
			t.Errorf("%s reported as damped", name)
		}
	}
	if _, ok := dampedNode(nil, "db3"); ok {
		t.Error("nil pool reported a damped node")
	}
}
