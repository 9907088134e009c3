package agent

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/config"
)

// Every leaf of config.Config, changed alone, is reported under its own
// key: a key added to the configuration later is covered without a list
// to update. (The test finds the leaves by reflection too, and mutates
// each one.)
func TestChangedKeysCoversEveryKey(t *testing.T) {
	base := config.Default()
	var leaves []string
	forEachLeaf(reflect.ValueOf(base).Elem(), "", func(key string) {
		leaves = append(leaves, key)
		changed := deepCopy(t, base)
		leafOf(t, reflect.ValueOf(&changed).Elem(), key)()
		if got := changedKeys(*base, changed); !slices.Equal(got, []string{key}) {
			t.Errorf("changing %s alone: changedKeys = %q", key, got)
		}
	})
	for _, want := range []string{"mysql.addr", "mysql.password_file", "pool.max_lag", "pool.damping", "history.size",
		"sinks.haproxy.backends", "http_tls_cert_file", "api_token_file", "gossip.probe_interval", "hooks.timeout", "dev"} {
		if !slices.Contains(leaves, want) {
			t.Errorf("no leaf %s among %q", want, leaves)
		}
	}
	if got := changedKeys(*base, deepCopy(t, base)); len(got) != 0 {
		t.Errorf("no change: changedKeys = %q", got)
	}
}

// deepCopy copies a Config through reflection, slices and maps included.
func deepCopy(t *testing.T, c *config.Config) config.Config {
	t.Helper()
	v := reflect.New(reflect.TypeOf(*c)).Elem()
	copyValue(v, reflect.ValueOf(*c))
	return v.Interface().(config.Config)
}

func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Struct:
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				copyValue(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyValue(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMap(src.Type())
		for _, k := range src.MapKeys() {
			m.SetMapIndex(k, src.MapIndex(k))
		}
		dst.Set(m)
	default:
		dst.Set(src)
	}
}

// forEachLeaf calls f for every leaf key of v (a struct), the way
// changedKeys names them.
func forEachLeaf(v reflect.Value, prefix string, f func(key string)) {
	ty := v.Type()
	for i := range ty.NumField() {
		fd := ty.Field(i)
		if !fd.IsExported() {
			continue
		}
		name := strings.Split(fd.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" {
			name = strings.ToLower(fd.Name)
		}
		key := prefix + name
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct && fv.Type().PkgPath() != "time" {
			forEachLeaf(fv, key+".", f)
			continue
		}
		f(key)
	}
}

// leafOf returns a function that changes the leaf key of v.
func leafOf(t *testing.T, v reflect.Value, key string) func() {
	t.Helper()
	for _, part := range strings.Split(key, ".") {
		ty := v.Type()
		found := false
		for i := range ty.NumField() {
			fd := ty.Field(i)
			name := strings.Split(fd.Tag.Get("yaml"), ",")[0]
			if name == "" || name == "-" {
				name = strings.ToLower(fd.Name)
			}
			if fd.IsExported() && name == part {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			t.Fatalf("no field %s in %s", part, key)
		}
	}
	return func() { mutate(t, key, v) }
}

func mutate(t *testing.T, key string, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for _, k := range v.MapKeys() {
			m.SetMapIndex(k, v.MapIndex(k))
		}
		k := reflect.New(v.Type().Key()).Elem()
		if k.Kind() == reflect.String {
			k.SetString("added-by-test")
		}
		m.SetMapIndex(k, reflect.New(v.Type().Elem()).Elem())
		v.Set(m)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		} else {
			v.Set(reflect.Zero(v.Type()))
		}
	default:
		t.Fatalf("%s: cannot change a %s", key, v.Kind())
	}
}

// A reload logs every changed setting it does not apply, by key, and
// none it applies.
func TestReloadLogsEverySettingNeedingRestart(t *testing.T) {
	c := testConfig(t, "reload1", "fast", "")
	n := startNode(t, c)
	re := deepCopy(t, c)
	re.LogLevel = "info"
	re.Tags = map[string]string{"team": "dba"}
	re.EventHandlers = []string{"/bin/true"}
	re.MySQL.Addr = "127.0.0.1:3307"
	re.Pool.MaxLag = 42 * time.Second
	re.Sinks.File.Path = "/tmp/elsewhere"
	re.History.Size = 7
	re.HTTPTLSCertFile = "/etc/shoal/cert.pem"
	re.Bind = "127.0.0.1:1"
	n.a.Reload(&re)
	line := ""
	for _, l := range strings.Split(n.logs.String(), "\n") {
		if strings.Contains(l, "need a restart") {
			line = l
		}
	}
	for _, k := range []string{"bind", "mysql.addr", "pool.max_lag", "sinks.file.path", "history.size", "http_tls_cert_file"} {
		if !strings.Contains(line, k) {
			t.Errorf("restart warning %q does not name %s", line, k)
		}
	}
	for _, k := range []string{"log_level", "tags", "event_handlers"} {
		if strings.Contains(line, k) {
			t.Errorf("restart warning %q names %s, which reload applies", line, k)
		}
	}
}
