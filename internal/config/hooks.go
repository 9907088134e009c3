package config

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/shoaldb/shoal/internal/hooks"
)

// Hooks tunes how event handlers run. Zero values take the defaults.
type Hooks struct {
	QueueSize          int           `yaml:"queue_size"`           // per handler, default 1000
	Timeout            time.Duration `yaml:"timeout"`              // per run, default 30s
	KillGrace          time.Duration `yaml:"kill_grace"`           // SIGTERM → SIGKILL, default 5s
	OutputLimit        int           `yaml:"output_limit"`         // bytes of output logged, default 64 KiB
	QueryResponseLimit int           `yaml:"query_response_limit"` // default 1024, serf's limit
	// Coalesce member events for every handler, like serf's coalescing
	// (off by default: every event runs at once).
	Coalesce        bool          `yaml:"coalesce"`
	CoalescePeriod  time.Duration `yaml:"coalesce_period"`  // default 3s
	QuiescentPeriod time.Duration `yaml:"quiescent_period"` // default 1s
	// Env names more variables of the agent's environment handlers get.
	Env []string `yaml:"env"`
	// Dir is the handlers' working directory (default: the agent's).
	Dir string `yaml:"dir"`
}

// HookSpecs parses event_handlers, applying the hooks settings.
func (c *Config) HookSpecs() ([]hooks.Spec, error) {
	var specs []hooks.Spec
	var errs []error
	for i, raw := range c.EventHandlers {
		s, err := hooks.ParseSpec(raw)
		if err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("event_handlers[%d]", i), raw, "%v", err))
			continue
		}
		s.Coalesce = c.Hooks.Coalesce
		specs = append(specs, s)
	}
	return specs, errors.Join(errs...)
}

func (h Hooks) validate() error {
	var errs []error
	if h.QueueSize < 0 || h.QueueSize > 1_000_000 {
		errs = append(errs, fieldErr("hooks.queue_size", strconv.Itoa(h.QueueSize), "must be from 1 to 1000000 (0: default 1000)"))
	}
	if h.Timeout < 0 || (h.Timeout > 0 && h.Timeout < hooks.MinTimeout) {
		errs = append(errs, fieldErr("hooks.timeout", h.Timeout.String(), "must be at least %s (0: default 30s)", hooks.MinTimeout))
	}
	if h.KillGrace < 0 {
		errs = append(errs, fieldErr("hooks.kill_grace", h.KillGrace.String(), "must not be negative"))
	}
	if h.OutputLimit < 0 {
		errs = append(errs, fieldErr("hooks.output_limit", strconv.Itoa(h.OutputLimit), "must not be negative"))
	}
	if h.QueryResponseLimit < 0 {
		errs = append(errs, fieldErr("hooks.query_response_limit", strconv.Itoa(h.QueryResponseLimit), "must not be negative"))
	}
	if h.CoalescePeriod < 0 || h.QuiescentPeriod < 0 {
		errs = append(errs, fieldErr("hooks.coalesce_period", h.CoalescePeriod.String(), "periods must not be negative"))
	}
	return errors.Join(errs...)
}

// RunnerConfig returns the hooks runner settings (the caller adds Self and
// the logger).
func (h Hooks) RunnerConfig() hooks.Config {
	return hooks.Config{
		Dir: h.Dir, EnvAllow: h.Env, QueueSize: h.QueueSize, Timeout: h.Timeout, KillGrace: h.KillGrace,
		OutputLimit: h.OutputLimit, QueryResponseLimit: h.QueryResponseLimit,
		CoalescePeriod: h.CoalescePeriod, QuiescentPeriod: h.QuiescentPeriod,
	}
}
