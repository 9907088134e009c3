package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/setting"
)

// option describes one setting that can come from a flag and an environment
// variable. The config file is decoded into Config directly.
type option struct {
	key   string // config key, e.g. "http_addr" or "gossip.probe_interval"
	flag  string // flag name without dashes
	env   string // environment variable, "" for none
	usage string
	list  bool // repeatable flag / comma-separated env
	bool  bool // a flag that takes no value (--x means --x=true)
	set   func(c *Config, raw []string) error
	// typ is the value's type shown by --help: string, duration, int or
	// bool; def formats the default from Default() ("" shows none).
	typ string
	def func(c *Config) string
}

func strOpt(key, flag, env, usage string, f func(*Config) *string) option {
	return option{key: key, flag: flag, env: env, usage: usage, typ: "string", def: func(c *Config) string { return *f(c) },
		set: func(c *Config, raw []string) error {
			*f(c) = raw[len(raw)-1]
			return nil
		}}
}

// noDefault hides the default of an option whose usage says it: the host
// name of the machine that runs --help is not a default to print.
func noDefault(o option) option {
	o.def = nil
	return o
}

func durOpt(key, flag, env, usage string, f func(*Config) *time.Duration) option {
	return option{key: key, flag: flag, env: env, usage: usage, typ: "duration", def: func(c *Config) string {
		if *f(c) == 0 {
			return "" // 0 means "not set": the usage says what applies
		}
		return f(c).String()
	}, set: func(c *Config, raw []string) error {
		d, err := time.ParseDuration(raw[len(raw)-1])
		if err != nil {
			return fieldErr(key, raw[len(raw)-1], "not a duration (e.g. 500ms, 2s)")
		}
		*f(c) = d
		return nil
	}}
}

func intOpt(key, flag, env, usage string, f func(*Config) *int) option {
	return option{key: key, flag: flag, env: env, usage: usage, typ: "int", def: func(c *Config) string { return strconv.Itoa(*f(c)) }, set: func(c *Config, raw []string) error {
		n, err := strconv.Atoi(raw[len(raw)-1])
		if err != nil {
			return fieldErr(key, raw[len(raw)-1], "not an integer")
		}
		*f(c) = n
		return nil
	}}
}

// optBoolOpt is a boolean whose default depends on other settings: nil
// until given.
func optBoolOpt(key, flag, env, usage string, f func(*Config) **bool) option {
	return option{key: key, flag: flag, env: env, usage: usage, bool: true, typ: "bool", set: func(c *Config, raw []string) error {
		b, err := strconv.ParseBool(raw[len(raw)-1])
		if err != nil {
			return fieldErr(key, raw[len(raw)-1], "not a boolean (true or false)")
		}
		*f(c) = &b
		return nil
	}}
}

func boolOpt(key, flag, env, usage string, f func(*Config) *bool) option {
	return option{key: key, flag: flag, env: env, usage: usage, bool: true, typ: "bool", def: func(c *Config) string { return strconv.FormatBool(*f(c)) }, set: func(c *Config, raw []string) error {
		b, err := strconv.ParseBool(raw[len(raw)-1])
		if err != nil {
			return fieldErr(key, raw[len(raw)-1], "not a boolean (true or false)")
		}
		*f(c) = b
		return nil
	}}
}

