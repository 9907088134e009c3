package hooks

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// The settings' defaults are the runner's: DefaultSettings gives the
// Config that zero settings give once defaults apply.
func TestSettingsDefaultsAreTheRunners(t *testing.T) {
	got := DefaultSettings().Config().WithDefaults()
	want := Settings{}.Config().WithDefaults()
	if got.QueueSize != want.QueueSize || got.Timeout != want.Timeout || got.KillGrace != want.KillGrace ||
		got.OutputLimit != want.OutputLimit || got.QueryResponseLimit != want.QueryResponseLimit ||
		got.CoalescePeriod != want.CoalescePeriod || got.QuiescentPeriod != want.QuiescentPeriod {
		t.Errorf("DefaultSettings gives %+v, zero settings give %+v", got, want)
	}
	if err := DefaultSettings().Check(); err != nil {
		t.Errorf("DefaultSettings().Check() = %v", err)
	}
}

func TestSettingsCheck(t *testing.T) {
	testkit.RefusesEach(t, func() Settings {
		s := DefaultSettings()
		s.CoalescePeriod = time.Second
		return s
	}, Settings.Check, []testkit.Refusal[Settings]{
		{Mod: func(s *Settings) { s.QueueSize = MaxQueueSize + 1 }, Want: `queue_size "1000001": must be from 1 to 1000000 (0: default 1000)`},
		{Mod: func(s *Settings) { s.Timeout = time.Millisecond }, Want: `timeout "1ms": must be at least 100ms (0: default 30s)`},
		{Mod: func(s *Settings) { s.KillGrace = -1 }, Want: `kill_grace "-1ns": must not be negative`},
		{Mod: func(s *Settings) { s.QuiescentPeriod = -1 }, Want: `coalesce_period "1s": periods must not be negative`},
	})
	s := Settings{Env: []string{"X"}, Dir: "/d", Timeout: time.Second}
	if c := s.Config(); c.Dir != "/d" || len(c.EnvAllow) != 1 || c.Timeout != time.Second {
		t.Errorf("Config() = %+v", c)
	}
}
