package maint

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/view"
)

// TestDampedNodeFeedsMaint: `shoal maint` reports this node held out by
// damping from the pool, with the hold's end, and nothing for other reasons.
func TestDampedNodeFeedsMaint(t *testing.T) {
	until := time.Date(2024, 5, 1, 12, 1, 26, 0, time.UTC)
	p := &pool.Pool{Clusters: []pool.Cluster{
		{Name: "a", Out: []pool.Node{{Name: "db1", Reason: pool.ReasonMaintenance}}},
		{Name: "b", Out: []pool.Node{
			{Name: "db2", Reason: pool.ReasonLag},
			{Name: "db3", Reason: pool.ReasonDamped, Detail: "flapping: penalty 2620, re-entry below 1000", Until: until},
		}},
	}}
	if n, ok := dampedNode(p, "db3"); !ok || !n.Until.Equal(until) || n.Detail == "" {
		t.Fatalf("db3 = %+v, %v; want damped until %v", n, ok, until)
	}
	for _, name := range []string{"db1", "db2", "db9"} {
		if _, ok := dampedNode(p, name); ok {
			t.Errorf("%s reported as damped", name)
		}
	}
	if _, ok := dampedNode(nil, "db3"); ok {
		t.Error("nil pool reported a damped node")
	}
}

type fakeTags struct {
	publishErr, saveErr error
	saved               string
	reason              func() string
}

func (f *fakeTags) Wanted() map[string]string       { return map[string]string{"dc": "eu"} }
func (f *fakeTags) Publish(map[string]string) error { return f.publishErr }
func (f *fakeTags) SavedMaint() string              { return f.saved }
func (f *fakeTags) WriteTagsFile(map[string]string) error {
	if f.saveErr != nil {
		return f.saveErr
	}
	f.saved = f.reason()
	return nil
}

// TestSetTakesEffectBeforeSaving: a change whose publish fails is undone;
// one whose save fails stays in effect, unpersisted, with a warning that
// says what a restart does; only a db agent has maintenance.
func TestSetTakesEffectBeforeSaving(t *testing.T) {
	tags := &fakeTags{}
	var changes []string
	m := New(Config{Node: "db1", DB: true, TagsFile: "/state/tags.json", Tags: tags,
		Changed: func(prev string, st view.Maint) { changes = append(changes, prev+"->"+st.Reason) }})
	tags.reason = m.Reason
	st, err := m.Set(true, "")
	if err != nil || !st.Enabled || st.Reason != DefaultReason || !st.Persisted {
		t.Fatalf("Set(true) = %+v, %v", st, err)
	}
	tags.publishErr = errors.New("gossip down")
	if _, err := m.Set(false, ""); err == nil || m.Reason() != DefaultReason {
		t.Fatalf("failed publish: err %v, reason %q; want the change undone", err, m.Reason())
	}
	tags.publishErr, tags.saveErr = nil, errors.New("disk full")
	st, err = m.Set(false, "")
	if err != nil || st.Enabled || st.Persisted || !strings.Contains(st.Warning, "RETURNS TO MAINTENANCE") || !strings.Contains(st.Warning, "disk full") {
		t.Fatalf("unsaved disable = %+v, %v", st, err)
	}
	if len(changes) != 2 {
		t.Fatalf("changes recorded: %v, want the two that took effect", changes)
	}
	if _, err := New(Config{Tags: tags}).Set(true, "x"); !errors.Is(err, ErrNotDB) {
		t.Fatalf("app agent: %v, want ErrNotDB", err)
	}
}

// TestRestoreKeepsAReason: the state read from the tags file is in effect,
// with the default reason for an empty one.
func TestRestoreKeepsAReason(t *testing.T) {
	m := New(Config{Node: "db1", DB: true, Tags: &fakeTags{}})
	m.Restore("")
	if st := m.State(); !st.Enabled || st.Reason != DefaultReason {
		t.Fatalf("state = %+v, want enabled with the default reason", st)
	}
	m.Restore("upgrade")
	if m.Reason() != "upgrade" {
		t.Fatalf("reason = %q", m.Reason())
	}
}
