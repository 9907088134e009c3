package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// No JSON log record of a db agent (probe, pool, hooks, serf, sinks)
// carries a key twice: a log pipeline keeps only one of them, or refuses
// the record.
func TestJSONLogsHaveNoDuplicateKeys(t *testing.T) {
	c := testConfig(t, "dbjson", "fast", "")
	c.Role = tags.RoleDB
	c.MySQL.Addr = "127.0.0.1:1" // refused: the probe logs its failures
	c.MySQL.User = "shoal"
	c.Sinks.File.Path = t.TempDir() + "/pool.json"
	c.EventHandlers = []string{"/bin/true"}
	t.Setenv("SHOAL_MYSQL_PASSWORD", "x")
	buf := &testkit.SyncBuffer{}
	a, err := New(c, logging.New(buf, "json", slog.LevelDebug))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "a probe log record", func() bool { return strings.Contains(buf.String(), `"component":"probe"`) })
	a.Shutdown()

	components := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		keys, err := topLevelKeys(line)
		if err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Errorf("key %q twice in %s", k, line)
			}
			seen[k] = true
		}
		var rec struct{ Component string }
		_ = json.Unmarshal([]byte(line), &rec)
		components[rec.Component] = true
	}
	for _, want := range []string{"probe", "agent", "pool", "serf", "hooks"} {
		if !components[want] {
			t.Errorf("no record of component %q was checked (have %v)", want, components)
		}
	}
}

// topLevelKeys returns the keys of a JSON object in order, duplicates
// included.
func topLevelKeys(s string) ([]string, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil && err != io.EOF {
			return nil, err
		}
	}
	return keys, nil
}
