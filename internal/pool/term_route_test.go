package pool

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

// rv makes a member advertise a valid voter tag.
var rv = tag(tags.KeyVoter, "8300")

// termSummary is summary plus each cluster's term and AskTerm:
// "default{...} term 3 dbp ask".
func termSummary(p *Pool) string {
	var parts []string
	for _, c := range p.Clusters {
		s := summary(&Pool{Clusters: []Cluster{c}})
		if c.Term != nil {
			s += fmt.Sprintf(" term %d %s", c.Term.Number, c.Term.Writer)
		}
		if c.AskTerm {
			s += " ask"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// details renders every node's detail as "name=detail", writers first.
func details(c Cluster) map[string]string {
	m := map[string]string{}
	for _, ns := range [][]Node{c.Out, c.Readers, c.Writers} {
		for _, n := range ns {
			m[n.Name] = n.Detail
		}
	}
	return m
}

func TestComputeByTerm(t *testing.T) {
	t3 := Term{Cluster: "default", Number: 3, Writer: "dbp", Addr: "dbp:3306", Granted: time.Date(2026, 11, 27, 6, 1, 2, 0, time.UTC), Why: "first"}
	known := TermView{Terms: map[string]Term{"default": t3}}
	warnWriter := func(name string, opts ...opt) Member {
		return dbh(name, tags.Health{State: tags.Warning, Reason: "slow"}, opts...)
	}
	galera := func(name string, opts ...opt) Member {
		return dbh(name, tags.Health{State: tags.Passing, Galera: true, GaleraSynced: true}, opts...)
	}
	bad := func(m *Member) { m.Bad, m.BadDetail = ReasonBadTags, "x" }
	prevWriter := func(name string) *Pool {
		return &Pool{Clusters: []Cluster{{Name: "default", Writers: []Node{{Name: name, Addr: name + ":3306"}}}}}
	}
	tests := []struct {
		name    string
		members []Member
		policy  Policy
		prev    *Pool
		tv      TermView
		want    string
		detail  map[string]string // node -> detail, for the nodes named
	}{
		{"holder passing, alone writable",
			[]Member{writer("dbp", rv), replica("dbr", 0, rv)}, Policy{}, nil, known,
			"default{w[dbp] r[dbr] o[]} term 3 dbp", map[string]string{"dbp": ""}},
		{"two writable, term on dbp: dbp writer, dbr conflict",
			[]Member{writer("dbp", rv), writer("dbr", rv), replica("dbs", 0, rv)}, Policy{}, nil, known,
			"default{w[dbp] r[dbs] o[dbr:conflict] c[dbp dbr]} term 3 dbp",
			map[string]string{"dbr": "writable, but term 3 belongs to dbp", "dbp": "conflict: writer by term 3; writable: dbp, dbr"}},
		{"holder not first by name: a later name holds it",
			[]Member{writer("dba", rv), writer("dbp", rv), warnWriter("dbz", rv)}, Policy{}, nil, known,
			"default{w[dbp] r[] o[dba:conflict dbz:conflict] c[dba dbp dbz]} term 3 dbp", nil},
		{"holder in warning, other passing writable: holder by the floor",
			[]Member{warnWriter("dbp", rv), writer("dbr", rv)}, Policy{}, nil, known,
			"default{w[dbp:floor] r[] o[dbr:conflict] c[dbp dbr]} term 3 dbp",
			map[string]string{"dbp": "warning: slow; term 3", "dbr": "writable, but term 3 belongs to dbp"}},
		{"holder passing, other writable in warning: conflict, not warning",
			[]Member{writer("dbp", rv), warnWriter("dbr", rv)}, Policy{}, nil, known,
			"default{w[dbp] r[] o[dbr:conflict] c[dbp dbr]} term 3 dbp", nil},
		{"holder read-only, another writable: no writer, no-term, ask",
			[]Member{replica("dbp", 0, rv), writer("dbr", rv)}, Policy{}, nil, known,
			"default{w[] r[dbp] o[dbr:no-term]} term 3 dbp ask",
			map[string]string{"dbr": "writable without the writer term; term 3 belongs to dbp (read-only)"}},
		{"holder read-only, nothing else writable: no writer, no ask",
			[]Member{replica("dbp", 0, rv), replica("dbr", 0, rv)}, Policy{}, nil, known,
			"default{w[] r[dbp dbr] o[]} term 3 dbp", nil},
		{"holder critical, another writable",
			[]Member{dbh("dbp", tags.Health{State: tags.Critical, Reason: "conn-refused"}, rv), writer("dbr", rv)}, Policy{}, nil, known,
			"default{w[] r[] o[dbp:critical dbr:no-term]} term 3 dbp ask",
			map[string]string{"dbr": "writable without the writer term; term 3 belongs to dbp (critical)"}},
		{"holder not a member, another writable",
			[]Member{writer("dbr", rv)}, Policy{}, nil, known,
			"default{w[] r[] o[dbr:no-term]} term 3 dbp ask",
			map[string]string{"dbr": "writable without the writer term; term 3 belongs to dbp (not a member)"}},
		{"no term known: no writer, no-term, ask",
			[]Member{writer("dbp", rv), writer("dbr", rv), replica("dbs", 0, rv)}, Policy{}, nil, TermView{},
			"default{w[] r[dbs] o[dbp:no-term dbr:no-term] c[dbp dbr]} term 0  ask",
			map[string]string{"dbp": "no writer term known yet", "dbr": "no writer term known yet"}},
		{"no term known, one writable: still no writer",
			[]Member{writer("dbp", rv), replica("dbs", 0, rv)}, Policy{}, nil, TermView{Terms: map[string]Term{"other": t3}},
			"default{w[] r[dbs] o[dbp:no-term]} term 0  ask", nil},
		{"no term known, none writable: ask",
			[]Member{replica("dbs", 0, rv)}, Policy{}, nil, TermView{},
			"default{w[] r[dbs] o[]} term 0  ask", nil},
		{"unverifiable: no writer even with a term, no ask",
			[]Member{writer("dbp", rv), replica("dbs", 0, rv)}, Policy{}, nil,
			TermView{Terms: known.Terms, Unverifiable: "no consensus.term_key configured"},
			"default{w[] r[dbs] o[dbp:no-term]} term 3 dbp",
			map[string]string{"dbp": "no consensus.term_key configured"}},
		{"unverifiable, no term",
			[]Member{writer("dbp", rv)}, Policy{}, nil, TermView{Unverifiable: "no consensus.term_key configured"},
			"default{w[] r[] o[dbp:no-term]} term 0 ", map[string]string{"dbp": "no consensus.term_key configured"}},
		{"address mismatch: not the holder",
			[]Member{writer("dbp", rv, func(m *Member) { m.Addr = "10.9.9.9:3306" })}, Policy{}, nil, known,
			"default{w[] r[] o[dbp:no-term]} term 3 dbp ask",
			map[string]string{"dbp": "writable without the writer term; term 3 belongs to dbp (granted at dbp:3306, now at 10.9.9.9:3306)"}},
		{"attacker writable without rv while the holder writes: conflict",
			[]Member{writer("dbp", rv), replica("dbr", 0, rv), writer("evil")}, Policy{}, nil, known,
			"default{w[dbp] r[dbr] o[evil:conflict] c[dbp evil]} term 3 dbp", nil},
		{"attacker writable without rv, no term: no-term",
			[]Member{replica("dbr", 0, rv), writer("evil")}, Policy{}, nil, TermView{},
			"default{w[] r[dbr] o[evil:no-term]} term 0  ask", nil},
		{"attacker named as the holder at another address",
			[]Member{writer("dbp", rv, cluster("c")), writer("dbq", cluster("c"))}, Policy{}, nil,
			TermView{Terms: map[string]Term{"c": {Cluster: "c", Number: 5, Writer: "dbq", Addr: "10.0.0.2:3306"}}},
			"c{w[] r[] o[dbp:no-term dbq:no-term] c[dbp dbq]} term 5 dbq ask", nil},
		{"the previous writer plays no part: term wins",
			[]Member{writer("dbp", rv), writer("dbr", rv)}, Policy{}, prevWriter("dbr"), known,
			"default{w[dbp] r[] o[dbr:conflict] c[dbp dbr]} term 3 dbp", nil},
		{"the previous writer plays no part: no term, no writer",
			[]Member{writer("dbp", rv)}, Policy{}, prevWriter("dbp"), TermView{},
			"default{w[] r[] o[dbp:no-term]} term 0  ask", nil},
		{"a bad member's voter tag does not count",
			[]Member{writer("a"), replica("b", 0), replica("x", 0, rv, bad)}, Policy{}, nil, TermView{},
			"default{w[a] r[b] o[x:bad-tags]}", nil},
		{"a voter out of the pool still makes the cluster require a term",
			[]Member{writer("a"), replica("x", 0, rv, maint("m"))}, Policy{}, nil, TermView{},
			"default{w[] r[] o[a:no-term x:maintenance]} term 0  ask", nil},
		{"Galera with rv keeps the Galera rule",
			[]Member{galera("g1", rv), galera("g2", rv)}, Policy{}, nil, TermView{},
			"default{w[g1] r[g2] o[]}", nil},
		{"wrong source is judged against the holder",
			[]Member{writer("dbp", rv, ids(1, 0)), writer("dbr", rv, ids(2, 0)), replica("dbs", 0, rv, ids(3, 2)), replica("dbt", 0, rv, ids(4, 1))},
			Policy{}, nil, known,
			"default{w[dbp] r[dbt] o[dbr:conflict dbs:wrong-source] c[dbp dbr]} term 3 dbp", nil},
		{"no writer: no wrong source",
			[]Member{replica("dbp", 0, rv, ids(1, 0)), writer("dbr", rv, ids(2, 0)), replica("dbs", 0, rv, ids(3, 2))},
			Policy{}, nil, known,
			"default{w[] r[dbp dbs] o[dbr:no-term]} term 3 dbp ask", nil},
		{"read fallback to the holder",
			[]Member{writer("dbp", rv), writer("dbr", rv), replica("dbs", 50, rv)},
			Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}, nil, known,
			"default{w[dbp] r[dbp:fallback] o[dbr:conflict dbs:lag] c[dbp dbr]} term 3 dbp", nil},
		{"no writer: the reader floor keeps a stale reader",
			[]Member{writer("dbr", rv), replica("dbs", 50, rv)},
			Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}, nil, TermView{},
			"default{w[] r[dbs:floor] o[dbr:no-term]} term 0  ask", nil},
		{"holder serves reads",
			[]Member{writer("dbp", rv), replica("dbs", 0, rv)}, Policy{WriterServesReads: true}, nil, known,
			"default{w[dbp] r[dbp dbs] o[]} term 3 dbp", nil},
		{"clusters apart: one with a term, one without",
			[]Member{writer("dbp", rv), writer("x1", cluster("x")), writer("x2", cluster("x"))}, Policy{}, nil, known,
			"default{w[dbp] r[] o[]} term 3 dbp; x{w[] r[] o[x1:conflict x2:conflict] c[x1 x2]}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := ComputeFresh(tt.members, tt.policy, tt.prev, Freshness{}, tt.tv)
			if got := termSummary(p); got != tt.want {
				t.Fatalf("pool:\n got %s\nwant %s", got, tt.want)
			}
			checkInvariants(t, tt.members, tt.policy, p)
			checkTermInvariants(t, p, tt.tv)
			if len(tt.detail) > 0 {
				got := details(p.Clusters[0])
				for n, d := range tt.detail {
					if got[n] != d {
						t.Errorf("detail of %s: got %q, want %q", n, got[n], d)
					}
				}
			}
			rng := rand.New(rand.NewSource(1))
			for range 20 {
				shuffled := append([]Member(nil), tt.members...)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				if q, _ := ComputeFresh(shuffled, tt.policy, tt.prev, Freshness{}, tt.tv); !reflect.DeepEqual(p, q) {
					t.Fatalf("order changed the pool:\n got %s\nwant %s", termSummary(q), termSummary(p))
				}
			}
		})
	}
}

