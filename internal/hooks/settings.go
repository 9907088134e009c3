package hooks

import (
	"time"

	"github.com/shoaldb/shoal/internal/setting"
)

// MaxQueueSize is the largest queue_size a user may set.
const MaxQueueSize = 1_000_000

// Settings are the hooks settings as a user gives them: the agent's hooks
// section, with its yaml keys. Zero values take the defaults (as in
// Config).
type Settings struct {
	QueueSize          int           `yaml:"queue_size"`
	Timeout            time.Duration `yaml:"timeout"`
	KillGrace          time.Duration `yaml:"kill_grace"`
	OutputLimit        int           `yaml:"output_limit"`
	QueryResponseLimit int           `yaml:"query_response_limit"`
	// Coalesce member events for every handler, like serf's coalescing
	// (off by default: every event runs at once); see Spec.Coalesce.
	Coalesce        bool          `yaml:"coalesce"`
	CoalescePeriod  time.Duration `yaml:"coalesce_period"`
	QuiescentPeriod time.Duration `yaml:"quiescent_period"`
	// Env names more variables of the agent's environment handlers get
	// (Config.EnvAllow).
	Env []string `yaml:"env"`
	// Dir is the handlers' working directory (default: the agent's).
	Dir string `yaml:"dir"`
}

// DefaultSettings returns the settings the agent starts from.
func DefaultSettings() Settings {
	return Settings{
		QueueSize: DefaultQueueSize, Timeout: DefaultTimeout, KillGrace: DefaultKillGrace,
		OutputLimit: DefaultOutputLimit, QueryResponseLimit: DefaultQueryResponseLimit,
		CoalescePeriod: DefaultCoalescePeriod, QuiescentPeriod: DefaultQuiescentPeriod,
	}
}

// Check checks the settings as given: every problem is a *setting.Error
// naming the setting's key.
func (s Settings) Check() error {
	var errs setting.Errors
	if s.QueueSize < 0 || s.QueueSize > MaxQueueSize {
		errs.Addf("queue_size", s.QueueSize, "must be from 1 to %d (0: default %d)", MaxQueueSize, DefaultQueueSize)
	}
	if s.Timeout < 0 || (s.Timeout > 0 && s.Timeout < MinTimeout) {
		errs.Addf("timeout", s.Timeout, "must be at least %s (0: default %s)", MinTimeout, DefaultTimeout)
	}
	if s.KillGrace < 0 {
		errs.Addf("kill_grace", s.KillGrace, "must not be negative")
	}
	if s.OutputLimit < 0 {
		errs.Addf("output_limit", s.OutputLimit, "must not be negative")
	}
	if s.QueryResponseLimit < 0 {
		errs.Addf("query_response_limit", s.QueryResponseLimit, "must not be negative")
	}
	if s.CoalescePeriod < 0 || s.QuiescentPeriod < 0 {
		errs.Addf("coalesce_period", s.CoalescePeriod, "periods must not be negative")
	}
	return errs.Err()
}

// Config returns the runner's configuration from the settings; the caller
// adds Self, the logger and OnRun. Coalesce applies to the specs (see
// Spec.Coalesce).
func (s Settings) Config() Config {
	return Config{
		Dir: s.Dir, EnvAllow: s.Env, QueueSize: s.QueueSize, Timeout: s.Timeout, KillGrace: s.KillGrace,
		OutputLimit: s.OutputLimit, QueryResponseLimit: s.QueryResponseLimit,
		CoalescePeriod: s.CoalescePeriod, QuiescentPeriod: s.QuiescentPeriod,
	}
}
