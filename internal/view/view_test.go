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
