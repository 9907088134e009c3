package probe

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/setting"
)

// Defaults and bounds.
const (
	DefaultHost         = "127.0.0.1"
	DefaultPort         = 3306
	DefaultInterval     = 250 * time.Millisecond
	DefaultTimeout      = 500 * time.Millisecond
	DefaultRise         = 2
	DefaultFall         = 2
	DefaultReconnectMax = time.Second

	// MinInterval keeps the probe from hammering the server it guards.
	MinInterval  = 50 * time.Millisecond
	MaxInterval  = time.Minute
	MinTimeout   = 10 * time.Millisecond
	MaxTimeout   = 10 * time.Second
	MaxRiseFall  = 100
	maxSocketLen = 107 // sun_path holds 108 bytes including the NUL
)

// Config configures a Probe. Zero durations and counts take the defaults
// (see WithDefaults); the password never comes from a command-line flag but
// from PasswordFromFile, the environment or LoadOptionFile.
type Config struct {
	// Socket is the server's unix socket. When set, the probe connects
	// through it and Host must be empty or "localhost" (as with mysql
	// clients, "localhost" means the socket).
	Socket string `json:"socket,omitempty"`
	// Host and Port are the TCP address (default 127.0.0.1:3306).
	Host string `json:"host,omitempty"`
	Port int    `json:"port,omitempty"`

	User     string `json:"user"`
	Password string `json:"-"`

	// Interval between check starts (default 250 ms, minimum 50 ms).
	// Checks never overlap; a dead connection is noticed between checks
	// without waiting for the next one.
	Interval time.Duration `json:"interval"`
	// Timeout bounds each check, connecting included (default 500 ms). It
	// is enforced by the check's context and, as a backstop, by the socket's
	// dial deadline (Timeout) and read and write deadlines (1.25 x Timeout),
	// so a hung (SIGSTOPped) server fails by timeout.
	Timeout time.Duration `json:"timeout"`
	// Rise consecutive answering checks make a critical server healthy
	// (default 2); Fall consecutive failures make it critical (default 2).
	// Hard failures (refused, reset, server gone) are critical at once.
	Rise int `json:"rise"`
	Fall int `json:"fall"`
	// ReconnectMax caps the exponential back-off between failed connection
	// attempts (default 1 s; it starts at Interval). The first attempt after
	// a connection breaks is immediate.
	ReconnectMax time.Duration `json:"reconnect_max"`
	// Clock runs the probe's schedule: check start times, the wait between
	// checks, the reconnect back-off and the hysteresis times (Status.Since).
	// nil: the real clock; WithClock overrides it. Check timeouts and the
	// idle connection's read deadline stay on real time: they bound network
	// I/O, which only the kernel's clock times.
	Clock clockwork.Clock `json:"-"`
}

// DefaultConfig returns a Config with every default filled in, except the
// user and password.
func DefaultConfig() Config {
	return Config{}.WithDefaults()
}

// WithDefaults returns c with zero fields replaced by their defaults.
func (c Config) WithDefaults() Config {
	if c.Socket == "" && c.Host == "" {
		c.Host = DefaultHost
	}
	if c.Socket == "" && c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Rise == 0 {
		c.Rise = DefaultRise
	}
	if c.Fall == 0 {
		c.Fall = DefaultFall
	}
	if c.ReconnectMax == 0 {
		// The back-off starts at Interval: an interval above 1 s caps it there.
		c.ReconnectMax = max(DefaultReconnectMax, c.Interval)
	}
	return c
}

// The limits of the settings a user gives (the agent's mysql.interval,
// mysql.timeout, mysql.rise and mysql.fall): Validate checks them, and the
// agent's configuration checks its keys with these same functions, so that
// a configuration shoal accepts is one the probe starts with.

// CheckInterval checks a probe interval: MinInterval to MaxInterval.
func CheckInterval(d time.Duration) error {
	if d < MinInterval || d > MaxInterval {
		return fmt.Errorf("must be from %s to %s", MinInterval, shortDuration(MaxInterval))
	}
	return nil
}

// CheckTimeout checks a probe timeout: MinTimeout to MaxTimeout.
func CheckTimeout(d time.Duration) error {
	if d < MinTimeout || d > MaxTimeout {
		return fmt.Errorf("must be from %s to %s", MinTimeout, shortDuration(MaxTimeout))
	}
	return nil
}

// CheckRiseFall checks a rise or fall count: 1 to MaxRiseFall.
func CheckRiseFall(n int) error {
	if n < 1 || n > MaxRiseFall {
		return fmt.Errorf("must be from 1 to %d", MaxRiseFall)
	}
	return nil
}

