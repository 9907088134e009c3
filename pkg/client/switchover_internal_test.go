package client

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/view"
)

// TestSwitchoverDefaultsAreTheAgents: the waits Switchover's timeout counts
// for a zero wait are the ones the agent fills in (view.SwitchoverRequest
// Normalize), and the bound SwitchoverRequest's doc gives is the agent's.
func TestSwitchoverDefaultsAreTheAgents(t *testing.T) {
	secs := func(d time.Duration) float64 { return d.Seconds() }
	if switchoverCatchUpSeconds != secs(view.DefaultSwitchoverCatchUp) || switchoverAppliedSeconds != secs(view.DefaultSwitchoverApplied) {
		t.Errorf("client defaults %v s and %v s, the agent's %s and %s", switchoverCatchUpSeconds, switchoverAppliedSeconds,
			view.DefaultSwitchoverCatchUp, view.DefaultSwitchoverApplied)
	}
	if view.MinSwitchoverWait != time.Second || view.MaxSwitchoverWait != 120*time.Second {
		t.Errorf("SwitchoverRequest's doc says from 1 to 120 s; the agent's bounds are %s and %s", view.MinSwitchoverWait, view.MaxSwitchoverWait)
	}
}
