// Package publish is the publishing of an agent's own tags: its health
// first, its maintenance state and the operator's user tags, with the
// degradation policy below, the retry of a failed publish, the tags file
// that keeps the user tags (and the maintenance reason) across restarts,
// and the wanted user tags, kept apart from what was gossiped.
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
//   - a failed publish is retried with backoff (with jitter), counted in
//     shoal_health_publish_failures_total and shown by `shoal health` and
//     `shoal info`;
//   - the wanted user tags are kept apart from what is gossiped, so a
//     degraded publish never loses them (nor the tags file's copy).
package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/backoff"
	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// RetryPolicy is the backoff of a failed publish.
var RetryPolicy = backoff.Policy{Initial: 250 * time.Millisecond, Max: 10 * time.Second, Jitter: true}

// ReasonCannotPublish is the health reason published when the node's tags
// cannot be published as they should: the node is critical everywhere.
const ReasonCannotPublish = "cannot-publish"

// Config is what a Publisher needs.
type Config struct {
	Role     string // tags.RoleDB or tags.RoleApp
	Cluster  string
	TagsFile string // "" when the tags live in memory only
	// Port is the MySQL port the health tag carries (db agents).
	Port uint16
	// Serf returns the local serf instance; it is called only once serf
	// exists (from Publish on).
	Serf func() Local
	// Maint returns the maintenance reason in effect, "" for none (package
	// maint owns it).
	Maint func() string
	// Voter returns the consensus voter tag's value, "" when this agent is
	// no voter (nil: none).
	Voter func() string
	// Published runs after a publish changed the local tags (the router's
	// Trigger).
	Published func()
	// Streamed: the GTID position travels in the position stream
	// (gossip.Positions), and a change of the position alone is published
	// in the health tag only every StreamPositionInterval.
	Streamed bool
	Clock    clockwork.Clock // nil: the real clock
	Log      *slog.Logger
}

// Local is the local member's side of serf (*serf.Serf).
type Local interface {
	LocalMember() serf.Member
	SetTags(map[string]string) error
}

// Publisher gossips the agent's tags. Locks are never nested but in the
// order pubMu, then fileMu, then mu.
type Publisher struct {
	cfg   Config
	dirty chan struct{} // a wake-up of Run: the tags need publishing

	// pubMu serializes the changes of the local tags. guards: published, rebroadcast
	pubMu     sync.Mutex
	published map[string]string // the tags the last publish set
	// rebroadcast: the last SetTags failed (a broadcast timeout still
	// changes the local tags), so the next publish broadcasts them again
	// even when they are unchanged, instead of leaving them to push-pull.
	rebroadcast bool

	// fileMu serializes tags file writes. guards: written
	fileMu  sync.Mutex
	written map[string]string // the tags last written to the tags file

	// mu guards: health, wanted, status
	mu        sync.Mutex
	health    tags.Health       // the health to publish (db agents)
	healthSet time.Time         // when health last changed (SetHealth's cadence)
	wanted    map[string]string // the user tags to publish, whatever was gossiped
	status    outcome           // the outcome of the last publish
}

// outcome is the outcome of the last publish.
type outcome struct {
	ok       bool     // the last publish carried everything wanted
	err      string   // why not
	withheld []string // user tags left out to keep the health tag
	minimal  bool     // only a minimal critical health could be published
	failures uint64   // publishes that failed or were degraded
	since    time.Time
}

// New returns a Publisher whose health is critical, "starting".
func New(cfg Config) *Publisher {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Maint == nil {
		cfg.Maint = func() string { return "" }
	}
	if cfg.Voter == nil {
		cfg.Voter = func() string { return "" }
	}
	if cfg.Published == nil {
		cfg.Published = func() {}
	}
	return &Publisher{
		cfg:    cfg,
		dirty:  make(chan struct{}, 1),
		health: tags.Health{State: tags.Critical, Reason: "starting", Port: cfg.Port},
	}
}

// Init sets the user tags to start with and returns the full tag set serf
// starts with; it is recorded as published. User tags that do not fit
// beside the agent's own (a tags file of an older release, whose budget
// was larger) are withheld as Publish withholds them, and kept as wanted:
// the agent starts, and its health reaches the cluster.
func (p *Publisher) Init(user map[string]string) (map[string]string, error) {
	user = UserTags(user)
	full, withheld, minimal, degraded := p.publishable(user)
	if degraded != nil {
		if _, err := p.fullTags(nil); err != nil {
			// Not even the agent's own tags fit: a configuration error.
			return nil, fmt.Errorf("tags: %w", degraded)
		}
		p.cfg.Log.Error("user tags withheld from gossip: they do not fit beside the health tag", "withheld", withheld, "err", degraded)
	}
	p.setWanted(user)
	p.pubMu.Lock()
	p.published = full
	p.pubMu.Unlock()
	p.record(degraded, withheld, minimal)
	return full, nil
}

