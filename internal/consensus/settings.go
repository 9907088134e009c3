package consensus

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/setting"
	"github.com/shoaldb/shoal/internal/tags"
)

// Defaults and limits of the consensus settings.
const (
	// DefaultPort is the raft port when consensus.bind gives none.
	DefaultPort = 7950
	// DataDirName is the default data directory's name, next to the
	// keyring file.
	DataDirName = "raft"

	DefaultBootstrapExpect = 3
	MinBootstrapExpect     = 1
	MaxBootstrapExpect     = 9

	DefaultHeartbeatTimeout   = time.Second
	DefaultElectionTimeout    = time.Second
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
	// MinTimeout and MaxTimeout bound heartbeat_timeout and
	// election_timeout.
	MinTimeout = 100 * time.Millisecond
	MaxTimeout = time.Minute
	// MinLeaderLeaseTimeout bounds leader_lease_timeout from below; it is
	// at most heartbeat_timeout.
	MinLeaderLeaseTimeout = 50 * time.Millisecond

	// DefaultFenceAfter is how long a conflict must last before a db agent
	// fences its own server (fence_after); MinFenceAfter and MaxFenceAfter
	// bound it.
	DefaultFenceAfter = 3 * time.Second

	// DefaultFailoverLimit is failover_limit's default; MaxFailoverLimit
	// its bound.
	DefaultFailoverLimit = 3
	MaxFailoverLimit     = 1000
	MinFenceAfter        = time.Second
	MaxFenceAfter        = time.Minute
)

// Settings are the consensus settings as a user gives them: the agent's
// consensus section, with its yaml keys. Consensus is on exactly when Key
// or KeyringFile is given (Enabled). Defaults that depend on the rest of
// the agent's configuration (voter, bind, advertise, data_dir) are left
// empty here and resolved by the methods that take a Host.
type Settings struct {
	// Key is a base64 KeySize-byte key; with KeyringFile, the key the file
	// is created from at the first start. A secret: never shown.
	Key string `yaml:"key"`
	// KeyringFile holds the consensus keys (a JSON array of base64 keys,
	// primary first, mode 0600 like the gossip keyring file).
	KeyringFile string `yaml:"keyring_file"`
	// Voter: nil means the default, a voter on a db agent when consensus
	// is on (IsVoter). true on an app agent makes it a witness voter.
	Voter *bool `yaml:"voter"`
	// Bind is the raft listen address ip:port; empty means the gossip bind
	// IP with DefaultPort (BindAddr).
	Bind string `yaml:"bind"`
	// Advertise is the raft address ip:port given to the other voters;
	// empty means the bind IP when bind gives one, else the gossip
	// advertise IP, else the gossip bind IP, with the bind port
	// (AdvertiseAddr).
	Advertise string `yaml:"advertise"`
	// DataDir holds the raft log, stable store and snapshots; empty means
	// DataDirName next to KeyringFile (DataDirPath).
	DataDir string `yaml:"data_dir"`
	// BootstrapExpect is the number of voters that must be seen before the
	// first quorum forms; every voter should be given the same.
	BootstrapExpect int `yaml:"bootstrap_expect"`
	// TermKey lists the public keys that writer terms are verified with
	// (base64, comma-separated; `shoal term-key` prints them). An agent
	// without the consensus key, an app agent, needs it to route writes in
	// a cluster whose db agents vote; the consensus key gives it too.
	TermKey            string        `yaml:"term_key"`
	HeartbeatTimeout   time.Duration `yaml:"heartbeat_timeout"`
	ElectionTimeout    time.Duration `yaml:"election_timeout"`
	LeaderLeaseTimeout time.Duration `yaml:"leader_lease_timeout"`
	// Fence: a db agent sets its own server read-only and kills its client
	// connections when the server is writable while another node holds the
	// writer term (docs/consensus.md, "Fencing"). nil means the default,
	// on (FenceEnabled).
	Fence *bool `yaml:"fence"`
	// FenceAfter is how long the conflict must last, continuously, before
	// the agent fences: an operator promoting in the wrong order (the new
	// server writable first, the old one read-only a moment later) is not
	// fought.
	FenceAfter time.Duration `yaml:"fence_after"`
	// Disabled says, on a db agent, that it runs without writer terms on
	// purpose (a Galera cluster, a single server, a fleet not ready yet):
	// it then does not warn at start that its cluster's writes follow the
	// old rule. It does not turn consensus off: without a key or keyring
	// file it is off; with either, Disabled is refused.
	Disabled bool `yaml:"disabled"`
	// Lease is how long a voter that holds a writer term may go without
	// contact with a raft leader (or, leading, with a quorum) before it
	// fences its own server; 0 means the default (LeaseDuration).
	Lease time.Duration `yaml:"lease"`
	// Failover: the raft leader replaces a dead writer by itself
	// (docs/consensus.md, "Failover"): it confirms the death from more
	// than one witness, picks the most advanced replica, and grants it
	// the next term. Off by default in this release.
	Failover bool `yaml:"failover"`
	// FailoverLimit bounds the failovers of one cluster that a leader
	// starts in an hour (a fleet that flaps is not failed over for ever);
	// a count, not a block window.
	FailoverLimit int `yaml:"failover_limit"`
	// Promotion is this server's promotion rule for a failover: "" or
	// PromoteNormal, PromotePrefer (picked first among the most advanced),
	// PromoteNever (never promoted; a failover whose most advanced replica
	// says never promotes nobody rather than lose its transactions).
	Promotion string `yaml:"promotion"`
}

