package tags

import "fmt"

// State is the health state of a database server as judged by its local probe.
// The zero value is Critical, so a Health nobody filled in is never healthy.
type State uint8

// Health states.
const (
	Critical State = iota // unreachable or failing: never routed to
	Warning               // degraded: routed to only to keep a role from being empty
	Passing               // healthy
)

// String returns the state's name.
func (s State) String() string {
	switch s {
	case Critical:
		return "critical"
	case Warning:
		return "warning"
	case Passing:
		return "passing"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// code returns the one-letter code used in the health tag.
func (s State) code() byte {
	switch s {
	case Passing:
		return 'p'
	case Warning:
		return 'w'
	}
	return 'c'
}

// Health is the probe result a database agent publishes in the health tag.
type Health struct {
	State         State
	ReadOnly      bool   // @@read_only
	SuperReadOnly bool   // @@super_read_only
	Replica       bool   // a replication source is configured
	IORunning     bool   // replication IO thread running
	SQLRunning    bool   // replication SQL thread running
	LagKnown      bool   // false when Seconds_Behind_Master is NULL
	LagSeconds    uint32 // replication lag; meaningful only if LagKnown
	ServerID      uint32 // @@server_id
	Galera        bool   // the server is a Galera node
	GaleraSynced  bool   // Galera: Synced and in the primary component
	Reason        string // short reason code for a non-passing state
	Seq           uint32 // bumped by the agent on every state change
	Port          uint16 // the MySQL port clients use on this host; 0 = not published
}

// Normalize returns h as Encode publishes it: an unknown state becomes
// Critical, the lag is clamped to MaxLagSeconds and zeroed when unknown,
// GaleraSynced is cleared unless Galera, and the reason has every byte outside
// [A-Za-z0-9._:/-] replaced by '_' and is cut to MaxReasonLen bytes.
// Decode(Encode(h)) == h.Normalize().
func (h Health) Normalize() Health {
	if h.State > Passing {
		h.State = Critical
	}
	if !h.LagKnown {
		h.LagSeconds = 0
	} else if h.LagSeconds > MaxLagSeconds {
		h.LagSeconds = MaxLagSeconds
	}
	if !h.Galera {
		h.GaleraSynced = false
	}
	h.Reason = cleanReason(h.Reason)
	return h
}

func cleanReason(s string) string {
	if len(s) > MaxReasonLen {
		s = s[:MaxReasonLen]
	}
	for i := 0; i < len(s); i++ {
		if !isReasonByte(s[i]) {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if !isReasonByte(b[j]) {
					b[j] = '_'
				}
			}
			return string(b)
		}
	}
	return s
}