// shortDuration formats whole minutes without the trailing "0s" ("1m").
func shortDuration(d time.Duration) string {
	s := d.String()
	if d%time.Minute == 0 {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

// FieldError is a Config field that Validate refuses.
type FieldError struct {
	Field string // the Config field's JSON name: "timeout", "port"
	Value string // the value as shown
	Err   error
}

func (e *FieldError) Error() string { return fmt.Sprintf("probe %s = %s: %v", e.Field, e.Value, e.Err) }
func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks c after applying defaults. Every problem is reported, as
// a *FieldError naming the field and the bad value.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(field string, value any, err error) {
		if err != nil {
			errs = append(errs, &FieldError{Field: field, Value: fmt.Sprint(value), Err: err})
		}
	}
	badf := func(field string, value any, format string, args ...any) {
		bad(field, value, fmt.Errorf(format, args...))
	}
	if c.Socket != "" {
		switch {
		case !filepath.IsAbs(c.Socket):
			badf("socket", strconv.Quote(c.Socket), "must be an absolute path")
		case len(c.Socket) > maxSocketLen:
			badf("socket", strconv.Quote(c.Socket), "longer than %d bytes", maxSocketLen)
		}
		if c.Host != "" && c.Host != "localhost" {
			badf("host", strconv.Quote(c.Host), "set together with socket %q; use one of them", c.Socket)
		}
	}
	if c.Socket == "" && (c.Port < 1 || c.Port > 65535) {
		badf("port", c.Port, "must be from 1 to 65535")
	}
	if c.User == "" {
		badf("user", `""`, "required")
	}
	bad("interval", c.Interval, CheckInterval(c.Interval))
	bad("timeout", c.Timeout, CheckTimeout(c.Timeout))
	bad("rise", c.Rise, CheckRiseFall(c.Rise))
	bad("fall", c.Fall, CheckRiseFall(c.Fall))
	if c.ReconnectMax < c.Interval || c.ReconnectMax > 5*time.Minute {
		badf("reconnect_max", c.ReconnectMax, "must be from interval (%s) to 5m", c.Interval)
	}
	return errors.Join(errs...)
}

// socketTimeout is the driver's read and write deadline: Timeout plus a
// quarter, a backstop behind the check's context.
func (c Config) socketTimeout() time.Duration { return c.Timeout + c.Timeout/4 }

// network returns the driver network and address.
func (c Config) network() (string, string) {
	if c.Socket != "" {
		return "unix", c.Socket
	}
	return "tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// Target is the address the probe connects to, for logs.
func (c Config) Target() string {
	_, addr := c.network()
	return addr
}

// LogValue lets a Config be logged without its password.
func (c Config) LogValue() slog.Value {
	net, addr := c.network()
	return slog.GroupValue(
		slog.String("net", net), slog.String("addr", addr), slog.String("user", c.User),
		slog.Bool("password_set", c.Password != ""),
		slog.Duration("interval", c.Interval), slog.Duration("timeout", c.Timeout),
		slog.Int("rise", c.Rise), slog.Int("fall", c.Fall),
	)
}

// String formats a Config without its password.
func (c Config) String() string {
	return c.LogValue().String()
}

// Settings are the probe's settings as a user gives them: the agent's
// mysql section (mysql.addr, mysql.interval, ...), with its yaml keys. The
// password never comes from a setting but from PasswordFile, the
// environment variable PasswordEnv or the option file's [client]
// section (see Config).
type Settings struct {
	Addr         string        `yaml:"addr"` // host:port
	Socket       string        `yaml:"socket"`
	User         string        `yaml:"user"`
	PasswordFile string        `yaml:"password_file"` // mode 0600 or stricter
	OptionFile   string        `yaml:"option_file"`
	Interval     time.Duration `yaml:"interval"`
	Timeout      time.Duration `yaml:"timeout"`
	Rise         int           `yaml:"rise"`
	Fall         int           `yaml:"fall"`
	// Port is the port routers send clients to, published to the cluster;
	// 0: the port of Addr, else DefaultPort (see PublishedPort).
	Port int `yaml:"port"`
	// ReplicationUser and ReplicationPasswordFile are the account this
	// server replicates with after a switchover demoted it (a former
	// writer has none of its own; a replica keeps its own when unset).
	ReplicationUser         string `yaml:"replication_user"`
	ReplicationPasswordFile string `yaml:"replication_password_file"` // mode 0600 or stricter
}

// ReplicationAccount reads the replication account: "" when none is
// configured. The user and the file go together.
func (s Settings) ReplicationAccount() (user, password string, err error) {
	switch {
	case s.ReplicationUser == "" && s.ReplicationPasswordFile == "":
		return "", "", nil
	case s.ReplicationUser == "":
		return "", "", setting.Errorf("replication_user", "", "required with replication_password_file")
	case s.ReplicationPasswordFile == "":
		return "", "", setting.Errorf("replication_password_file", "", "required with replication_user")
	case len(s.ReplicationUser) > 128 || strings.ContainsAny(s.ReplicationUser, "\x00\n"):
		return "", "", setting.Errorf("replication_user", s.ReplicationUser, "at most 128 bytes, no NUL or newline")
	}
	pw, err := PasswordFromFile(s.ReplicationPasswordFile)
	if err != nil {
		return "", "", setting.Errorf("replication_password_file", s.ReplicationPasswordFile, "%v", err)
	}
	return s.ReplicationUser, pw, nil
}

// DefaultSettings returns the settings the agent starts from: the probe's
// defaults, and no server (an app agent).
func DefaultSettings() Settings {
	return Settings{Interval: DefaultInterval, Timeout: DefaultTimeout, Rise: DefaultRise, Fall: DefaultFall}
}

// Configured reports whether a server to probe is set.
func (s Settings) Configured() bool { return s.Addr != "" || s.Socket != "" || s.OptionFile != "" }

// PublishedPort is the port published to the cluster: Port, else the port
// of Addr, else DefaultPort.
func (s Settings) PublishedPort() int {
	if s.Port != 0 {
		return s.Port
	}
	if _, port, err := net.SplitHostPort(s.Addr); err == nil {
		if p, err := strconv.Atoi(port); err == nil {
			return p
		}
	}
	return DefaultPort
}

// Check checks the settings as given, without reading any file: every
// problem is a *setting.Error naming the setting's key. The limits are
// those Validate applies (CheckInterval, CheckTimeout, CheckRiseFall), so
// settings Check accepts are ones the probe starts with.
func (s Settings) Check() error {
	var errs setting.Errors
	if s.Addr != "" {
		host, port, err := net.SplitHostPort(s.Addr)
		if err != nil || host == "" {
			errs.Addf("addr", s.Addr, "want host:port")
		} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			errs.Addf("addr", s.Addr, "port must be from 1 to 65535")
		}
	}
	if s.Addr != "" && s.Socket != "" {
		errs.Addf("socket", s.Socket, "give mysql.addr or mysql.socket, not both")
	}
	errs.Add("interval", s.Interval, CheckInterval(s.Interval))
	errs.Add("timeout", s.Timeout, CheckTimeout(s.Timeout))
	errs.Add("rise", s.Rise, CheckRiseFall(s.Rise))
	errs.Add("fall", s.Fall, CheckRiseFall(s.Fall))
	if s.Port < 0 || s.Port > 65535 {
		errs.Addf("port", s.Port, "must be from 1 to 65535")
	}
	return errs.Err()
}

