package tags

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors returned by Decode; test with errors.Is.
var (
	// ErrUnknownVersion means the health tag is not in a version this agent reads.
	ErrUnknownVersion = errors.New("unknown health tag version")
	// ErrMalformed means the health tag is in a known version but is not valid.
	ErrMalformed = errors.New("malformed health tag")
)

// FieldError is a malformed field of a health tag. It matches ErrMalformed.
type FieldError struct {
	Field string // the field's key, or "#n" for the n-th field when it has none
	Value string // the offending value, cut short for display
	Msg   string // what is wrong
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("field %q: %s", e.Field, e.Msg)
	}
	return fmt.Sprintf("field %q: value %q: %s", e.Field, e.Value, e.Msg)
}

// Is makes errors.Is(err, ErrMalformed) true for a FieldError.
func (e *FieldError) Is(target error) bool { return target == ErrMalformed }

// Decode parses a health tag value. It never panics; every error says what is
// wrong and, for a malformed field, which field (see FieldError).
func Decode(s string) (Health, error) {
	h, err := decode(s)
	if err != nil {
		return Health{}, fmt.Errorf("decode health tag: %w", err)
	}
	return h, nil
}

func decode(s string) (Health, error) {
	var h Health
	if s == "" {
		return h, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if len(s) > MaxHealthLen {
		return h, fmt.Errorf("%w: %d bytes, limit %d", ErrMalformed, len(s), MaxHealthLen)
	}
	ver, rest, _ := strings.Cut(s, ";")
	if ver != Version {
		return h, fmt.Errorf("%w %q (this agent reads %s)", ErrUnknownVersion, short(ver), Version)
	}
	var seen uint
	for i, f := range strings.Split(rest, ";") {
		key, val, ok := strings.Cut(f, "=")
		switch {
		case f == "":
			return h, &FieldError{Field: "#" + strconv.Itoa(i+1), Msg: "empty field"}
		case !ok:
			return h, &FieldError{Field: short(f), Msg: "missing '='"}
		}
		bit, err := decodeField(&h, key, val)
		if err != nil {
			name := short(key)
			if key == "" {
				name = "#" + strconv.Itoa(i+1)
			}
			return h, &FieldError{Field: name, Value: short(val), Msg: err.Error()}
		}
		if seen&bit != 0 {
			return h, &FieldError{Field: key, Msg: "duplicate field"}
		}
		seen |= bit
	}
	for i, f := range facts {
		if f.Required && seen&(1<<i) == 0 {
			return h, &FieldError{Field: f.Key, Msg: "missing field"}
		}
	}
	if !h.LagKnown {
		h.LagSeconds = 0
	}
	return h, nil
}

// decodeField stores one field in h and returns its bit, 1<<(its index in
// facts), or 0 for an unknown key.
func decodeField(h *Health, key, val string) (uint, error) {
	for i, f := range facts {
		if f.Key == key {
			return 1 << i, f.dec(h, val)
		}
	}
	// An unknown key, ignored if well formed (see the package doc).
	if key == "" || len(key) > 8 {
		return 0, errors.New("invalid key: want 1 to 8 bytes of [a-z]")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 'a' || key[i] > 'z' {
			return 0, errors.New("invalid key: want 1 to 8 bytes of [a-z]")
		}
	}
	return 0, checkToken(val)
}

// checkToken checks a reason code or the value of an unknown field.
func checkToken(v string) error {
	if len(v) > maxTokenLen {
		return fmt.Errorf("%d bytes, limit %d", len(v), maxTokenLen)
	}
	for i := 0; i < len(v); i++ {
		if !isReasonByte(v[i]) {
			return errors.New("invalid character: want [A-Za-z0-9._:/-]")
		}
	}
	return nil
}

func parseBool(v string) (bool, error) {
	switch v {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, errors.New("want 0 or 1")
}

// parseUint parses a canonical decimal number (no sign, no leading zeros) no
// larger than max.
func parseUint(v string, max uint64) (uint32, error) {
	if v == "" || len(v) > 10 || (v[0] == '0' && len(v) > 1) {
		return 0, fmt.Errorf("want a decimal number 0..%d without leading zeros", max)
	}
	var n uint64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("want a decimal number 0..%d without leading zeros", max)
		}
		n = n*10 + uint64(c-'0')
	}
	if n > max {
		return 0, fmt.Errorf("out of range 0..%d", max)
	}
	return uint32(n), nil
}

// short cuts outside text for an error message; %q does the escaping.
func short(s string) string {
	const max = 32
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// Published decodes the health tag in a member's tags t, if any: nil and no
// error when t has none. Package member calls it once per member, where the
// member is admitted, and the decoded health flows on from there.
func Published(t map[string]string) (*Health, error) {
	raw, ok := t[KeyHealth]
	if !ok {
		return nil, nil
	}
	h, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	return &h, nil
}
