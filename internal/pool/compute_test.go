package pool

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/tags"
)

func TestCompute(t *testing.T) {
	galera := func(name string, synced, readOnly bool, opts ...opt) Member {
		return dbh(name, tags.Health{State: tags.Passing, Galera: true, GaleraSynced: synced, ReadOnly: readOnly}, opts...)
	}
	warnWriter := func(name string, opts ...opt) Member {
		return dbh(name, tags.Health{State: tags.Warning, Reason: "slow"}, opts...)
	}
	prevWriter := func(cluster, name string) *Pool {
		return &Pool{Clusters: []Cluster{{Name: cluster, Writers: []Node{{Name: name}}}}}
	}
	tests := []struct {
		name    string
		members []Member
		policy  Policy
		prev    *Pool
		want    string
	}{
		{"empty", nil, Policy{}, nil, ""},
		{"writer and reader",
			[]Member{writer("a"), replica("b", 0)}, Policy{}, nil,
			"default{w[a] r[b] o[]}"},
		{"read-only server is not a writer",
			[]Member{dbh("a", tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true, SQLRunning: true, LagKnown: true})},
			Policy{}, nil, "default{w[] r[a] o[]}"},
		{"conflict without previous writer: no writer",
			[]Member{writer("a"), writer("b"), replica("c", 1)}, Policy{}, nil,
			"default{w[] r[c] o[a:conflict b:conflict] c[a b]}"},
		{"conflict keeps the previous writer",
			[]Member{writer("a"), writer("b"), writer("c")}, Policy{}, prevWriter("default", "b"),
			"default{w[b] r[] o[a:conflict c:conflict] c[a b c]}"},
		{"conflict with previous writer no longer a candidate",
			[]Member{writer("a"), writer("b"), writer("c", status(StatusFailed))}, Policy{}, prevWriter("default", "c"),
			"default{w[] r[] o[a:conflict b:conflict c:agent-failed] c[a b]}"},
		{"previous writer of another cluster does not count",
			[]Member{writer("a"), writer("b")}, Policy{}, prevWriter("other", "a"),
			"default{w[] r[] o[a:conflict b:conflict] c[a b]}"},
		{"single candidate is writer whatever the previous",
			[]Member{writer("a")}, Policy{}, prevWriter("default", "z"),
			"default{w[a] r[] o[]}"},
		{"lagging reader out when another is fine",
			[]Member{writer("a"), replica("b", 11), replica("c", 10)}, Policy{}, nil,
			"default{w[a] r[c] o[b:lag]}"},
		{"max lag from policy",
			[]Member{replica("b", 3), replica("c", 2)}, Policy{MaxLag: 2 * time.Second}, nil,
			"default{w[] r[c] o[b:lag]}"},
		{"unknown lag is out",
			[]Member{replica("b", -1), replica("c", 0)}, Policy{}, nil,
			"default{w[] r[c] o[b:lag]}"},
		{"floor: all lagging keeps the least lag",
			[]Member{writer("a"), replica("b", 50), replica("c", 20), replica("d", -1)}, Policy{MinReaders: 1}, nil,
			"default{w[a] r[c:floor] o[b:lag d:lag]}"},
		{"floor of two",
			[]Member{replica("b", 50), replica("c", 20), replica("d", -1), replica("e", 20)}, Policy{MinReaders: 2}, nil,
			"default{w[] r[c:floor e:floor] o[b:lag d:lag]}"},
		{"floor tops up healthy readers",
			[]Member{replica("b", 50), replica("c", 0), replica("d", 90)}, Policy{MinReaders: 2}, nil,
			"default{w[] r[b:floor c] o[d:lag]}"},
		{"floor: known lag before stopped replication",
			[]Member{
				dbh("b", tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true}),
				replica("c", 5000),
			}, Policy{MinReaders: 1}, nil,
			"default{w[] r[c:floor] o[b:replication-stopped]}"},
		{"floor: by name when equal",
			[]Member{replica("c", -1), dbh("b", tags.Health{State: tags.Warning, ReadOnly: true})}, Policy{MinReaders: 1}, nil,
			"default{w[] r[b:floor] o[c:lag]}"},
		{"no floor: min_readers 0",
			[]Member{replica("b", 50)}, Policy{}, nil,
			"default{w[] r[] o[b:lag]}"},
		{"no floor: negative",
			[]Member{replica("b", 50)}, Policy{MinReaders: -1}, nil,
			"default{w[] r[] o[b:lag]}"},
		{"floor never keeps dead servers",
			[]Member{
				replica("b", 0, status(StatusFailed)), replica("c", 0, status(StatusLeft)),
				replica("d", 0, status(StatusLeaving)), replica("e", 0, maint("disk")),
				dbh("f", tags.Health{State: tags.Critical, ReadOnly: true, Reason: "conn-refused"}),
				member("g", tags.RoleDB), member("h", tags.RoleDB, tag(tags.KeyHealth, "v9;x")),
				dbh("i", tags.Health{State: tags.Passing, ReadOnly: true, Galera: true}),
				member("j", tags.RoleDB, health(tags.Health{State: tags.Passing, ReadOnly: true}), status(StatusNone)),
			}, Policy{MinReaders: 5}, nil,
			"default{w[] r[] o[b:agent-failed c:left d:leaving e:maintenance f:critical g:no-health h:bad-health-tag i:galera-not-synced j:agent-failed]}"},
		{"maintenance takes precedence and is not floored",
			[]Member{writer("a", maint("upgrade")), replica("b", 0, maint("x"), status(StatusFailed))}, Policy{}, nil,
			"default{w[] r[] o[a:maintenance b:maintenance]}"},
		{"maintenance of the writer ends a conflict",
			[]Member{writer("a", maint("switchover")), writer("b")}, Policy{}, nil,
			"default{w[b] r[] o[a:maintenance]}"},
		{"multiple clusters",
			[]Member{
				writer("a1", cluster("s1")), replica("a2", 0, cluster("s1")),
				writer("b1", cluster("s2")), replica("b2", 99, cluster("s2")),
				writer("d1"), writer("d2", cluster(tags.DefaultCluster)),
			}, Policy{MinReaders: 1}, nil,
			"default{w[] r[] o[d1:conflict d2:conflict] c[d1 d2]}; s1{w[a1] r[a2] o[]}; s2{w[b1] r[b2:floor] o[]}"},
		{"writer serves reads",
			[]Member{writer("a"), replica("b", 0)}, Policy{WriterServesReads: true}, nil,
			"default{w[a] r[a b] o[]}"},
		{"writer serving reads meets the floor",
			[]Member{writer("a"), replica("b", 60)}, Policy{WriterServesReads: true}, nil,
			"default{w[a] r[a] o[b:lag]}"},
		{"apps, role-less and stock serf agents are ignored",
			[]Member{
				member("app1", tags.RoleApp), member("plain", ""), member("web1", "web", tag("dc", "x")),
				member("app2", tags.RoleApp, health(tags.Health{State: tags.Passing})), writer("a"),
			}, Policy{}, nil,
			"default{w[a] r[] o[]}"},
		{"warning reader out when others are fine",
			[]Member{replica("b", 0), dbh("c", tags.Health{State: tags.Warning, ReadOnly: true, Replica: true, IORunning: true, SQLRunning: true, LagKnown: true})},
			Policy{}, nil, "default{w[] r[b] o[c:warning]}"},
		{"replication stopped",
			[]Member{
				replica("a", 0),
				dbh("b", tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, SQLRunning: true, LagKnown: true}),
				dbh("c", tags.Health{State: tags.Passing, ReadOnly: true}),
			}, Policy{}, nil,
			"default{w[] r[a] o[b:replication-stopped c:replication-stopped]}"},
		{"writer floor: a warning writer beats none",
			[]Member{warnWriter("a"), replica("b", 0)}, Policy{}, nil,
			"default{w[a:floor] r[b] o[]}"},
		{"warning writer out when a passing one exists",
			[]Member{warnWriter("a"), writer("b")}, Policy{}, nil,
			"default{w[b] r[] o[a:warning]}"},
		{"writer floor keeps the conflict rule",
			[]Member{warnWriter("a"), warnWriter("b")}, Policy{}, nil,
			"default{w[] r[] o[a:conflict b:conflict] c[a b]}"},
		{"galera: one writer by name, others read",
			[]Member{galera("g3", true, false), galera("g1", true, false), galera("g2", true, false)}, Policy{}, nil,
			"default{w[g1] r[g2 g3] o[]}"},
		{"galera: the writer does not depend on the previous one (every agent must agree; it moves back to g1)",
			[]Member{galera("g3", true, false), galera("g1", true, false), galera("g2", true, false)}, Policy{}, prevWriter("default", "g2"),
			"default{w[g1] r[g2 g3] o[]}"},
		{"galera: previous writer gone, the next by name",
			[]Member{galera("g3", true, false), galera("g1", true, false, status(StatusFailed)), galera("g2", true, false)}, Policy{}, prevWriter("default", "g1"),
			"default{w[g2] r[g3] o[g1:agent-failed]}"},
		{"galera: not synced out, read-only synced reads",
			[]Member{galera("g1", false, false), galera("g2", true, true), galera("g3", true, false)}, Policy{}, nil,
			"default{w[g3] r[g2] o[g1:galera-not-synced]}"},
		{"galera: critical after fall wsrep failures is still galera-not-synced",
			[]Member{dbh("g1", tags.Health{State: tags.Critical, Reason: "wsrep", Galera: true}), galera("g2", true, false)}, Policy{}, nil,
			"default{w[g2] r[] o[g1:galera-not-synced]}"},
		{"galera: resynced but not yet risen is still galera-not-synced",
			[]Member{dbh("g1", tags.Health{State: tags.Critical, Reason: "wsrep", Galera: true, GaleraSynced: true}), galera("g2", true, false)}, Policy{}, nil,
			"default{w[g2] r[] o[g1:galera-not-synced]}"},
		{"galera: critical for another reason is critical",
			[]Member{dbh("g1", tags.Health{State: tags.Critical, Reason: "refused"}), galera("g2", true, false),
				dbh("g3", tags.Health{State: tags.Critical, Reason: "timeout", Galera: true, GaleraSynced: true})}, Policy{}, nil,
			"default{w[g2] r[] o[g1:critical g3:critical]}"},
		{"wrong source: out, the writer's replica stays",
			[]Member{writer("a", ids(1, 0)), replica("b", 0, ids(2, 1)), replica("c", 0, ids(3, 7))}, Policy{}, nil,
			"default{w[a] r[b] o[c:wrong-source]}"},
		{"wrong source is hard: the floor never keeps it",
			[]Member{writer("a", ids(1, 0)), replica("c", 0, ids(3, 7))}, Policy{MinReaders: 2}, nil,
			"default{w[a] r[] o[c:wrong-source]}"},
		{"wrong source before lag: the floor keeps the writer's lagging replica",
			[]Member{writer("a", ids(1, 0)), replica("b", 50, ids(2, 7)), replica("c", 60, ids(3, 1))}, Policy{MinReaders: 1}, nil,
			"default{w[a] r[c:floor] o[b:wrong-source]}"},
		{"wrong source with stopped threads (the last source known)",
			[]Member{writer("a", ids(1, 0)), dbh("b", tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, ServerID: 2, SourceServerID: 7})},
			Policy{MinReaders: 1}, nil,
			"default{w[a] r[] o[b:wrong-source]}"},
		{"wrong source: unknown source keeps today's rules",
			[]Member{writer("a", ids(1, 0)), replica("b", 0, ids(2, 0)), replica("c", 30, ids(3, 0))}, Policy{MinReaders: 2}, nil,
			"default{w[a] r[b c:floor] o[]}"},
		{"wrong source: not judged without a writer",
			[]Member{writer("a", ids(1, 0), status(StatusFailed)), replica("b", 0, ids(2, 1)), replica("c", 0, ids(3, 7))}, Policy{}, nil,
			"default{w[] r[b c] o[a:agent-failed]}"},
		{"wrong source: not judged in a conflict with no writer",
			[]Member{writer("a", ids(1, 0)), writer("d", ids(4, 0)), replica("c", 0, ids(3, 7))}, Policy{}, nil,
			"default{w[] r[c] o[a:conflict d:conflict] c[a d]}"},
		{"wrong source: the writer kept in a conflict is the one that counts",
			[]Member{writer("a", ids(1, 0)), writer("d", ids(4, 0)), replica("b", 0, ids(2, 4)), replica("c", 0, ids(3, 1))}, Policy{}, prevWriter("default", "d"),
			"default{w[d] r[b] o[a:conflict c:wrong-source] c[a d]}"},
		{"wrong source: not judged when the writer's server_id is unknown",
			[]Member{writer("a"), replica("c", 0, ids(3, 7))}, Policy{}, nil,
			"default{w[a] r[c] o[]}"},
		{"wrong source: a replica of a replica (chained) is out",
			[]Member{writer("a", ids(1, 0)), replica("b", 0, ids(2, 1)), replica("c", 0, ids(3, 2))}, Policy{}, nil,
			"default{w[a] r[b] o[c:wrong-source]}"},
		{"wrong source: a writer that replicates (master-master) is still the writer",
			[]Member{
				dbh("a", tags.Health{State: tags.Passing, Replica: true, IORunning: true, SQLRunning: true, LagKnown: true, ServerID: 1, SourceServerID: 2}),
				replica("b", 0, ids(2, 1)),
			}, Policy{}, nil,
			"default{w[a] r[b] o[]}"},
		{"wrong source under the writer floor",
			[]Member{warnWriter("a", ids(1, 0)), replica("b", 0, ids(2, 1)), replica("c", 0, ids(3, 9))}, Policy{}, nil,
			"default{w[a:floor] r[b] o[c:wrong-source]}"},
		{"wrong source with the writer serving reads",
			[]Member{writer("a", ids(1, 0)), replica("c", 0, ids(3, 7))}, Policy{WriterServesReads: true, MinReaders: 1}, nil,
			"default{w[a] r[a] o[c:wrong-source]}"},
		{"wrong source per cluster",
			[]Member{writer("a", ids(1, 0), cluster("x")), replica("b", 0, ids(2, 1), cluster("x")),
				writer("d", ids(7, 0)), replica("c", 0, ids(3, 1))}, Policy{}, nil,
			"default{w[d] r[] o[c:wrong-source]}; x{w[a] r[b] o[]}"},
		{"fallback: the writer instead of a lagging reader",
			[]Member{writer("a"), replica("b", 50), replica("c", 20)}, Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}, nil,
			"default{w[a] r[a:fallback] o[b:lag c:lag]}"},
		{"fallback: the writer instead of stopped replication",
			[]Member{writer("a"), dbh("b", tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true})},
			Policy{MinReaders: 2, ReadFallback: ReadFallbackWriter}, nil,
			"default{w[a] r[a:fallback] o[b:replication-stopped]}"},
		{"fallback: not needed when fresh readers meet the floor",
			[]Member{writer("a"), replica("b", 0), replica("c", 50)}, Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}, nil,
			"default{w[a] r[b] o[c:lag]}"},
		{"fallback: a fresh reader tops up the floor, stale ones stay out",
			[]Member{writer("a"), replica("b", 0), replica("c", 1), replica("d", 50)}, Policy{MinReaders: 3, ReadFallback: ReadFallbackWriter}, nil,
			"default{w[a] r[a:fallback b c] o[d:lag]}"},
		{"fallback: a warning reader is not stale and is floored first",
			[]Member{writer("a"), replica("b", 50),
				dbh("c", tags.Health{State: tags.Warning, ReadOnly: true, Replica: true, IORunning: true, SQLRunning: true, LagKnown: true, LagSeconds: 90})},
			Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}, nil,
			"default{w[a] r[c:floor] o[b:lag]}"},
		{"fallback: the writer already serving reads is enough",
			[]Member{writer("a"), replica("b", 50)}, Policy{MinReaders: 2, ReadFallback: ReadFallbackWriter, WriterServesReads: true}, nil,
			"default{w[a] r[a] o[b:lag]}"},
		{"fallback: no passing writer keeps the stale reader",
			[]Member{warnWriter("a"), replica("b", 50)}, Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}, nil,
			"default{w[a:floor] r[b:floor] o[]}"},
		{"fallback: no writer keeps the stale reader",
			[]Member{replica("b", 50)}, Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}, nil,
			"default{w[] r[b:floor] o[]}"},
		{"fallback: dead replicas are not stale ones",
			[]Member{writer("a"), replica("b", 0, status(StatusFailed))}, Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}, nil,
			"default{w[a] r[] o[b:agent-failed]}"},
		{"fallback none: no floor for stale readers",
			[]Member{writer("a"), replica("b", 50), dbh("c", tags.Health{State: tags.Warning, ReadOnly: true})},
			Policy{MinReaders: 2, ReadFallback: ReadFallbackNone}, nil,
			"default{w[a] r[c:floor] o[b:lag]}"},
		{"fallback none without a writer",
			[]Member{replica("b", 50)}, Policy{MinReaders: 1, ReadFallback: ReadFallbackNone}, nil,
			"default{w[] r[] o[b:lag]}"},
		{"fallback stale-reader is the floor of old",
			[]Member{writer("a"), replica("b", 50), replica("c", 20)}, Policy{MinReaders: 1, ReadFallback: ReadFallbackStaleReader}, nil,
			"default{w[a] r[c:floor] o[b:lag]}"},
		{"galera mixed with async writer is a conflict",
			[]Member{galera("g1", true, false), writer("a")}, Policy{}, nil,
			"default{w[] r[] o[a:conflict g1:conflict] c[a g1]}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Compute(tt.members, tt.policy, tt.prev)
			if got := summary(p); got != tt.want {
				t.Fatalf("\n got %s\nwant %s", got, tt.want)
			}
			checkInvariants(t, tt.members, tt.policy, p)
		})
	}
}

