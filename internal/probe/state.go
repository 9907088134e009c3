package probe

import (
	"fmt"
	"time"
)

// State is the health of the local server as the probe sees it. The zero
// value is StateCritical: a server is not healthy until proven so.
type State uint8

const (
	// StateCritical: unreachable, hung, or failing checks; route nothing.
	StateCritical State = iota
	// StateWarning: reachable and answering, but degraded (slow checks,
	// replication status unreadable).
	StateWarning
	// StatePassing: reachable and answering promptly.
	StatePassing
)

func (s State) String() string {
	switch s {
	case StateCritical:
		return "critical"
	case StateWarning:
		return "warning"
	case StatePassing:
		return "passing"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// MarshalText encodes the state as its name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Outcome is the verdict of a single check.
type Outcome uint8

const (
	// OutcomePass: the server answered all check statements promptly.
	OutcomePass Outcome = iota
	// OutcomeWarn: the server answered, but something is degraded.
	OutcomeWarn
	// OutcomeFail: the check failed (timeout, query or auth error, Galera
	// node not synced); counts towards fall.
	OutcomeFail
	// OutcomeHardFail: the server is certainly gone (connection refused or
	// reset, socket missing, shutdown in progress); critical at once.
	OutcomeHardFail
)

func (o Outcome) String() string {
	switch o {
	case OutcomePass:
		return "pass"
	case OutcomeWarn:
		return "warn"
	case OutcomeFail:
		return "fail"
	case OutcomeHardFail:
		return "hard_fail"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// MarshalText encodes the outcome as its name.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// up reports whether the server answered (pass or warn).
func (o Outcome) up() bool { return o == OutcomePass || o == OutcomeWarn }

// Reason is a short, stable code for why a check or a state is what it is.
// Reasons are meant for tags, metrics labels and logs; Message has details.
type Reason string

// Reason codes.
const (
	ReasonOK         Reason = "ok"
	ReasonStarting   Reason = "starting"    // no check has completed yet
	ReasonSlow       Reason = "slow"        // check took over half the timeout
	ReasonReplStatus Reason = "repl_status" // replication status unreadable (grants?)
	ReasonRefused    Reason = "refused"     // connection refused or socket missing
	ReasonConnLost   Reason = "conn_lost"   // connection reset or closed by the server
	ReasonShutdown   Reason = "shutdown"    // server shutting down
	ReasonTimeout    Reason = "timeout"     // no answer within the timeout (hung server)
	ReasonAuth       Reason = "auth"        // access denied
	ReasonTooMany    Reason = "too_many"    // too many connections
	ReasonConnect    Reason = "connect"     // other connection error
	ReasonQuery      Reason = "query"       // a check statement failed
	ReasonWsrep      Reason = "wsrep"       // Galera node not Synced or not in the Primary component
	ReasonPanic      Reason = "panic"       // the check panicked (a bug)
)

// Result is the result of one check.
type Result struct {
	Outcome Outcome `json:"outcome"`
	Reason  Reason  `json:"reason"`
	Message string  `json:"message,omitempty"`
	Facts   Facts   `json:"facts"`
	// FactsRead: the check read the server's facts (it passed, warned, or
	// failed on what it read, like a Galera node not synced). A check that
	// failed before reading them (timeout, refused, query error) carries
	// at most Facts.Reachable.
	FactsRead bool          `json:"facts_read,omitempty"`
	Start     time.Time     `json:"start"`
	Duration  time.Duration `json:"duration"`
	// HostStall is how long the host itself was stalled during a check that
	// timed out: the longest of its cpu, io and memory pressure stall times
	// (Linux PSI, "some") over the check. 0 when not measured.
	HostStall time.Duration `json:"host_stall,omitempty"`
}

// stallShare: a timeout during which the host was stalled for at least
// 1/stallShare of the wait is ambiguous (see hysteresis).
const stallShare = 4

// HostStalled reports whether the host was stalled for a good share of a
// timed-out check, so that the silence may be the host's and not the
// server's.
func (r Result) HostStalled() bool {
	return r.HostStall > 0 && r.HostStall*stallShare >= r.Duration
}

// hysteresis is the probe's state machine. It is pure: it sees only results,
// with their own timestamps, so it is tested without clocks or sleeps.
//
// Counters are of consecutive results: passes (pass), ups (pass or warn),
// fails (fail or hard fail), notPasses (warn, fail or hard fail).
//
//	any state  --hard fail------------------------------------> critical
//	any state  --fails >= fall---------------------------------> critical
//	critical   --ups >= rise, passes >= rise-------------------> passing
//	critical   --ups >= rise, passes <  rise-------------------> warning
//	warning    --passes >= rise--------------------------------> passing
//	passing    --notPasses >= fall (fails < fall)--------------> warning
//
// A timeout counts as one failure per probe interval it spans (at least one):
// fall is meant as "failing for fall intervals", and a check that waited
// Duration without an answer has shown that much silence by itself. With the
// defaults (interval 250ms, timeout 500ms, fall 2) one timeout of a hung
// server is enough, so it leaves the pool about one timeout after it hangs
// instead of two; a check that answers slowly but within the timeout is a
// pass. Set mysql.timeout below fall x interval to require several timeouts.
//
// Unless the host itself stalled: a timeout during which the host's tasks
// waited for CPU, I/O or memory (Linux PSI) for at least a quarter of the
// wait says as much about the host as about the server (a machine so
// overloaded that a trivial query takes over the timeout stalls every
// process, the probe's included), so it counts as one failure, like any
// other. A hung server on an overloaded host then needs fall timeouts in a
// row; one stall no longer takes a healthy writer out of the pool
// (TestHysteresisTimeoutWeight, TestProbeSigstopUnderHostStall).
//
// A single bad result never moves a passing server (unless hard, or a
// timeout spanning fall intervals), and a single good result never revives a
// critical one (unless rise is 1). The
// reason and message follow the latest result that agrees with the state
// (a critical server that was refused and now times out says "timeout").
type hysteresis struct {
	rise, fall int
	interval   time.Duration // weighs timeouts; 0 counts each as one failure

	state   State
	reason  Reason
	message string
	since   time.Time

	passes, ups, fails, notPasses int
}

func newHysteresis(rise, fall int, interval time.Duration, now time.Time) *hysteresis {
	return &hysteresis{
		rise: rise, fall: fall, interval: interval,
		state: StateCritical, reason: ReasonStarting, message: "no check completed yet", since: now,
	}
}

// observe feeds one result and reports whether the state changed.
func (h *hysteresis) observe(r Result) bool {
	switch r.Outcome {
	case OutcomePass:
		h.passes++
		h.ups++
		h.fails, h.notPasses = 0, 0
	case OutcomeWarn:
		h.passes, h.fails = 0, 0
		h.ups++
		h.notPasses++
	default:
		w := 1
		if r.Reason == ReasonTimeout && h.interval > 0 && !r.HostStalled() {
			w = max(1, int(r.Duration/h.interval))
		}
		h.passes, h.ups = 0, 0
		h.fails += w
		h.notPasses += w
	}

	next := h.state
	switch {
	case r.Outcome == OutcomeHardFail || h.fails >= h.fall:
		next = StateCritical
	case h.state == StateCritical && h.ups >= h.rise:
		next = StateWarning
		if h.passes >= h.rise {
			next = StatePassing
		}
	case h.state == StateWarning && h.passes >= h.rise:
		next = StatePassing
	case h.state == StatePassing && h.notPasses >= h.fall:
		next = StateWarning
	}

	changed := next != h.state
	if changed || agrees(next, r.Outcome) {
		h.reason, h.message = r.Reason, r.Message
	}
	if changed {
		h.state = next
		h.since = r.Start.Add(r.Duration)
	}
	return changed
}

// agrees reports whether an outcome describes a state, so its reason may
// replace the state's reason.
func agrees(s State, o Outcome) bool {
	switch s {
	case StatePassing:
		return o == OutcomePass
	case StateWarning:
		return o == OutcomeWarn
	default:
		return !o.up()
	}
}
