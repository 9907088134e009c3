package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/pkg/client"
)

// TestHealthListsOtherFacts: shoal health lists the facts of the schema it
// has no row for, by their labels, and leaves out those not set.
func TestHealthListsOtherFacts(t *testing.T) {
	m := client.LocalHealth{State: "passing", Reachable: true, Version: "11.4.5-MariaDB", ServerID: 3,
		SuperReadOnly: true, ReadOnly: true, Galera: true, GaleraSynced: true, Port: 3307}
	if got, want := factsText(m), "super_read_only true, galera true, galera synced true, port 3307"; got != want {
		t.Errorf("factsText = %q, want %q", got, want)
	}
	if got := factsText(client.LocalHealth{State: "critical"}); got != "" {
		t.Errorf("no facts: %q", got)
	}
	var b bytes.Buffer
	if err := writeHealth(&b, &client.HealthResponse{Status: "ok", Node: "db1", Role: "db", MySQL: &m}); err != nil {
		t.Fatal(err)
	}
	if want := "facts      super_read_only true, galera true, galera synced true, port 3307\n"; !strings.Contains(b.String(), want) {
		t.Errorf("want the line %q in:\n%s", want, b.String())
	}
}
