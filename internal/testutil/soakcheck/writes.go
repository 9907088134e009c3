package soakcheck

import (
	"strings"
	"time"
)

// Write is one client write through an app host's HAProxy write port: the
// server that accepted it (its node name), or the error.
type Write struct {
	Client string
	Start  time.Time
	End    time.Time
	Node   string // accepted by; "" when it failed
	Err    string
}

// ReadOnlyError reports whether err is MariaDB's refusal of a write on a
// read-only server (ER_OPTION_PREVENTS_STATEMENT, 1290).
func ReadOnlyError(err string) bool { return strings.Contains(err, "Error 1290") }

// Window is a span of time in which the primary may refuse writes as
// read-only: a switchover (from the old primary turning read-only to the new
// one being the writer in every HAProxy), or a partition in which the
// primary, cut off from the voters' majority, fenced itself (from the cut
// to the heal).
type Window struct{ From, To time.Time }

// Contains reports whether at is in the window.
func (w Window) Contains(at time.Time) bool { return !at.Before(w.From) && !at.After(w.To) }

// WriteStats is what the clients' writes show.
type WriteStats struct {
	Total, OK, Failed int
	// ReadOnly are writes refused by a read-only server; InSwitchover
	// those that started or ended inside a window (a switchover or a
	// lease fence: the primary is read-only, the agents have not yet seen
	// it), Outside the others.
	ReadOnly, ReadOnlyInSwitchover, ReadOnlyOutside int
	// WrongServer are writes accepted by a server that was not the
	// primary at any moment of the write (expected 0: only the primary is
	// writable).
	WrongServer []Write
}

// CheckWrites classifies the writes against the primary timeline.
func CheckWrites(writes []Write, e Expect, readOnly []Window) WriteStats {
	var st WriteStats
	for _, w := range writes {
		st.Total++
		switch {
		case w.Err == "":
			st.OK++
			if !primaryDuring(e, w.Node, w.Start, w.End) {
				st.WrongServer = append(st.WrongServer, w)
			}
		case ReadOnlyError(w.Err):
			st.Failed++
			st.ReadOnly++
			in := false
			for _, sw := range readOnly {
				in = in || sw.Contains(w.Start) || sw.Contains(w.End)
			}
			if in {
				st.ReadOnlyInSwitchover++
			} else {
				st.ReadOnlyOutside++
			}
		default:
			st.Failed++
		}
	}
	return st
}

// primaryDuring reports whether node was the primary at some moment of
// [from, to].
func primaryDuring(e Expect, node string, from, to time.Time) bool {
	if e.PrimaryAt(from) == node || e.PrimaryAt(to) == node {
		return true
	}
	for _, p := range e.Primaries {
		if p.Name == node && p.At.After(from) && p.At.Before(to) {
			return true
		}
	}
	return false
}
