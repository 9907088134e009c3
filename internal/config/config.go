// Package config holds the shoal agent configuration: defaults, the YAML
// config files, SHOAL_* environment variables and command-line flags,
// applied in that order (Flags.Load).
//
// Each component owns its settings: their type (with the yaml keys), their
// defaults and their limits (probe.Settings for mysql, pool.Settings,
// gossip.Tuning, hooks.Settings, history.Config, the sinks' Config).
// Config embeds each under its section key, starts from the component's
// default, and checks a section only with the component's own check, so a
// value config accepts is one the component starts with; config defines
// no default or limit of a component setting (sections_test.go keeps it
// so).
//
// The values are checked in one pass, once all layers are applied
// (Validate, called by Load), which reports every problem at once, each
// naming its key, its flag and where it was set (config file and line,
// environment variable, flag). What the values name is checked after that,
// by CheckFiles: the files (keyring, tags, API token, MySQL credentials,
// certificate, history) and the handlers' programs, at start and by
// --config-check alike. The components check their settings again when
// they are built (probe.New, hooks.New, history.Open, the sinks' New),
// with the same functions, for callers other than the agent.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/setting"
	"github.com/shoaldb/shoal/internal/tags"
)

// Default ports.
const (
	DefaultGossipPort = 7946
	DefaultHTTPAddr   = "127.0.0.1:8946"
	DefaultRPCAddr    = "127.0.0.1:7373"
)

// Config is the complete agent configuration. The yaml keys are the config
// file keys; every key has a matching --flag (underscores become dashes) and
// most have a SHOAL_<KEY> environment variable (see options.go).
type Config struct {
	Node      string `yaml:"node"`
	Bind      string `yaml:"bind"`
	Advertise string `yaml:"advertise"`

	Join          []string      `yaml:"join"`
	RetryInterval time.Duration `yaml:"retry_interval"`
	RetryMaxWait  time.Duration `yaml:"retry_max_wait"`
	RetryMax      int           `yaml:"retry_max"`
	Rejoin        bool          `yaml:"rejoin"`
	Snapshot      string        `yaml:"snapshot"`

	Tags     map[string]string `yaml:"tags"`
	TagsFile string            `yaml:"tags_file"`

	Encrypt              string `yaml:"encrypt"`
	KeyringFile          string `yaml:"keyring_file"`
	InsecureNoEncryption bool   `yaml:"insecure_no_encryption"`

	// Consensus configures raft among the voters (db agents and witness
	// app agents) that decides each cluster's writer term; on exactly
	// when consensus.key or consensus.keyring_file is given.
	Consensus consensus.Settings `yaml:"consensus"`

	// Profile names the gossip timing profile (gossip.Profiles); Gossip
	// holds the user's gossip settings over it.
	Profile string        `yaml:"profile"`
	Gossip  gossip.Tuning `yaml:"gossip"`

	HTTPAddr string `yaml:"http_addr"`
	RPCAddr  string `yaml:"rpc_addr"`
	RPCAuth  string `yaml:"rpc_auth"`
	// APITokenFile holds the token that state-changing and secret-revealing
	// API and RPC requests must carry; created at the first start. Empty
	// means apitoken.DefaultPath.
	APITokenFile string `yaml:"api_token_file"`
	// HTTPTLSCertFile and HTTPTLSKeyFile (PEM) make the HTTP API serve
	// HTTPS; required, with InsecureHTTP as the explicit alternative, when
	// http_addr is not a loopback address.
	HTTPTLSCertFile string `yaml:"http_tls_cert_file"`
	HTTPTLSKeyFile  string `yaml:"http_tls_key_file"`
	// InsecureHTTP allows plain HTTP beyond loopback: reads, and the token
	// of every write, cross the network in cleartext.
	InsecureHTTP bool `yaml:"insecure_http"`
	// HTTPAllowedHosts are more DNS names the API answers in the Host
	// header, besides IP literals, localhost, the host name and the names
	// in http_addr and advertise (DNS rebinding protection).
	HTTPAllowedHosts []string `yaml:"http_allowed_hosts"`

	LogLevel  string `yaml:"log_level"`
	LogFormat string `yaml:"log_format"`

	LeaveTimeout time.Duration `yaml:"leave_timeout"`

	// Role is "db" (probes a local MySQL) or "app"; empty means db when a
	// MySQL target is configured, else app.
	Role    string `yaml:"role"`
	Cluster string `yaml:"cluster"`
	// MySQL is the local server a db agent probes. The password never
	// comes from a flag: mysql.password_file (mode 0600 or stricter), the
	// environment variable SHOAL_MYSQL_PASSWORD, or the option file's
	// [client] section.
	MySQL probe.Settings `yaml:"mysql"`
	// Pool is the routing policy; every agent of a cluster should use the
	// same.
	Pool pool.Settings `yaml:"pool"`

	Sinks Sinks `yaml:"sinks"`
	// History configures the record of pool and health transitions: an
	// in-memory ring and, when history.file is set, an append-only
	// JSON-lines file rotated by size.
	History history.Config `yaml:"history"`

	// EventHandlers are Serf-style "[filter=]command" specs.
	EventHandlers []string `yaml:"event_handlers"`
	// Hooks tunes how event handlers run.
	Hooks hooks.Settings `yaml:"hooks"`

	// Dev is set by --dev only: no encryption required, gossip on loopback
	// (a bind address beyond loopback needs a key or
	// insecure_no_encryption), local profile, a node name derived from the
	// bind port when none is given.
	Dev bool `yaml:"-"`

	// sources names where each key set was set (a config file and line, an
	// environment variable, a flag), for error messages.
	sources map[string]string
	// notices are messages about how the files were read (serf keys).
	notices []string
	// unreadFiles: a config file could not be read or parsed, so its
	// values are missing.
	unreadFiles bool
}

