package pool

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/setting"
)

// pool.min_readers means the same in the settings and in the policy: the
// default floor is 1, and 0 is no floor (docs/configuration.md), not the
// default.
func TestSettingsMinReaders(t *testing.T) {
	lagging := []Member{writer("a"), replica("b", 50)}
	for _, tc := range []struct {
		minReaders int
		want       string
	}{
		{DefaultSettings().MinReaders, "default{w[a] r[b:floor] o[]}"},
		{0, "default{w[a] r[] o[b:lag]}"},
		{2, "default{w[a] r[b:floor] o[]}"},
	} {
		s := DefaultSettings()
		s.MinReaders = tc.minReaders
		if err := s.Check(); err != nil {
			t.Fatalf("min_readers %d: %v", tc.minReaders, err)
		}
		if got := summary(Compute(lagging, s.Policy(), nil)); got != tc.want {
			t.Errorf("min_readers %d: pool %s, want %s", tc.minReaders, got, tc.want)
		}
	}
}

func TestSettingsCheck(t *testing.T) {
	if err := DefaultSettings().Check(); err != nil {
		t.Fatalf("DefaultSettings().Check() = %v", err)
	}
	for _, tc := range []struct {
		mod  func(*Settings)
		want string
	}{
		{func(s *Settings) { s.MinReaders = -1 }, `min_readers "-1": must be 0 or more`},
		{func(s *Settings) { s.MaxLag = 0 }, `max_lag "0s": must be at least 1s`},
		{func(s *Settings) { s.DampHalfLife = 2 * time.Hour }, `damp_half_life "2h0m0s": must be from 1s to 1h`},
		{func(s *Settings) { s.IsolationWindow = time.Millisecond }, `isolation_window "1ms": must be at least 1s`},
	} {
		s := DefaultSettings()
		tc.mod(&s)
		if err := s.Check(); setting.One(err) == nil || err.Error() != tc.want {
			t.Errorf("Check() = %v, want the one *setting.Error %q", err, tc.want)
		}
	}
	s := DefaultSettings()
	if s.Damp().HalfLife != DefaultHalfLife || s.Policy().MaxLag != DefaultMaxLag || !s.Damping {
		t.Errorf("defaults: %+v", s)
	}
}