func TestComputeDetails(t *testing.T) {
	members := []Member{
		writer("a"), writer("b"),
		replica("c", 42),
		dbh("d", tags.Health{State: tags.Critical, ReadOnly: true, Reason: "conn-refused"}),
		replica("e", 0, maint("disk swap")),
		member("f", tags.RoleDB, tag(tags.KeyHealth, "v2;h=p")),
		dbh("g", tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true}),
	}
	p := Compute(members, Policy{MinReaders: 2}, nil)
	fb := Compute([]Member{writer("w"), replica("r", 50), replica("s", 20)}, Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}, nil)
	if got, want := fb.Clusters[0].Readers[0], (Node{Name: "w", Addr: "w:3306", Reason: ReasonFallback,
		Detail: "the writer serves reads instead of stale readers: s (lag), r (lag)"}); got != want {
		t.Errorf("fallback reader %+v, want %+v", got, want)
	}
	wrong := Compute([]Member{writer("w", ids(2, 0)), replica("r", 0, ids(3, 7))}, Policy{}, nil)
	if got, want := wrong.Clusters[0].Out[0].Detail, "replicates from server_id 7, writer has 2"; got != want {
		t.Errorf("wrong-source detail %q, want %q", got, want)
	}
	got := map[string]string{}
	for _, n := range append(append(p.Clusters[0].Readers, p.Clusters[0].Out...), p.Clusters[0].Writers...) {
		got[n.Name] = string(n.Reason) + " | " + n.Detail
	}
	want := map[string]string{
		"a": "conflict | writable: a, b",
		"b": "conflict | writable: a, b",
		"c": "floor | lag: lag 42s > max 10s",
		"d": "critical | conn-refused",
		"e": "maintenance | disk swap",
		"f": `bad-health-tag | decode health tag: unknown health tag version "v2" (this agent reads v1)`,
		"g": "floor | replication-stopped: io thread running, sql thread stopped",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
	if addr := p.Clusters[0].Readers[0].Addr; addr != "c:3306" {
		t.Fatalf("addr = %q", addr)
	}
}

