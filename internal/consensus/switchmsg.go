package consensus

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/tags"
)

// A switchover (docs/consensus.md, "Switchover") is run by one voter's
// agent, which sends each step to the agent that must take it as the serf
// query SwitchQuery, addressed to that node: record its intent in raft
// (the leader; see SwitchIntent), demote the old writer,
// restore it (when the switchover gives up before the grant), catch the
// target up, grant the new term (the raft leader), promote the target,
// re-point the other servers. Steps are signed with the term key, like
// terms: holding the gossip key is not enough to demote a writer. A step
// names its node, the term it starts from and when it expires, so it
// cannot be replayed elsewhere or later; the agents remember the steps
// they took (by switchover ID and op) and answer a repeat with the first
// answer, so that a lost answer can be asked again.

// Switchover step operations.
const (
	OpDemote  = "demote"  // old writer: read-only, clients killed; answers its GTID position
	OpRestore = "restore" // old writer: writable again (the switchover gave up before the grant)
	OpCatchUp = "catchup" // target: wait until replication applied GTID
	OpGrant   = "grant"   // raft leader: grant term From+1 to Target
	OpPromote = "promote" // target: once it holds term From+1, stop replicating and take writes
	OpRepoint = "repoint" // any other server of the cluster: replicate from the target
	OpBegin   = "begin"   // raft leader: record the switchover's intent (WaitMS: its time budget)
	OpEnd     = "end"     // raft leader: end it (Rollback: rolled back; Outcome: what happened)
	// A failover's own steps, to each candidate (Target: the candidate,
	// Old: the dead writer).
	OpSurvey = "survey" // stop the IO thread, apply what was received (WaitMS), answer Survey
	OpResume = "resume" // start the IO thread again: the failover did not go ahead
	// OpFailover asks the raft leader to fail the cluster over now (shoal
	// failover on another voter): Old holds term From.
	OpFailover = "failover"
)

var switchOps = map[string]bool{OpDemote: true, OpRestore: true, OpCatchUp: true, OpGrant: true, OpPromote: true, OpRepoint: true, OpBegin: true, OpEnd: true,
	OpSurvey: true, OpResume: true, OpFailover: true}

// Limits of a switchover message: it must fit serf's query and response
// size limits (1,024 bytes with the name and serf's own fields).
const (
	MaxSwitchMessage = 800
	// MaxStepLife is the longest a step may live: a step that expires
	// later than this from now (a clock far off, or a forgery's attempt
	// at a long life) is refused.
	MaxStepLife = 5 * time.Minute
	maxGTID     = 300
	maxDetail   = 250
)

// SwitchStep is one step of a switchover.
type SwitchStep struct {
	ID      string    `json:"id"`      // the switchover's ID (16 hex digits)
	Op      string    `json:"op"`      // one of the Op constants
	Node    string    `json:"node"`    // the agent that takes the step
	By      string    `json:"by"`      // the agent that runs the switchover
	Cluster string    `json:"cluster"` // the cluster switched over
	From    uint64    `json:"from"`    // the term the switchover starts from
	Old     string    `json:"old"`     // the writer of term From
	Target  string    `json:"target"`  // the new writer
	Addr    string    `json:"addr"`    // the target's MySQL address
	GTID    string    `json:"gtid,omitempty"`
	WaitMS  int64     `json:"wait_ms,omitempty"` // catchup: how long to wait for GTID
	Expires time.Time `json:"expires"`
	// Group is the raft group of the voter that runs the switchover: an
	// agent takes only its own group's steps.
	Group string `json:"group"`
	// Outcome and Rollback: the end step's (OpEnd).
	Outcome  string `json:"outcome,omitempty"`
	Rollback bool   `json:"rollback,omitempty"`
	// Kind: the begin step's (SwitchIntent.Kind).
	Kind string `json:"kind,omitempty"`
	// Timers: a repoint step's, the new writer's own replication timers
	// as a replica (nil: keep the server's).
	Timers *ReplTimers `json:"timers,omitempty"`
}

// ReplTimers are a replica's connect retry (seconds) and heartbeat period
// (milliseconds); zero: unknown.
type ReplTimers struct {
	ConnectRetry int   `json:"connect_retry,omitempty"`
	HeartbeatMS  int64 `json:"heartbeat_ms,omitempty"`
}

