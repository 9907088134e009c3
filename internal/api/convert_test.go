package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

var timeType = reflect.TypeFor[time.Time]()

// fill sets every field reachable from v to a non-zero value: one element
// in each slice and map, pointers to filled values.
func fill(v reflect.Value) {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(time.Unix(1700000000, 0)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i))
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		panic("fill: unhandled kind " + v.Kind().String())
	}
}

// zeroFields lists the paths under v that are zero.
func zeroFields(v reflect.Value, path string) []string {
	if v.IsZero() {
		return []string{path}
	}
	if v.Type() == timeType {
		return nil
	}
	var out []string
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
	case reflect.Pointer:
		out = zeroFields(v.Elem(), path)
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			out = append(out, zeroFields(v.Index(i), path+"[]")...)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			out = append(out, zeroFields(v.MapIndex(k), path+"[k]")...)
		}
	}
	return out
}

func filled[T any]() T {
	var v T
	fill(reflect.ValueOf(&v).Elem())
	return v
}

// Every field of every wire type the API converts to is set from the
// agent's view: a field added to a pkg/client type and forgotten in
// convert.go fails here.
func TestConversionsSetEveryField(t *testing.T) {
	for name, out := range map[string]any{
		"Info":         toInfo(filled[view.Info]()),
		"PoolResponse": ToPool(filled[view.Pool]()),
		"LocalHealth":  toLocalHealth(new(filled[view.LocalHealth]())),
		"MaintStatus":  toMaint(filled[view.Maint]()),
		"History":      toHistory(filled[view.History]()),
		"HookStats":    toHookStats(filled[[]hooks.HandlerStats]()),
		"ForceLeave":   toForceLeave(filled[view.ForceLeave]()),
	} {
		if z := zeroFields(reflect.ValueOf(out), name); len(z) > 0 {
			t.Errorf("not set by the conversion: %v", z)
		}
	}
}

// nil stays nil and empty stays empty, so that the JSON says null (or
// omits the field) exactly when the agent's value is nil.
func TestConversionsKeepNilAndEmpty(t *testing.T) {
	p := ToPool(view.Pool{Clusters: []view.ClusterPool{{Writers: []view.PoolNode{}, Conflict: []string{}}}, Sinks: []view.SinkStatus{}})
	if p.Writers != nil || p.Sinks == nil || len(p.Sinks) != 0 || p.Clusters[0].Writers == nil || p.Clusters[0].Readers != nil || p.Clusters[0].Conflict == nil {
		t.Fatalf("pool %#v", p)
	}
	if h := toLocalHealth(nil); h != nil {
		t.Fatalf("nil local health became %+v", h)
	}
	if hs := toHookStats(nil); hs == nil {
		t.Fatal("hook stats: nil, want [] (the hooks routes always list handlers)")
	}
	if h := toHistory(view.History{Entries: []history.Entry{}}); h.Entries == nil {
		t.Fatal("history entries: empty became nil")
	}
	if d := toHookStats([]hooks.HandlerStats{{}})[0].LastDuration; d != "" {
		t.Fatalf("no last run: duration %q, want none", d)
	}
}

// The consensus layer: nil (no consensus key) is absent from the JSON; a
// voter's lists and map are never null, and a zero last contact is left out.
func TestConsensusOnTheWire(t *testing.T) {
	if c := toInfo(view.Info{}).Consensus; c != nil {
		t.Fatalf("no consensus key: %+v, want nil", c)
	}
	b, err := json.Marshal(toInfo(view.Info{}))
	if err != nil || strings.Contains(string(b), `"consensus"`) {
		t.Fatalf("no consensus key: %s, %v", b, err)
	}
	b, err = json.Marshal(toConsensus(&view.Consensus{BootstrapExpect: 3}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"voter":false,"id":"","addr":"","bootstrap_expect":3,"state":"","leader":"","leader_addr":"","bootstrapped":false,` +
		`"raft_term":0,"last_index":0,"applied_index":0,"voters":[],"refused":{},"group":"","groups":[],"terms":[],"term_keys":[],"failover":false,"failovers":{}}`
	if string(b) != want {
		t.Fatalf("not a voter:\n got %s\nwant %s", b, want)
	}
	granted := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	b, _ = json.Marshal(toConsensus(&view.Consensus{
		Voter: true, State: "Leader", Voters: []view.ConsensusVoter{{ID: "db1", Addr: "10.0.0.1:7950", Failing: true, LastContact: granted}},
		Refused:  map[string]uint64{"bad-key": 2},
		Terms:    []view.Term{{Cluster: "main", Number: 4, Writer: "db1", Addr: "10.0.0.1:3306", Granted: granted, Why: "first writer"}},
		TermKeys: []string{"k1", "k2"},
	}))
	for _, part := range []string{
		`"voters":[{"id":"db1","addr":"10.0.0.1:7950","leader":false,"failing":true,"last_contact":"2024-05-01T12:00:00Z"}]`,
		`"state":"leader"`,
		`"refused":{"bad-key":2}`,
		`"term_keys":["k1","k2"]`,
		`"terms":[{"cluster":"main","term":4,"writer":"db1","addr":"10.0.0.1:3306","granted":"2024-05-01T12:00:00Z","why":"first writer"}]`,
	} {
		if !strings.Contains(string(b), part) {
			t.Errorf("voter: %s lacks %s", b, part)
		}
	}
	if strings.Contains(string(b), `"applied_index":0,"last_contact"`) {
		t.Errorf("zero last contact on the wire: %s", b)
	}
}

// TestFactsReachTheAPI: every fact of the schema (tags.Facts) goes from a
// health, through its tag, to both client types' JSON under its name, set.
// A fact added to the schema without its field in pkg/client fails here.
func TestFactsReachTheAPI(t *testing.T) {
	h := filled[tags.Health]()
	// filled gives both domains the same id, which no position has.
	h.Position.Domains[1].ID++
	decoded, err := tags.Decode(tags.Encode(h))
	if err != nil {
		t.Fatal(err)
	}
	local := filled[view.LocalHealth]()
	local.Health = decoded
	for name, v := range map[string]any{"MemberHealth": memberHealth(decoded), "LocalHealth": toLocalHealth(&local)} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		for _, f := range tags.Facts() {
			for _, fl := range f.Fields {
				if v, ok := got[fl.JSON]; !ok || v == nil || reflect.ValueOf(v).IsZero() {
					t.Errorf("%s: fact %q (tag key %s) is %v in %s", name, fl.JSON, f.Key, v, b)
				}
			}
		}
	}
}
