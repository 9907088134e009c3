// Package setting is how a component reports a setting it refuses: the
// key within the component's section of the configuration ("timeout",
// "backends[1].role"), the value as given and why. Each component owns its
// settings type, its defaults and its limits, and checks them with a
// function that returns these errors; package config adds the section
// ("mysql.timeout"), the flag and where the value was set (the config
// file and line, the environment variable, the flag).
package setting

import (
	"errors"
	"fmt"
)

// Error is a setting a component refuses.
type Error struct {
	Key   string // the key within the section: "timeout", "backends[0].role"
	Value string // the value as given, as the user would write it
	Msg   string // what is wrong, lower case: "must be from 10ms to 10s"
}

func (e *Error) Error() string { return fmt.Sprintf("%s %q: %s", e.Key, e.Value, e.Msg) }

// Errorf returns an *Error for key and the value as given (formatted with
// %v).
func Errorf(key string, value any, format string, args ...any) *Error {
	return &Error{Key: key, Value: fmt.Sprint(value), Msg: fmt.Sprintf(format, args...)}
}

// Errors collects the refused settings of one check.
type Errors []error

// Add records err, when not nil, as the error of key and value: an *Error
// as it is, any other error as the message.
func (es *Errors) Add(key string, value any, err error) {
	if err == nil {
		return
	}
	var se *Error
	if errors.As(err, &se) {
		*es = append(*es, err)
		return
	}
	*es = append(*es, Errorf(key, value, "%v", err))
}

// Addf records a refused setting.
func (es *Errors) Addf(key string, value any, format string, args ...any) {
	*es = append(*es, Errorf(key, value, format, args...))
}

// Err joins the errors (nil when there are none).
func (es Errors) Err() error { return errors.Join(es...) }

// Prefix returns err with the key of every *Error in it prefixed by
// section ("backends[0]." + "role"): for a settings type nested in
// another's.
func Prefix(section string, err error) error {
	var out []error
	for _, e := range Leaves(err) {
		var se *Error
		if errors.As(e, &se) {
			c := *se
			c.Key = section + c.Key
			e = &c
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// Leaves flattens an errors.Join tree; nil has none.
func Leaves(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// One returns the *Error err is made of when it is exactly one, else nil:
// for a check expected to refuse one setting.
func One(err error) *Error {
	var se *Error
	if l := Leaves(err); len(l) != 1 || !errors.As(l[0], &se) {
		return nil
	}
	return se
}
