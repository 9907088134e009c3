package agent

import (
	"errors"
	"fmt"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// DefaultMaintReason is the reason recorded when the operator gives none.
const DefaultMaintReason = "maintenance mode enabled, no reason given"

// ErrNotDB means an operation needs a database agent.
var ErrNotDB = errors.New("this agent has no database (role app): maintenance applies to database nodes")

// maintReason returns the reason to publish for r.
func maintReason(r string) string {
	if r == "" {
		return DefaultMaintReason
	}
	return r
}

// checkMaintReason rejects reasons that the tag would not carry as given.
func checkMaintReason(r string) error { return config.CheckMaintReason(r) }

// SetMaint puts this node in maintenance (every agent then keeps it out of
// the pool, reason "maintenance") or takes it out, like Consul's node
// maintenance mode. It returns once the new tags are queued for gossip. With
// a tags file the state survives restarts.
//
// The change takes effect first (published to every agent), and is saved
// after: a drain must not depend on a full or read-only state directory.
// When saving fails the change stays in effect, the returned state has
// Persisted false and a Warning saying what a restart would do, and the
// error is logged.
func (a *Agent) SetMaint(enable bool, reason string) (view.Maint, error) {
	if a.role != tags.RoleDB {
		return view.Maint{}, ErrNotDB
	}
	if err := checkMaintReason(reason); err != nil {
		return view.Maint{}, err
	}
	a.mu.Lock()
	prev := a.maint
	a.maint = ""
	if enable {
		a.maint = maintReason(reason)
	}
	a.mu.Unlock()
	user := a.wantedUserTags()
	if err := a.publish(user); err != nil {
		a.mu.Lock()
		a.maint = prev
		a.mu.Unlock()
		return view.Maint{}, err
	}
	saveErr := a.writeTagsFile(user)
	a.mu.Lock()
	a.maintSaveErr = ""
	if saveErr != nil {
		a.maintSaveErr = saveErr.Error()
	}
	a.mu.Unlock()
	st := a.Maint()
	if enable {
		a.log.Warn("maintenance enabled: this node leaves the pool on every agent", "reason", st.Reason)
	} else if prev != "" {
		a.log.Info("maintenance disabled: this node may return to the pool", "was", prev)
	}
	if saveErr != nil {
		a.log.Warn("maintenance state not saved: "+st.Warning, "tags_file", a.cfg.TagsFile, "err", saveErr)
	}
	a.recordMaint(prev, st)
	return st, nil
}

// Maint returns this node's maintenance state, whether the tags file holds
// it, and whether this agent's pool holds the node out by flap damping.
func (a *Agent) Maint() view.Maint {
	a.mu.Lock()
	st := view.Maint{
		Node:    a.cfg.Node,
		Enabled: a.maint != "",
		Reason:  a.maint,
	}
	saveErr := a.maintSaveErr
	a.mu.Unlock()
	if a.cfg.TagsFile != "" {
		a.tagsFileMu.Lock()
		saved := a.tagsWritten[tags.KeyMaint]
		a.tagsFileMu.Unlock()
		st.Persisted = saved == st.Reason
		if !st.Persisted {
			st.Warning = unsavedMaintWarning(st.Enabled, saved, a.cfg.TagsFile, saveErr)
		}
	}
	if a.router != nil {
		if n, ok := dampedNode(a.router.Current().Pool, st.Node); ok {
			st.Damped, st.DampedUntil, st.DampDetail = true, n.Until, n.Detail
		}
	}
	return st
}

// unsavedMaintWarning says what a restart does when the tags file holds
// saved ("" for off) instead of the maintenance state in effect.
func unsavedMaintWarning(enabled bool, saved, tagsFile, saveErr string) string {
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
