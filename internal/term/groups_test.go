package term

import (
	"strings"
	"testing"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

func voter(name, group string) serf.Member {
	return serf.Member{Name: name, Status: serf.StatusAlive,
		Tags: map[string]string{tags.KeyVoter: tags.FormatVoter(tags.VoterTag{Port: 7374, InConfig: true, Group: group})}}
}

// One group is followed; two are a conflict, and only this voter's own
// group is followed then.
func TestGroupsFromVoterTags(t *testing.T) {
	g := ReadGroups("app1", "", []serf.Member{voter("db1", "0a1b2c3d"), voter("db2", "0a1b2c3d")})
	if g.Own != "0a1b2c3d" || g.Conflict() != "" || !g.Follows(pool.Term{Group: "0a1b2c3d"}) || g.Follows(pool.Term{Group: "1a1b2c3d"}) {
		t.Fatalf("one group: %+v, conflict %q", g, g.Conflict())
	}
	g = ReadGroups("app1", "", []serf.Member{voter("db1", "0a1b2c3d"), voter("db2", "1a1b2c3d")})
	if g.Own != "" || !strings.Contains(g.Conflict(), "2 raft groups") {
		t.Fatalf("two groups: %+v, conflict %q", g, g.Conflict())
	}
	g = ReadGroups("db3", "1a1b2c3d", []serf.Member{voter("db1", "0a1b2c3d"), voter("db3", "9a1b2c3d")})
	if g.Own != "1a1b2c3d" || len(g.Voters["1a1b2c3d"]) != 1 || g.Voters["9a1b2c3d"] != nil {
		t.Fatalf("a voter: %+v", g)
	}
}
