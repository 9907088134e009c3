package pool

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

func TestDecideTerms(t *testing.T) {
	now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	held := func(w string, n uint64) map[string]Term {
		return map[string]Term{"default": {Cluster: "default", Number: n, Writer: w, Addr: w + ":3306"}}
	}
	voters := map[string]bool{"dbp": true, "dbr": true, "dbq": true}
	warning := dbh("dbp", tags.Health{State: tags.Warning})
	galera := func(n string) Member {
		return dbh(n, tags.Health{State: tags.Passing, Galera: true, GaleraSynced: true})
	}
	cases := []struct {
		name    string
		members []Member
		terms   map[string]Term
		voters  map[string]bool
		want    string // "" or "term N to X (expect E)"
	}{
		{"first term: the only writable server", []Member{writer("dbp"), replica("dbr", 0)}, nil, voters, "term 1 to dbp (expect 0)"},
		{"first term: two writable servers, none", []Member{writer("dbp"), writer("dbr")}, nil, voters, ""},
		{"first term: a writable non-voter is no candidate", []Member{writer("dbp"), writer("evil")}, nil, voters, "term 1 to dbp (expect 0)"},
		{"first term: only a non-voter is writable, none", []Member{writer("evil"), replica("dbr", 0)}, nil, voters, ""},
		{"first term: a warning server is no candidate", []Member{warning, replica("dbr", 0)}, nil, voters, ""},
		{"holder passing, a second writable server: kept", []Member{writer("dbp"), writer("dbr")}, held("dbp", 3), voters, ""},
		{"holder slow (warning), a second writable server: kept", []Member{warning, writer("dbr")}, held("dbp", 3), voters, ""},
		{"holder read-only, one other writable: promoted", []Member{replica("dbp", 0), writer("dbr")}, held("dbp", 3), voters, "term 4 to dbr (expect 3)"},
		{"holder critical, one other writable: promoted", []Member{dbh("dbp", tags.Health{State: tags.Critical}), writer("dbr")}, held("dbp", 3), voters, "term 4 to dbr (expect 3)"},
		{"holder failed, one other writable: promoted", []Member{writer("dbp", status(StatusFailed)), writer("dbr")}, held("dbp", 3), voters, "term 4 to dbr (expect 3)"},
		{"holder not a member, one other writable: promoted", []Member{writer("dbr")}, held("dbp", 3), voters, "term 4 to dbr (expect 3)"},
		{"holder read-only, two others writable: none", []Member{replica("dbp", 0), writer("dbr"), writer("dbq")}, held("dbp", 3), voters, ""},
		{"holder read-only, no other writable: none", []Member{replica("dbp", 0), replica("dbr", 0)}, held("dbp", 3), voters, ""},
		{"holder in maintenance: kept", []Member{writer("dbp", maint("kernel")), writer("dbr")}, held("dbp", 3), voters, ""},
		{"holder read-only, the writable one is no voter: none", []Member{replica("dbp", 0), writer("evil")}, held("dbp", 3), voters, ""},
		{"holder at a new address, the only writable: a new term to it", []Member{writer("dbp", addr("10.0.0.9:3307")), replica("dbr", 0)}, held("dbp", 3), voters, "term 4 to dbp (expect 3)"},
		{"holder at a new address, another writable too: none", []Member{writer("dbp", addr("10.0.0.9:3307")), writer("dbr")}, held("dbp", 3), voters, ""},
		{"Galera: no term", []Member{galera("g1"), galera("g2")}, nil, map[string]bool{"g1": true, "g2": true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gs := DecideTerms(tc.members, Policy{}, tc.terms, tc.voters, nil, now)
			var got []string
			for _, g := range gs {
				if err := CheckTerm(g.Term); err != nil {
					t.Errorf("granted a bad term: %v", err)
				}
				if !g.Term.Granted.Equal(now) || g.Term.Why == "" {
					t.Errorf("grant %+v: want granted at %v and a reason", g, now)
				}
				got = append(got, fmt.Sprintf("term %d to %s (expect %d)", g.Term.Number, g.Term.Writer, g.Expect))
			}
			if s := strings.Join(got, "; "); s != tc.want {
				t.Errorf("grants = %q, want %q", s, tc.want)
			}
		})
	}
}

// The writer a failover replaced, thawed and still gossiping its old
// writable tag while the new holder's says read-only, gets no term by the
// outside-promotion rule; another writable server still does.
func TestDecideTermsBarsTheFailedOverWriter(t *testing.T) {
	now := time.Date(2026, 12, 6, 4, 23, 28, 0, time.UTC)
	voters := map[string]bool{"db1": true, "db2": true, "db3": true}
	terms := map[string]Term{"default": {Cluster: "default", Number: 22, Writer: "db2", Addr: "db2:3306"}}
	barred := map[string]string{"default": "db1"}
	if gs := DecideTerms([]Member{writer("db1"), replica("db2", 0), replica("db3", 0)}, Policy{}, terms, voters, barred, now); len(gs) != 0 {
		t.Errorf("the failed-over writer was granted %+v", gs)
	}
	gs := DecideTerms([]Member{replica("db1", 0), replica("db2", 0), writer("db3")}, Policy{}, terms, voters, barred, now)
	if len(gs) != 1 || gs[0].Term.Writer != "db3" || gs[0].Term.Number != 23 {
		t.Errorf("an outside promotion of db3: %+v", gs)
	}
	if gs := DecideTerms([]Member{writer("db1"), replica("db2", 0), replica("db3", 0)}, Policy{}, terms, voters, nil, now); len(gs) != 1 {
		t.Errorf("without the bar the rule grants db1 (the bug): %+v", gs)
	}
}

func TestDecideTermsPerCluster(t *testing.T) {
	ms := []Member{writer("a1", cluster("a")), replica("a2", 0, cluster("a")), writer("b1", cluster("b")), writer("b2", cluster("b"))}
	voters := map[string]bool{"a1": true, "a2": true, "b1": true, "b2": true}
	gs := DecideTerms(ms, Policy{}, map[string]Term{}, voters, nil, time.Now())
	if len(gs) != 1 || gs[0].Term.Cluster != "a" || gs[0].Term.Writer != "a1" || gs[0].Term.Addr != "a1:3306" {
		t.Fatalf("grants = %+v, want one: term 1 of a to a1 at a1:3306", gs)
	}
	if !strings.Contains(gs[0].Term.Why, "only writable") {
		t.Errorf("why = %q", gs[0].Term.Why)
	}
}

func TestCheckTerm(t *testing.T) {
	ok := Term{Cluster: "c", Number: 1, Writer: "w", Addr: "10.0.0.1:3306"}
	if err := CheckTerm(ok); err != nil {
		t.Fatalf("CheckTerm(%+v) = %v", ok, err)
	}
	bad := []func(*Term){
		func(t *Term) { t.Cluster = "" },
		func(t *Term) { t.Cluster = strings.Repeat("c", tags.MaxClusterLen+1) },
		func(t *Term) { t.Writer = "" },
		func(t *Term) { t.Addr = "nocolon" },
		func(t *Term) { t.Number = 0 },
		func(t *Term) { t.Why = strings.Repeat("x", maxTermWhy+1) },
	}
	for i, f := range bad {
		tt := ok
		f(&tt)
		if err := CheckTerm(tt); err == nil {
			t.Errorf("case %d: CheckTerm(%+v) = nil, want an error", i, tt)
		}
	}
}