// Promotion rules (consensus.promotion).
const (
	PromoteNormal = "normal"
	PromotePrefer = "prefer"
	PromoteNever  = "never"
)

// LeaseDuration is the writer's lease: lease when given, else 2 ×
// heartbeat_timeout + 3 × election_timeout (5s with the defaults). A raft
// follower waits up to twice the heartbeat timeout before it calls an
// election, a vote takes up to twice the election timeout, and a split
// vote one round more: a shorter lease fences a healthy writer when the
// raft leader dies (measured: 2 × the election timeout fenced it in the
// first of three elections, and an election took 2.99 s under load).
func (s Settings) LeaseDuration() time.Duration {
	if s.Lease > 0 {
		return s.Lease
	}
	return 2*s.HeartbeatTimeout + 3*s.ElectionTimeout
}

// DefaultSettings returns the settings the agent starts from: consensus
// off.
func DefaultSettings() Settings {
	return Settings{BootstrapExpect: DefaultBootstrapExpect, HeartbeatTimeout: DefaultHeartbeatTimeout,
		ElectionTimeout: DefaultElectionTimeout, LeaderLeaseTimeout: DefaultLeaderLeaseTimeout,
		FenceAfter: DefaultFenceAfter, FailoverLimit: DefaultFailoverLimit}
}

// FenceEnabled reports whether fencing is on: consensus is on and fence is
// not false.
func (s Settings) FenceEnabled() bool {
	return s.Enabled() && (s.Fence == nil || *s.Fence)
}

// Host is what the rest of an agent's configuration tells the consensus
// settings: its role and its gossip addresses (ip:port). The agent may set
// GossipAdvertise to the address gossip really advertises, which it knows
// once gossip runs, when the configured one is empty or unspecified.
type Host struct {
	Role            string // tags.RoleDB or tags.RoleApp
	GossipBind      string
	GossipAdvertise string // "" when none is configured
}

// Enabled reports whether consensus is on: a key or a keyring file is
// given.
func (s Settings) Enabled() bool { return s.Key != "" || s.KeyringFile != "" }

// IsVoter reports whether an agent of role votes: voter when given, else
// true on a db agent with consensus on.
func (s Settings) IsVoter(role string) bool {
	if s.Voter != nil {
		return *s.Voter
	}
	return s.Enabled() && role == tags.RoleDB
}

// BindAddr is the raft listen address: bind, else the gossip bind IP with
// DefaultPort.
func (s Settings) BindAddr(h Host) string {
	if s.Bind != "" {
		return s.Bind
	}
	return net.JoinHostPort(hostOf(h.GossipBind), strconv.Itoa(DefaultPort))
}

