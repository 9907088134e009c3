package mariadbtest

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

// serverConfig describes one instance's my.cnf.
type serverConfig struct {
	dir      string // instance directory: datadir, socket, logs
	port     int
	serverID int
	readOnly bool
	bind     string // bind-address; "" is 127.0.0.1
	netns    string // network namespace to run in; "" is the caller's
	extra    []string
}

func (c serverConfig) datadir() string { return filepath.Join(c.dir, "data") }
func (c serverConfig) socket() string  { return filepath.Join(c.dir, "mysqld.sock") }
func (c serverConfig) errorLog() string {
	return filepath.Join(c.dir, "error.log")
}
func (c serverConfig) path() string { return filepath.Join(c.dir, "my.cnf") }

// render returns the my.cnf text.
func (c serverConfig) render() string {
	var b strings.Builder
	b.WriteString("# written by mariadbtest\n[mariadbd]\n")
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	if os.Geteuid() == 0 {
		line("user=root")
	}
	line("datadir=%s", c.datadir())
	line("socket=%s", c.socket())
	line("pid-file=%s", filepath.Join(c.dir, "mysqld.pid"))
	line("log-error=%s", c.errorLog())
	line("port=%d", c.port)
	bind := c.bind
	if bind == "" {
		bind = "127.0.0.1"
	}
	line("bind-address=%s", bind)
	line("server-id=%d", c.serverID)
	line("log-bin=binlog")
	line("binlog_format=ROW")
	line("log_slave_updates=ON")
	line("gtid_strict_mode=ON")
	if c.readOnly {
		line("read_only=ON")
	}
	for _, l := range storageConfig {
		line("%s", l)
	}
	for _, l := range speedConfig {
		line("%s", l)
	}
	for _, l := range c.extra {
		line("%s", l)
	}
	return b.String()
}

// write writes the my.cnf into the instance directory.
func (c serverConfig) write() error {
	if err := os.WriteFile(c.path(), []byte(c.render()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", c.path(), err)
	}
	return nil
}

// templateConfig returns the my.cnf used by mariadb-install-db to build a
// template datadir: no networking, no binary log.
func templateConfig(dir string) string {
	var b strings.Builder
	b.WriteString("# written by mariadbtest (template)\n[mariadbd]\n")
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
