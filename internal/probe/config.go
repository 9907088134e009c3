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
