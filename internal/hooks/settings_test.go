package hooks

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/setting"
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
	for _, tc := range []struct {
		mod  func(*Settings)
		want string
	}{
		{func(s *Settings) { s.QueueSize = MaxQueueSize + 1 }, `queue_size "1000001": must be from 1 to 1000000 (0: default 1000)`},
		{func(s *Settings) { s.Timeout = time.Millisecond }, `timeout "1ms": must be at least 100ms (0: default 30s)`},
		{func(s *Settings) { s.KillGrace = -1 }, `kill_grace "-1ns": must not be negative`},
		{func(s *Settings) { s.QuiescentPeriod = -1 }, `coalesce_period "1s": periods must not be negative`},
	} {
		s := DefaultSettings()
		s.CoalescePeriod = time.Second
		tc.mod(&s)
		if err := s.Check(); setting.One(err) == nil || err.Error() != tc.want {
			t.Errorf("Check() = %v, want the one *setting.Error %q", err, tc.want)
		}
	}
	s := Settings{Env: []string{"X"}, Dir: "/d", Timeout: time.Second}
	if c := s.Config(); c.Dir != "/d" || len(c.EnvAllow) != 1 || c.Timeout != time.Second {
		t.Errorf("Config() = %+v", c)
	}
}
