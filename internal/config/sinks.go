package config

import (
	"errors"
	"fmt"

	filesink "github.com/shoaldb/shoal/internal/sink/file"
	"github.com/shoaldb/shoal/internal/sink/haproxy"
)

// Sinks are the local routers this agent drives from the pool. Each is off
// until configured.
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

func (s Sinks) validate() error {
	var errs []error
	if s.FileEnabled() {
		if err := s.File.Validate(); err != nil {
			errs = append(errs, prefixErrs("sinks.file.", err)...)
		}
	}
	if s.HAProxyEnabled() {
		if err := s.HAProxy.Validate(); err != nil {
			errs = append(errs, prefixErrs("sinks.", err)...)
		}
	}
	return errors.Join(errs...)
}

// prefixErrs splits a joined error and prefixes each part, so that every
// line of the final message names its config key in full.
func prefixErrs(prefix string, err error) []error {
	var out []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, prefixErrs(prefix, e)...)
		}
		return out
	}
	return []error{fmt.Errorf("%s%w", prefix, err)}
}
