package probe

import (
	"strings"
	"testing"
	"time"
)

// outcomes maps the letters used in the table: P pass, W warn, F fail, H hard.
var outcomes = map[byte]Outcome{'P': OutcomePass, 'W': OutcomeWarn, 'F': OutcomeFail, 'H': OutcomeHardFail}

// states maps C critical, W warning, P passing.
var stateLetters = map[State]byte{StateCritical: 'C', StateWarning: 'W', StatePassing: 'P'}

func TestHysteresis(t *testing.T) {
	tests := []struct {
		name       string
		rise, fall int
		in         string // outcomes, one letter per check
		want       string // state after each check
	}{
		{"starts critical, rise 2", 2, 2, "PP", "CP"},
		{"rise 3", 3, 2, "PPPP", "CCPP"},
		{"rise 1", 1, 2, "P", "P"},
		{"interrupted rise restarts", 2, 2, "PFPP", "CCCP"},
		{"single failure tolerated", 2, 2, "PPFP", "CPPP"},
		{"fall 2", 2, 2, "PPFF", "CPPC"},
		{"fall 3", 2, 3, "PPFFF", "CPPPC"},
		{"fall 1", 2, 1, "PPF", "CPC"},
		{"hard fail at once", 2, 3, "PPH", "CPC"},
		{"hard fail from warning", 2, 3, "PPWWWH", "CPPPWC"},
		{"recovery needs rise", 2, 2, "PPHPPP", "CPCCPP"},
		{"warn counts as up from critical", 2, 2, "WW", "CW"},
		{"warn then pass from critical", 2, 2, "WPP", "CWP"},
		{"pass then warn from critical", 2, 2, "PW", "CW"},
		{"single warn tolerated", 2, 2, "PPWP", "CPPP"},
		{"warn fall to warning", 2, 2, "PPWW", "CPPW"},
		{"warning back to passing needs rise", 2, 2, "PPWWPWPP", "CPPWWWWP"},
		{"warn then fail: warning", 2, 2, "PPWF", "CPPW"},
		{"warning to critical by fall", 2, 2, "PPWWFF", "CPPWWC"},
		{"warn resets failures", 2, 2, "PPFWF", "CPPWW"},
		{"alternating never falls", 2, 2, "PPFPFPFP", "CPPPPPPP"},
		{"alternating never rises", 2, 2, "FPFPFP", "CCCCCC"},
		{"failures while critical stay critical", 2, 2, "FFHF", "CCCC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			h := newHysteresis(tc.rise, tc.fall, 0, t0)
			var got strings.Builder
			for i := range len(tc.in) {
				prev := h.state
				changed := h.observe(Result{Outcome: outcomes[tc.in[i]], Reason: Reason(tc.in[i : i+1]), Start: t0.Add(time.Duration(i) * time.Second)})
				if changed != (h.state != prev) {
					t.Fatalf("check %d: changed=%v but state %v -> %v", i, changed, prev, h.state)
				}
				got.WriteByte(stateLetters[h.state])
			}
			if got.String() != tc.want {
				t.Errorf("outcomes %s with rise=%d fall=%d: states %s, want %s", tc.in, tc.rise, tc.fall, got.String(), tc.want)
			}
		})
	}
}

