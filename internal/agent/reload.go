package agent

import (
	"reflect"
	"strings"
)

// reloadable are the configuration keys Reload applies. Every other key
// that changed needs a restart and is logged as such.
var reloadable = map[string]bool{
	"log_level":      true,
	"tags":           true, // unless tags_file is set: see Reload
	"event_handlers": true,
	"hooks.coalesce": true, // applied to the handlers' specs
}

// changedKeys returns the configuration keys (yaml names, dotted:
// "mysql.addr", "sinks.haproxy.backends") whose values differ between old
// and new, two values of the same struct type. It walks nested structs
// field by field; any other value (a slice, a map, a string, a duration)
// is compared whole. A field without a yaml name is named by its Go name
// in lower case, so that no field is ever left out.
func changedKeys(old, new any) []string {
	var out []string
	walkChanged(reflect.ValueOf(old), reflect.ValueOf(new), "", &out)
	return out
}

func walkChanged(a, b reflect.Value, prefix string, out *[]string) {
	for a.Kind() == reflect.Pointer {
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				*out = append(*out, strings.TrimSuffix(prefix, "."))
			}
			return
		}
		a, b = a.Elem(), b.Elem()
	}
	t := a.Type()
	if a.Kind() != reflect.Struct || t.PkgPath() == "time" {
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, strings.TrimSuffix(prefix, "."))
		}
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" {
			name = strings.ToLower(f.Name)
		}
		if f.Anonymous && f.Tag.Get("yaml") == "" {
			name = "" // embedded: its fields are the parent's
		}
		p := prefix
		if name != "" {
			p += name + "."
		}
		walkChanged(a.Field(i), b.Field(i), p, out)
	}
}