// The term a cluster follows is a copy: changing the view afterwards does
// not change the pool, and Clone copies it too.
func TestComputeTermIsCopied(t *testing.T) {
	tv := TermView{Terms: map[string]Term{"default": {Cluster: "default", Number: 3, Writer: "a", Addr: "a:3306"}}}
	p, _ := ComputeFresh([]Member{writer("a", rv)}, Policy{}, nil, Freshness{}, tv)
	tv.Terms["default"] = Term{Number: 9}
	q := p.Clone()
	q.Clusters[0].Term.Number = 7
	if p.Clusters[0].Term.Number != 3 {
		t.Fatalf("term %d, want 3", p.Clusters[0].Term.Number)
	}
}

// A cluster whose db members advertise no voter tag keeps today's rule
// whatever the term view says.
func TestComputeWithoutVotersIgnoresTerms(t *testing.T) {
	members := []Member{
		writer("a", cluster("x")), writer("b", cluster("x")), replica("c", 3, cluster("x")),
		replica("d", 30), replica("e", 40), writer("f"), member("g", tags.RoleApp, rv),
		replica("h", -1, cluster("y")), writer("i", cluster("y"), status(StatusFailed)),
		dbh("w", tags.Health{State: tags.Warning}, cluster("z")),
	}
	prev := &Pool{Clusters: []Cluster{{Name: "x", Writers: []Node{{Name: "b"}}}}}
	tvs := []TermView{
		{},
		{Terms: map[string]Term{"x": {Number: 4, Writer: "a", Addr: "a:3306"}, "default": {Number: 1, Writer: "zz", Addr: "zz:1"}}},
		{Unverifiable: "no key"},
	}
	for _, policy := range []Policy{{}, {WriterServesReads: true, MinReaders: 2}} {
		want := Compute(members, policy, prev)
		for _, tv := range tvs {
			got, _ := ComputeFresh(members, policy, prev, Freshness{}, tv)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("term view %+v changed the pool:\n got %s\nwant %s", tv, termSummary(got), termSummary(want))
			}
		}
	}
}