// The publishing cadence of a health change that is only the GTID position
// (every other fact equal): each publish is a gossip broadcast to every
// agent, and a busy server's position changes at every check. The writer's
// positions are the clock every agent measures replica lag against (their
// receipt times date the writer's transactions), so they need resolution;
// a replica's position only needs to be fresh enough to compare with them.
// Any other change publishes at once, with the newest position.
const (
	// WriterPositionInterval is the least time between two position-only
	// publishes of a writable server (read_only=0), less a tenth of slack
	// for the probe's timing (positionInterval).
	WriterPositionInterval = 250 * time.Millisecond
	// ReaderPositionInterval is that of a read-only server.
	ReaderPositionInterval = time.Second
	// StreamPositionInterval is that of any server when the positions
	// travel in the position stream: the tag's position is then for
	// members that join late, for agents of releases without the stream,
	// and the position when the stream misses one for long.
	StreamPositionInterval = 30 * time.Second
)

// positionInterval is the position-only cadence of a server with health h,
// less a tenth: the probe checks every 250 ms by default, as often as the
// writer's cadence, and a check that comes a little early (its ticker's
// jitter, a slower check before) must not be held to the check after,
// which would halve the resolution.
func positionInterval(h tags.Health, streamed bool) time.Duration {
	d := WriterPositionInterval
	switch {
	case streamed:
		d = StreamPositionInterval
	case h.ReadOnly:
		d = ReaderPositionInterval
	}
	return d - d/10
}

// SetHealth sets the health to publish: h with the sequence number of the
// current health, advanced when the state changed. It wakes Run when the
// health changed, but a change of the GTID position alone only once
// positionInterval has passed since the last publish of a health: until
// then h is held, and the next call (the probe's next check, changed or
// not) publishes it once the interval is over. A position that lacks a
// transaction of the last one published (a server restored from a backup)
// is published at once.
func (p *Publisher) SetHealth(h tags.Health, stateChanged bool) {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	h.Seq = p.health.Seq
	if stateChanged {
		h.Seq++
	}
	changed := h != p.health
	samePos := h
	samePos.Position = p.health.Position
	if changed && samePos == p.health && h.Position.Covers(p.health.Position) && now.Sub(p.healthSet) < positionInterval(h, p.cfg.Streamed) {
		changed = false // position only, too soon: held until a later call
	}
	if changed {
		p.health, p.healthSet = h, now
	}
	p.mu.Unlock()
	if changed {
		p.MarkDirty()
	}
}

// MarkDirty wakes Run: the local tags need publishing.
func (p *Publisher) MarkDirty() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// Run gossips the agent's tags whenever they change, off the probe's
// goroutine (serf's SetTags waits for the broadcast to be queued), and
// retries a failed publish with backoff, until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	b := backoff.New(RetryPolicy, p.cfg.Clock)
	var retry <-chan time.Time // nil: no retry planned
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.dirty:
		case <-retry:
		}
		retry = nil
		if err := p.Publish(nil); err != nil {
			wait := b.Next()
			p.cfg.Log.Error("publish tags; retrying", "err", err, "in", wait)
			retry = p.cfg.Clock.After(wait)
			continue
		}
		b.Reset()
	}
}

// Status reports whether this agent's tags, its health above all, reach
// the cluster.
func (p *Publisher) Status() view.PublishStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.status
	return view.PublishStatus{
		OK: s.ok, Error: s.err, WithheldTags: slices.Clone(s.withheld),
		MinimalHealth: s.minimal, Failures: s.failures, Since: s.since,
	}
}

// Failures is the value of shoal_health_publish_failures_total.
func (p *Publisher) Failures() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status.failures
}

func (p *Publisher) record(err error, withheld []string, minimal bool) {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.status
	ok := err == nil
	if !ok {
		s.failures++
	}
	if ok != s.ok || s.since.IsZero() {
		s.since = now
	}
	s.ok, s.withheld, s.minimal = ok, withheld, minimal
	s.err = ""
	if err != nil {
		s.err = err.Error()
	}
}

// Wanted returns a copy of the user tags the operator wants published
// (config, tags file, API, RPC), whatever was gossiped.
func (p *Publisher) Wanted() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.wanted)
}

func (p *Publisher) setWanted(user map[string]string) {
	p.mu.Lock()
	p.wanted = maps.Clone(user)
	p.mu.Unlock()
}

