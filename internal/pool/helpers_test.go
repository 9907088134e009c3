package pool

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/tags"
)

type opt func(*Member)

func member(name string, role string, opts ...opt) Member {
	m := Member{Name: name, Addr: name + ":3306", Status: StatusAlive, Tags: map[string]string{}}
	if role != "" {
		m.Tags[tags.KeyRole] = role
	}
	for _, o := range opts {
		o(&m)
	}
	return admitted(m)
}

// admitted decodes m's health tag as package member's admission does.
func admitted(m Member) Member {
	h, err := tags.Published(m.Tags)
	m.Health, m.HealthErr = h, ""
	if err != nil {
		m.HealthErr = err.Error()
	}
	return m
}

func health(h tags.Health) opt { return func(m *Member) { m.Tags[tags.KeyHealth] = tags.Encode(h) } }
func cluster(c string) opt     { return func(m *Member) { m.Tags[tags.KeyCluster] = c } }
func status(s Status) opt      { return func(m *Member) { m.Status = s } }
func maint(r string) opt       { return func(m *Member) { m.Tags[tags.KeyMaint] = r } }
func tag(k, v string) opt      { return func(m *Member) { m.Tags[k] = v } }
func addr(a string) opt        { return func(m *Member) { m.Addr = a } }

// ids sets the server_id and the source server_id in the member's health tag.
func ids(serverID, sourceID uint32) opt {
	return func(m *Member) {
		h, err := tags.Published(m.Tags)
		if err != nil || h == nil {
			panic(fmt.Sprintf("ids: %s has no health tag: %v", m.Name, err))
		}
		h.ServerID, h.SourceServerID = serverID, sourceID
		m.Tags[tags.KeyHealth] = tags.Encode(*h)
	}
}

// writer is a passing writable server.
func writer(name string, opts ...opt) Member {
	return member(name, tags.RoleDB, append([]opt{health(tags.Health{State: tags.Passing})}, opts...)...)
}

// replica is a passing read-only replica with the given lag; lag < 0 means unknown.
func replica(name string, lag int, opts ...opt) Member {
	h := tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true, SQLRunning: true}
	if lag >= 0 {
		h.LagKnown, h.LagSeconds = true, uint32(lag)
	}
	return member(name, tags.RoleDB, append([]opt{health(h)}, opts...)...)
}

// dbh is a db member with the given health.
func dbh(name string, h tags.Health, opts ...opt) Member {
	return member(name, tags.RoleDB, append([]opt{health(h)}, opts...)...)
}

// summary renders a pool compactly for table tests:
// "default{w[a] r[b c:floor] o[d:lag] c[a e]}; other{...}".
func summary(p *Pool) string {
	var parts []string
	for _, c := range p.Clusters {
		s := fmt.Sprintf("%s{w[%s] r[%s] o[%s]", c.Name, nodes(c.Writers), nodes(c.Readers), nodes(c.Out))
		if c.Conflict != nil {
			s += fmt.Sprintf(" c[%s]", strings.Join(c.Conflict, " "))
		}
		parts = append(parts, s+"}")
	}
	return strings.Join(parts, "; ")
}

func nodes(ns []Node) string {
	var s []string
	for _, n := range ns {
		if n.Reason == "" {
			s = append(s, n.Name)
		} else {
			s = append(s, n.Name+":"+string(n.Reason))
		}
	}
	return strings.Join(s, " ")
}

// checkInvariants checks what must hold for any pool computed from members.
func checkInvariants(t testing.TB, members []Member, policy Policy, p *Pool) {
	t.Helper()
	want := map[string]string{} // db member name -> cluster
	for _, m := range dedupe(members) {
		if m.Tags[tags.KeyRole] == tags.RoleDB {
			want[m.Name] = tags.Cluster(m.Tags)
		}
	}
	known := map[Reason]bool{}
	for _, r := range Reasons() {
		known[r] = true
	}
	seen := map[string]int{}
	for i, c := range p.Clusters {
		if i > 0 && p.Clusters[i-1].Name >= c.Name {
			t.Fatalf("clusters not sorted: %q before %q", p.Clusters[i-1].Name, c.Name)
		}
		if len(c.Writers) > 1 {
			t.Fatalf("cluster %q has %d writers: %s", c.Name, len(c.Writers), summary(p))
		}
		if c.Conflict != nil && len(c.Conflict) < 2 {
			t.Fatalf("cluster %q conflict with %d candidates", c.Name, len(c.Conflict))
		}
		for _, list := range []struct {
			name  string
			nodes []Node
			out   bool
		}{{"writers", c.Writers, false}, {"readers", c.Readers, false}, {"out", c.Out, true}} {
			if !slices.IsSortedFunc(list.nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) }) {
				t.Fatalf("cluster %q %s not sorted: %s", c.Name, list.name, summary(p))
			}
			for _, n := range list.nodes {
				if cl, ok := want[n.Name]; !ok || cl != c.Name {
					t.Fatalf("%q listed in cluster %q but is not a db member of it", n.Name, c.Name)
				}
				if n.Reason != "" && !known[n.Reason] {
					t.Fatalf("%q has unknown reason %q", n.Name, n.Reason)
				}
				if list.out == (n.Reason == "" || n.Reason == ReasonFloor || n.Reason == ReasonFallback) {
					t.Fatalf("%q in %s with reason %q", n.Name, list.name, n.Reason)
				}
				seen[n.Name]++
			}
		}
		w := c.Writer()
		readsToo := slices.ContainsFunc(c.Readers, func(n Node) bool { return n.Name == w })
		if w != "" && policy.WriterServesReads && !readsToo {
			t.Fatalf("writer %q does not serve reads: %s", w, summary(p))
		}
		if w != "" && readsToo {
			seen[w]--
		}
		for _, n := range c.Readers {
			if n.Reason == ReasonFallback && (n.Name != w || policy.WriterServesReads) {
				t.Fatalf("%q in the readers as fallback: %s", n.Name, summary(p))
			}
		}
	}
	for name := range want {
		if seen[name] != 1 {
			t.Fatalf("db member %q listed %d times: %s", name, seen[name], summary(p))
		}
	}
}