// Check validates a step's fields (not its expiry: CheckFresh).
func (s SwitchStep) Check() error {
	switch {
	case len(s.ID) != 16 || !isHex(s.ID):
		return fmt.Errorf("switchover ID %.40q: want 16 hex digits", s.ID)
	case !switchOps[s.Op]:
		return fmt.Errorf("switchover step %.40q: unknown", s.Op)
	case !tags.ValidCluster(s.Cluster):
		return fmt.Errorf("switchover cluster %.80q: not a valid cluster name", s.Cluster)
	case s.From == 0:
		return fmt.Errorf("switchover of %q: no term to start from", s.Cluster)
	case len(s.Outcome) > maxOutcome:
		return fmt.Errorf("switchover outcome of %d bytes, more than %d", len(s.Outcome), maxOutcome)
	case len(s.GTID) > maxGTID:
		return fmt.Errorf("switchover GTID position of %d bytes, more than %d", len(s.GTID), maxGTID)
	case s.WaitMS < 0 || s.WaitMS > MaxStepLife.Milliseconds():
		return fmt.Errorf("switchover wait %d ms: out of range", s.WaitMS)
	case !tags.ValidGroup(s.Group):
		return fmt.Errorf("switchover raft group %.40q: want %d lowercase hex digits", s.Group, tags.GroupLen)
	case s.Kind != "" && s.Kind != KindFailover:
		return fmt.Errorf("switchover kind %.40q: unknown", s.Kind)
	case s.Timers != nil && (s.Timers.ConnectRetry < 0 || s.Timers.ConnectRetry > maxConnectRetry || s.Timers.HeartbeatMS < 0 || s.Timers.HeartbeatMS > maxHeartbeatMS):
		return fmt.Errorf("switchover replication timers %+v: out of range", *s.Timers)
	}
	for _, n := range []struct{ what, name string }{{"node", s.Node}, {"by", s.By}, {"old writer", s.Old}, {"target", s.Target}} {
		if d := member.CheckName(n.name); d != "" {
			return fmt.Errorf("switchover %s: %s", n.what, d)
		}
	}
	if _, port, err := net.SplitHostPort(s.Addr); err != nil || port == "" || len(s.Addr) > maxName {
		return fmt.Errorf("switchover target address %.80q: want host:port", s.Addr)
	}
	return nil
}

// Bounds of the replication timers a step carries (MySQL's and MariaDB's:
// a connect retry of a day at most here, a heartbeat period of 4294967 s).
const (
	maxConnectRetry = 86400
	maxHeartbeatMS  = 4294967000
)

// maxName bounds a target address in a switchover message.
const maxName = 128

// CheckFresh refuses a step that expired, or that claims to live longer
// than MaxStepLife from now.
func (s SwitchStep) CheckFresh(now time.Time) error {
	switch {
	case !now.Before(s.Expires):
		return fmt.Errorf("switchover step %s of %s expired %s ago", s.Op, s.ID, now.Sub(s.Expires).Round(time.Millisecond))
	case s.Expires.Sub(now) > MaxStepLife:
		return fmt.Errorf("switchover step %s of %s expires in %s, more than %s (clocks apart?)", s.Op, s.ID, s.Expires.Sub(now).Round(time.Second), MaxStepLife)
	}
	return nil
}