// AdvertiseAddr is the raft address given to the other voters, with the
// port of BindAddr: advertise when given; else the IP of bind when it is
// one IP (raft listens on no other); else the gossip advertise IP, else
// the gossip bind IP. The IP is unspecified (0.0.0.0) when everything
// binds every interface and nothing is advertised: the agent then
// substitutes the IP gossip advertises (Host.GossipAdvertise).
func (s Settings) AdvertiseAddr(h Host) string {
	if s.Advertise != "" {
		return s.Advertise
	}
	bindIP, port, err := net.SplitHostPort(s.BindAddr(h))
	if err != nil {
		bindIP, port = "", strconv.Itoa(DefaultPort)
	}
	ip := hostOf(h.GossipAdvertise)
	if b := net.ParseIP(bindIP); s.Bind != "" && b != nil && !b.IsUnspecified() || ip == "" {
		ip = bindIP
	}
	return net.JoinHostPort(ip, port)
}

// DataDirPath is the raft data directory: data_dir, else DataDirName next
// to the keyring file; "" when neither is given (no voter runs so).
func (s Settings) DataDirPath() string {
	switch {
	case s.DataDir != "":
		return s.DataDir
	case s.KeyringFile != "":
		return filepath.Join(filepath.Dir(s.KeyringFile), DataDirName)
	}
	return ""
}

// hostOf is the host of an ip[:port] address ("" when there is none).
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	if ip := net.ParseIP(addr); ip != nil {
		return ip.String()
	}
	return ""
}

// CheckKey checks a base64 consensus key of KeySize bytes.
func CheckKey(value string) error {
	b, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		return fmt.Errorf("not valid base64: %w", err)
	}
	if len(b) != KeySize {
		return fmt.Errorf("key is %d bytes; must be %d bytes (use shoal keygen)", len(b), KeySize)
	}
	return nil
}

// shortDur formats whole minutes as a user writes them: "1m", not "1m0s".
func shortDur(d time.Duration) string { return strings.TrimSuffix(d.String(), "0s") }

// redact shows only the first characters of a secret.
func redact(s string) string {
	if len(s) <= 4 {
		return s
	}
	return s[:4] + "..."
}

// Check checks the settings as given, without the rest of the agent's
// configuration: every problem is a *setting.Error naming the setting's
// key. CheckHost checks what depends on the rest.
func (s Settings) Check() error {
	var errs setting.Errors
	if s.Key != "" {
		if err := CheckKey(s.Key); err != nil {
			errs.Addf("key", redact(s.Key), "%v", err)
		}
	}
	if s.Disabled && s.Enabled() {
		errs.Addf("disabled", true, "consensus is on (key or keyring_file is given): drop disabled, or the key and the keyring file")
	}
	if s.Voter != nil && *s.Voter && !s.Enabled() {
		errs.Addf("voter", true, "a voter needs the consensus key: give keyring_file (created from key at the first start), or key")
	}
	if s.Bind != "" {
		errs.Add("bind", s.Bind, checkAddr(s.Bind, true))
	}
	if s.Advertise != "" {
		errs.Add("advertise", s.Advertise, checkAddr(s.Advertise, false))
	}
	if s.BootstrapExpect < MinBootstrapExpect || s.BootstrapExpect > MaxBootstrapExpect {
		errs.Addf("bootstrap_expect", s.BootstrapExpect, "must be from %d to %d", MinBootstrapExpect, MaxBootstrapExpect)
	}
	if _, err := s.TermPublicKeys(); err != nil {
		errs.Addf("term_key", s.TermKey, "%v", err)
	}
	s.checkTimeouts(&errs)
	if s.FailoverLimit < 1 || s.FailoverLimit > MaxFailoverLimit {
		errs.Addf("failover_limit", s.FailoverLimit, "must be from 1 to %d (failovers of one cluster per hour)", MaxFailoverLimit)
	}
	switch s.Promotion {
	case "", PromoteNormal, PromotePrefer, PromoteNever:
	default:
		errs.Addf("promotion", s.Promotion, "must be %s, %s or %s", PromoteNormal, PromotePrefer, PromoteNever)
	}
	if s.FenceAfter < MinFenceAfter || s.FenceAfter > MaxFenceAfter {
		errs.Addf("fence_after", s.FenceAfter, "must be from %s to %s", shortDur(MinFenceAfter), shortDur(MaxFenceAfter))
	}
	switch {
	case s.Lease < 0 || s.Lease > MaxTimeout:
		errs.Addf("lease", s.Lease, "must be at most %s (0: the default, 2 x heartbeat_timeout + 3 x election_timeout)", shortDur(MaxTimeout))
	case s.Lease > 0 && s.Lease < 2*s.HeartbeatTimeout:
		errs.Addf("lease", s.Lease, "must be at least twice heartbeat_timeout (%s): a follower waits up to that long before it calls an election, so any change of raft leader would fence the writer", 2*s.HeartbeatTimeout)
	}
	return errs.Err()
}

