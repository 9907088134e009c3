package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// storageConfig holds the settings that shape the files in a datadir. The
// template and every instance use the same lines, so a copied datadir always
// matches the server that opens it.
var storageConfig = []string{
	"innodb_data_file_path=ibdata1:4M:autoextend",
	"innodb_log_file_size=4M",
	"innodb_page_size=16384",
}

// speedConfig trades durability for start-up speed and a small footprint;
// these servers hold only test data.
var speedConfig = []string{
	"skip-name-resolve",
	"performance_schema=OFF",
	"innodb_buffer_pool_size=16M",
	"innodb_log_buffer_size=2M",
	"innodb_doublewrite=0",
	"innodb_flush_log_at_trx_commit=2",
	"aria_pagecache_buffer_size=8M",
	"key_buffer_size=1M",
	"max_connections=100",
}

// Config describes one instance: its directory and my.cnf.
type Config struct {
	Dir      string // instance directory: datadir, socket, logs
	Port     int
	ServerID int
	ReadOnly bool
	Bind     string // bind-address; "" is 127.0.0.1
	Extra    []string
}

// Datadir is the instance's data directory.
func (c Config) Datadir() string { return filepath.Join(c.Dir, "data") }

// Socket is the instance's unix socket.
func (c Config) Socket() string { return filepath.Join(c.Dir, "mysqld.sock") }

// ErrorLog is the server's error log.
func (c Config) ErrorLog() string { return filepath.Join(c.Dir, "error.log") }

// PIDFile is the pid-file mariadbd writes.
func (c Config) PIDFile() string { return filepath.Join(c.Dir, "mysqld.pid") }

// StdoutLog is where the process's stdout and stderr go.
func (c Config) StdoutLog() string { return filepath.Join(c.Dir, "stdout.log") }

// Path is the my.cnf.
func (c Config) Path() string { return filepath.Join(c.Dir, "my.cnf") }

// Render returns the my.cnf text.
func (c Config) Render() string {
	var b strings.Builder
	b.WriteString("# written by shoal (internal/mariadb/launch)\n[mariadbd]\n")
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	if os.Geteuid() == 0 {
		line("user=root")
	}
	line("datadir=%s", c.Datadir())
	line("socket=%s", c.Socket())
	line("pid-file=%s", c.PIDFile())
	line("log-error=%s", c.ErrorLog())
	line("port=%d", c.Port)
	bind := c.Bind
	if bind == "" {
		bind = "127.0.0.1"
	}
	line("bind-address=%s", bind)
	line("server-id=%d", c.ServerID)
	line("log-bin=binlog")
	line("binlog_format=ROW")
	line("log_slave_updates=ON")
	line("gtid_strict_mode=ON")
	if c.ReadOnly {
		line("read_only=ON")
	}
	for _, l := range storageConfig {
		line("%s", l)
	}
	for _, l := range speedConfig {
		line("%s", l)
	}
	for _, l := range c.Extra {
		line("%s", l)
	}
	return b.String()
}

// Write writes the my.cnf into the instance directory.
func (c Config) Write() error {
	if err := os.WriteFile(c.Path(), []byte(c.Render()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", c.Path(), err)
	}
	return nil
}

// templateConfig returns the my.cnf used by mariadb-install-db to build a
// template datadir: no networking, no binary log.
func templateConfig(dir string) string {
	var b strings.Builder
	b.WriteString("# written by shoal (internal/mariadb/launch, template)\n[mariadbd]\n")
	if os.Geteuid() == 0 {
		b.WriteString("user=root\n")
	}
	fmt.Fprintf(&b, "datadir=%s\n", filepath.Join(dir, "data"))
	fmt.Fprintf(&b, "socket=%s\n", filepath.Join(dir, "bootstrap.sock"))
	fmt.Fprintf(&b, "log-error=%s\n", filepath.Join(dir, "error.log"))
	b.WriteString("skip-networking\n")
	for _, l := range storageConfig {
		b.WriteString(l + "\n")
	}
	for _, l := range speedConfig {
		b.WriteString(l + "\n")
	}
	return b.String()
}
