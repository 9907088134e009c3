package view

import "testing"

// TestParseSerfStats: serf's string counters become numbers; a missing or
// unparsable counter is 0.
func TestParseSerfStats(t *testing.T) {
	got := ParseSerfStats(map[string]string{
		"members": "3", "failed": "1", "left": "0", "health_score": "2",
		"member_time": "42", "event_time": "7", "query_time": "x",
		"intent_queue": "5", "encrypted": "true", "coordinate_resets": "9",
	})
	want := SerfStats{Members: 3, Failed: 1, HealthScore: 2, MemberTime: 42, EventTime: 7,
		IntentQueue: 5, Encrypted: true, CoordinateResets: 9}
	if got != want {
		t.Fatalf("ParseSerfStats = %+v, want %+v", got, want)
	}
	if got := ParseSerfStats(nil); got != (SerfStats{}) {
		t.Fatalf("ParseSerfStats(nil) = %+v, want zero", got)
	}
}

// TestLagFigures: a lag's numbers as the history shows them: transactions
// only for gtid, tenths of a second for gtid and whole seconds for sbm,
// "≥" for a lower bound, "unknown" for a NULL Seconds_Behind_Master.
func TestLagFigures(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	u := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		l    Lag
		want string
	}{
		{Lag{Source: "gtid", Seconds: f(11.34), Transactions: u(120)}, "120 tx, 11.3s"},
		{Lag{Source: "gtid", Seconds: f(0), Transactions: u(0)}, "0 tx, 0s"},
		{Lag{Source: "gtid", Seconds: f(600), AtLeast: true, Transactions: u(3)}, "3 tx, ≥600.0s"},
		{Lag{Source: "sbm", Seconds: f(15)}, "15s"},
		{Lag{Source: "sbm", Seconds: f(0)}, "0s"},
		{Lag{Source: "sbm"}, "unknown"},
	} {
		if got := tc.l.Figures(); got != tc.want {
			t.Errorf("%+v: Figures() = %q, want %q", tc.l, got, tc.want)
		}
	}
}