// TermPublicKeys parses term_key: none when it is empty.
func (s Settings) TermPublicKeys() ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for i, f := range strings.Split(s.TermKey, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		pub, err := ParsePublicKey(f)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		out = append(out, pub)
	}
	return out, nil
}

// checkTimeouts checks the raft timeouts, and their order as raft wants
// it: leader_lease_timeout ≤ heartbeat_timeout ≤ election_timeout.
func (s Settings) checkTimeouts(errs *setting.Errors) {
	hb := s.HeartbeatTimeout >= MinTimeout && s.HeartbeatTimeout <= MaxTimeout
	if !hb {
		errs.Addf("heartbeat_timeout", s.HeartbeatTimeout, "must be from %s to %s", MinTimeout, shortDur(MaxTimeout))
	}
	if s.ElectionTimeout < MinTimeout || s.ElectionTimeout > MaxTimeout {
		errs.Addf("election_timeout", s.ElectionTimeout, "must be from %s to %s", MinTimeout, shortDur(MaxTimeout))
	} else if hb && s.ElectionTimeout < s.HeartbeatTimeout {
		errs.Addf("election_timeout", s.ElectionTimeout, "must be at least heartbeat_timeout (%s)", s.HeartbeatTimeout)
	}
	switch {
	case s.LeaderLeaseTimeout < MinLeaderLeaseTimeout:
		errs.Addf("leader_lease_timeout", s.LeaderLeaseTimeout, "must be at least %s", MinLeaderLeaseTimeout)
	case hb && s.LeaderLeaseTimeout > s.HeartbeatTimeout:
		errs.Addf("leader_lease_timeout", s.LeaderLeaseTimeout, "must be at most heartbeat_timeout (%s)", s.HeartbeatTimeout)
	}
}

// checkAddr checks an ip:port address with a port from 1 to 65535; an
// unspecified IP (0.0.0.0, ::) only when listen.
func checkAddr(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want ip:port (%w)", err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("host %q must be an IP address", host)
	}
	if !listen && ip.IsUnspecified() {
		return fmt.Errorf("must be a reachable address, not %s", host)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port must be a number from 1 to 65535")
	}
	return nil
}

// CheckHost checks what depends on the rest of the agent's configuration:
// a voter keeps its key in a keyring file (its raft identity and data must
// outlive a restart), and raft does not listen on the gossip port of the
// same IP. Like Check, every problem is a *setting.Error.
func (s Settings) CheckHost(h Host) error {
	var errs setting.Errors
	if !s.Enabled() {
		return nil
	}
	if s.IsVoter(h.Role) && s.KeyringFile == "" {
		errs.Addf("keyring_file", "", "a voter keeps the consensus key in a keyring file, created from key at the first start, "+
			"and its raft data next to it (%s) unless data_dir is given: give keyring_file", DataDirName)
	}
	if clash(s.BindAddr(h), h.GossipBind) {
		key, value := "bind", s.Bind
		if s.Bind == "" {
			value = s.BindAddr(h)
		}
		errs.Addf(key, value, "is the gossip bind address (%s): give raft another port (default %d)", h.GossipBind, DefaultPort)
	}
	return errs.Err()
}

// clash reports whether two ip:port listen addresses take the same port on
// a shared IP (an unspecified IP is every IP).
func clash(a, b string) bool {
	ha, pa, erra := net.SplitHostPort(a)
	hb, pb, errb := net.SplitHostPort(b)
	if erra != nil || errb != nil || pa != pb {
		return false
	}
	ia, ib := net.ParseIP(ha), net.ParseIP(hb)
	every := func(ip net.IP, h string) bool { return h == "" || ip != nil && ip.IsUnspecified() }
	return every(ia, ha) || every(ib, hb) || ia != nil && ia.Equal(ib)
}
