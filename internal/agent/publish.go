package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// Publishing the local tags, health first.
//
// memberlist carries at most 512 bytes of tags per node. The health tag
// must always reach the cluster: a node whose health cannot be published
// would stay routable on stale health everywhere else. So:
//
//   - every entry point that changes user tags (config, tags file, HTTP
//     API, Serf RPC) refuses tags over tags.UserTagBudget, which together
//     with the limits on the cluster name and maintenance reason always fits;
//   - should a publish still not fit (a bypass, a future field), the health
//     tag wins: the user tags are withheld from gossip, not the health; if
//     even that does not fit, a minimal "critical, cannot-publish" health
//     that always fits is published, so the node leaves every pool;
//   - a failed publish is retried with backoff, counted in
//     shoal_health_publish_failures_total and shown by `shoal health` and
//     `shoal info`;
//   - the wanted user tags are kept apart from what is gossiped, so a
//     degraded publish never loses them (nor the tags file's copy).

// Publish retry backoff.
const (
	publishRetryMin = 250 * time.Millisecond
	publishRetryMax = 10 * time.Second
)

// ReasonCannotPublish is the health reason published when the node's tags
// cannot be published as they should: the node is critical everywhere.
const ReasonCannotPublish = "cannot-publish"

// pubState is the outcome of the last publish.
type pubState struct {
	mu       sync.Mutex
	ok       bool     // the last publish carried everything wanted
	err      string   // why not
	withheld []string // user tags left out to keep the health tag
	minimal  bool     // only a minimal critical health could be published
	failures uint64   // publishes that failed or were degraded
	since    time.Time
}

func (p *pubState) record(err error, withheld []string, minimal bool, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok := err == nil
	if !ok {
		p.failures++
	}
	if ok != p.ok || p.since.IsZero() {
		p.since = now
	}
	p.ok, p.withheld, p.minimal = ok, withheld, minimal
	p.err = ""
	if err != nil {
		p.err = err.Error()
	}
}

// PublishStatus reports whether this agent's tags, its health above all,
// reach the cluster.
func (a *Agent) PublishStatus() view.PublishStatus {
	p := &a.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	return view.PublishStatus{
		OK:            p.ok,
		Error:         p.err,
		WithheldTags:  slices.Clone(p.withheld),
		MinimalHealth: p.minimal,
		Failures:      p.failures,
		Since:         p.since,
	}
}

// publishFailures is the value of shoal_health_publish_failures_total.
func (a *Agent) publishFailures() uint64 {
	a.pub.mu.Lock()
	defer a.pub.mu.Unlock()
	return a.pub.failures
}

// wantedUserTags returns a copy of the user tags the operator wants
// published (config, tags file, API, RPC), whatever was gossiped.
func (a *Agent) wantedUserTags() map[string]string {
	a.wantMu.Lock()
	defer a.wantMu.Unlock()
	return maps.Clone(a.userWant)
}

func (a *Agent) setWantedUserTags(user map[string]string) {
	a.wantMu.Lock()
	a.userWant = maps.Clone(user)
	a.wantMu.Unlock()
}

// publishLoop gossips the agent's tags whenever they change, off the
// probe's goroutine (serf's SetTags waits for the broadcast to be queued),
// and retries a failed publish with backoff.
func (a *Agent) publishLoop(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	wait := publishRetryMin
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.dirty:
		case <-retry.C:
		}
		if err := a.publish(nil); err != nil {
			a.log.Error("publish tags; retrying", "err", err, "in", wait)
			retry.Reset(wait)
			wait = min(2*wait, publishRetryMax)
			continue
		}
		wait = publishRetryMin
	}
}

// publish gossips the full tag set built from the agent's state and the user
// tags: user when not nil (it becomes the wanted user tags), else the wanted
// user tags. Every writer of the local tags goes through here, one at a time,
// so that a health publish never overwrites a concurrent maintenance or tag
// change with the state it read before.
//
// A change of the local tags made outside of here (the Serf RPC's tags
// command) is adopted as the new wanted user tags and persisted; shoal's
// reserved tags are always rebuilt from the agent's own state.
//
// With user given, tags that do not fit are an error and nothing changes.
// Without, the health tag has priority: see the comment at the top.
func (a *Agent) publish(user map[string]string) error {
	a.pubMu.Lock()
	defer a.pubMu.Unlock()
	cur := a.Serf().LocalMember().Tags
	strict := user != nil
	switch {
	case strict:
	case a.published != nil && !maps.Equal(cur, a.published):
		// Changed behind our back: adopt the user part, persist it.
		user = userTags(cur)
		a.setWantedUserTags(user)
		if err := a.writeTagsFile(user); err != nil {
			a.log.Error("persist tags changed through the Serf RPC", "err", err)
		}
		a.log.Info("local tags changed through the Serf RPC", "user_tags", len(user))
	default:
		user = a.wantedUserTags()
	}
	next, withheld, minimal, degraded := a.publishable(user)
	if strict {
		if degraded != nil {
			return degraded
		}
		a.setWantedUserTags(user)
	}
	if maps.Equal(cur, next) {
		a.published = next
		a.pub.record(degraded, withheld, minimal, time.Now())
		return nil
	}
	start := time.Now()
	err := a.Serf().SetTags(next)
	if err == nil || a.Serf().LocalMember().Tags != nil && maps.Equal(a.Serf().LocalMember().Tags, next) {
		// A broadcast timeout still changed the local state, which gossip
		// and push-pull carry on: remember it as ours.
		a.published = next
	}
	if err != nil {
		err = fmt.Errorf("set tags: %w", err)
		a.pub.record(err, withheld, minimal, time.Now())
		return err
	}
	if degraded != nil {
		a.log.Error("health published without some user tags: they do not fit with it", "withheld", withheld, "minimal", minimal, "err", degraded)
	}
	a.pub.record(degraded, withheld, minimal, time.Now())
	a.log.Debug("published tags", "health", next[tags.KeyHealth], "took", time.Since(start))
	a.router.Trigger()
	return nil
}

// publishable returns the tags to gossip for user. When they do not fit,
// the user tags are withheld (health has priority), and when even the
// agent's own tags do not fit, a minimal critical health is returned that
// always fits. degraded says why anything was left out.
func (a *Agent) publishable(user map[string]string) (next map[string]string, withheld []string, minimal bool, degraded error) {
	next, err := a.fullTags(user)
	if err == nil {
		return next, nil, false, nil
	}
	degraded = err
	withheld = slices.Sorted(maps.Keys(user))
	if next, err = a.fullTags(nil); err == nil {
		return next, withheld, false, degraded
	}
	degraded = errors.Join(degraded, err)
	return a.minimalTags(), withheld, true, degraded
}

// minimalTags is the smallest honest tag set: role, a valid cluster, and
// on a db agent a critical health with reason cannot-publish.
func (a *Agent) minimalTags() map[string]string {
	out := map[string]string{tags.KeyRole: a.role}
	if c := a.cfg.Cluster; c != "" && len(c) <= tags.MaxClusterLen {
		out[tags.KeyCluster] = c
	}
	if a.role == tags.RoleDB {
		a.mu.Lock()
		h := tags.Health{State: tags.Critical, Reason: ReasonCannotPublish, Seq: a.health.Seq, Port: a.health.Port}
		a.mu.Unlock()
		out[tags.KeyHealth] = tags.Encode(h)
	}
	return out
}
