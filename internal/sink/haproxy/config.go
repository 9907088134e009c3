package haproxy

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/setting"
)

// Defaults and bounds.
const (
	DefaultTimeout = 2 * time.Second
	// DefaultInterval is short because the periodic reconcile is what
	// restores the runtime state after HAProxy restarts or reloads (a
	// restarted HAProxy puts every reader server back in, the primary's
	// included); it costs one `show servers state` read in steady state.
	DefaultInterval   = 1 * time.Second
	DefaultServerName = "{{.Name}}"
	DefaultMatch      = MatchName
	DefaultDrainState = StateMaint

	// MinInterval keeps the periodic reconcile from hammering HAProxy.
	MinInterval = 500 * time.Millisecond
	MaxInterval = 10 * time.Minute
	MinTimeout  = 10 * time.Millisecond
	MaxTimeout  = 30 * time.Second
	// MaxWeight is HAProxy's largest server weight.
	MaxWeight = 256

	maxSocketLen = 107 // sun_path holds 108 bytes including the NUL
)

// Ways to map servers to pool nodes (Config.Match).
const (
	MatchName = "name" // server name = Config.ServerName executed over the node
	MatchAddr = "addr" // server address:port = node Addr
)

// Role names of a Mapping.
const (
	RoleWriter = "writer"
	RoleReader = "reader"
)

// Config configures the HAProxy sink. Zero fields take the defaults (see
// WithDefaults).
type Config struct {
	// Address is HAProxy's runtime API: "unix:/abs/path" or "host:port".
	// Required. The socket needs `level admin`.
	Address string `yaml:"address"`
	// Timeout bounds each runtime API command, connecting included
	// (default 2 s). A reconcile of the loop is bounded by 10 x Timeout,
	// and a connection failure ends it at once.
	Timeout time.Duration `yaml:"timeout"`
	// Interval between periodic reconciles with the last pool (default 1 s,
	// minimum 500 ms).
	Interval time.Duration `yaml:"interval"`
	// Match is how servers map to nodes: "name" (default) or "addr".
	Match string `yaml:"match"`
	// ServerName is the text/template giving a node's server name when
	// Match is "name" (default "{{.Name}}"). It must be empty with "addr".
	ServerName string `yaml:"server_name"`
	// Weight, when not 0, is set on servers that are in the pool
	// (1-256). 0 leaves weights alone.
	Weight int `yaml:"weight"`
	// DrainState is the state of servers out of the pool: "maint" (default:
	// new and existing connections go elsewhere) or "drain" (existing
	// connections finish).
	DrainState State `yaml:"drain_state"`
	// Backends maps cluster roles to HAProxy backends. At least one;
	// each backend at most once.
	Backends []Mapping `yaml:"backends"`
}

// Mapping ties one role of one cluster to one HAProxy backend.
type Mapping struct {
	Cluster string `yaml:"cluster"`
	Role    string `yaml:"role"` // writer or reader
	Backend string `yaml:"backend"`
}

// WriterReader is the usual mapping of one cluster: its writer to the
// backend writer, its readers to the backend reader.
func WriterReader(cluster, writer, reader string) []Mapping {
	return []Mapping{{Cluster: cluster, Role: RoleWriter, Backend: writer}, {Cluster: cluster, Role: RoleReader, Backend: reader}}
}

// WithDefaults returns c with zero fields replaced by their defaults. The
// Backends slice is shared with c.
func (c Config) WithDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Match == "" {
		c.Match = DefaultMatch
	}
	if c.Match == MatchName && c.ServerName == "" {
		c.ServerName = DefaultServerName
	}
	if c.DrainState == "" {
		c.DrainState = DefaultDrainState
	}
	return c
}

// Validate checks c after applying defaults. Every problem is reported, as
// a *setting.Error naming the key and the bad value (the agent's config
// adds the section, sinks.haproxy).
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs setting.Errors
	bad := errs.Addf
	if _, _, err := parseAddress(c.Address); err != nil {
		bad("address", c.Address, "%v", err)
	}
	if c.Timeout < MinTimeout || c.Timeout > MaxTimeout {
		bad("timeout", c.Timeout, "must be within %s-%s", MinTimeout, MaxTimeout)
	}
	if c.Interval < MinInterval || c.Interval > MaxInterval {
		bad("interval", c.Interval, "must be within %s-%s", MinInterval, MaxInterval)
	}
	switch c.Match {
	case MatchName:
		if _, err := newNamer(c); err != nil {
			bad("server_name", c.ServerName, "%v", err)
		}
	case MatchAddr:
		if c.ServerName != "" {
			bad("server_name", c.ServerName, "must be empty with match %q", MatchAddr)
		}
	default:
		bad("match", c.Match, "must be %q or %q", MatchName, MatchAddr)
	}
	if c.Weight < 0 || c.Weight > MaxWeight {
		bad("weight", c.Weight, "must be within 0-%d (0 leaves weights alone)", MaxWeight)
	}
	if c.DrainState != StateMaint && c.DrainState != StateDrain {
		bad("drain_state", string(c.DrainState), "must be %q or %q", StateMaint, StateDrain)
	}
	if len(c.Backends) == 0 {
		bad("backends", "[]", "at least one mapping {cluster, role, backend} is required")
	}
	seen := map[string]int{}
	for i, m := range c.Backends {
		field := func(name string) string { return fmt.Sprintf("backends[%d].%s", i, name) }
		if m.Cluster == "" {
			bad(field("cluster"), "", "required")
		}
		if m.Role != RoleWriter && m.Role != RoleReader {
			bad(field("role"), m.Role, "must be %q or %q", RoleWriter, RoleReader)
		}
		if err := checkIdent(m.Backend); err != nil {
			bad(field("backend"), m.Backend, "%v", err)
		}
		if j, ok := seen[m.Backend]; ok && m.Backend != "" {
			bad(field("backend"), m.Backend, "already mapped by backends[%d]", j)
		} else {
			seen[m.Backend] = i
		}
	}
	return errs.Err()
}

// parseAddress splits a runtime API address into a network and an address
// for net.Dial.
func parseAddress(a string) (network, address string, err error) {
	if a == "" {
		return "", "", errors.New(`required ("unix:/path" or "host:port")`)
	}
	if path, ok := strings.CutPrefix(a, "unix:"); ok {
		switch {
		case !filepath.IsAbs(path):
			return "", "", errors.New("unix socket path must be absolute")
		case len(path) > maxSocketLen:
			return "", "", fmt.Errorf("unix socket path longer than %d bytes", maxSocketLen)
		}
		return "unix", path, nil
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "", "", fmt.Errorf(`want "unix:/path" or "host:port": %w`, err)
	}
	if host == "" {
		return "", "", errors.New("host is empty")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("port %q must be within 1-65535", port)
	}
	return "tcp", a, nil
}

// checkIdent checks an HAProxy proxy or server name as HAProxy does: letters,
// digits, '-', '_', '.' and ':'. It also keeps command arguments free of
// spaces, ';' and newlines, which the runtime API would read as separators.
func checkIdent(s string) error {
	if s == "" {
		return errors.New("required")
	}
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '-' || r == '_' || r == '.' || r == ':' {
			continue
		}
		return fmt.Errorf("invalid character %q (HAProxy names use letters, digits, '-', '_', '.', ':')", r)
	}
	return nil
}
