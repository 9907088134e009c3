package pool_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/shoaldb/shoal/internal/testutil/pooltest"
)

var update = flag.Bool("update", false, "rewrite pkg/poolschema/testdata/pool-v1.json from pooltest.Fixture")

// TestSchemaGolden: the pool in its JSON schema is exactly the golden file,
// the contract every use (hooks, file sink, API) is checked against. A
// change here is a schema change: additions only within version 1.
func TestSchemaGolden(t *testing.T) {
	got, err := json.MarshalIndent(pooltest.Fixture().Schema(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(pooltest.GoldenPath(), got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(pooltest.GoldenPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the pool schema changed (go test ./internal/pool -run TestSchemaGolden -update rewrites the golden file, if the change is meant):\ngot:\n%s\nwant:\n%s", got, want)
	}
}
