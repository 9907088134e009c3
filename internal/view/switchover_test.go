package view

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSwitchoverRequestNormalize: zero waits get the defaults, the bounds
// are inclusive, and every refusal is a *SwitchoverRequestError that wraps
// ErrSwitchover and names the field and the value.
func TestSwitchoverRequestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name             string
		req              SwitchoverRequest
		catchUp, applied time.Duration
		field, msg       string
	}{
		{name: "defaults", req: SwitchoverRequest{To: "db2"}, catchUp: 30 * time.Second, applied: 10 * time.Second},
		{name: "bounds", req: SwitchoverRequest{To: "db2", CatchUp: time.Second, Applied: 2 * time.Minute}, catchUp: time.Second, applied: 2 * time.Minute},
		{name: "no target", req: SwitchoverRequest{}, field: "to", msg: `switchover refused: to "": required`},
		{name: "catch-up too long", req: SwitchoverRequest{To: "db2", CatchUp: 2*time.Minute + 1}, field: "catch_up", msg: "catch_up 2m0.000000001s: must be from 1s to 2m0s (0: the default, 30s)"},
		{name: "catch-up negative", req: SwitchoverRequest{To: "db2", CatchUp: -time.Second}, field: "catch_up", msg: "catch_up -1s: must be"},
		{name: "applied under a second", req: SwitchoverRequest{To: "db2", Applied: 500 * time.Millisecond}, field: "applied", msg: "applied 500ms: must be from 1s to 2m0s (0: the default, 10s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.req.Normalize()
			if tc.field == "" {
				if err != nil || got.CatchUp != tc.catchUp || got.Applied != tc.applied || got.To != tc.req.To {
					t.Fatalf("Normalize = %+v, %v; want waits %s and %s", got, err, tc.catchUp, tc.applied)
				}
				return
			}
			var re *SwitchoverRequestError
			if !errors.As(err, &re) || re.Field != tc.field || !errors.Is(err, ErrSwitchover) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Normalize error = %v; want a SwitchoverRequestError on %s wrapping ErrSwitchover, saying %q", err, tc.field, tc.msg)
			}
		})
	}
}