// Publish gossips the full tag set built from the agent's state and the
// user tags: user when not nil (it becomes the wanted user tags), else the
// wanted user tags. Every writer of the local tags goes through here, one
// at a time, so that a health publish never overwrites a concurrent
// maintenance or tag change with the state it read before.
//
// A change of the local tags made outside of here (the Serf RPC's tags
// command) is adopted as the new wanted user tags and persisted; shoal's
// reserved tags are always rebuilt from the agent's own state.
//
// With user given, tags that do not fit are an error and nothing changes.
// Without, the health tag has priority: see the package doc.
func (p *Publisher) Publish(user map[string]string) error {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	s := p.cfg.Serf()
	cur := s.LocalMember().Tags
	strict := user != nil
	switch {
	case strict:
	case p.published != nil && !maps.Equal(cur, p.published):
		// Changed behind our back: adopt the user part, persist it.
		user = UserTags(cur)
		p.setWanted(user)
		if err := p.WriteTagsFile(user); err != nil {
			p.cfg.Log.Error("persist tags changed through the Serf RPC", "err", err)
		}
		p.cfg.Log.Info("local tags changed through the Serf RPC", "user_tags", len(user))
	default:
		user = p.Wanted()
	}
	next, withheld, minimal, degraded := p.publishable(user)
	if strict {
		if degraded != nil {
			return degraded
		}
		p.setWanted(user)
	}
	if maps.Equal(cur, next) && !p.rebroadcast {
		p.published = next
		p.record(degraded, withheld, minimal)
		return nil
	}
	start := p.cfg.Clock.Now()
	err := s.SetTags(next)
	if err == nil || s.LocalMember().Tags != nil && maps.Equal(s.LocalMember().Tags, next) {
		// A broadcast timeout still changed the local state, which gossip
		// and push-pull carry on: remember it as ours.
		p.published = next
	}
	p.rebroadcast = err != nil
	if err != nil {
		err = fmt.Errorf("set tags: %w", err)
		p.record(err, withheld, minimal)
		return err
	}
	if degraded != nil {
		p.cfg.Log.Error("health published without some user tags: they do not fit with it", "withheld", withheld, "minimal", minimal, "err", degraded)
	}
	p.record(degraded, withheld, minimal)
	p.cfg.Log.Debug("published tags", "health", next[tags.KeyHealth], "took", p.cfg.Clock.Since(start))
	p.cfg.Published()
	return nil
}

// publishable returns the tags to gossip for user. When they do not fit,
// the user tags are withheld (health has priority), and when even the
// agent's own tags do not fit, a minimal critical health is returned that
// always fits. degraded says why anything was left out.
func (p *Publisher) publishable(user map[string]string) (next map[string]string, withheld []string, minimal bool, degraded error) {
	next, err := p.fullTags(user)
	if err == nil {
		return next, nil, false, nil
	}
	degraded = err
	withheld = slices.Sorted(maps.Keys(user))
	if next, err = p.fullTags(nil); err == nil {
		return next, withheld, false, degraded
	}
	degraded = errors.Join(degraded, err)
	return p.minimalTags(), withheld, true, degraded
}

// fullTags builds the tag set to gossip from user tags and the agent's own
// state (role, cluster, health, maintenance), and checks it against the
// rules every agent applies to gossiped tags (package member), so that an
// agent never publishes tags that make it bad-tags everywhere.
func (p *Publisher) fullTags(user map[string]string) (map[string]string, error) {
	var h *tags.Health
	if p.cfg.Role == tags.RoleDB {
		p.mu.Lock()
		hh := p.health
		p.mu.Unlock()
		h = &hh
	}
	full, err := tags.Merge(user, p.cfg.Role, p.cfg.Cluster, h, p.cfg.Maint(), p.cfg.Voter())
	if err != nil {
		return nil, err
	}
	// Never publish tags the other agents would refuse (bad-tags).
	if d := member.CheckTags(full); d != "" {
		return nil, fmt.Errorf("tags: %s", d)
	}
	return full, nil
}

// minimalTags is the smallest honest tag set: role, a valid cluster, and
// on a db agent a critical health with reason cannot-publish.
func (p *Publisher) minimalTags() map[string]string {
	out := map[string]string{tags.KeyRole: p.cfg.Role}
	if c := p.cfg.Cluster; c != "" && len(c) <= tags.MaxClusterLen {
		out[tags.KeyCluster] = c
	}
	if p.cfg.Role == tags.RoleDB {
		p.mu.Lock()
		h := tags.Health{State: tags.Critical, Reason: ReasonCannotPublish, Seq: p.health.Seq, Port: p.health.Port}
		p.mu.Unlock()
		out[tags.KeyHealth] = tags.Encode(h)
	}
	return out
}

// UserTags returns the tags an operator controls: everything but shoal's
// reserved keys.
func UserTags(all map[string]string) map[string]string {
	out := make(map[string]string, len(all))
	for k, v := range all {
		if !tags.IsReserved(k) {
			out[k] = v
		}
	}
	return out
}
