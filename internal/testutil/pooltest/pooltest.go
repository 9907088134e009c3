// Package pooltest holds the pool every user of the pool's JSON schema
// (package poolschema) is tested with, and the check that a document is
// the schema or a documented superset of it.
package pooltest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
)

// Fixture is a pool with every shape the schema has: a cluster with a
// writer by a writer term, a reader kept by the floor and a node out with
// a detail, and a cluster in a writer conflict with no writer, no reader
// and no term.
func Fixture() *pool.Pool {
	return &pool.Pool{Clusters: []pool.Cluster{
		{
			Name:    "main",
			Writers: []pool.Node{{Name: "db1", Addr: "10.0.0.11:3306"}},
			Readers: []pool.Node{{Name: "db2", Addr: "10.0.0.12:3306", Reason: pool.ReasonFloor, Detail: "lag 12s over max_lag 10s"}},
			Out:     []pool.Node{{Name: "db3", Addr: "10.0.0.13:3306", Reason: pool.ReasonCritical, Detail: "timeout"}},
			Term: &pool.Term{Cluster: "main", Number: 3, Writer: "db1", Addr: "10.0.0.11:3306",
				Granted: time.Date(2026, 11, 27, 6, 1, 2, 0, time.UTC), Why: "first term: the only writable server"},
		},
		{
			Name: "other",
			Out: []pool.Node{
				{Name: "db4", Addr: "10.0.1.14:3306", Reason: pool.ReasonConflict},
				{Name: "db5", Addr: "10.0.1.15:3306", Reason: pool.ReasonConflict},
			},
			Conflict: []string{"db4", "db5"},
		},
	}}
}

// GoldenPath is the schema's golden file: Fixture in the pool schema.
func GoldenPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "pkg", "poolschema", "testdata", "pool-v1.json")
}

// Golden returns the golden file's clusters.
func Golden(t testing.TB) []any {
	t.Helper()
	b, err := os.ReadFile(GoldenPath())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", GoldenPath(), err)
	}
	cs, ok := doc["clusters"].([]any)
	if !ok {
		t.Fatalf("%s: no clusters list", GoldenPath())
	}
	return cs
}

// RequireSuperset fails the test unless the clusters list in got (JSON
// decoded into any) holds every key and value of the golden clusters, with
// extra keys only from extras (the use's documented additions).
func RequireSuperset(t testing.TB, got any, extras ...string) {
	t.Helper()
	if err := superset(got, Golden(t), extras, "clusters"); err != nil {
		t.Errorf("not the pool schema (pkg/poolschema/testdata/pool-v1.json) or a documented superset of it: %v", err)
	}
}

func superset(got, want any, extras []string, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an object", path, got)
		}
		keys := make([]string, 0, len(g))
		for k := range g {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, ok := w[k]; !ok && !slices.Contains(extras, k) {
				return fmt.Errorf("%s: undocumented field %q", path, k)
			}
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s: field %q missing", path, k)
			}
			if err := superset(gv, wv, extras, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Errorf("%s: %v (%T), want a list", path, got, got)
		}
		if len(g) != len(w) {
			return fmt.Errorf("%s: %d entries, want %d", path, len(g), len(w))
		}
		for i := range w {
			if err := superset(g[i], w[i], extras, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s: %v, want %v", path, got, want)
		}
		return nil
	}
}
