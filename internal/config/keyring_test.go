package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestDecodeKeyring(t *testing.T) {
	keys, err := DecodeKeyring([]byte(`["a2V5MQ==", "a2V5Mg=="]`), "/k")
	if err != nil || !slices.Equal(keys, []string{"a2V5MQ==", "a2V5Mg=="}) {
		t.Fatalf("got %q, %v", keys, err)
	}
	for in, want := range map[string]string{
		`[]`:         "keyring file /k holds no keys",
		`null`:       "keyring file /k holds no keys",
		`{"a": "b"}`: "keyring file /k: want a JSON array of base64 keys: ",
		`["a", 1]`:   "keyring file /k: want a JSON array of base64 keys: ",
	} {
		if _, err := DecodeKeyring([]byte(in), "/k"); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("DecodeKeyring(%s) = %v, want %q", in, err, want)
		}
	}
}

// FuzzDecodeKeyring: a keyring file's bytes never panic the decoder, errors
// name the file, and what is accepted is a non-empty list that encodes back
// to the same list.
func FuzzDecodeKeyring(f *testing.F) {
	f.Add([]byte(`["a2V5MQ=="]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := DecodeKeyring(data, "kr")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "keyring file kr") {
				t.Fatalf("error does not name the file: %q", err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("accepted an empty keyring")
		}
		b, err := json.Marshal(keys)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeKeyring(b, "kr")
		if err != nil || !slices.Equal(back, keys) {
			t.Fatalf("round trip: %q → %q, %v", keys, back, err)
		}
	})
}
