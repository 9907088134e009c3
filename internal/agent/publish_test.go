package agent

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// padToFill returns the longest value of tag "pad" that still fits beside
// cur in memberlist's 512 bytes.
func padToFill(cur map[string]string) string {
	pad := ""
	for {
		next := maps.Clone(cur)
		next["pad"] = pad + "x"
		if tags.EncodedSize(next) > tags.MetaMaxSize {
			return pad
		}
		pad += "x"
	}
}

// TestHealthOutranksUserTags is the reproduction of the "frozen health"
// bug: user tags that fill memberlist's 512 bytes while the server is
// healthy left no room for the longer critical health tag, so the publish
// failed, the old (passing) health stayed in gossip, and every other agent
// kept a hung server as the writer. Now the entry points refuse such tags,
// and should any still get in (here straight through serf, as the Serf RPC
// did), the health tag wins: the user tags are withheld, the failure is
// counted and shown, and the server leaves every pool.
func TestHealthOutranksUserTags(t *testing.T) {
	mariadbtest.Require(t)
	t.Setenv("SHOAL_MYSQL_PASSWORD", probePW)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	srv.CreateUser(probeUser)
	db1 := startNode(t, dbConfig(t, "db1", srv))
	app := startNode(t, testConfig(t, "app1", "fast", "", db1.cfg.Bind))
	testkit.WaitFor(t, 20*time.Second, "db1 is the writer on the app agent", func() bool {
		return poolOf(app.a) == "db1||"
	})

	cur := db1.a.Serf().LocalMember().Tags
	pad := padToFill(cur)
	if len(pad) < 300 {
		t.Fatalf("only %d bytes of room beside %v: the test needs a tag that fits now but not with a longer health", len(pad), cur)
	}

	// Every entry point refuses it: the API/CLI path, and the check the
	// Serf RPC gate calls.
	if _, err := db1.a.UpdateTags(map[string]string{"pad": pad}, nil); err == nil ||
		!strings.Contains(err.Error(), "128-byte user tag budget") {
		t.Fatalf("UpdateTags with a %d-byte tag: err = %v, want the user tag budget named", len(pad), err)
	}
	if err := db1.a.CheckTagChange(map[string]string{"pad": pad}, nil); !errors.Is(err, tags.ErrTooLarge) {
		t.Fatalf("CheckTagChange: err = %v, want ErrTooLarge", err)
	}

	// A bypass: set them straight through serf, as `serf tags -set` did.
	withPad := maps.Clone(cur)
	withPad["pad"] = pad
	if err := db1.a.Serf().SetTags(withPad); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the app agent sees the pad tag", func() bool {
		for _, m := range app.a.Members() {
			if m.Name == "db1" && m.Tags["pad"] == pad {
				return true
			}
		}
		return false
	})

	// mysqld hangs: its health (critical, timeout) no longer fits with
	// the pad. The health must reach the app agent anyway.
	srv.Stop()
	defer srv.Cont()
	testkit.WaitFor(t, 15*time.Second, "db1 out of the app agent's pool", func() bool {
		return strings.HasPrefix(poolOf(app.a), "||db1(")
	})
	// The app agent can see the new health before SetTags returns (it
	// waits for the broadcast): wait for the status too.
	testkit.WaitFor(t, 5*time.Second, "the publish status shows the pad withheld", func() bool {
		return len(db1.a.PublishStatus().WithheldTags) == 1
	})
	st := db1.a.PublishStatus()
	if st.OK || st.WithheldTags[0] != "pad" || st.Failures == 0 || st.MinimalHealth || !strings.Contains(st.Error, "512-byte") {
		t.Fatalf("publish status = %+v, want the pad withheld and the failure counted", st)
	}
	if got := db1.a.pub.Wanted()["pad"]; got != pad {
		t.Fatalf("the withheld tag was lost: wanted user tags hold pad of %d bytes", len(got))
	}
	if db1.a.publishFailures() == 0 {
		t.Fatal("shoal_health_publish_failures_total did not count")
	}
}