var options = []option{
	noDefault(strOpt("node", "node", "SHOAL_NODE", "node name, unique in the cluster (default: this host's name; with --dev, HOSTNAME-PORT)", func(c *Config) *string { return &c.Node })),
	strOpt("bind", "bind", "SHOAL_BIND", "gossip bind address ip:port (TCP and UDP)", func(c *Config) *string { return &c.Bind }),
	strOpt("advertise", "advertise", "SHOAL_ADVERTISE", "gossip address ip:port advertised to peers (default: the bind address)", func(c *Config) *string { return &c.Advertise }),
	{key: "join", flag: "join", env: "SHOAL_JOIN", list: true, usage: "address of a member to join at start, host or host:port (no port: this agent's bind port, as in serf), retried with backoff until one answers (repeatable)",
		set: func(c *Config, raw []string) error { c.Join = splitList(raw); return nil }},
	{key: "join", flag: "retry-join", list: true, usage: "alias of --join (serf and consul spelling)",
		set: func(c *Config, raw []string) error { c.Join = append(c.Join, splitList(raw)...); return nil }},
	durOpt("retry_interval", "retry-interval", "SHOAL_RETRY_INTERVAL", "first wait between join attempts; doubles up to --retry-max-wait", func(c *Config) *time.Duration { return &c.RetryInterval }),
	durOpt("retry_max_wait", "retry-max-wait", "SHOAL_RETRY_MAX_WAIT", "longest wait between join attempts", func(c *Config) *time.Duration { return &c.RetryMaxWait }),
	intOpt("retry_max", "retry-max", "SHOAL_RETRY_MAX", "join attempts before the agent gives up and exits (0 = never give up)", func(c *Config) *int { return &c.RetryMax }),
	boolOpt("rejoin", "rejoin", "SHOAL_REJOIN", "after a graceful leave, rejoin the snapshot's peers on restart", func(c *Config) *bool { return &c.Rejoin }),
	strOpt("snapshot", "snapshot", "SHOAL_SNAPSHOT", "snapshot file: a restarted agent rejoins its old peers by itself", func(c *Config) *string { return &c.Snapshot }),
	{key: "tags", flag: "tag", list: true, usage: "tag key=value (repeatable; merged over the file's tags)",
		set: func(c *Config, raw []string) error {
			if c.Tags == nil {
				c.Tags = map[string]string{}
			}
			for _, r := range raw {
				k, v, err := ParseTag(r)
				if err != nil {
					return fieldErr("tags", r, "%v", err)
				}
				c.Tags[k] = v
			}
			return nil
		}},
	strOpt("tags_file", "tags-file", "SHOAL_TAGS_FILE", "file that persists tags changed at runtime", func(c *Config) *string { return &c.TagsFile }),
	strOpt("encrypt", "encrypt", "SHOAL_ENCRYPT", "base64 gossip encryption key (shoal keygen)", func(c *Config) *string { return &c.Encrypt }),
	strOpt("keyring_file", "keyring-file", "SHOAL_KEYRING_FILE", "keyring file; created from --encrypt if missing, updated by key rotation", func(c *Config) *string { return &c.KeyringFile }),
	strOpt("consensus.key", "consensus-key", "SHOAL_CONSENSUS_KEY", "base64 32-byte consensus key (shoal keygen), separate from the gossip key; creates --consensus-keyring-file if missing. With it or --consensus-keyring-file, consensus is on", func(c *Config) *string { return &c.Consensus.Key }),
	strOpt("consensus.keyring_file", "consensus-keyring-file", "SHOAL_CONSENSUS_KEYRING_FILE", "consensus keyring file (mode 0600); created from --consensus-key if missing", func(c *Config) *string { return &c.Consensus.KeyringFile }),
	optBoolOpt("consensus.voter", "consensus-voter", "SHOAL_CONSENSUS_VOTER", "vote in consensus (default: true on a db agent with consensus on; true on an app agent makes it a witness)", func(c *Config) **bool { return &c.Consensus.Voter }),
	intOpt("consensus.failover_limit", "consensus-failover-limit", "SHOAL_CONSENSUS_FAILOVER_LIMIT", "failovers of one cluster a raft leader starts in an hour (1 to 1000)", func(c *Config) *int { return &c.Consensus.FailoverLimit }),
	strOpt("consensus.promotion", "consensus-promotion", "SHOAL_CONSENSUS_PROMOTION", "this server's promotion rule in a failover: normal, prefer (picked first among the most advanced replicas) or never (never promoted)", func(c *Config) *string { return &c.Consensus.Promotion }),
	boolOpt("consensus.failover", "consensus-failover", "SHOAL_CONSENSUS_FAILOVER", "the raft leader replaces a dead writer by itself: confirmed dead by more than one witness, the most advanced replica gets the next term (docs/consensus.md, Failover)", func(c *Config) *bool { return &c.Consensus.Failover }),
	boolOpt("consensus.disabled", "consensus-disabled", "SHOAL_CONSENSUS_DISABLED", "a db agent without writer terms on purpose: no warning at start that its cluster's writes follow the old rule (any single writable server); refused with a consensus key", func(c *Config) *bool { return &c.Consensus.Disabled }),
	strOpt("consensus.bind", "consensus-bind", "SHOAL_CONSENSUS_BIND", "consensus (raft) listen address ip:port (default: the gossip bind IP, port 7950)", func(c *Config) *string { return &c.Consensus.Bind }),
	strOpt("consensus.advertise", "consensus-advertise", "SHOAL_CONSENSUS_ADVERTISE", "consensus address ip:port given to the other voters (default: the consensus bind IP, else the gossip advertise IP, else the gossip bind IP; the consensus bind port)", func(c *Config) *string { return &c.Consensus.Advertise }),
	strOpt("consensus.data_dir", "consensus-data-dir", "SHOAL_CONSENSUS_DATA_DIR", "raft log, stable store and snapshots (default: raft next to the consensus keyring file)", func(c *Config) *string { return &c.Consensus.DataDir }),
	intOpt("consensus.bootstrap_expect", "consensus-bootstrap-expect", "SHOAL_CONSENSUS_BOOTSTRAP_EXPECT", "voters that must be seen before the first quorum forms (1 to 9; give every voter the same)", func(c *Config) *int { return &c.Consensus.BootstrapExpect }),
	strOpt("consensus.term_key", "consensus-term-key", "SHOAL_CONSENSUS_TERM_KEY", "public key(s) that writer terms are verified with, base64, comma-separated (shoal term-key prints them); app agents without the consensus key need it to route writes", func(c *Config) *string { return &c.Consensus.TermKey }),
	durOpt("consensus.heartbeat_timeout", "consensus-heartbeat-timeout", "", "raft heartbeat timeout", func(c *Config) *time.Duration { return &c.Consensus.HeartbeatTimeout }),
	durOpt("consensus.election_timeout", "consensus-election-timeout", "", "raft election timeout (at least the heartbeat timeout)", func(c *Config) *time.Duration { return &c.Consensus.ElectionTimeout }),
	durOpt("consensus.leader_lease_timeout", "consensus-leader-lease-timeout", "", "raft leader lease timeout (at most the heartbeat timeout)", func(c *Config) *time.Duration { return &c.Consensus.LeaderLeaseTimeout }),
	optBoolOpt("consensus.fence", "consensus-fence", "SHOAL_CONSENSUS_FENCE", "fence: a db agent sets its own server read-only and kills its client connections when the server is writable while another node holds the writer term (default: true when consensus is on)", func(c *Config) **bool { return &c.Consensus.Fence }),
	durOpt("consensus.fence_after", "consensus-fence-after", "", "how long such a conflict must last before the agent fences (1s to 1m)", func(c *Config) *time.Duration { return &c.Consensus.FenceAfter }),
	durOpt("consensus.lease", "consensus-lease", "", "the writer's lease: a voter holding a writer term fences its own server after this long without contact with a raft leader (default: 2 x heartbeat timeout + 3 x election timeout; at least 2 x heartbeat timeout)", func(c *Config) *time.Duration { return &c.Consensus.Lease }),
	boolOpt("insecure_no_encryption", "insecure-no-encryption", "SHOAL_INSECURE_NO_ENCRYPTION", "run gossip unencrypted (not for production)", func(c *Config) *bool { return &c.InsecureNoEncryption }),
	strOpt("profile", "profile", "SHOAL_PROFILE", "timing profile: "+strings.Join(gossip.ProfileNames(), ", "), func(c *Config) *string { return &c.Profile }),
	durOpt("gossip.probe_interval", "probe-interval", "", "override: failure detector probe interval", func(c *Config) *time.Duration { return &c.Gossip.ProbeInterval }),
	durOpt("gossip.probe_timeout", "probe-timeout", "", "override: failure detector probe timeout", func(c *Config) *time.Duration { return &c.Gossip.ProbeTimeout }),
	intOpt("gossip.suspicion_mult", "suspicion-mult", "", "override: suspicion timeout multiplier", func(c *Config) *int { return &c.Gossip.SuspicionMult }),
	intOpt("gossip.suspicion_max_timeout_mult", "suspicion-max-timeout-mult", "", "override: suspicion max timeout multiplier", func(c *Config) *int { return &c.Gossip.SuspicionMaxTimeoutMult }),
	durOpt("gossip.gossip_interval", "gossip-interval", "", "override: gossip interval", func(c *Config) *time.Duration { return &c.Gossip.GossipInterval }),
	intOpt("gossip.gossip_nodes", "gossip-nodes", "", "override: peers gossiped to per interval", func(c *Config) *int { return &c.Gossip.GossipNodes }),
	intOpt("gossip.retransmit_mult", "retransmit-mult", "", "override: retransmit multiplier", func(c *Config) *int { return &c.Gossip.RetransmitMult }),
	intOpt("gossip.indirect_checks", "indirect-checks", "", "override: indirect probes per failed direct probe", func(c *Config) *int { return &c.Gossip.IndirectChecks }),
	durOpt("gossip.push_pull_interval", "push-pull-interval", "", "override: full state sync interval", func(c *Config) *time.Duration { return &c.Gossip.PushPullInterval }),
	durOpt("gossip.reconnect_interval", "reconnect-interval", "", "override: how often to try failed members again", func(c *Config) *time.Duration { return &c.Gossip.ReconnectInterval }),
	durOpt("gossip.reconnect_timeout", "reconnect-timeout", "", "override: how long failed members are kept before being reaped", func(c *Config) *time.Duration { return &c.Gossip.ReconnectTimeout }),
	strOpt("gossip.positions", "positions", "SHOAL_POSITIONS", "how GTID positions travel: stream (packets of their own; the default) or tags (the health tag at every change, for a cluster still running a release without the stream)", func(c *Config) *string { return &c.Gossip.Positions }),
	boolOpt("gossip.confirm_failures", "confirm-failures", "", "act on a member-failed only once direct pings to the member go unanswered", func(c *Config) *bool { return &c.Gossip.ConfirmFailures }),
	durOpt("gossip.dead_node_reclaim_time", "dead-node-reclaim-time", "", "after this long, a dead member's name may rejoin from another address", func(c *Config) *time.Duration { return &c.Gossip.DeadNodeReclaimTime }),
	durOpt("gossip.tombstone_timeout", "tombstone-timeout", "", "override: how long left members are kept", func(c *Config) *time.Duration { return &c.Gossip.TombstoneTimeout }),
	strOpt("http_addr", "http-addr", "SHOAL_HTTP_ADDR", "HTTP API listen address (empty disables)", func(c *Config) *string { return &c.HTTPAddr }),
	strOpt("rpc_addr", "rpc-addr", "SHOAL_RPC_ADDR", "Serf-compatible RPC listen address (empty disables)", func(c *Config) *string { return &c.RPCAddr }),
	strOpt("rpc_auth", "rpc-auth", "SHOAL_RPC_AUTH", "auth token required by the Serf-compatible RPC", func(c *Config) *string { return &c.RPCAuth }),
	strOpt("http_tls_cert_file", "http-tls-cert-file", "SHOAL_HTTP_TLS_CERT_FILE", "PEM certificate: the HTTP API serves HTTPS (with --http-tls-key-file)", func(c *Config) *string { return &c.HTTPTLSCertFile }),
	strOpt("http_tls_key_file", "http-tls-key-file", "SHOAL_HTTP_TLS_KEY_FILE", "PEM private key of --http-tls-cert-file", func(c *Config) *string { return &c.HTTPTLSKeyFile }),
	{key: "http_allowed_hosts", flag: "http-allowed-hosts", env: "SHOAL_HTTP_ALLOWED_HOSTS", list: true, usage: "DNS name the HTTP API answers in the Host header besides IP addresses, localhost and the host's own names (repeatable)",
		set: func(c *Config, raw []string) error { c.HTTPAllowedHosts = splitList(raw); return nil }},
	boolOpt("insecure_http", "insecure-http", "SHOAL_INSECURE_HTTP", "allow plain HTTP on a non-loopback --http-addr (reads and the API token cross the network in cleartext)", func(c *Config) *bool { return &c.InsecureHTTP }),
	strOpt("api_token_file", "api-token-file", "SHOAL_API_TOKEN_FILE", "file holding the API token, created (mode 0600) at the first start (default: $STATE_DIRECTORY/api-token, /var/lib/shoal/api-token for root, else ~/.local/state/shoal/api-token)", func(c *Config) *string { return &c.APITokenFile }),
	strOpt("log_level", "log-level", "SHOAL_LOG_LEVEL", "trace, debug, info, warn or error", func(c *Config) *string { return &c.LogLevel }),
	strOpt("log_format", "log-format", "SHOAL_LOG_FORMAT", "text or json", func(c *Config) *string { return &c.LogFormat }),
	strOpt("role", "role", "SHOAL_ROLE", "db (probes a local MySQL) or app; default: db when a MySQL target is set", func(c *Config) *string { return &c.Role }),
	strOpt("cluster", "cluster", "SHOAL_CLUSTER", "cluster (shard) this database belongs to", func(c *Config) *string { return &c.Cluster }),
	strOpt("mysql.addr", "mysql-addr", "SHOAL_MYSQL_ADDR", "local MySQL/MariaDB host:port to probe", func(c *Config) *string { return &c.MySQL.Addr }),
	strOpt("mysql.socket", "mysql-socket", "SHOAL_MYSQL_SOCKET", "local MySQL/MariaDB unix socket to probe", func(c *Config) *string { return &c.MySQL.Socket }),
	strOpt("mysql.user", "mysql-user", "SHOAL_MYSQL_USER", "probe user (password: $SHOAL_MYSQL_PASSWORD, --mysql-password-file or --mysql-option-file)", func(c *Config) *string { return &c.MySQL.User }),
	strOpt("mysql.password_file", "mysql-password-file", "SHOAL_MYSQL_PASSWORD_FILE", "file holding the probe password (mode 0600 or stricter)", func(c *Config) *string { return &c.MySQL.PasswordFile }),
	strOpt("mysql.replication_user", "mysql-replication-user", "SHOAL_MYSQL_REPLICATION_USER", "account a former writer replicates with after a switchover (default: none; a replica keeps its own)", func(c *Config) *string { return &c.MySQL.ReplicationUser }),
	strOpt("mysql.replication_password_file", "mysql-replication-password-file", "SHOAL_MYSQL_REPLICATION_PASSWORD_FILE", "file holding mysql.replication_user's password (mode 0600 or stricter)", func(c *Config) *string { return &c.MySQL.ReplicationPasswordFile }),
	strOpt("mysql.option_file", "mysql-option-file", "SHOAL_MYSQL_OPTION_FILE", "MySQL client option file; its [client] section gives user, password, host, port, socket", func(c *Config) *string { return &c.MySQL.OptionFile }),
	durOpt("mysql.interval", "mysql-interval", "", "probe interval", func(c *Config) *time.Duration { return &c.MySQL.Interval }),
	durOpt("mysql.timeout", "mysql-timeout", "", "probe timeout per check", func(c *Config) *time.Duration { return &c.MySQL.Timeout }),
	intOpt("mysql.rise", "mysql-rise", "", "passes in a row to become passing", func(c *Config) *int { return &c.MySQL.Rise }),
	intOpt("mysql.fall", "mysql-fall", "", "failures in a row to become critical (hard failures count at once)", func(c *Config) *int { return &c.MySQL.Fall }),
	intOpt("mysql.port", "mysql-port", "", "port routers send clients to (default: the port of --mysql-addr, else 3306)", func(c *Config) *int { return &c.MySQL.Port }),
	durOpt("pool.max_lag", "max-lag", "", "most replication lag a reader may have", func(c *Config) *time.Duration { return &c.Pool.MaxLag }),
	intOpt("pool.min_readers", "min-readers", "", "reader floor: soft reasons never drain readers below this", func(c *Config) *int { return &c.Pool.MinReaders }),
	boolOpt("pool.writer_serves_reads", "writer-serves-reads", "", "list the writer among the readers too", func(c *Config) *bool { return &c.Pool.WriterServesReads }),
	strOpt("pool.read_fallback", "read-fallback", "", "what the reader floor keeps instead of a stale reader: writer, none or stale-reader", func(c *Config) *string { return (*string)(&c.Pool.ReadFallback) }),
	boolOpt("pool.damping", "damping", "", "hold flapping readers out until they settle (route-flap damping)", func(c *Config) *bool { return &c.Pool.Damping }),
	durOpt("pool.damp_half_life", "damp-half-life", "", "how fast a flapping reader's penalty decays", func(c *Config) *time.Duration { return &c.Pool.DampHalfLife }),
	strOpt("sinks.file.path", "pool-file", "SHOAL_POOL_FILE", "write the pool as JSON to this file (atomically, on change)", func(c *Config) *string { return &c.Sinks.File.Path }),
	strOpt("sinks.file.lists_dir", "pool-lists-dir", "", "also write host:port lists per cluster and role into this directory", func(c *Config) *string { return &c.Sinks.File.ListsDir }),
	{key: "event_handlers", flag: "event-handler", list: true, usage: "run a script on events: [filter=]command, Serf's syntax; filters member-join, member-leave, member-failed, member-update, member-reap, user[:NAME], query[:NAME], pool-change, health-change, * (repeatable)",
		set: func(c *Config, raw []string) error { c.EventHandlers = append(c.EventHandlers, raw...); return nil }},
	strOpt("history.file", "history-file", "SHOAL_HISTORY_FILE", "append pool and health transitions to this JSON-lines file (rotated by size)", func(c *Config) *string { return &c.History.File }),
	intOpt("history.size", "history-size", "", "transitions kept in memory for shoal history", func(c *Config) *int { return &c.History.Size }),
	durOpt("pool.isolation_window", "isolation-window", "", "members that failed within this window still count in the fleet an agent must reach to act on a failure", func(c *Config) *time.Duration { return &c.Pool.IsolationWindow }),
	durOpt("pool.isolation_max", "isolation-max", "", "longest an agent that cannot reach the fleet holds a node whose failure it cannot verify", func(c *Config) *time.Duration { return &c.Pool.IsolationMax }),
	durOpt("leave_timeout", "leave-timeout", "SHOAL_LEAVE_TIMEOUT", "bound on the graceful leave at shutdown", func(c *Config) *time.Duration { return &c.LeaveTimeout }),
}

