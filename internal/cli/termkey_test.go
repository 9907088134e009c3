package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/consensus"
)

func TestTermKey(t *testing.T) {
	raw := make([]byte, consensus.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	k1 := base64.StdEncoding.EncodeToString(raw)
	raw[0] ^= 1
	k2 := base64.StdEncoding.EncodeToString(raw)
	kr, err := consensus.ParseKeyring([]string{k1, k2})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range kr.TermPublicKeys() {
		want = append(want, consensus.EncodePublicKey(p))
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, file, want, errWant string
		code                      int
	}{
		{"keyring file", write("k.json", `["`+k1+`","`+k2+`"]`), strings.Join(want, ",") + "\n", "", ExitOK},
		{"one key", write("k.txt", k1+"\n"), want[0] + "\n", "", ExitOK},
		{"not base64", write("bad.txt", "not a key\n"), "", "bad.txt: ", ExitUsage},
		{"bad json", write("bad.json", `["x"`), "", "not a keyring", ExitUsage},
		{"empty", write("empty", "\n"), "", "no key given", ExitUsage},
		{"missing", filepath.Join(dir, "none"), "", "--keyring-file: open", ExitUsage},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := Execute(t.Context(), []string{"term-key", "--keyring-file", tc.file}, &out, &errb)
		if code != tc.code || out.String() != tc.want || !strings.Contains(errb.String(), tc.errWant) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q", tc.name, code, out.String(), errb.String(), tc.code, tc.want, tc.errWant)
		}
		if strings.Contains(errb.String(), k1) {
			t.Errorf("%s: the secret key is in the error output", tc.name)
		}
	}
	var out, errb bytes.Buffer
	if code := Execute(t.Context(), []string{"term-key", k1}, &out, &errb); code != ExitUsage {
		t.Errorf("key as an argument: exit %d, want %d (stderr %q)", code, ExitUsage, errb.String())
	}
}
