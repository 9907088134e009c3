package member

import (
	"net"
	"strconv"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// PoolMember converts a serf member for pool.Compute, admitting it first: a
// member that breaks the rules is marked bad (pool.Member.Bad) and carries
// escaped names only. Its routing address is its gossip IP with the MySQL
// port its health tag publishes (3306 when none).
func PoolMember(m serf.Member) pool.Member {
	v := Admit(m.Name, m.Tags)
	port := "3306"
	if raw, ok := v.Tags[tags.KeyHealth]; ok && v.Problem.OK() {
		if h, err := tags.Decode(raw); err == nil && h.Port != 0 {
			port = strconv.Itoa(int(h.Port))
		}
	}
	return pool.Member{
		Name:      v.Name,
		Addr:      net.JoinHostPort(m.Addr.String(), port),
		Status:    pool.Status(m.Status),
		Tags:      v.Tags,
		Bad:       v.Problem.Reason,
		BadDetail: v.Problem.Detail,
	}
}
