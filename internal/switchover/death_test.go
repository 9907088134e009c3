package switchover

import (
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// dbm is a db member of cluster main.
func dbm(name string, st pool.Status, h *tags.Health) pool.Member {
	return pool.Member{Name: name, Addr: name + ":3306", Status: st, Tags: map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main"}, Health: h}
}

func down(reason string) *tags.Health {
	return &tags.Health{State: tags.Critical, Reason: reason, ServerID: 1}
}

func replica(io bool) *tags.Health {
	return &tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: io, SQLRunning: true, ServerID: 2, SourceServerID: 1}
}

func notReceiving() *tags.Health {
	h := replica(true)
	h.NotReceiving = true
	return h
}

func TestWriterDeath(t *testing.T) {
	term := pool.Term{Cluster: "main", Number: 3, Writer: "db1", Addr: "db1:3306"}
	alive, failed := pool.StatusAlive, pool.StatusFailed
	for _, tc := range []struct {
		name    string
		members []pool.Member
		dead    bool
		fast    bool
		why     string
	}{
		{"mysqld killed, replicas lost it", []pool.Member{dbm("db1", alive, down("refused")), dbm("db2", alive, replica(false)), dbm("db3", alive, replica(false))},
			true, true, "its agent reports mysqld down (refused) and its replicas lost it (db2, db3)"},
		{"connection lost counts as down", []pool.Member{dbm("db1", alive, down("conn_lost")), dbm("db2", alive, replica(false))}, true, true, "conn_lost"},
		{"a replica still receives", []pool.Member{dbm("db1", alive, down("refused")), dbm("db2", alive, replica(false)), dbm("db3", alive, replica(true))},
			false, false, "replica db3 still receives from it"},
		{"a hung server is not dead", []pool.Member{dbm("db1", alive, down("timeout")), dbm("db2", alive, replica(false))}, false, false, "critical (timeout)"},
		{"too many connections is not dead", []pool.Member{dbm("db1", alive, down("too_many")), dbm("db2", alive, replica(false))}, false, false, "too_many"},
		{"slow is not dead", []pool.Member{dbm("db1", alive, &tags.Health{State: tags.Warning, Reason: "slow"}), dbm("db2", alive, replica(false))}, false, false, "warning (slow)"},
		{"passing", []pool.Member{dbm("db1", alive, &tags.Health{State: tags.Passing}), dbm("db2", alive, replica(false))}, false, false, "passing"},
		{"no health", []pool.Member{dbm("db1", alive, nil), dbm("db2", alive, replica(false))}, false, false, "no health"},
		{"agent failed, replicas lost it: the lease path", []pool.Member{dbm("db1", failed, down("refused")), dbm("db2", alive, replica(false))},
			true, false, "its agent is failed and its replicas lost it (db2)"},
		{"agent failed, a replica still receives (a partition of the agents only)", []pool.Member{dbm("db1", failed, nil), dbm("db2", alive, replica(true))},
			false, false, "still receives"},
		{"host frozen: agent failed, replica's IO thread runs but receives nothing", []pool.Member{dbm("db1", failed, nil), dbm("db2", alive, notReceiving())},
			true, false, "its agent is failed and its replicas lost it (db2: receives nothing)"},
		{"mysqld down, a replica receives nothing", []pool.Member{dbm("db1", alive, down("refused")), dbm("db2", alive, notReceiving()), dbm("db3", alive, replica(false))},
			true, true, "lost it (db2: receives nothing, db3)"},
		{"agent failed, one replica receives nothing, another receives", []pool.Member{dbm("db1", failed, nil), dbm("db2", alive, notReceiving()), dbm("db3", alive, replica(true))},
			false, false, "replica db3 still receives"},
		{"agent gone, no member", []pool.Member{dbm("db2", alive, replica(false))}, true, false, "its agent is no member"},
		{"no replica to confirm", []pool.Member{dbm("db1", alive, down("refused")), dbm("db2", alive, &tags.Health{State: tags.Passing, ReadOnly: true})},
			false, false, "no replica is there to confirm it"},
		{"a failed replica is no witness", []pool.Member{dbm("db1", alive, down("refused")), dbm("db2", failed, replica(false))}, false, false, "no replica"},
		{"a replica of another source is no witness", []pool.Member{dbm("db1", alive, down("refused")),
			dbm("db2", alive, &tags.Health{Replica: true, IORunning: false, ServerID: 2, SourceServerID: 9})}, false, false, "no replica of it"},
		{"another cluster's replica is no witness", []pool.Member{dbm("db1", alive, down("refused")),
			{Name: "x", Status: alive, Tags: map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "other"}, Health: replica(false)}}, false, false, "no replica"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := writerDeath(term, tc.members)
			if gone := tc.members[0].Name != "db1" || tc.members[0].Status != alive; v.Gone != gone {
				t.Errorf("gone %v, want %v (%s)", v.Gone, gone, v.Why)
			}
			if v.Dead != tc.dead || v.Fast != tc.fast || !strings.Contains(v.Why, tc.why) {
				t.Errorf("got %+v, want dead %v fast %v why containing %q", v, tc.dead, tc.fast, tc.why)
			}
		})
	}
}
