package config

import (
	"errors"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/shoaldb/shoal/internal/probe"
)

var clusterRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (c *Config) validateDB() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	switch c.Role {
	case "", "db", "app":
	default:
		add(fieldErr("role", c.Role, "must be db or app (serf's role key was a tag; shoal reserves the role tag: put serf's value under tags with another key)"))
	}
	if c.Role == "db" && !c.MySQL.Configured() {
		add(fieldErr("role", c.Role, "a db agent needs mysql.addr, mysql.socket or mysql.option_file"))
	}
	if !clusterRe.MatchString(c.Cluster) {
		add(fieldErr("cluster", c.Cluster, "must be 1-64 characters of letters, digits, . _ -"))
	}
	for _, k := range []string{"role", "cluster", "maint", "sh"} {
		if _, ok := c.Tags[k]; ok {
			add(fieldErr("tags", k, "tag key %q is reserved by shoal (use the %s setting)", k, map[string]string{"role": "role", "cluster": "cluster", "maint": "shoal maint", "sh": "probe"}[k]))
		}
	}
	m := c.MySQL
	if m.Addr != "" {
		add(validateMySQLAddr(m.Addr))
	}
	if m.Addr != "" && m.Socket != "" {
		add(fieldErr("mysql.socket", m.Socket, "give mysql.addr or mysql.socket, not both"))
	}
	// The probe's own limits (package probe owns them): a value accepted
	// here is one the probe starts with.
	add(probeLimit("mysql.interval", m.Interval.String(), probe.CheckInterval(m.Interval)))
	add(probeLimit("mysql.timeout", m.Timeout.String(), probe.CheckTimeout(m.Timeout)))
	add(probeLimit("mysql.rise", strconv.Itoa(m.Rise), probe.CheckRiseFall(m.Rise)))
	add(probeLimit("mysql.fall", strconv.Itoa(m.Fall), probe.CheckRiseFall(m.Fall)))
	if m.Port < 0 || m.Port > 65535 {
		add(fieldErr("mysql.port", strconv.Itoa(m.Port), "must be from 1 to 65535"))
	}
	p := c.Pool
	if p.MaxLag < time.Second {
		add(fieldErr("pool.max_lag", p.MaxLag.String(), "must be at least 1s"))
	}
	if p.MinReaders < 0 {
		add(fieldErr("pool.min_readers", strconv.Itoa(p.MinReaders), "must be 0 or more"))
	}
	if p.DampHalfLife < time.Second || p.DampHalfLife > time.Hour {
		add(fieldErr("pool.damp_half_life", p.DampHalfLife.String(), "must be from 1s to 1h"))
	}
	if p.IsolationWindow < time.Second {
		add(fieldErr("pool.isolation_window", p.IsolationWindow.String(), "must be at least 1s"))
	}
	return errors.Join(errs...)
}

// probeLimit turns a probe limit's error into one naming the config key.
func probeLimit(key, value string, err error) error {
	if err == nil {
		return nil
	}
	return fieldErr(key, value, "%v", err)
}

func validateMySQLAddr(v string) error {
	host, port, err := splitAddr(v)
	if err != nil || host == "" {
		return fieldErr("mysql.addr", v, "want host:port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fieldErr("mysql.addr", v, "port must be from 1 to 65535")
	}
	return nil
}

// MySQLPort is the port published to the cluster.
func (c *Config) MySQLPort() int {
	if c.MySQL.Port != 0 {
		return c.MySQL.Port
	}
	if c.MySQL.Addr != "" {
		if _, port, err := splitAddr(c.MySQL.Addr); err == nil {
			if p, err := strconv.Atoi(port); err == nil {
				return p
			}
		}
	}
	return 3306
}

func splitAddr(v string) (string, string, error) { return net.SplitHostPort(v) }
