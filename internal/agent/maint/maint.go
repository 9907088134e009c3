// Package maint is a node's maintenance mode, like Consul's node
// maintenance: an operator takes a database node out of the pool on every
// agent (reason "maintenance") and puts it back. The state is published
// with the node's tags and, with a tags file, survives restarts; the
// change takes effect first and is saved after (see Set).
package maint

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/view"
)

// DefaultReason is the reason recorded when the operator gives none.
const DefaultReason = "maintenance mode enabled, no reason given"

// ErrNotDB means an operation needs a database agent.
var ErrNotDB = errors.New("this agent has no database (role app): maintenance applies to database nodes")

// Publisher publishes and saves the node's tags (package publish).
type Publisher interface {
	Wanted() map[string]string
	Publish(user map[string]string) error
	WriteTagsFile(user map[string]string) error
	SavedMaint() string // the reason the tags file holds, "" for none
}

// Config is what Maint needs.
type Config struct {
	Node     string
	DB       bool   // a database agent; maintenance applies to no other
	TagsFile string // "" when the state lives in memory only
	Tags     Publisher
	// Pool returns this agent's current pool, or nil (for flap damping).
	Pool func() *pool.Pool
	// Changed records an operator's change (the history): the reason
	// before ("" for off) and the state after.
	Changed func(prev string, st view.Maint)
	Log     *slog.Logger
}

// Maint holds the node's maintenance state.
type Maint struct {
	cfg Config
	// mu guards: reason, saveErr
	mu     sync.Mutex
	reason string // "" when not in maintenance
	// saveErr is why the last change was not saved to the tags file;
	// shown while the file does not hold the state.
	saveErr string
}

// New returns the maintenance state of a node not in maintenance.
func New(cfg Config) *Maint {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Pool == nil {
		cfg.Pool = func() *pool.Pool { return nil }
	}
	if cfg.Changed == nil {
		cfg.Changed = func(string, view.Maint) {}
	}
	return &Maint{cfg: cfg}
}

// Reason is the maintenance reason in effect, "" when not in maintenance.
func (m *Maint) Reason() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reason
}

// Restore puts the node in maintenance as the tags file says at start,
// without publishing it; the default reason stands in for an empty one.
func (m *Maint) Restore(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reason = withDefault(reason)
}

// withDefault returns the reason to publish for r.
func withDefault(r string) string {
	if r == "" {
		return DefaultReason
	}
	return r
}

// Set puts this node in maintenance (every agent then keeps it out of the
// pool, reason "maintenance") or takes it out. It returns once the new tags
// are queued for gossip. With a tags file the state survives restarts.
//
// The change takes effect first (published to every agent), and is saved
// after: a drain must not depend on a full or read-only state directory.
// When saving fails the change stays in effect, the returned state has
// Persisted false and a Warning saying what a restart would do, and the
// error is logged.
func (m *Maint) Set(enable bool, reason string) (view.Maint, error) {
	if !m.cfg.DB {
		return view.Maint{}, ErrNotDB
	}
	if err := config.CheckMaintReason(reason); err != nil {
		return view.Maint{}, err
	}
	m.mu.Lock()
	prev := m.reason
	m.reason = ""
	if enable {
		m.reason = withDefault(reason)
	}
	m.mu.Unlock()
	user := m.cfg.Tags.Wanted()
	if err := m.cfg.Tags.Publish(user); err != nil {
		m.mu.Lock()
		m.reason = prev
		m.mu.Unlock()
		return view.Maint{}, err
	}
	saveErr := m.cfg.Tags.WriteTagsFile(user)
	m.mu.Lock()
	m.saveErr = ""
	if saveErr != nil {
		m.saveErr = saveErr.Error()
	}
	m.mu.Unlock()
	st := m.State()
	if enable {
		m.cfg.Log.Warn("maintenance enabled: this node leaves the pool on every agent", "reason", st.Reason)
	} else if prev != "" {
		m.cfg.Log.Info("maintenance disabled: this node may return to the pool", "was", prev)
	}
	if saveErr != nil {
		m.cfg.Log.Warn("maintenance state not saved: "+st.Warning, "tags_file", m.cfg.TagsFile, "err", saveErr)
	}
	m.cfg.Changed(prev, st)
	return st, nil
}

// State returns this node's maintenance state, whether the tags file holds
// it, and whether this agent's pool holds the node out by flap damping.
func (m *Maint) State() view.Maint {
	m.mu.Lock()
	st := view.Maint{Node: m.cfg.Node, Enabled: m.reason != "", Reason: m.reason}
	saveErr := m.saveErr
	m.mu.Unlock()
	if m.cfg.TagsFile != "" {
		saved := m.cfg.Tags.SavedMaint()
		st.Persisted = saved == st.Reason
		if !st.Persisted {
			st.Warning = unsavedWarning(st.Enabled, saved, m.cfg.TagsFile, saveErr)
		}
	}
	if n, ok := dampedNode(m.cfg.Pool(), st.Node); ok {
		st.Damped, st.DampedUntil, st.DampDetail = true, n.Until, n.Detail
	}
	return st
}

// unsavedWarning says what a restart does when the tags file holds saved
// ("" for off) instead of the maintenance state in effect.
func unsavedWarning(enabled bool, saved, tagsFile, saveErr string) string {
	if saveErr == "" {
		saveErr = "not written yet"
	}
	switch {
	case enabled && saved == "":
		return fmt.Sprintf("maintenance is in effect on every agent but was not saved to tags_file %s (%s): it ENDS if this agent restarts; fix the file system and run `shoal maint enable` again", tagsFile, saveErr)
	case enabled:
		return fmt.Sprintf("maintenance is in effect on every agent but its reason was not saved to tags_file %s (%s): a restart keeps the old reason %q; fix the file system and run `shoal maint enable` again", tagsFile, saveErr, saved)
	default:
		return fmt.Sprintf("maintenance is off on every agent but tags_file %s still holds it (%s): the node RETURNS TO MAINTENANCE if this agent restarts; fix the file system and run `shoal maint disable` again", tagsFile, saveErr)
	}
}

// dampedNode returns node's entry in p when it is out with reason damped.
func dampedNode(p *pool.Pool, node string) (pool.Node, bool) {
	if p == nil {
		return pool.Node{}, false
	}
	for _, c := range p.Clusters {
		for _, n := range c.Out {
			if n.Name == node && n.Reason == pool.ReasonDamped {
				return n, true
			}
		}
	}
	return pool.Node{}, false
}
