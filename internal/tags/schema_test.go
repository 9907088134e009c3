package tags

import (
	"reflect"
	"testing"
)

// fullHealth has every field of Health set to a value other than its zero
// value, as Encode publishes it. A field added to Health must be set here
// (TestFullHealthSetsEveryField).
var fullHealth = Health{
	State: Passing, ReadOnly: true, SuperReadOnly: true, Replica: true, IORunning: true, SQLRunning: true, NotReceiving: true,
	LagKnown: true, LagSeconds: 7, ServerID: 2, SourceServerID: 1,
	Position: Position{N: 1, Domains: [MaxDomains]Domain{{0, 1234}}}, Galera: true, GaleraSynced: true,
	Reason: "slow", Seq: 9, Port: 3307,
}

func TestFullHealthSetsEveryField(t *testing.T) {
	v := reflect.ValueOf(fullHealth)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("fullHealth leaves %s at its zero value", v.Type().Field(i).Name)
		}
	}
}

// TestEveryFieldIsAFact: every field of Health travels through the tag on
// its own, so a field added to Health without its Fact fails here.
func TestEveryFieldIsAFact(t *testing.T) {
	full := reflect.ValueOf(fullHealth)
	for i := range full.NumField() {
		name := full.Type().Field(i).Name
		h := Health{}
		hv := reflect.ValueOf(&h).Elem()
		hv.Field(i).Set(full.Field(i))
		switch name { // the fields that mean something only with another
		case "LagSeconds":
			h.LagKnown = true
		case "GaleraSynced":
			h.Galera = true
		}
		got, err := Decode(Encode(h))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.ValueOf(got).Field(i).Equal(full.Field(i)) {
			t.Errorf("%s: Decode(Encode) gives %v, want %v (%q): is it in Facts?", name,
				reflect.ValueOf(got).Field(i), full.Field(i), Encode(h))
		}
	}
}

// TestFactsAreWellFormed: keys and JSON names are unique, every fact but the
// sequence number is shown, and Show gives every field of a full health.
func TestFactsAreWellFormed(t *testing.T) {
	keys, names := map[string]bool{}, map[string]bool{}
	for _, f := range facts {
		if keys[f.Key] || f.Key == "" || f.enc == nil || f.dec == nil {
			t.Errorf("fact %q: duplicate, empty or without its codec", f.Key)
		}
		keys[f.Key] = true
		if len(f.Fields) == 0 && f.Key != "n" {
			t.Errorf("fact %q is shown nowhere", f.Key)
		}
		for _, fl := range f.Fields {
			if names[fl.JSON] || fl.JSON == "" || fl.Label == "" || fl.Value == nil {
				t.Errorf("fact %q: field %+v duplicate or incomplete", f.Key, fl)
			}
			names[fl.JSON] = true
		}
	}
	if len(facts) > 64 {
		t.Fatalf("%d facts: Decode's bit set holds 64", len(facts))
	}
	for name, v := range Show(fullHealth) {
		if v == nil || reflect.ValueOf(v).IsZero() {
			t.Errorf("Show(fullHealth)[%q] = %v", name, v)
		}
	}
}
