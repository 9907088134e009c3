package config

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/setting"
)

// FuzzLoadConfig feeds a YAML configuration file through decode and
// Validate, as LoadFile and Flags.Load do: neither may panic, and every
// error names a line of the file or a configuration key.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte("node: db1\ninsecure_no_encryption: true\nprofile: fast\n"))
	f.Add([]byte("node: db1\nprofle: fast\n"))
	f.Add([]byte("node: [1, 2]\nhooks:\n  queue_size: -1\nevent_handlers: ['user=']\n"))
	keys := configKeys()
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Default()
		c.Node = "fuzz"
		if err := decode(data, c); err != nil {
			for _, e := range setting.Leaves(err) {
				if !lineRe.MatchString(e.Error()) && !wholeDocument(e) && !namesKey(e, keys) {
					t.Fatalf("decode error names no line or key: %q", e)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			for _, e := range setting.Leaves(err) {
				if !namesKey(e, keys) {
					t.Fatalf("validation error names no key: %q", e)
				}
			}
		}
		_ = c.Effective()
	})
}

var lineRe = regexp.MustCompile(`line \d+`)

// wholeDocument reports errors about the file as a whole, which have no
// line to name.
func wholeDocument(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "more than one YAML document")
}

// namesKey reports whether err names a configuration key: a FieldError, or
// a message that starts with a key (possibly dotted or indexed).
func namesKey(err error, keys map[string]bool) bool {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Key != ""
	}
	msg := err.Error()
	end := strings.IndexAny(msg, " :[")
	if end < 0 {
		return false
	}
	first := strings.Split(msg[:end], ".")[0]
	return keys[first]
}

// configKeys returns every yaml key of Config, at any depth.
func configKeys() map[string]bool {
	keys := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			fl := t.Field(i)
			name, _, _ := strings.Cut(fl.Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				keys[name] = true
			}
			walk(fl.Type)
		}
	}
	walk(reflect.TypeOf(Config{}))
	return keys
}

// TestDecodeErrorsNameALine: YAML errors that the decoder reports without
// a line (found by FuzzLoadConfig) get one.
func TestDecodeErrorsNameALine(t *testing.T) {
	for in, want := range map[string]string{
		"\"":                                 "line 1: yaml: found unexpected end of stream",
		"node: db1\ntags:\n  a: *nope\n":     "line 3: yaml: unknown anchor 'nope' referenced",
		"node: db1\nlog_level: in\x01fo\n":   "line 2: yaml: control characters are not allowed",
		"node: db1\n\nlog_level: \xffinfo\n": "line 3: yaml: invalid leading UTF-8 octet",
		"node: db1\nprofile: \"fast\n":       "yaml: line 2: found unexpected end of stream", // the decoder's own
	} {
		err := decode([]byte(in), Default())
		if err == nil || err.Error() != want {
			t.Errorf("decode(%q) = %v, want %q", in, err, want)
		}
	}
}