// FilesRead reports whether every config file was read and parsed (its
// values applied, though some may be invalid): only then do the checks of
// the files the configuration names (CheckFiles) mean anything.
func (c *Config) FilesRead() bool { return !c.unreadFiles }

// Notices returns messages about how the configuration was read, such as a
// stock serf key read as its shoal equivalent; the agent logs them and
// --config-check prints them.
func (c *Config) Notices() []string { return c.notices }

// setSource records where key was set; a later layer replaces an earlier one.
func (c *Config) setSource(key, src string) {
	if c.sources == nil {
		c.sources = map[string]string{}
	}
	c.sources[key] = src
}

// sourceOf returns where key, or the nearest section holding it, was set.
func (c *Config) sourceOf(key string) string {
	if s, ok := c.sources[key]; ok {
		return s
	}
	key, _, _ = strings.Cut(key, "[")
	for key != "" {
		if s, ok := c.sources[key]; ok {
			return s
		}
		i := strings.LastIndexByte(key, '.')
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return ""
}

// annotate adds to every FieldError in err where its key was set.
func (c *Config) annotate(err error) error {
	for _, e := range setting.Leaves(err) {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Source == "" {
			fe.Source = c.sourceOf(fe.Key)
		}
	}
	return err
}

// EffectiveRole returns "db" or "app".
func (c *Config) EffectiveRole() string {
	if c.Role != "" {
		return c.Role
	}
	if c.MySQL.Configured() {
		return "db"
	}
	return "app"
}

// Default returns the built-in defaults. Each component section is the
// component's own default (probe.DefaultSettings, ...): config defines no
// default of a component setting. The sinks are off until configured.
func Default() *Config {
	host, _ := os.Hostname()
	return &Config{
		Node:          host,
		Bind:          fmt.Sprintf("0.0.0.0:%d", DefaultGossipPort),
		RetryInterval: time.Second,
		RetryMaxWait:  30 * time.Second,
		Rejoin:        true,
		Tags:          map[string]string{},
		Profile:       gossip.DefaultProfile,
		HTTPAddr:      DefaultHTTPAddr,
		RPCAddr:       DefaultRPCAddr,
		LogLevel:      "info",
		LogFormat:     "text",
		LeaveTimeout:  5 * time.Second,
		Cluster:       tags.DefaultCluster,
		MySQL:         probe.DefaultSettings(),
		Gossip:        gossip.DefaultTuning(),
		Pool:          pool.DefaultSettings(),
		History:       history.DefaultConfig(),
		Hooks:         hooks.DefaultSettings(),
		Consensus:     consensus.DefaultSettings(),
	}
}

// MaxNodeNameLen is the longest node name.
const MaxNodeNameLen = 128

var (
	// allowedHostRe: an http_allowed_hosts entry, a DNS name.
	allowedHostRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9.])?$`)
	nodeNameRe    = regexp.MustCompile(`^[A-Za-z0-9_.\-:]+$`)
)

// InvalidError marks an error in the configuration, or in a file it
// names, that the agent finds only at start (a corrupt tags file, a keyring
// readable by others): a usage error, exit status 2, which systemd does
// not restart in a loop.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// Invalid marks err as a configuration error (nil stays nil).
func Invalid(err error) error {
	if err == nil {
		return nil
	}
	return &InvalidError{Err: err}
}

// FieldError is a validation error that names the config key, its flag when
// there is one, and where the value was set when known.
type FieldError struct {
	Key   string
	Value string
	Msg   string
	// Source is where the key was set: "config file F, line N",
	// "environment SHOAL_X" or "flag --x"; empty when unknown.
	Source string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Source != "" && !strings.HasPrefix(e.Source, "flag ") { // a flag is named anyway
		b.WriteString(e.Source + ": ")
	}
	b.WriteString(e.Key)
	if f := flagFor(e.Key); f != "" {
		b.WriteString(" (--" + f + ")")
	}
	fmt.Fprintf(&b, " %q: %s", e.Value, e.Msg)
	return b.String()
}

// flagFor names the command-line flag of a config key ("event_handlers[2]"
// is event_handlers), or "" when the key has none: a message never cites a
// flag that does not exist.
func flagFor(key string) string {
	key, _, _ = strings.Cut(key, "[")
	for _, o := range options {
		if o.key == key {
			return o.flag
		}
	}
	return ""
}

func fieldErr(key, value, format string, args ...any) error {
	return &FieldError{Key: key, Value: value, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks the whole configuration and returns every problem found,
// joined, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.Node == "" {
		add(fieldErr("node", c.Node, "must not be empty"))
	} else if len(c.Node) > MaxNodeNameLen {
		add(fieldErr("node", c.Node, "longer than %d characters", MaxNodeNameLen))
	} else if !nodeNameRe.MatchString(c.Node) {
		add(fieldErr("node", c.Node, "may contain only letters, digits and . _ - :"))
	}
	add(validateHostPort("bind", c.Bind, true))
	if c.Advertise != "" {
		add(validateHostPort("advertise", c.Advertise, true))
		if h, _, err := SplitHostPortDefault(c.Advertise, DefaultGossipPort); err == nil {
			if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
				add(fieldErr("advertise", c.Advertise, "must be a reachable address, not %s", h))
			}
		}
	}
	add(c.validateJoin())
	if err := tags.CheckUserTags(c.Tags); err != nil {
		var te *tags.TagError
		if errors.As(err, &te) {
			add(fieldErr("tags", te.Key+"="+te.Value, "%s", te.Msg))
		} else {
			add(fieldErr("tags", fmt.Sprintf("%d tags", len(c.Tags)), "%v", err))
		}
	}
	add(c.validateEncryption())
	if _, ok := gossip.Profiles[c.Profile]; !ok {
		add(fieldErr("profile", c.Profile, "unknown profile; choose one of %s", strings.Join(gossip.ProfileNames(), ", ")))
	}
	if c.HTTPAddr != "" {
		add(validateHostPort("http_addr", c.HTTPAddr, false))
	}
	add(c.validateHTTPTLS())
	if c.RPCAddr != "" {
		add(validateHostPort("rpc_addr", c.RPCAddr, false))
	}
	switch strings.ToLower(c.LogLevel) {
	case "trace", "debug", "info", "warn", "error":
	default:
		add(fieldErr("log_level", c.LogLevel, "must be one of trace, debug, info, warn, error"))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		add(fieldErr("log_format", c.LogFormat, "must be text or json"))
	}
	if c.LeaveTimeout <= 0 {
		add(fieldErr("leave_timeout", c.LeaveTimeout.String(), "must be positive"))
	}
	add(c.validateDB())
	add(c.checkSections())
	if _, err := c.HookSpecs(); err != nil {
		add(err)
	}
	return c.annotate(errors.Join(errs...))
}

// validateJoin checks the join addresses and the retry settings.
func (c *Config) validateJoin() error {
	var errs []error
	for i, j := range c.Join {
		if err := validateJoin(fmt.Sprintf("join[%d]", i), j); err != nil {
			errs = append(errs, err)
		}
	}
	if c.RetryInterval < 10*time.Millisecond {
		errs = append(errs, fieldErr("retry_interval", c.RetryInterval.String(), "must be at least 10ms"))
	}
	if c.RetryMaxWait < c.RetryInterval {
		errs = append(errs, fieldErr("retry_max_wait", c.RetryMaxWait.String(), "must be at least retry_interval (%s)", c.RetryInterval))
	}
	if c.RetryMax < 0 {
		errs = append(errs, fieldErr("retry_max", strconv.Itoa(c.RetryMax), "must be 0 (retry forever) or positive"))
	}
	return errors.Join(errs...)
}

// validateEncryption checks the key, that gossip is encrypted unless
// explicitly not, and that --dev's unencrypted gossip stays on loopback
// unless explicitly not.
func (c *Config) validateEncryption() error {
	var errs []error
	if c.Encrypt != "" {
		errs = append(errs, ValidateKey("encrypt", c.Encrypt))
	}
	keyless := c.Encrypt == "" && c.KeyringFile == "" && !c.InsecureNoEncryption
	if keyless && !c.Dev {
		errs = append(errs, fieldErr("encrypt", "", "gossip encryption is required: give a key (shoal keygen) with --encrypt or --keyring-file, or run without encryption explicitly with --insecure-no-encryption (or --dev)"))
	}
	if keyless && c.Dev && !loopbackAddr(c.Bind) {
		errs = append(errs, fieldErr("bind", c.Bind, "--dev gossips unencrypted, so only on loopback: bind 127.0.0.1:PORT, "+
			"or give an encryption key (--encrypt, --keyring-file), or add --insecure-no-encryption to gossip unencrypted on this address"))
	}
	return errors.Join(errs...)
}

// HTTPTLS reports whether the HTTP API serves HTTPS.
func (c *Config) HTTPTLS() bool { return c.HTTPTLSCertFile != "" && c.HTTPTLSKeyFile != "" }

// HTTPLoopback reports whether http_addr is on a loopback IP. An empty
// host, 0.0.0.0 and :: are not: they listen on every interface.
func (c *Config) HTTPLoopback() bool { return loopbackAddr(c.HTTPAddr) }

// loopbackAddr reports whether the host of an ip[:port] address is a
// loopback IP; an empty host, 0.0.0.0 and :: are every interface.
func loopbackAddr(v string) bool {
	host, _, err := SplitHostPortDefault(v, DefaultGossipPort)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

// validateHTTPTLS checks the TLS pair and that an API beyond loopback is
// either HTTPS or explicitly insecure.
func (c *Config) validateHTTPTLS() error {
	var errs []error
	if c.HTTPTLSCertFile != "" && c.HTTPTLSKeyFile == "" {
		errs = append(errs, fieldErr("http_tls_key_file", "", "must be set with http_tls_cert_file (%s)", c.HTTPTLSCertFile))
	}
	if c.HTTPTLSKeyFile != "" && c.HTTPTLSCertFile == "" {
		errs = append(errs, fieldErr("http_tls_cert_file", "", "must be set with http_tls_key_file (%s)", c.HTTPTLSKeyFile))
	}
	for _, h := range c.HTTPAllowedHosts {
		if !allowedHostRe.MatchString(h) {
			errs = append(errs, fieldErr("http_allowed_hosts", h, "must be a DNS name (letters, digits, '-', '.'), without scheme or port"))
		}
	}
	_, _, splitErr := net.SplitHostPort(c.HTTPAddr) // a malformed address has its own error
	if c.HTTPAddr != "" && splitErr == nil && !c.HTTPLoopback() && !c.HTTPTLS() && !c.InsecureHTTP {
		errs = append(errs, fieldErr("http_addr", c.HTTPAddr, "is not a loopback address, so the API (its reads, and the token of every write) would be open to the network in cleartext: "+
			"serve HTTPS with http_tls_cert_file and http_tls_key_file (--http-tls-cert-file, --http-tls-key-file), "+
			"or accept plain HTTP explicitly with insecure_http: true (--insecure-http), or listen on 127.0.0.1"))
	}
	return errors.Join(errs...)
}

// ValidateKey checks a base64 gossip encryption key given under a config key.
func ValidateKey(key, value string) error {
	if err := CheckKey(value); err != nil {
		return fieldErr(key, redact(value), "%v", err)
	}
	return nil
}

// CheckKey checks a base64 gossip encryption key (16, 24 or 32 bytes).
func CheckKey(value string) error {
	b, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		return fmt.Errorf("not valid base64: %w", err)
	}
	switch len(b) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("key is %d bytes; must be 16, 24 or 32 bytes (use shoal keygen)", len(b))
}

// redact shows only the first characters of a secret in error messages.
func redact(s string) string {
	if len(s) <= 4 {
		return s
	}
	return s[:4] + "..."
}

func validateHostPort(key, v string, allowNoPort bool) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		if allowNoPort && net.ParseIP(strings.Trim(v, "[]")) != nil {
			return nil
		}
		return fieldErr(key, v, "want host:port (%v)", err)
	}
	if host != "" && net.ParseIP(host) == nil {
		// A host name is fine for join targets, but listeners want an IP.
		return fieldErr(key, v, "host must be an IP address")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fieldErr(key, v, "port must be a number from 0 to 65535")
	}
	return nil
}

// validateJoin checks a join address as memberlist reads it:
// [name/]host[:port], a host name or an IP ([ipv6]:port with a port); no
// port means this agent's own bind port, as in serf.
func validateJoin(key, v string) error {
	addr := v
	if name, rest, ok := strings.Cut(v, "/"); ok {
		if name == "" {
			return fieldErr(key, v, "empty node name before the /")
		}
		addr = rest
	}
	if !joinHasPort(addr) {
		if strings.Trim(addr, "[]") == "" {
			return fieldErr(key, v, "empty address: want host or host:port")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fieldErr(key, v, "want host or host:port (%v)", err)
	}
	if host == "" {
		return fieldErr(key, v, "host must not be empty: want host or host:port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fieldErr(key, v, "port must be a number from 1 to 65535")
	}
	return nil
}

// joinHasPort is memberlist's rule: a bracketed IPv6 address has a port
// after the bracket; otherwise exactly one colon means a port.
func joinHasPort(s string) bool {
	if strings.LastIndex(s, "[") == 0 {
		return strings.LastIndex(s, ":") > strings.LastIndex(s, "]")
	}
	return strings.Count(s, ":") == 1
}

// SplitHostPortDefault splits "ip:port" or a bare "ip" (then def is the port).
func SplitHostPortDefault(v string, def int) (string, int, error) {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		if ip := net.ParseIP(strings.Trim(v, "[]")); ip != nil {
			return ip.String(), def, nil
		}
		return "", 0, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	return host, p, nil
}

// ParseTag parses "key=value".
func ParseTag(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("tag %q: want key=value", s)
	}
	if !tags.ValidKey(k) {
		return "", "", fmt.Errorf("tag %q: key must be 1-64 characters of letters, digits, . _ -", s)
	}
	return k, v, nil
}
