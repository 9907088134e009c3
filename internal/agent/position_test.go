package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/agent/publish"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestPublishPositionCadence: with a real MariaDB taking writes all the
// time, the agent publishes its GTID position no more often than its
// cadence (250 ms writable, 1 s read-only), and once the writes stop, the
// last position is published: in the health tag with gossip.positions
// tags, in the position stream by default, where the health tag then
// carries a position change alone at most every 30 s.
func TestPublishPositionCadence(t *testing.T) {
	for _, mode := range []string{gossip.PositionsTags, gossip.PositionsStream} {
		t.Run(mode, func(t *testing.T) { testPositionCadence(t, mode) })
	}
}

func testPositionCadence(t *testing.T, mode string) {
	mariadbtest.Require(t)
	t.Setenv("SHOAL_MYSQL_PASSWORD", probePW)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	srv.CreateUser(probeUser)
	srv.MustExec("CREATE DATABASE d")
	srv.MustExec("CREATE TABLE d.t (id INT AUTO_INCREMENT PRIMARY KEY)")
	cfg := dbConfig(t, "db1", srv)
	cfg.Gossip.Positions = mode
	db1 := startNode(t, cfg)
	tagHealth := func() tags.Health {
		h, _ := tags.Decode(db1.a.Serf().LocalMember().Tags[tags.KeyHealth])
		return h
	}
	published := tagHealth
	if mode == gossip.PositionsStream {
		published = func() tags.Health {
			h := tagHealth()
			s, _ := db1.a.mesh.pos.Latest("db1")
			h.Position = s.Pos
			return h
		}
	}
	tagChanges := 0
	tagPos := tagHealth().Position
	testkit.WaitFor(t, 20*time.Second, "db1 publishes passing with a position", func() bool {
		h := published()
		return h.State == tags.Passing && h.Position.Known()
	})

	for _, tc := range []struct {
		readOnly bool
		interval time.Duration
	}{{false, publish.WriterPositionInterval}, {true, publish.ReaderPositionInterval}} {
		srv.SetReadOnly(tc.readOnly)
		testkit.WaitFor(t, 5*time.Second, "read_only published", func() bool { return published().ReadOnly == tc.readOnly })
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { // a write every 10 ms (root writes despite read_only)
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
					_ = srv.Exec("INSERT INTO d.t VALUES ()")
				}
			}
		}()
		var changes []time.Time
		last := published().Position
		end := time.Now().Add(4 * tc.interval)
		for time.Now().Before(end) {
			if p := published().Position; p != last {
				changes, last = append(changes, time.Now()), p
			}
			if p := tagHealth().Position; p != tagPos {
				tagChanges, tagPos = tagChanges+1, p
			}
			time.Sleep(2 * time.Millisecond)
		}
		close(stop)
		<-done
		minGap := time.Hour
		for i := 1; i < len(changes); i++ {
			minGap = min(minGap, changes[i].Sub(changes[i-1]))
		}
		t.Logf("read_only=%v: %d position publishes in %s of writes, smallest gap %s",
			tc.readOnly, len(changes), 4*tc.interval, minGap.Round(time.Millisecond))
		// The cadence allows a tenth early (positionInterval); sampling
		// adds a few ms either way.
		if len(changes) < 2 || minGap < tc.interval-tc.interval/10-10*time.Millisecond {
			t.Errorf("read_only=%v: %d publishes, smallest gap %s; want at least 2, %s apart", tc.readOnly, len(changes), minGap, tc.interval)
		}
		var pos string
		if err := srv.DB().QueryRow("SELECT @@gtid_current_pos").Scan(&pos); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 3*tc.interval+time.Second, fmt.Sprintf("the last position %s published", pos), func() bool {
			return "0-"+fmt.Sprint(srv.ServerID())+"-"+fmt.Sprint(published().Position.Domains[0].Seq) == pos
		})
	}
	// Each read_only flip publishes the tag at once, with the position.
	if t.Logf("health tag position changes: %d", tagChanges); mode == gossip.PositionsStream && tagChanges > 3 {
		t.Errorf("the health tag's position changed %d times in %s of writes, want at most the read_only flip and one position-only publish",
			tagChanges, 4*(publish.WriterPositionInterval+publish.ReaderPositionInterval))
	}
}
