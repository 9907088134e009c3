package pool

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/setting"
)

// pool.min_readers means the same in the settings and in the policy: the
// default floor is 1, and 0 is no floor (docs/configuration.md), not the
// default. pool.read_fallback: the default sends reads to the writer rather
// than keep a lagging reader; each value reaches the policy.
func TestSettingsFloor(t *testing.T) {
	lagging := []Member{writer("a"), replica("b", 50)}
	def := DefaultSettings()
	for _, tc := range []struct {
		minReaders int
		fallback   ReadFallback
		want       string
	}{
		{def.MinReaders, ReadFallbackStaleReader, "default{w[a] r[b:floor] o[]}"},
		{0, ReadFallbackStaleReader, "default{w[a] r[] o[b:lag]}"},
		{2, ReadFallbackStaleReader, "default{w[a] r[b:floor] o[]}"},
		{def.MinReaders, def.ReadFallback, "default{w[a] r[a:fallback] o[b:lag]}"},
		{0, def.ReadFallback, "default{w[a] r[] o[b:lag]}"},
		{def.MinReaders, ReadFallbackNone, "default{w[a] r[] o[b:lag]}"},
	} {
		s := DefaultSettings()
		s.MinReaders, s.ReadFallback = tc.minReaders, tc.fallback
		if err := s.Check(); err != nil {
			t.Fatalf("min_readers %d read_fallback %q: %v", tc.minReaders, tc.fallback, err)
		}
		if got := summary(Compute(lagging, s.Policy(), nil)); got != tc.want {
			t.Errorf("min_readers %d read_fallback %q: pool %s, want %s", tc.minReaders, tc.fallback, got, tc.want)
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
		{func(s *Settings) { s.ReadFallback = "primary" }, `read_fallback "primary": must be writer, none or stale-reader`},
		{func(s *Settings) { s.ReadFallback = "" }, `read_fallback "": must be writer, none or stale-reader`},
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
