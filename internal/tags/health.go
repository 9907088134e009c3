package tags

import (
	"errors"
	"fmt"
	"slices"
)

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

// decode reads the one-letter code of the health tag.
func (s *State) decode(v string) error {
	switch v {
	case "p":
		*s = Passing
	case "w":
		*s = Warning
	case "c":
		*s = Critical
	default:
		return errors.New("want p, w or c")
	}
	return nil
}

// Health is the probe result a database agent publishes in the health tag.
type Health struct {
	State         State
	ReadOnly      bool // @@read_only
	SuperReadOnly bool // @@super_read_only
	Replica       bool // a replication source is configured
	IORunning     bool // replication IO thread running
	SQLRunning    bool // replication SQL thread running
	// NotReceiving: the IO thread runs but receives nothing, not even the
	// source's heartbeats (a frozen or silently cut source).
	NotReceiving bool
	LagKnown     bool   // false when Seconds_Behind_Master is NULL
	LagSeconds   uint32 // replication lag; meaningful only if LagKnown
	ServerID     uint32 // @@server_id
	// SourceServerID is the server_id of the server it replicates from; 0
	// when unknown or not a replica.
	SourceServerID uint32
	// Position is the server's GTID position (gtid_current_pos, or MySQL's
	// gtid_executed); unknown without GTID or with more than MaxDomains.
	Position     Position
	Galera       bool   // the server is a Galera node
	GaleraSynced bool   // Galera: Synced and in the primary component
	Reason       string // short reason code for a non-passing state
	Seq          uint32 // bumped by the agent on every state change
	Port         uint16 // the MySQL port clients use on this host; 0 = not published
}

// facts is the one definition of every field of the health tag: its key on
// the wire, whether v1 requires it, how it is written and read, and the
// names it goes by in the API's JSON (pkg/client's MemberHealth and
// LocalHealth) and for humans. Encode and Decode are loops over it, the API
// fills its JSON from it (Show), and the tests check every fact against
// every type it flows to, so adding a fact is: a field of Health and an
// entry here, the probe's reading of it and its line in probe.Status.Health,
// the JSON field in pkg/client, and the API docs (docs/development.md).
//
// The fields, in the order Encode writes them:
//
//	key  required  value
//	h    yes       health state: p (passing), w (warning), c (critical)
//	ro   yes       @@read_only: 0 or 1
//	sro  yes       @@super_read_only: 0 or 1
//	rep  yes       a replication source is configured: 0 or 1
//	io   yes       replication IO thread running: 0 or 1
//	sql  yes       replication SQL thread running: 0 or 1
//	nr   no        1 = the IO thread runs but nothing arrived for 3 heartbeat periods; absent = receiving or not judged
//	lag  no        replication lag in whole seconds, 0..999999999; absent = unknown (NULL)
//	sid  yes       @@server_id, 0..4294967295
//	src  no        server_id of the replication source, 1..4294967295; absent = unknown or not a replica
//	gp   no        GTID position, domain:seq[,domain:seq] (at most MaxDomains, sorted); absent = unknown
//	g    no        Galera: 1 = synced and in the primary component, 0 = not; absent = not Galera
//	rs   no        short reason code, at most 32 bytes of [A-Za-z0-9._:/-] (written: at most 19)
//	p    no        MySQL port routers send clients to on this host (1..65535)
//	n    yes       health sequence number, 0..4294967295, bumped on every state change
var facts = []Fact{
	{Key: "h", Required: true, Fields: []Field{{"state", "state", func(h Health) any { return h.State.String() }}},
		enc: func(b []byte, h Health) []byte { return append(append(b, ";h="...), h.State.code()) },
		dec: func(h *Health, v string) error { return h.State.decode(v) }},
	boolFact("ro", "read_only", "read_only", func(h *Health) *bool { return &h.ReadOnly }),
	boolFact("sro", "super_read_only", "super_read_only", func(h *Health) *bool { return &h.SuperReadOnly }),
	boolFact("rep", "replica", "replica", func(h *Health) *bool { return &h.Replica }),
	boolFact("io", "io_running", "io thread", func(h *Health) *bool { return &h.IORunning }),
	boolFact("sql", "sql_running", "sql thread", func(h *Health) *bool { return &h.SQLRunning }),
	{Key: "nr", Fields: []Field{{"not_receiving", "not receiving", func(h Health) any { return h.NotReceiving }}},
		enc: func(b []byte, h Health) []byte {
			if !h.NotReceiving {
				return b
			}
			return append(b, ";nr=1"...)
		},
		dec: func(h *Health, v string) (err error) {
			h.NotReceiving, err = parseBool(v)
			return err
		}},
	{Key: "lag", Fields: []Field{{"lag_seconds", "lag", func(h Health) any {
		if !h.LagKnown {
			return nil
		}
		return h.LagSeconds
	}}},
		enc: func(b []byte, h Health) []byte {
			if !h.LagKnown {
				return b
			}
			return appendUint(b, "lag", h.LagSeconds)
		},
		dec: func(h *Health, v string) (err error) {
			h.LagSeconds, err = parseUint(v, MaxLagSeconds)
			h.LagKnown = true
			return err
		}},
	uintFact("sid", "server_id", "server_id", true, 1<<32-1, func(h *Health) *uint32 { return &h.ServerID }),
	uintFact("src", "source_server_id", "source server_id", false, 1<<32-1, func(h *Health) *uint32 { return &h.SourceServerID }),
	{Key: "gp", Fields: []Field{{"gtid_position", "gtid position", func(h Health) any {
		if !h.Position.Known() {
			return nil
		}
		return h.Position.String()
	}}},
		enc: func(b []byte, h Health) []byte {
			if !h.Position.Known() {
				return b
			}
			return append(append(b, ";gp="...), h.Position.String()...)
		},
		dec: func(h *Health, v string) (err error) {
			h.Position, err = ParsePosition(v)
			return err
		}},
	{Key: "g", Fields: []Field{
		{"galera", "galera", func(h Health) any { return h.Galera }},
		{"galera_synced", "galera synced", func(h Health) any { return h.GaleraSynced }},
	},
		enc: func(b []byte, h Health) []byte {
			if !h.Galera {
				return b
			}
			return appendBool(b, "g", h.GaleraSynced)
		},
		dec: func(h *Health, v string) (err error) {
			h.Galera = true
			h.GaleraSynced, err = parseBool(v)
			return err
		}},
	{Key: "rs", Fields: []Field{{"reason", "reason", func(h Health) any { return h.Reason }}},
		enc: func(b []byte, h Health) []byte {
			if h.Reason == "" {
				return b
			}
			return append(append(b, ";rs="...), h.Reason...)
		},
		dec: func(h *Health, v string) error {
			if err := checkToken(v); err != nil {
				return err
			}
			if v == "" {
				return errors.New("empty reason")
			}
			h.Reason = cleanReason(v)
			return nil
		}},
	{Key: "p", Fields: []Field{{"port", "port", func(h Health) any { return h.Port }}},
		enc: func(b []byte, h Health) []byte {
			if h.Port == 0 {
				return b
			}
			return appendUint(b, "p", uint32(h.Port))
		},
		dec: func(h *Health, v string) error {
			port, err := parseUint(v, 65535)
			h.Port = uint16(port)
			return err
		}},
	uintFact("n", "", "", true, 1<<32-1, func(h *Health) *uint32 { return &h.Seq }),
}

