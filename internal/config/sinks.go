package config

import (
	filesink "github.com/shoaldb/shoal/internal/sink/file"
	"github.com/shoaldb/shoal/internal/sink/haproxy"
)

// Sinks are the local routers this agent drives from the pool. Each is off
// until configured, so their sections start empty: each sink applies its
// own defaults (WithDefaults) once enabled.
type Sinks struct {
	File    filesink.Config `yaml:"file"`
	HAProxy haproxy.Config  `yaml:"haproxy"`
}

// FileEnabled reports whether the file sink is configured.
func (s Sinks) FileEnabled() bool {
	return s.File.Path != "" || s.File.ListsDir != "" || s.File.Mode != "" || s.File.Interval != 0
}

// HAProxyEnabled reports whether the HAProxy sink is configured.
func (s Sinks) HAProxyEnabled() bool {
	return s.HAProxy.Address != "" || len(s.HAProxy.Backends) > 0
}
