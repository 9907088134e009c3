package probe

import (
	"reflect"
	"testing"

	"github.com/shoaldb/shoal/internal/tags"
)

// TestHealthMapsEveryFact: a status whose facts are all set publishes every
// fact of the schema (tags.Facts) set, so a fact added to the schema but not
// read from the probe's facts in Status.Health fails here.
func TestHealthMapsEveryFact(t *testing.T) {
	st := Status{
		State: StateWarning, Reason: ReasonSlow,
		Known: Facts{
			Reachable: true, Flavor: FlavorMariaDB, Version: "11.4.5-MariaDB", ServerID: 2,
			ReadOnly: true, HasSuperReadOnly: true, SuperReadOnly: true,
			Replication: Replication{Known: true, Channels: 1, IORunning: true, SQLRunning: true, NotReceiving: true,
				LagKnown: true, LagSeconds: 3, SourceServerID: 1},
			Position: tags.Position{N: 1, Domains: [tags.MaxDomains]tags.Domain{{ID: 0, Seq: 9}}},
			Galera:   Galera{Enabled: true, LocalState: GaleraSynced, ClusterStatus: "Primary"},
		},
	}
	h := st.Health(3307)
	for _, f := range tags.Facts() {
		for _, fl := range f.Fields {
			if v := fl.Value(h); v == nil || reflect.ValueOf(v).IsZero() {
				t.Errorf("fact %q (tag key %s) is %v: is it mapped in Status.Health?", fl.JSON, f.Key, v)
			}
		}
	}
}

// TestHealthPublishesKnownFacts: the published facts are the latest facts
// read (Known), not those of the latest check, which may have read none.
func TestHealthPublishesKnownFacts(t *testing.T) {
	st := Status{
		State: StatePassing, Reason: ReasonOK,
		Known: Facts{Reachable: true, ServerID: 5, ReadOnly: true, Position: tags.Position{N: 1, Domains: [tags.MaxDomains]tags.Domain{{ID: 0, Seq: 9}}}},
		Last:  Result{Outcome: OutcomeFail, Reason: ReasonTimeout},
	}
	want := tags.Health{State: tags.Passing, ServerID: 5, ReadOnly: true, Position: st.Known.Position}
	if got := st.Health(0); got != want {
		t.Fatalf("Health = %+v, want %+v", got, want)
	}
	st.State = StateCritical
	st.Reason = ReasonTimeout
	want.State, want.Reason = tags.Critical, "timeout"
	if got := st.Health(0); got != want {
		t.Fatalf("critical: Health = %+v, want %+v", got, want)
	}
}