func TestComputeDeterministic(t *testing.T) {
	members := []Member{
		writer("a", cluster("x")), writer("b", cluster("x")), replica("c", 3, cluster("x")),
		replica("d", 30), replica("e", 40), writer("f"), member("g", tags.RoleApp),
		replica("h", -1, cluster("y")), writer("i", cluster("y"), status(StatusFailed)),
		// Duplicate names: the choice must not depend on order.
		replica("dup", 0), writer("dup"), replica("dup", 0, status(StatusFailed)),
	}
	prev := &Pool{Clusters: []Cluster{{Name: "x", Writers: []Node{{Name: "b"}}}}}
	for _, policy := range []Policy{{}, {WriterServesReads: true, MinReaders: 2}} {
		want := Compute(members, policy, prev)
		checkInvariants(t, members, policy, want)
		rng := rand.New(rand.NewSource(1))
		for i := 0; i < 50; i++ {
			shuffled := append([]Member(nil), members...)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if got := Compute(shuffled, policy, prev); !reflect.DeepEqual(got, want) {
				t.Fatalf("order changed the pool:\n got %s\nwant %s", summary(got), summary(want))
			}
		}
	}
}

func TestComputeDoesNotModifyInput(t *testing.T) {
	members := []Member{replica("b", 0), writer("a")}
	prev := &Pool{Clusters: []Cluster{{Name: "default", Writers: []Node{{Name: "a"}}}}}
	before := summary(prev)
	Compute(members, Policy{}, prev)
	if members[0].Name != "b" || summary(prev) != before {
		t.Fatal("Compute modified its input")
	}
}

