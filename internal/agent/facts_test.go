package agent

import (
	"testing"

	"github.com/shoaldb/shoal/internal/tags"
)

// TestEveryFactReachesTheMetrics: every fact of the schema that is not text
// is a shoal_mysql_fact series, so a fact of a type factValues does not
// handle fails here.
func TestEveryFactReachesTheMetrics(t *testing.T) {
	// Every fact known, so that none is left out as unknown (nil); the GTID
	// position is text.
	pos, err := tags.NewPosition([]tags.Domain{{ID: 0, Seq: 42}})
	if err != nil {
		t.Fatal(err)
	}
	h := tags.Health{State: tags.Passing, LagKnown: true, Galera: true, Position: pos}
	got := factValues(h)
	for name, v := range tags.Show(h) {
		if _, text := v.(string); text {
			continue
		}
		if _, ok := got[name]; !ok {
			t.Errorf("fact %q (%T) is not a metric", name, v)
		}
	}
	if got["lag_seconds"] != 0 || got["read_only"] != 0 || got["galera"] != 1 {
		t.Errorf("factValues = %v", got)
	}
	if _, ok := factValues(tags.Health{})["lag_seconds"]; ok {
		t.Error("unknown lag is a metric")
	}
}
