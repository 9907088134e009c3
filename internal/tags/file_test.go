package tags

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

func TestDecodeFile(t *testing.T) {
	for in, want := range map[string]map[string]string{
		`{"dc": "eu1", "maint": "kernel"}`: {"dc": "eu1", "maint": "kernel"},
		`{}`:                               {},
		`null`:                             {},
	} {
		got, err := DecodeFile([]byte(in))
		if err != nil || got == nil || !maps.Equal(got, want) {
			t.Errorf("DecodeFile(%s) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{``, `[]`, `{"a": 1}`, `{"a": "b"`} {
		if _, err := DecodeFile([]byte(in)); err == nil || !strings.HasPrefix(err.Error(), "want a JSON object of string values: ") {
			t.Errorf("DecodeFile(%s) = %v", in, err)
		}
	}
}

// FuzzDecodeFile: a tags file's bytes never panic the decoder, and what it
// accepts is a non-nil map that encodes back to the same map.
func FuzzDecodeFile(f *testing.F) {
	f.Add([]byte(`{"dc": "eu1"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeFile(data)
		if err != nil {
			return
		}
		if m == nil {
			t.Fatal("nil map accepted")
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeFile(b)
		if err != nil || !maps.Equal(back, m) {
			t.Fatalf("round trip: %q → %q, %v", m, back, err)
		}
	})
}
