package switchover

import (
	"errors"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/tags"
)

func cand(name, pos string, mod ...func(*candidate)) candidate {
	p, err := parseGTIDList(pos)
	if err != nil {
		panic(err)
	}
	c := candidate{Name: name, Addr: name + ":3306", Pos: p, Received: p,
		Survey: consensus.SurveyAnswer{ServerID: uint32(len(name)*10 + int(name[len(name)-1]-'0')), Replica: true, SQLRunning: true, Drained: true}}
	for _, m := range mod {
		m(&c)
	}
	return c
}

func TestChoose(t *testing.T) {
	oldAt := func(seq uint64) tags.Position {
		p, _ := tags.NewPosition([]tags.Domain{{ID: 0, Seq: seq}})
		return p
	}
	for _, tc := range []struct {
		name  string
		cands []candidate
		old   tags.Position
		pick  string
		why   string            // in Why
		out   map[string]string // name: in Out[name]
	}{
		{name: "the most advanced", cands: []candidate{cand("db2", "0-1-10"), cand("db3", "0-1-12")}, old: oldAt(12),
			pick: "db3", why: "db3 is the most advanced replica (0-1-12)", out: map[string]string{"db2": "lacks 2 transactions db3 applied"}},
		{name: "a tie goes to the first by name", cands: []candidate{cand("db3", "0-1-12"), cand("db2", "0-1-12")}, old: oldAt(12),
			pick: "db2", out: map[string]string{"db3": "as advanced as db2"}},
		{name: "a tie goes to the one whose promotion rule is prefer", cands: []candidate{cand("db2", "0-1-12"),
			cand("db3", "0-1-12", func(c *candidate) { c.Survey.Promotion = consensus.PromotePrefer })}, old: oldAt(12),
			pick: "db3", out: map[string]string{"db2": "as advanced as db3, whose promotion rule is prefer"}},
		{name: "prefer does not beat a more advanced one", cands: []candidate{cand("db2", "0-1-12"),
			cand("db3", "0-1-11", func(c *candidate) { c.Survey.Promotion = consensus.PromotePrefer })}, old: oldAt(12),
			pick: "db2", out: map[string]string{"db3": "lacks 1 transactions db2 applied"}},
		{name: "never is not promoted", cands: []candidate{cand("db2", "0-1-12"),
			cand("db3", "0-1-12", func(c *candidate) { c.Survey.Promotion = consensus.PromoteNever })}, old: oldAt(12),
			pick: "db2", out: map[string]string{"db3": "promotion rule is never"}},
		{name: "never alone holding transactions: nobody is promoted", cands: []candidate{cand("db2", "0-1-10"),
			cand("db3", "0-1-12", func(c *candidate) { c.Survey.Promotion = consensus.PromoteNever })}, old: oldAt(12),
			out: map[string]string{"db2": "lacks 2 transactions db3 applied", "db3": "promotion rule is never"}},
		{name: "received but not applied by another counts", cands: []candidate{
			cand("db2", "0-1-12"),
			cand("db3", "0-1-10", func(c *candidate) { c.Received = gl("0-1-14"); c.Survey.Drained = false }),
		}, old: oldAt(14), out: map[string]string{"db2": "lacks 2 transactions db3 received", "db3": "relay log not drained"}},
		{name: "a broken SQL thread is passed over", cands: []candidate{
			cand("db2", "0-1-12"),
			cand("db3", "0-1-12", func(c *candidate) { c.SQLError = "1062: Duplicate entry"; c.Survey.SQLRunning = false }),
		}, pick: "db2", out: map[string]string{"db3": "stopped on an error: 1062"}},
		{name: "errant transactions are passed over", cands: []candidate{
			cand("db2", "0-1-12"),
			cand("db3", "0-33-13", func(c *candidate) { c.Survey.Own = "0-33-13" }),
		}, old: oldAt(12), pick: "db2", out: map[string]string{"db3": "errant transactions: 0-33-13 was written on it"}},
		{name: "an errant write with the sequence number of the writer's next (MariaDB)", cands: []candidate{
			cand("db2", "0-1-4"),
			cand("db3", "0-33-4", func(c *candidate) { c.Survey.Own = "0-33-4" }),
		}, old: oldAt(4), pick: "db2", out: map[string]string{"db3": "errant transactions: 0-33-4"}},
		{name: "own GTIDs others have are not errant (a former writer)", cands: []candidate{
			cand("db2", "0-22-12"),
			cand("db3", "0-22-12", func(c *candidate) { c.Survey.ServerID = 22; c.Survey.Own = "0-22-12" }),
		}, old: oldAt(12), pick: "db2"},
		{name: "no survey", cands: []candidate{cand("db2", "0-1-12"), {Name: "db3", Err: errors.New("no answer in 3s")}},
			pick: "db2", out: map[string]string{"db3": "no survey: no answer in 3s"}},
		{name: "nobody answered", cands: []candidate{{Name: "db3", Err: errors.New("no answer")}},
			why: "no candidate may be promoted: db3: no survey"},
		{name: "not a replica", cands: []candidate{cand("db2", "0-1-12", func(c *candidate) { c.Survey.Replica = false })},
			why: "db2: not a replica"},
		{name: "two domains: each must be covered", cands: []candidate{cand("db2", "0-1-12,1-1-5"), cand("db3", "0-1-13,1-1-4")},
			why: "no candidate may be promoted", out: map[string]string{"db2": "lacks 1 transactions db3 applied", "db3": "lacks 1 transactions db2 applied"}},
		{name: "a replica not surveyed that last gossiped more: no pick", cands: []candidate{cand("db2", "0-1-12"),
			{Name: "db3", Hint: true, Err: errors.New("its agent is failed"), Pos: gl("0-0-13"), Received: gl("0-0-13")}},
			why: "no candidate may be promoted", out: map[string]string{"db2": "lacks 1 transactions db3 had when it last gossiped", "db3": "not surveyed (its agent is failed)"}},
		{name: "a replica not surveyed that last gossiped less: the pick stands", cands: []candidate{cand("db2", "0-1-12"),
			{Name: "db3", Hint: true, Err: errors.New("its agent is failed"), Pos: gl("0-0-11"), Received: gl("0-0-11")}},
			pick: "db2"},
		{name: "an empty position is behind", cands: []candidate{cand("db2", ""), cand("db3", "0-1-1")},
			pick: "db3", out: map[string]string{"db2": "lacks 1 transactions db3 applied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := choose(tc.cands, tc.old)
			if ch.Pick != tc.pick {
				t.Errorf("pick %q, want %q (why %q, out %v)", ch.Pick, tc.pick, ch.Why, ch.Out)
			}
			if !strings.Contains(ch.Why, tc.why) {
				t.Errorf("why %q, want it to contain %q", ch.Why, tc.why)
			}
			for n, w := range tc.out {
				if !strings.Contains(ch.Out[n], w) {
					t.Errorf("out[%s] = %q, want it to contain %q", n, ch.Out[n], w)
				}
			}
			if ch.Pick != "" && ch.Addr != ch.Pick+":3306" {
				t.Errorf("addr %q", ch.Addr)
			}
		})
	}
}

func gl(s string) gtidList {
	l, err := parseGTIDList(s)
	if err != nil {
		panic(err)
	}
	return l
}

func TestParseGTIDList(t *testing.T) {
	for _, bad := range []string{"0-1", "a-1-2", "0-1-2,0-2-3", "0-1-2-3", "-1-1-1"} {
		if _, err := parseGTIDList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	l, err := parseGTIDList(" 0-1-100, 5-2-7 ")
	if err != nil || len(l) != 2 || l[5] != (gtid{5, 2, 7}) || formatList(l) != "0-1-100,5-2-7" {
		t.Fatalf("%v %v", l, err)
	}
}
