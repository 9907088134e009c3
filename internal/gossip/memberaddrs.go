package gossip

import (
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"
)

// memberRefresh is how often, at most, the transport asks for the members'
// addresses again when a stream comes from an address it does not know: a
// member that just joined is a stranger for at most this long, and a flood
// from strangers' addresses costs at most one lookup per interval.
const memberRefresh = 500 * time.Millisecond

// memberAddrs tells whether an address is a member's, from a cache of the
// members' IPs that is refreshed from its source on a miss, at most every
// memberRefresh. Without a source every address counts as a member's: the
// transport then has only the members' limits, as before SetMembers
// existed (tests of the transport alone).
type memberAddrs struct {
	mu  sync.Mutex
	src func() []netip.Addr
	set map[netip.Addr]struct{}
	at  time.Time
	now func() time.Time
}

// member reports whether ip is a member's.
func (m *memberAddrs) member(ip netip.Addr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.src == nil {
		return true
	}
	if _, ok := m.set[ip]; ok {
		return true
	}
	now := m.now()
	if !m.at.IsZero() && now.Sub(m.at) < memberRefresh {
		return false
	}
	m.at = now
	addrs := m.src()
	m.set = make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		m.set[a.Unmap()] = struct{}{}
	}
	_, ok := m.set[ip]
	return ok
}

// SetMembers gives the transport the source of the members' addresses:
// inbound streams from other addresses get the strangers' limits (see
// streamlimit.go). src is called from the accept loop, at most every
// memberRefresh: it must not block for long.
func (t *Transport) SetMembers(src func() []netip.Addr) {
	t.members.mu.Lock()
	defer t.members.mu.Unlock()
	t.members.src, t.members.set, t.members.at = src, nil, time.Time{}
}

// SerfMemberIPs returns a source of the IPs of serf's members, failed and
// left ones included (serf keeps them until it reaps them), for
// SetMembers.
func SerfMemberIPs(s *serf.Serf) func() []netip.Addr {
	return func() []netip.Addr {
		ms := s.Members()
		out := make([]netip.Addr, 0, len(ms))
		for _, m := range ms {
			if ip, ok := netip.AddrFromSlice(m.Addr); ok {
				out = append(out, ip.Unmap())
			}
		}
		return out
	}
}