// Config builds the probe's Config from the settings, reading the password
// from PasswordFile, the environment variable PasswordEnv (through
// getenv) or the option file's [client] section, and validates it. Every
// error is a *setting.Error naming the setting that gave the bad value:
// the option file for what it gave.
func (s Settings) Config(getenv func(string) string) (Config, error) {
	pc := DefaultConfig()
	if s.OptionFile != "" {
		opts, err := LoadOptionFile(s.OptionFile)
		if err != nil {
			return pc, setting.Errorf("option_file", s.OptionFile, "%v", err)
		}
		pc = opts.Fill(pc)
	}
	if s.Addr != "" {
		host, port, _ := net.SplitHostPort(s.Addr)
		pc.Host = host
		pc.Port, _ = strconv.Atoi(port)
		pc.Socket = ""
	}
	if s.Socket != "" {
		pc.Socket, pc.Host = s.Socket, ""
	}
	if s.User != "" {
		pc.User = s.User
	}
	switch {
	case s.PasswordFile != "":
		pw, err := PasswordFromFile(s.PasswordFile)
		if err != nil {
			return pc, setting.Errorf("password_file", s.PasswordFile, "%v", err)
		}
		pc.Password = pw
	case getenv(PasswordEnv) != "":
		pc.Password = getenv(PasswordEnv)
	}
	pc.Interval, pc.Timeout, pc.Rise, pc.Fall = s.Interval, s.Timeout, s.Rise, s.Fall
	pc.ReconnectMax = 0 // the default follows the interval
	pc = pc.WithDefaults()
	if pc.User == "" {
		return pc, setting.Errorf("user", "", "required on a db agent: set mysql.user, or user= in the [client] section of mysql.option_file")
	}
	return pc, s.settingErrors(pc.Validate())
}

// settingErrors names the setting of each FieldError of Validate: the one
// that gave the field, or option_file for what the option file gave.
func (s Settings) settingErrors(err error) error {
	var errs setting.Errors
	for _, e := range setting.Leaves(err) {
		var fe *FieldError
		if !errors.As(e, &fe) {
			errs = append(errs, e)
			continue
		}
		key := fe.Field
		switch fe.Field {
		case "host", "port":
			key = "addr"
			if s.Addr == "" && s.OptionFile != "" {
				key = "option_file"
			}
		case "socket":
			if s.Socket == "" && s.OptionFile != "" {
				key = "option_file"
			}
		case "reconnect_max":
			key = "interval"
		}
		if key == "option_file" {
			errs.Addf(key, s.OptionFile, "%s %s: %v", fe.Field, fe.Value, fe.Err)
			continue
		}
		errs.Add(key, fe.Value, fe.Err)
	}
	return errs.Err()
}
