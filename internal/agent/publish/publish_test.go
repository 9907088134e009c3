package publish

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/tags"
)

func dbPublisher(t *testing.T, maint *string) *Publisher {
	t.Helper()
	return New(Config{
		Role: tags.RoleDB, Cluster: "main", Port: 3306,
		TagsFile: filepath.Join(t.TempDir(), "tags.json"),
		Maint:    func() string { return *maint },
		Clock:    clockwork.NewFakeClock(),
	})
}

// TestHealthWinsOverUserTags: user tags that do not fit beside the health
// are withheld, and when not even the agent's own tags fit, a minimal
// critical health that always fits is published.
func TestHealthWinsOverUserTags(t *testing.T) {
	maint := ""
	p := dbPublisher(t, &maint)
	user := map[string]string{"pad": strings.Repeat("x", 450)}
	next, withheld, minimal, degraded := p.publishable(user)
	if degraded == nil || minimal || len(withheld) != 1 || withheld[0] != "pad" || next[tags.KeyHealth] == "" || next["pad"] != "" {
		t.Fatalf("publishable = %v, %v, %v, %v; want the pad withheld and the health kept", next, withheld, minimal, degraded)
	}
	maint = strings.Repeat("m", tags.MaxMaintLen+1) // a bypass: too long for the tag
	next, _, minimal, degraded = p.publishable(user)
	h, err := tags.Decode(next[tags.KeyHealth])
	if degraded == nil || !minimal || err != nil || h.State != tags.Critical || h.Reason != ReasonCannotPublish || h.Port != 3306 {
		t.Fatalf("publishable = %v, minimal %v, %v; want a minimal critical health", next, minimal, degraded)
	}
}

// TestSetHealthSequence: the sequence number advances with each change of
// state, and only a change wakes the publisher.
func TestSetHealthSequence(t *testing.T) {
	maint := ""
	p := dbPublisher(t, &maint)
	p.SetHealth(tags.Health{State: tags.Passing, Port: 3306}, true)
	select {
	case <-p.dirty:
	default:
		t.Fatal("a new health did not wake the publisher")
	}
	p.SetHealth(tags.Health{State: tags.Passing, Port: 3306}, false)
	select {
	case <-p.dirty:
		t.Fatal("the same health woke the publisher")
	default:
	}
	full, err := p.fullTags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := tags.Decode(full[tags.KeyHealth]); h.Seq != 1 || h.State != tags.Passing {
		t.Fatalf("health = %+v, want passing with seq 1", h)
	}
}

// TestTagsFileKeepsMaint: the tags file holds the user tags and the
// maintenance reason, and is read back as both.
func TestTagsFileKeepsMaint(t *testing.T) {
	maint := "upgrade"
	p := dbPublisher(t, &maint)
	saved, err := p.Load(map[string]string{"dc": "eu"})
	if err != nil || saved.InMaint || saved.User["dc"] != "eu" {
		t.Fatalf("first Load = %+v, %v", saved, err)
	}
	if got := p.SavedMaint(); got != "upgrade" {
		t.Fatalf("SavedMaint = %q, want the reason written with the new file", got)
	}
	q := New(Config{Role: tags.RoleDB, TagsFile: p.cfg.TagsFile})
	saved, err = q.Load(nil)
	if err != nil || !saved.InMaint || saved.Maint != "upgrade" || len(saved.User) != 1 || saved.User["dc"] != "eu" {
		t.Fatalf("Load = %+v, %v; want dc=eu and the reason", saved, err)
	}
	if fi, err := os.Stat(p.cfg.TagsFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tags file: %v, %v", fi, err)
	}
}

