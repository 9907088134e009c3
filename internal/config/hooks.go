package config

import (
	"errors"
	"fmt"

	"github.com/shoaldb/shoal/internal/hooks"
)

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
