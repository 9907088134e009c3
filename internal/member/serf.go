package member

import (
	"net"
	"strconv"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/pool"
)

// FromSerf admits a serf member (Admit, which decodes its health tag): the
// one place where a gossiped member enters shoal's view. The pool (Pool) and
// the API (api.ToMember) both read what it returns.
func FromSerf(m serf.Member) Gossiped {
	return Gossiped{Member: Admit(m.Name, m.Tags), Serf: m}
}

// Gossiped is an admitted serf member. Serf holds serf's raw view, for what
// admission does not check (addresses, status, protocol versions): never
// its name or tags, which are outside input (use Member's).
type Gossiped struct {
	Member
	Serf serf.Member
}

// Pool converts the member for pool.Compute: a member that breaks the rules
// is marked bad (pool.Member.Bad) and carries escaped names only. Its
// routing address is its gossip IP with the MySQL port its health tag
// publishes (3306 when none).
func (g Gossiped) Pool() pool.Member {
	port := "3306"
	if g.Health != nil && g.Health.Port != 0 {
		port = strconv.Itoa(int(g.Health.Port))
	}
	return pool.Member{
		Name:      g.Name,
		Addr:      net.JoinHostPort(g.Serf.Addr.String(), port),
		Status:    pool.Status(g.Serf.Status),
		Tags:      g.Tags,
		Bad:       g.Problem.Reason,
		BadDetail: g.Problem.Detail,
		Health:    g.Health,
		HealthErr: g.HealthErr,
	}
}