// TestMinimalHealthWhenNothingElseFits: when not even the agent's own tags
// fit, it publishes a critical health that always fits, so that no agent
// routes to it on stale health.
func TestMinimalHealthWhenNothingElseFits(t *testing.T) {
	c := testConfig(t, "db1", "fast", "")
	c.Role = tags.RoleDB
	c.MySQL.Addr = "127.0.0.1:1" // refused: critical
	c.MySQL.User = "shoal"
	t.Setenv("SHOAL_MYSQL_PASSWORD", "x")
	n := startNode(t, c)
	testkit.WaitFor(t, 10*time.Second, "a first health publish", func() bool {
		return n.a.Serf().LocalMember().Tags[tags.KeyHealth] != ""
	})
	// A maintenance reason too long for the tag (it bypasses SetMaint's
	// check): the agent's own tags can no longer be built.
	n.a.maint.Restore(strings.Repeat("m", tags.MaxMaintLen+1))
	n.a.pub.MarkDirty()
	testkit.WaitFor(t, 5*time.Second, "a minimal critical health", func() bool {
		h, err := tags.Decode(n.a.Serf().LocalMember().Tags[tags.KeyHealth])
		return err == nil && h.State == tags.Critical && h.Reason == ReasonCannotPublish
	})
	// The status is recorded right after serf took the tags: wait for it
	// too, then check what it says.
	testkit.WaitFor(t, 5*time.Second, "the publish status to record it", func() bool {
		return n.a.PublishStatus().MinimalHealth
	})
	if st := n.a.PublishStatus(); st.OK || !st.MinimalHealth || st.Error == "" {
		t.Fatalf("publish status = %+v, want a minimal health with its reason", st)
	}
}

// startErr starts an agent with c and returns its start error.
func startErr(t *testing.T, c *config.Config) error {
	t.Helper()
	a, err := New(c, logging.New(&testkit.SyncBuffer{}, "text", slog.LevelDebug))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Start(context.Background())
	a.Shutdown()
	return err
}

// TestTagsFileChecked: the tags file is held to the same rules as every
// other way of setting tags, and a bad one is a configuration error (exit
// status 2), named with the file.
func TestTagsFileChecked(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"bad json", `{"a":`, "want a JSON object of string values"},
		{"bad key", `{"bad key!":"v"}`, "tag key must be"},
		{"nul in value", `{"k":"a\u0000b"}`, "printable UTF-8"},
		{"newline in value", `{"k":"a\nb"}`, "printable UTF-8"},
		{"reserved", `{"role":"web"}`, "reserved by shoal"},
		{"over budget", `{"pad":"` + strings.Repeat("x", 200) + `"}`, "128-byte user tag budget"},
		{"bad maint", `{"maint":"a\u0007"}`, `"maint"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, "n1", "fast", "")
			c.TagsFile = filepath.Join(t.TempDir(), "tags.json")
			if err := os.WriteFile(c.TagsFile, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			err := startErr(t, c)
			var ie *config.InvalidError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.TagsFile) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start error = %v, want a config error naming %s and %q", err, c.TagsFile, tc.want)
			}
		})
	}
}

// TestKeyringFileMustBePrivate: a keyring file is a secret like the MySQL
// password file: readable by group or other, it is refused.
func TestKeyringFileMustBePrivate(t *testing.T) {
	key, _ := GenerateKey()
	c := testConfig(t, "n1", "fast", key)
	c.KeyringFile = filepath.Join(t.TempDir(), "keyring.json")
	if err := os.WriteFile(c.KeyringFile, []byte(`["`+key+`"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	err := startErr(t, c)
	var ie *config.InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("start error = %v, want a config error asking for chmod 600", err)
	}
	if err := os.Chmod(c.KeyringFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := startErr(t, c); err != nil {
		t.Fatalf("mode 0600: %v", err)
	}
}

// TestStaleTempFilesRemoved: temporary files that a kill -9 left in the
// middle of an atomic replace are removed at the next start; other files
// are left alone.
func TestStaleTempFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	lists := filepath.Join(dir, "lists")
	if err := os.Mkdir(lists, 0o755); err != nil {
		t.Fatal(err)
	}
	c := testConfig(t, "n1", "fast", "")
	c.TagsFile = filepath.Join(dir, "tags.json")
	c.Snapshot = filepath.Join(dir, "snapshot")
	c.Sinks.File.Path = filepath.Join(dir, "pool.json")
	c.Sinks.File.ListsDir = lists
	stale := []string{
		filepath.Join(dir, ".tags.json.tmp123456"),
		filepath.Join(dir, ".snapshot.peers.tmp42"),
		filepath.Join(dir, ".pool.json.tmp7"),
		filepath.Join(lists, ".main-writers.txt.tmp99"),
	}
	keep := []string{
		filepath.Join(dir, ".other.json.tmp1"),
		filepath.Join(dir, ".tags.json.tmpx"),
		filepath.Join(lists, "notes.txt"),
	}
	for _, p := range append(append([]string{}, stale...), keep...) {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startNode(t, c)
	for _, p := range stale {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: still there (err %v)", p, err)
		}
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: removed, but it is not ours: %v", p, err)
		}
	}
}

// TestAPITokenFileReportedAbsolute: the CLI reads the token file at the
// path the agent reports, from whatever directory it runs in.
func TestAPITokenFileReportedAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	c := testConfig(t, "n1", "fast", "")
	c.APITokenFile = filepath.Join("state", "api-token")
	n := startNode(t, c)
	if got, want := n.a.APITokenFile(), filepath.Join(dir, "state", "api-token"); got != want {
		t.Fatalf("APITokenFile() = %q, want %q", got, want)
	}
}
