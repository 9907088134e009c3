package cli

import (
	"runtime"
	"testing"
)

// TestLimitProcs: the agent runs with agentProcs Ps unless GOMAXPROCS is
// set in the environment, and the previous value comes back afterwards.
func TestLimitProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Setenv("GOMAXPROCS", "")
	restore := limitProcs()
	if got := runtime.GOMAXPROCS(0); got != agentProcs {
		t.Errorf("GOMAXPROCS %d during the agent, want %d", got, agentProcs)
	}
	restore()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS %d after, want %d back", got, before)
	}
	t.Setenv("GOMAXPROCS", "3")
	restore = limitProcs()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS set in the environment: %d during the agent, want it untouched (%d)", got, before)
	}
	restore()
}
