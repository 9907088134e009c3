package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWithDefaults(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{Size: 1000, MaxBytes: 10 << 20, Keep: 3}
	if got != want {
		t.Fatalf("WithDefaults() = %+v, want %+v", got, want)
	}
	set := Config{Size: 5, File: "/x", MaxBytes: 8192, Keep: 7}
	if got := set.WithDefaults(); got != set {
		t.Fatalf("WithDefaults() changed set fields: %+v", got)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "plain")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{"zero", Config{}, nil},
		{"bounds", Config{Size: MaxSize, MaxBytes: MinMaxBytes, Keep: MaxKeep}, nil},
		{"min", Config{Size: 1, Keep: 1}, nil},
		{"file", Config{File: filepath.Join(dir, "h.jsonl")}, nil},
		{"size negative", Config{Size: -1}, []string{`size "-1": must be within 1-1000000`}},
		{"size too big", Config{Size: MaxSize + 1}, []string{`size "1000001"`}},
		{"max_bytes small", Config{MaxBytes: 4095}, []string{`max_bytes "4095": must be at least 4096`}},
		{"max_bytes negative", Config{MaxBytes: -1}, []string{`max_bytes "-1"`}},
		{"keep negative", Config{Keep: -2}, []string{`keep "-2": must be within 1-100`}},
		{"keep too many", Config{Keep: 101}, []string{`keep "101"`}},
		{"file dir missing", Config{File: filepath.Join(dir, "nope", "h.jsonl")}, []string{`file "` + filepath.Join(dir, "nope", "h.jsonl") + `": directory ` + filepath.Join(dir, "nope") + " does not exist"}},
		{"file dir is a file", Config{File: filepath.Join(notDir, "h.jsonl")}, []string{"file ", "is not a directory"}},
		{"file is a dir", Config{File: dir}, []string{"file ", "not a regular file"}},
		{"all at once", Config{Size: -1, MaxBytes: 1, Keep: -1, File: dir}, []string{"size ", "max_bytes ", "keep ", "file "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			if _, oerr := Open(tt.cfg, nil); oerr == nil {
				t.Errorf("Open accepted a config Validate rejects")
			}
		})
	}
}