func splitList(raw []string) []string {
	var out []string
	for _, r := range raw {
		for _, p := range strings.Split(r, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// rawValue is a pflag.Value that records what was given, so that flags are
// applied after the file and the environment, in that order; a flag not
// given changes nothing. Its type and default are the option's, so that
// --help shows both.
type rawValue struct {
	vals []string
	list bool
	def  string
	typ  string
	bool bool
}

func (r *rawValue) String() string {
	if len(r.vals) == 0 {
		return r.def
	}
	return strings.Join(r.vals, ",")
}

func (r *rawValue) Set(s string) error {
	if r.list {
		r.vals = append(r.vals, s)
	} else {
		r.vals = []string{s}
	}
	return nil
}

func (r *rawValue) Type() string {
	switch {
	case r.list:
		return "stringArray"
	case r.typ != "":
		return r.typ
	}
	return "string"
}

// boolValue is a rawValue that pflag accepts as "--flag", without a value.
type boolValue struct{ *rawValue }

func (b boolValue) IsBoolFlag() bool { return true }

// DevBindIP is the gossip bind address of --dev when none is given.
const DevBindIP = "127.0.0.1"

// Flags binds every agent option to a flag set and loads the configuration
// when Load is called.
type Flags struct {
	fs     *pflag.FlagSet
	values map[string]*rawValue
	// ConfigFile is --config.
	ConfigFile []string
	// Dev is --dev.
	Dev bool
	// Check is --config-check: validate and exit.
	Check string
}

// BindFlags registers the agent flags on fs.
func BindFlags(fs *pflag.FlagSet) *Flags {
	f := &Flags{fs: fs, values: map[string]*rawValue{}}
	d := Default()
	for _, o := range options {
		rv := &rawValue{list: o.list, bool: o.bool, typ: o.typ}
		if o.def != nil {
			rv.def = o.def(d)
		}
		usage := o.usage
		if rv.def == "" && strings.HasPrefix(usage, "override: ") {
			usage += " (default: the profile's)"
		}
		if o.env != "" {
			usage += " [$" + o.env + "]"
		}
		if rv.bool {
			fs.Var(boolValue{rv}, o.flag, usage)
		} else {
			fs.Var(rv, o.flag, usage)
		}
		if rv.bool {
			fs.Lookup(o.flag).NoOptDefVal = "true"
		}
		f.values[o.flag] = rv
	}
	fs.StringArrayVar(&f.ConfigFile, "config", nil, "YAML config file (repeatable; later files override earlier ones)")
	fs.BoolVar(&f.Dev, "dev", false, "development mode: no encryption, gossip on 127.0.0.1 (--bind beyond loopback needs a key or --insecure-no-encryption), local profile, node name from the bind port")
	fs.StringVar(&f.Check, "config-check", "", "validate this config file (with the other flags and environment) and exit")
	return f
}

// Load builds the configuration: defaults, then each config file, then the
// environment (getenv), then the flags that were set. It validates the
// result and returns every problem at once, each naming where it was set
// (config file and line, environment variable or flag) and its key; the
// Config is returned too, as far as it could be read.
func (f *Flags) Load(getenv func(string) string) (*Config, error) {
	c := Default()
	files := f.ConfigFile
	if f.Check != "" {
		files = append(slices.Clip(files), f.Check)
	}
	var errs []error
	for _, path := range files {
		if err := LoadFile(path, c); err != nil {
			errs = append(errs, setting.Leaves(err)...)
		}
	}
	errs = append(errs, f.applyEnvFlags(c, getenv)...)
	if f.Dev {
		f.applyDev(c, getenv)
	}
	errs = append(errs, unreported(c.Validate(), errs)...)
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	return c, nil
}

// applyEnvFlags applies the environment, then the flags that were set.
func (f *Flags) applyEnvFlags(c *Config, getenv func(string) string) []error {
	var errs []error
	for _, o := range options {
		if o.env == "" {
			continue
		}
		v, ok := lookupEnv(getenv, o.env)
		if !ok {
			continue
		}
		if err := o.set(c, []string{v}); err != nil {
			errs = append(errs, withSource(err, "environment "+o.env))
			continue
		}
		c.setSource(o.key, "environment "+o.env)
	}
	for _, o := range options {
		if !f.fs.Changed(o.flag) {
			continue
		}
		if err := o.set(c, f.values[o.flag].vals); err != nil {
			errs = append(errs, withSource(err, "flag --"+o.flag))
			continue
		}
		c.setSource(o.key, "flag --"+o.flag)
	}
	return errs
}

// withSource records where the value of a FieldError was given.
func withSource(err error, src string) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		fe.Source = src
		return err
	}
	return fmt.Errorf("%s: %w", src, err)
}

// unreported returns the errors of err whose key has no error in reported
// yet: a value the file, environment or flags could not set is not
// reported again by validation.
func unreported(err error, reported []error) []error {
	keys := map[string]bool{}
	for _, e := range reported {
		var fe *FieldError
		if errors.As(e, &fe) {
			keys[baseKey(fe.Key)] = true
		}
	}
	var out []error
	for _, e := range setting.Leaves(err) {
		var fe *FieldError
		if e == nil || errors.As(e, &fe) && keys[baseKey(fe.Key)] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// MergeErrors adds to err the errors of more whose key err does not
// already report (a config error and the file checks of the same
// configuration), so that every problem is reported once.
func MergeErrors(err, more error) error {
	return errors.Join(append(setting.Leaves(err), unreported(more, setting.Leaves(err))...)...)
}

// baseKey is a key without its list index: "join[2]" is "join".
func baseKey(key string) string {
	key, _, _ = strings.Cut(key, "[")
	return key
}

// applyDev applies --dev: the local profile, gossip on loopback unless a
// bind address was given (Validate refuses one beyond loopback without
// encryption), and a node name from the bind port.
func (f *Flags) applyDev(c *Config, getenv func(string) string) {
	c.Dev = true
	if !f.fs.Changed("bind") && getenv("SHOAL_BIND") == "" && c.Bind == Default().Bind {
		c.Bind = net.JoinHostPort(DevBindIP, strconv.Itoa(DefaultGossipPort))
	}
	if !f.fs.Changed("profile") && getenv("SHOAL_PROFILE") == "" {
		c.Profile = "local"
	}
	if c.Node == Default().Node {
		if _, port, err := SplitHostPortDefault(c.Bind, DefaultGossipPort); err == nil {
			c.Node = fmt.Sprintf("%s-%d", c.Node, port)
		}
	}
}

func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

// secrets are the settings whose value is a secret: as a flag they draw a
// warning (SecretWarnings), in a config file they make the file private
// (checkSecretFile). The MySQL password has no key: it comes from
// mysql.password_file, the option file or SHOAL_MYSQL_PASSWORD.
var secrets = []struct{ key, flag, instead string }{
	{"encrypt", "encrypt", "SHOAL_ENCRYPT or keyring_file"},
	{"consensus.key", "consensus-key", "SHOAL_CONSENSUS_KEY or consensus.keyring_file"},
	{"rpc_auth", "rpc-auth", "SHOAL_RPC_AUTH or a config file of mode 0600"},
}

// SecretWarnings returns a warning for every secret given as a flag: any
// local user can read a process's arguments (ps, /proc/PID/cmdline).
func (f *Flags) SecretWarnings() []string {
	var out []string
	for _, sec := range secrets {
		if f.fs.Changed(sec.flag) {
			out = append(out, fmt.Sprintf("--%s was given on the command line, where any local user can read it (ps, /proc/PID/cmdline); use %s instead", sec.flag, sec.instead))
		}
	}
	return out
}
