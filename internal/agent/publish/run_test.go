package publish

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/tags"
)

// fakeLocal is the local member of a serf whose SetTags fails while fail
// is above 0.
type fakeLocal struct {
	mu    sync.Mutex
	tags  map[string]string
	fail  int
	calls int
	// keep: a failed SetTags still sets the tags, as serf's does when
	// only the broadcast timed out.
	keep bool
}

func (f *fakeLocal) LocalMember() serf.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return serf.Member{Name: "db1", Tags: maps.Clone(f.tags)}
}

func (f *fakeLocal) SetTags(t map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail > 0 {
		f.fail--
		if f.keep {
			f.tags = maps.Clone(t)
		}
		return errors.New("timeout waiting for update broadcast")
	}
	f.tags = maps.Clone(t)
	return nil
}

func (f *fakeLocal) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// TestRunRetriesWithJitteredBackoff: a failed publish is retried after a
// jittered backoff (at most RetryPolicy.Initial the first time), counted,
// and the retry that succeeds clears the failure.
func TestRunRetriesWithJitteredBackoff(t *testing.T) {
	clock := clockwork.NewFakeClock()
	local := &fakeLocal{fail: 2}
	maint := ""
	p := dbPublisher(t, &maint)
	p.cfg.Clock = clock
	p.cfg.Serf = func() Local { return local }
	if _, err := p.Init(nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	p.SetHealth(tags.Health{State: tags.Passing, Port: 3306}, true)
	for want, wait := range []time.Duration{RetryPolicy.Initial, 2 * RetryPolicy.Initial} {
		// Run is waiting for its retry timer after attempt want+1 failed.
		if err := clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if got := local.callCount(); got != want+1 {
			t.Fatalf("attempts = %d, want %d", got, want+1)
		}
		clock.Advance(wait) // the jittered wait is at most the policy's delay
	}
	for local.callCount() < 3 || !p.Status().OK {
		if ctx.Err() != nil {
			t.Fatalf("no successful retry: %d attempts, status %+v", local.callCount(), p.Status())
		}
		time.Sleep(time.Millisecond)
	}
	if st := p.Status(); st.Failures != 2 {
		t.Fatalf("status = %+v, want 2 failures counted", st)
	}
	if h, err := tags.Decode(local.LocalMember().Tags[tags.KeyHealth]); err != nil || h.State != tags.Passing {
		t.Fatalf("published health = %+v, %v", h, err)
	}
	cancel()
	<-done
}

// TestRetryBroadcastsAgainAfterATimeout: serf's SetTags that timed out
// waiting for its broadcast has still changed the local tags; the retry
// broadcasts them again rather than leaving them to the next push-pull
// (seen in CI: a db agent's first passing health reached the others only
// by push-pull, 31 s later).
func TestRetryBroadcastsAgainAfterATimeout(t *testing.T) {
	local := &fakeLocal{fail: 1, keep: true}
	maint := ""
	p := dbPublisher(t, &maint)
	p.cfg.Serf = func() Local { return local }
	if _, err := p.Init(nil); err != nil {
		t.Fatal(err)
	}
	p.SetHealth(tags.Health{State: tags.Passing, Port: 3306}, true)
	if err := p.Publish(nil); err == nil {
		t.Fatal("first publish: no error from a broadcast timeout")
	}
	if err := p.Publish(nil); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := local.callCount(); got != 2 {
		t.Fatalf("SetTags calls = %d, want 2: the retry must broadcast the unchanged tags again", got)
	}
	if err := p.Publish(nil); err != nil || local.callCount() != 2 {
		t.Fatalf("a publish after the successful retry broadcast again (%d calls, %v)", local.callCount(), err)
	}
	if !p.Status().OK {
		t.Fatalf("status = %+v, want ok after the retry", p.Status())
	}
}

// TestAdoptsTagsChangedBehindItsBack: tags set on serf directly (the Serf
// RPC's tags command) become the wanted user tags and are persisted, while
// shoal's own tags are rebuilt from its state.
func TestAdoptsTagsChangedBehindItsBack(t *testing.T) {
	local := &fakeLocal{}
	maint := ""
	p := dbPublisher(t, &maint)
	p.cfg.Serf = func() Local { return local }
	full, err := p.Init(map[string]string{"dc": "eu"})
	if err != nil {
		t.Fatal(err)
	}
	changed := maps.Clone(full)
	changed["dc"], changed[tags.KeyRole] = "us", "app"
	local.tags = changed
	if err := p.Publish(nil); err != nil {
		t.Fatal(err)
	}
	if w := p.Wanted(); w["dc"] != "us" || len(w) != 1 {
		t.Fatalf("wanted = %v, want dc=us adopted", w)
	}
	if got := local.LocalMember().Tags; got[tags.KeyRole] != tags.RoleDB || got["dc"] != "us" {
		t.Fatalf("published = %v, want role rebuilt and dc=us", got)
	}
	q := New(Config{Role: tags.RoleDB, TagsFile: p.cfg.TagsFile})
	if saved, err := q.Load(nil); err != nil || saved.User["dc"] != "us" {
		t.Fatalf("tags file = %+v, %v; want dc=us persisted", saved, err)
	}
}