// checkTermInvariants checks what the term rule promises for any pool: a
// cluster with a term has as writer only the term's holder; without a
// verifiable term it has no writer; AskTerm only with a term required.
func checkTermInvariants(t testing.TB, p *Pool, tv TermView) {
	t.Helper()
	for _, c := range p.Clusters {
		if c.Term == nil {
			if c.AskTerm {
				t.Fatalf("cluster %q asks for a term it does not require", c.Name)
			}
			for _, n := range c.Out {
				if n.Reason == ReasonNoTerm {
					t.Fatalf("cluster %q requires no term, but %s is out with no-term", c.Name, n.Name)
				}
			}
			continue
		}
		if len(c.Writers) == 0 {
			continue
		}
		w := c.Writers[0]
		if tv.Unverifiable != "" || c.Term.Number == 0 || w.Name != c.Term.Writer || w.Addr != c.Term.Addr {
			t.Fatalf("cluster %q: writer %s at %s, term %+v, unverifiable %q", c.Name, w.Name, w.Addr, *c.Term, tv.Unverifiable)
		}
		if c.AskTerm {
			t.Fatalf("cluster %q asks for a term with a writer by term", c.Name)
		}
	}
}

// TestComputeMarksClustersWithoutTerms: a replication cluster none of
// whose db members votes is marked unsafe (its writer follows the old
// rule: any single writable server), whatever its members' state; a
// single voter, or a Galera node (synced or not), clears the mark.
func TestComputeMarksClustersWithoutTerms(t *testing.T) {
	galera := func(name string, synced bool, opts ...opt) Member {
		return dbh(name, tags.Health{State: tags.Passing, Galera: true, GaleraSynced: synced}, opts...)
	}
	for _, tc := range []struct {
		name    string
		members []Member
		unsafe  map[string]string // by cluster
	}{
		{"no voter", []Member{writer("a"), replica("b", 0)}, map[string]string{"default": UnsafeNoTerm}},
		{"no voter, writer failed", []Member{writer("a", status(StatusFailed)), replica("b", 0)}, map[string]string{"default": UnsafeNoTerm}},
		{"two writable, no voter", []Member{writer("a"), writer("b")}, map[string]string{"default": UnsafeNoTerm}},
		{"one voter", []Member{writer("a"), replica("b", 0, rv)}, map[string]string{"default": ""}},
		{"a failed voter", []Member{writer("a"), replica("b", 0, rv, status(StatusFailed))}, map[string]string{"default": ""}},
		{"voters on an app agent only", []Member{writer("a"), member("w", tags.RoleApp, rv)}, map[string]string{"default": UnsafeNoTerm}},
		{"galera synced", []Member{galera("g1", true), galera("g2", true)}, map[string]string{"default": ""}},
		{"galera, none synced", []Member{galera("g1", false), galera("g2", false)}, map[string]string{"default": ""}},
		{"per cluster", []Member{writer("a", cluster("x")), writer("b", cluster("y"), rv)},
			map[string]string{"x": UnsafeNoTerm, "y": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := ComputeFresh(tc.members, Policy{}, nil, Freshness{}, TermView{})
			if len(p.Clusters) != len(tc.unsafe) {
				t.Fatalf("clusters %s, want %d", termSummary(p), len(tc.unsafe))
			}
			for _, c := range p.Clusters {
				if want := tc.unsafe[c.Name]; c.Unsafe != want {
					t.Errorf("%s: unsafe %q, want %q (%s)", c.Name, c.Unsafe, want, termSummary(p))
				}
				if c.Unsafe != "" && c.Term != nil {
					t.Errorf("%s: unsafe and follows term %+v", c.Name, *c.Term)
				}
			}
			if q := p.Clone(); !reflect.DeepEqual(q, p) {
				t.Errorf("Clone lost unsafe: %+v, want %+v", q, p)
			}
		})
	}
}
