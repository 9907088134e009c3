package config

import (
	"errors"
	"fmt"

	"github.com/shoaldb/shoal/internal/setting"
)

// section is a component's part of the configuration: its key and the
// component's own check of the settings (each component owns its settings
// type, its defaults and its limits; config defines none of them).
type section struct {
	key   string
	check func() error
}

// sections are the component sections, each checked by its component.
func (c *Config) sections() []section {
	out := []section{
		{"mysql", c.MySQL.Check},
		{"pool", c.Pool.Check},
		{"gossip", c.Gossip.Check},
		{"hooks", c.Hooks.Check},
		{"history", c.History.Validate},
		{"consensus", c.Consensus.Check},
		{"consensus", c.checkConsensusHost},
	}
	if c.Sinks.FileEnabled() {
		out = append(out, section{"sinks.file", c.Sinks.File.Validate})
	}
	if c.Sinks.HAProxyEnabled() {
		out = append(out, section{"sinks.haproxy", c.Sinks.HAProxy.Validate})
	}
	return out
}

// checkSections runs every component's check, each error naming the
// config key.
func (c *Config) checkSections() error {
	var errs []error
	for _, s := range c.sections() {
		errs = append(errs, sectionErrors(s.key, s.check()))
	}
	return errors.Join(errs...)
}

// sectionErrors turns the *setting.Error of a component into a
// *FieldError naming the full config key (section "mysql", key "timeout":
// mysql.timeout), which Validate completes with the flag and where the
// value was set. Any other error is prefixed by the section.
func sectionErrors(section string, err error) error {
	var out []error
	for _, e := range setting.Leaves(err) {
		var se *setting.Error
		if errors.As(e, &se) {
			out = append(out, &FieldError{Key: section + "." + se.Key, Value: se.Value, Msg: se.Msg})
			continue
		}
		out = append(out, fmt.Errorf("%s: %w", section, e))
	}
	return errors.Join(out...)
}