// SwitchAnswer is a node's answer to a step.
type SwitchAnswer struct {
	ID     string `json:"id"`
	Op     string `json:"op"`
	Node   string `json:"node"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	GTID   string `json:"gtid,omitempty"`   // demote: the old writer's position
	Killed int    `json:"killed,omitempty"` // demote: client connections killed
	Term   uint64 `json:"term,omitempty"`   // grant: the term granted
	Detail string `json:"detail,omitempty"`
	// Timers: a promote step's, the target's replication timers before
	// its replication was reset.
	Timers *ReplTimers `json:"timers,omitempty"`
	// Survey: a survey step's (GTID: the candidate's gtid_current_pos once
	// it applied what it received; Detail: its SQL thread's error).
	Survey *SurveyAnswer `json:"survey,omitempty"`
	// Retry: the step may succeed if sent again soon (busy, not the
	// leader, the gossip not caught up yet).
	Retry bool `json:"retry,omitempty"`
	// Signed is set by DecodeSwitchAnswer: the answer verified with a term
	// key. Never sent.
	Signed bool `json:"-"`
}

// SurveyAnswer is what a failover candidate reports besides its position.
type SurveyAnswer struct {
	ServerID   uint32 `json:"server_id"`
	Replica    bool   `json:"replica"`
	SQLRunning bool   `json:"sql_running"`
	// Drained: the SQL thread applied everything the IO thread received.
	Drained bool `json:"drained"`
	// Received: what its IO thread had received (Gtid_IO_Pos).
	Received string `json:"received,omitempty"`
	// Own: the GTIDs of gtid_binlog_pos that carry the candidate's own
	// server_id (written on it, not replicated to it).
	Own string `json:"own,omitempty"`
	// Promotion is the candidate's promotion rule (consensus.promotion):
	// "" (normal), "prefer" or "never".
	Promotion string `json:"promotion,omitempty"`
}

// Wire format: one byte, 1 for a signed message (JSON, then the ed25519
// signature of its domain and the JSON) or 2 for an unsigned answer (a
// node without the consensus key re-points, but cannot sign).
const (
	switchSigned   = 1
	switchUnsigned = 2
	stepDomain     = "shoal switchover step v1\x00"
	answerDomain   = "shoal switchover answer v1\x00"
)

// EncodeSwitchStep signs a step with the keyring's primary term key.
func EncodeSwitchStep(kr *Keyring, s SwitchStep) ([]byte, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	return encodeSwitch(kr, stepDomain, s)
}

// DecodeSwitchStep verifies a signed step and validates it. It trusts no
// byte before the signature verifies.
func DecodeSwitchStep(b []byte, pubs []ed25519.PublicKey) (SwitchStep, error) {
	var s SwitchStep
	signed, err := decodeSwitch(b, pubs, stepDomain, &s)
	if err != nil {
		return SwitchStep{}, err
	}
	if !signed {
		return SwitchStep{}, fmt.Errorf("%w: an unsigned switchover step", ErrTermSignature)
	}
	if err := s.Check(); err != nil {
		return SwitchStep{}, fmt.Errorf("%w: %w", ErrTermMalformed, err)
	}
	return s, nil
}

// EncodeSwitchAnswer encodes an answer, signed when kr is not nil. Error
// and Detail are shortened to fit.
func EncodeSwitchAnswer(kr *Keyring, a SwitchAnswer) ([]byte, error) {
	a.Error, a.Detail = shortenTo(a.Error, maxDetail), shortenTo(a.Detail, maxDetail)
	if len(a.GTID) > maxGTID {
		return nil, fmt.Errorf("switchover answer: GTID position of %d bytes, more than %d", len(a.GTID), maxGTID)
	}
	if a.Survey != nil && (len(a.Survey.Own) > maxGTID || len(a.Survey.Received) > maxGTID) {
		return nil, fmt.Errorf("switchover answer: survey positions of %d and %d bytes, more than %d", len(a.Survey.Own), len(a.Survey.Received), maxGTID)
	}
	if kr == nil {
		msg, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		if len(msg)+1 > MaxSwitchMessage {
			return nil, fmt.Errorf("switchover answer of %d bytes, more than %d", len(msg)+1, MaxSwitchMessage)
		}
		return append([]byte{switchUnsigned}, msg...), nil
	}
	return encodeSwitch(kr, answerDomain, a)
}

// DecodeSwitchAnswer decodes an answer, verified when signed (Signed).
func DecodeSwitchAnswer(b []byte, pubs []ed25519.PublicKey) (SwitchAnswer, error) {
	var a SwitchAnswer
	signed, err := decodeSwitch(b, pubs, answerDomain, &a)
	if err != nil {
		return SwitchAnswer{}, err
	}
	a.Signed = signed
	if len(a.GTID) > maxGTID || len(a.Error) > 2*maxDetail || len(a.Detail) > 2*maxDetail || a.Killed < 0 {
		return SwitchAnswer{}, fmt.Errorf("%w: switchover answer out of bounds", ErrTermMalformed)
	}
	if d := member.CheckName(a.Node); d != "" {
		return SwitchAnswer{}, fmt.Errorf("%w: switchover answer: node %s", ErrTermMalformed, d)
	}
	return a, nil
}

func encodeSwitch(kr *Keyring, domain string, v any) ([]byte, error) {
	msg, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if n := 1 + len(msg) + ed25519.SignatureSize; n > MaxSwitchMessage {
		return nil, fmt.Errorf("switchover message of %d bytes, more than %d", n, MaxSwitchMessage)
	}
	out := append([]byte{switchSigned}, msg...)
	return append(out, kr.SignTerm(append([]byte(domain), msg...))...), nil
}

// decodeSwitch decodes b into v: a signed message must verify with pubs;
// an unsigned one is decoded as it is (signed false).
func decodeSwitch(b []byte, pubs []ed25519.PublicKey, domain string, v any) (signed bool, err error) {
	if len(b) < 3 || len(b) > MaxSwitchMessage {
		return false, fmt.Errorf("%w: switchover message of %d bytes", ErrTermMalformed, len(b))
	}
	var msg []byte
	switch b[0] {
	case switchSigned:
		if len(b) < 1+2+ed25519.SignatureSize {
			return false, fmt.Errorf("%w: switchover message of %d bytes", ErrTermMalformed, len(b))
		}
		var sig []byte
		msg, sig = b[1:len(b)-ed25519.SignatureSize], b[len(b)-ed25519.SignatureSize:]
		if !VerifyTerm(pubs, append([]byte(domain), msg...), sig) {
			return false, ErrTermSignature
		}
		signed = true
	case switchUnsigned:
		msg = b[1:]
	default:
		return false, fmt.Errorf("%w: switchover message version %d", ErrTermMalformed, b[0])
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false, fmt.Errorf("%w: %w", ErrTermMalformed, err)
	}
	return signed, nil
}

func shortenTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return shorten(s, n-len("…"))
}

func isHex(s string) bool {
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