func TestReasonsDocumented(t *testing.T) {
	doc := readDoc(t)
	for _, r := range Reasons() {
		if !strings.Contains(doc, "//\t"+string(r)+" ") {
			t.Errorf("reason %q missing from the package doc table", r)
		}
	}
}

// A member marked bad where it entered the view is out with its reason and
// detail, even when its tags make it a writer, a reader or a floor
// candidate, and even as the previous writer.
func TestComputeBadMemberIsOut(t *testing.T) {
	bad := func(r Reason, detail string) opt {
		return func(m *Member) { m.Bad, m.BadDetail = r, detail }
	}
	members := []Member{
		writer(`db\xff`, bad(ReasonBadName, `name is not valid UTF-8`)),
		replica("r1", 0, bad(ReasonBadTags, "42 tags")),
		replica("r2", 500, bad(ReasonBadTags, "x"), maint("m")),
		writer("w"),
	}
	prev := &Pool{Clusters: []Cluster{{Name: "default", Writers: []Node{{Name: `db\xff`}}}}}
	p := Compute(members, Policy{MinReaders: 2}, prev)
	if got, want := summary(p), `default{w[w] r[] o[db\xff:bad-name r1:bad-tags r2:bad-tags]}`; got != want {
		t.Fatalf("pool:\n got %s\nwant %s", got, want)
	}
	if d := p.Clusters[0].Out[0].Detail; d != "name is not valid UTF-8" {
		t.Errorf("detail %q", d)
	}
	checkInvariants(t, members, Policy{MinReaders: 2}, p)
}

// The pool reads the probe's wsrep reason code from the health tag.
func TestWsrepReasonIsTheProbes(t *testing.T) {
	if wsrepReason != string(probe.ReasonWsrep) {
		t.Fatalf("wsrepReason %q, probe.ReasonWsrep %q", wsrepReason, probe.ReasonWsrep)
	}
}
