package testkit

import (
	"testing"

	"github.com/shoaldb/shoal/internal/setting"
)

// Refusal is one case of RefusesEach: a change to valid settings and the
// one refusal it must cause, as the check words it.
type Refusal[S any] struct {
	Mod  func(*S)
	Want string
}

// RefusesEach applies each case's change to base() and wants check to
// refuse exactly one setting, with the case's message.
func RefusesEach[S any](t testing.TB, base func() S, check func(S) error, cases []Refusal[S]) {
	t.Helper()
	for _, tc := range cases {
		s := base()
		tc.Mod(&s)
		if err := check(s); setting.One(err) == nil || err.Error() != tc.Want {
			t.Errorf("Check() = %v, want the one *setting.Error %q", err, tc.Want)
		}
	}
}