// Facts returns the fact schema (a copy): every field of the health tag in
// the order Encode writes them.
func Facts() []Fact { return slices.Clone(facts) }

// Fact is one field of the health tag (see Facts).
type Fact struct {
	Key      string  // the tag key
	Required bool    // every v1 tag has it
	Fields   []Field // what the API and humans see of it; none for the sequence number
	// enc appends ";key=value" for h to b, or nothing when h leaves an
	// optional fact out; dec stores a value read from the wire in h.
	enc func(b []byte, h Health) []byte
	dec func(h *Health, v string) error
}

// Field is a fact as the API's JSON and humans name it.
type Field struct {
	JSON  string // the field's name in pkg/client's MemberHealth and LocalHealth
	Label string // the name the CLI and the status page show
	// Value is the fact in h: a bool, a number, a string, or nil when h
	// does not know it (lag unknown).
	Value func(h Health) any
}

// Show returns every field of h by its JSON name: the decoded health as the
// API serves it.
func Show(h Health) map[string]any {
	out := make(map[string]any, len(facts)+1)
	for _, f := range facts {
		for _, fl := range f.Fields {
			out[fl.JSON] = fl.Value(h)
		}
	}
	return out
}

// boolFact is a required 0/1 fact.
func boolFact(key, json, label string, p func(*Health) *bool) Fact {
	return Fact{Key: key, Required: true,
		Fields: []Field{{json, label, func(h Health) any { return *p(&h) }}},
		enc:    func(b []byte, h Health) []byte { return appendBool(b, key, *p(&h)) },
		dec: func(h *Health, v string) (err error) {
			*p(h), err = parseBool(v)
			return err
		}}
}

// uintFact is a decimal fact of at most max; an optional one is left out
// when 0. json "" shows it nowhere.
func uintFact(key, json, label string, required bool, max uint64, p func(*Health) *uint32) Fact {
	f := Fact{Key: key, Required: required,
		enc: func(b []byte, h Health) []byte {
			if v := *p(&h); v != 0 || required {
				return appendUint(b, key, v)
			}
			return b
		},
		dec: func(h *Health, v string) (err error) {
			*p(h), err = parseUint(v, max)
			return err
		}}
	if json != "" {
		f.Fields = []Field{{json, label, func(h Health) any { return *p(&h) }}}
	}
	return f
}

// Normalize returns h as Encode publishes it: an unknown state becomes
// Critical, the lag is clamped to MaxLagSeconds and zeroed when unknown,
// GaleraSynced is cleared unless Galera, the position's domains are sorted
// and unique (a domain given twice keeps its highest sequence number), and the reason has every byte outside
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
	h.Position = h.Position.normalize()
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