func TestHysteresisReasonAndSince(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newHysteresis(2, 2, 0, t0)
	if h.reason != ReasonStarting || !h.since.Equal(t0) {
		t.Fatalf("initial reason %q since %v", h.reason, h.since)
	}
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	step := func(i int, o Outcome, r Reason) {
		h.observe(Result{Outcome: o, Reason: r, Message: string(r) + " msg", Start: at(i), Duration: 10 * time.Millisecond})
	}
	step(1, OutcomeHardFail, ReasonRefused)
	if h.reason != ReasonRefused || h.message != "refused msg" {
		t.Errorf("critical reason %q %q, want refused", h.reason, h.message)
	}
	if !h.since.Equal(t0) {
		t.Errorf("since moved without a state change: %v", h.since)
	}
	step(2, OutcomeFail, ReasonTimeout) // agrees with critical: reason follows
	if h.reason != ReasonTimeout {
		t.Errorf("reason %q, want timeout", h.reason)
	}
	step(3, OutcomePass, ReasonOK) // not yet passing: critical keeps its reason
	if h.state != StateCritical || h.reason != ReasonTimeout {
		t.Errorf("state %v reason %q, want critical timeout", h.state, h.reason)
	}
	step(4, OutcomePass, ReasonOK)
	if h.state != StatePassing || h.reason != ReasonOK {
		t.Errorf("state %v reason %q, want passing ok", h.state, h.reason)
	}
	if want := at(4).Add(10 * time.Millisecond); !h.since.Equal(want) {
		t.Errorf("since %v, want %v (end of the deciding check)", h.since, want)
	}
	step(5, OutcomeFail, ReasonTimeout) // tolerated: passing keeps "ok"
	if h.state != StatePassing || h.reason != ReasonOK {
		t.Errorf("state %v reason %q, want passing ok", h.state, h.reason)
	}
}

func TestStateStrings(t *testing.T) {
	for s, want := range map[State]string{StateCritical: "critical", StateWarning: "warning", StatePassing: "passing", 9: "state(9)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
	}
	var zero State
	if zero != StateCritical {
		t.Error("zero State must be critical")
	}
	b, _ := OutcomeHardFail.MarshalText()
	if string(b) != "hard_fail" {
		t.Errorf("OutcomeHardFail text %q", b)
	}
}

// A timeout counts one failure per interval it spans: with interval 250ms
// and fall 2, a 500ms timeout alone makes a passing server critical, a 260ms
// one does not, and other slow failures count once.
func TestHysteresisTimeoutWeight(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	passing := func() *hysteresis {
		h := newHysteresis(2, 2, 250*time.Millisecond, t0)
		h.observe(Result{Outcome: OutcomePass, Reason: ReasonOK, Start: t0})
		h.observe(Result{Outcome: OutcomePass, Reason: ReasonOK, Start: t0})
		if h.state != StatePassing {
			t.Fatalf("setup: %v", h.state)
		}
		return h
	}
	const ms = time.Millisecond
	for _, tc := range []struct {
		reason Reason
		d      time.Duration
		stall  time.Duration // host stall during the check
		want   State
	}{
		{ReasonTimeout, 500 * ms, 0, StateCritical},
		{ReasonTimeout, 260 * ms, 0, StatePassing},
		{ReasonConnect, 900 * ms, 0, StatePassing},
		// A host stalled for under a quarter of the wait: still a hung server.
		{ReasonTimeout, 500 * ms, 124 * ms, StateCritical},
		// A quarter or more: the silence may be the host's; counted once.
		{ReasonTimeout, 500 * ms, 125 * ms, StatePassing},
		{ReasonTimeout, 583 * ms, 583 * ms, StatePassing},
		{ReasonTimeout, 2 * time.Second, 600 * ms, StatePassing},
	} {
		h := passing()
		h.observe(Result{Outcome: OutcomeFail, Reason: tc.reason, Start: t0, Duration: tc.d, HostStall: tc.stall})
		if h.state != tc.want {
			t.Errorf("%s after %s (host stalled %s): %v, want %v", tc.reason, tc.d, tc.stall, h.state, tc.want)
		}
	}

	// Stalled timeouts still add up: fall of them in a row is critical.
	h := passing()
	stalled := Result{Outcome: OutcomeFail, Reason: ReasonTimeout, Start: t0, Duration: 500 * ms, HostStall: 400 * ms}
	h.observe(stalled)
	if h.state != StatePassing {
		t.Fatalf("one stalled timeout: %v, want passing", h.state)
	}
	h.observe(stalled)
	if h.state != StateCritical || h.reason != ReasonTimeout {
		t.Errorf("two stalled timeouts: %v (%s), want critical (timeout)", h.state, h.reason)
	}
}