// TestChangeRefusesReservedAndOversized: a tag change may not touch
// shoal's keys nor grow past the user tag budget; nothing changes then.
func TestChangeRefusesReservedAndOversized(t *testing.T) {
	maint := ""
	p := dbPublisher(t, &maint)
	if _, err := p.Init(map[string]string{"dc": "eu"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Change(nil, []string{tags.KeyRole}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("deleting role: %v", err)
	}
	if _, err := p.Change(map[string]string{"pad": strings.Repeat("x", 200)}, nil); !errors.Is(err, tags.ErrTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	got, err := p.Change(map[string]string{"rack": "r1"}, []string{"dc"})
	if err != nil || len(got) != 1 || got["rack"] != "r1" {
		t.Fatalf("Change = %v, %v", got, err)
	}
	if w := p.Wanted(); len(w) != 1 || w["dc"] != "eu" {
		t.Fatalf("Change changed the wanted tags: %v", w)
	}
}

// TestStatusCountsFailures: every failed or degraded publish is counted,
// and since moves only when the outcome flips.
func TestStatusCountsFailures(t *testing.T) {
	clock := clockwork.NewFakeClock()
	p := New(Config{Role: tags.RoleApp, Clock: clock})
	p.record(nil, nil, false)
	t0 := p.Status().Since
	clock.Advance(time.Second)
	p.record(errors.New("boom"), []string{"pad"}, false)
	clock.Advance(time.Second)
	p.record(errors.New("boom"), []string{"pad"}, false)
	st := p.Status()
	if st.OK || st.Failures != 2 || st.Error != "boom" || !st.Since.Equal(t0.Add(time.Second)) || p.Failures() != 2 {
		t.Fatalf("status = %+v", st)
	}
}

// TestPositionCadence: a change of the GTID position alone is published at
// most every WriterPositionInterval by a writable server and every
// ReaderPositionInterval by a read-only one; a held position goes out at
// the next check after the interval even when it has stopped changing; any
// other change goes out at once, with the newest position.
func TestPositionCadence(t *testing.T) {
	pos := func(seq uint64) tags.Position {
		p, err := tags.NewPosition([]tags.Domain{{ID: 0, Seq: seq}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		readOnly bool
		interval time.Duration
	}{{false, WriterPositionInterval}, {true, ReaderPositionInterval}} {
		maint := ""
		p := dbPublisher(t, &maint)
		clock := p.cfg.Clock.(*clockwork.FakeClock)
		woke := func() bool {
			select {
			case <-p.dirty:
				return true
			default:
				return false
			}
		}
		published := func() tags.Health {
			full, err := p.fullTags(nil)
			if err != nil {
				t.Fatal(err)
			}
			h, err := tags.Decode(full[tags.KeyHealth])
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		base := tags.Health{State: tags.Passing, ReadOnly: tc.readOnly, Port: 3306}
		check := func(seq uint64) bool {
			h := base
			h.Position = pos(seq)
			p.SetHealth(h, false)
			return woke()
		}
		p.SetHealth(base, true)
		woke()
		// The first position is a change like any other: just after the
		// state change it is held too.
		if check(1) {
			t.Fatalf("read_only=%v: a position right after a publish woke the publisher", tc.readOnly)
		}
		step := tc.interval / 5
		var at time.Duration
		for seq := uint64(2); at+step < tc.interval; seq++ {
			clock.Advance(step)
			at += step
			if check(seq) {
				t.Fatalf("read_only=%v: position %d published %s after the last publish, under %s", tc.readOnly, seq, at, tc.interval)
			}
		}
		if got := published().Position; got.Known() {
			t.Fatalf("read_only=%v: held position %v is in the tags", tc.readOnly, got)
		}
		// The position stops changing at 9; the next check after the
		// interval publishes it.
		clock.Advance(tc.interval - at)
		if !check(9) {
			t.Fatalf("read_only=%v: the held position was not published after %s", tc.readOnly, tc.interval)
		}
		if got := published().Position; got != pos(9) {
			t.Fatalf("read_only=%v: published position %v, want 0:9", tc.readOnly, got)
		}
		if check(9) {
			t.Fatalf("read_only=%v: an unchanged health woke the publisher", tc.readOnly)
		}
		// Any other change goes out at once, with the newest position.
		clock.Advance(time.Millisecond)
		h := base
		h.Position, h.LagKnown = pos(10), true
		p.SetHealth(h, false)
		if !woke() || published().Position != pos(10) || !published().LagKnown {
			t.Fatalf("read_only=%v: another change with a position was held: %+v", tc.readOnly, published())
		}
	}
	if WriterPositionInterval >= ReaderPositionInterval {
		t.Fatal("the writer's cadence must be the finer one")
	}
}

// TestLoadKeepsLegacyMaint: a tags file written by an older release, with a
// maintenance reason over tags.MaxMaintLen, still starts the node in
// maintenance, with the reason cut.
func TestLoadKeepsLegacyMaint(t *testing.T) {
	maint := ""
	p := dbPublisher(t, &maint)
	long := strings.Repeat("r", 128)
	if err := os.WriteFile(p.cfg.TagsFile, []byte(`{"dc":"eu","maint":"`+long+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	saved, err := p.Load(nil)
	if err != nil || !saved.InMaint || saved.Maint != long[:tags.MaxMaintLen] || saved.User["dc"] != "eu" {
		t.Fatalf("Load = %+v, %v; want the node in maintenance, the reason cut to %d bytes", saved, err, tags.MaxMaintLen)
	}
}
