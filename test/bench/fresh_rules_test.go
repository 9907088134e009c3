//go:build bench

package bench

import (
	"strings"
	"testing"
	"time"
)

// The anchors' rule and the counter parser are pure logic: tested here
// without MariaDB or namespaces.

func TestFreshSBMRule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		io, sql  string
		sbm      string
		empty    bool
		wantOut  bool
		inDetail string
	}{
		{name: "fresh", io: "Yes", sql: "Yes", sbm: "0"},
		{name: "at max", io: "Yes", sql: "Yes", sbm: "5"},
		{name: "above max", io: "Yes", sql: "Yes", sbm: "6", wantOut: true},
		{name: "NULL lag", io: "Yes", sql: "Yes", sbm: "", wantOut: true, inDetail: "sbm="},
		{name: "io reconnecting", io: "Connecting", sql: "Yes", sbm: "", wantOut: true, inDetail: "io=Connecting"},
		{name: "sql stopped", io: "Yes", sql: "No", sbm: "0", wantOut: true},
		{name: "garbage lag", io: "Yes", sql: "Yes", sbm: "x", wantOut: true},
		{name: "not a replica", empty: true, wantOut: true, inDetail: "not a replica"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := map[string]string{"Slave_IO_Running": tc.io, "Slave_SQL_Running": tc.sql, "Seconds_Behind_Master": tc.sbm}
			if tc.empty {
				st = map[string]string{}
			}
			out, detail := sbmRule(st, 5*time.Second)
			if out != tc.wantOut || !strings.Contains(detail, tc.inDetail) {
				t.Errorf("sbmRule(%v) = %v, %q; want %v and a detail with %q", st, out, detail, tc.wantOut, tc.inDetail)
			}
		})
	}
}

func TestFreshParseGossipCounters(t *testing.T) {
	const out = `Chain OUTPUT (policy ACCEPT 120 packets, 9000 bytes)
    pkts      bytes target     prot opt in     out     source               destination
     310    41234            17   --  *      eth0    0.0.0.0/0            0.0.0.0/0            multiport ports 7946
      12     2048            6    --  *      eth0    0.0.0.0/0            0.0.0.0/0            multiport ports 7946
       5      300            6    --  *      eth0    0.0.0.0/0            0.0.0.0/0            multiport ports 79460
`
	udp, tcp, err := parseGossipCounters(out)
	if err != nil || udp != 41234 || tcp != 2048 {
		t.Fatalf("parseGossipCounters = %d, %d, %v; want 41234, 2048", udp, tcp, err)
	}
	if _, _, err := parseGossipCounters("Chain INPUT (policy ACCEPT)\n"); err == nil {
		t.Fatal("no counting rules: want an error")
	}
}

func TestFreshSumCounter(t *testing.T) {
	const exp = `# TYPE shoal_serf_member_update_total counter
shoal_serf_member_update_total 12
shoal_serf_member_update_total{cluster="a"} 3
shoal_serf_member_update_totals 100
shoal_serf_member_join_total 7
`
	if got := sumCounter(exp, "shoal_serf_member_update_total"); got != 15 {
		t.Fatalf("sumCounter = %v, want 15", got)
	}
	if got := sumCounter(exp, "shoal_absent_total"); got != 0 {
		t.Fatalf("sumCounter of an absent counter = %v, want 0", got)
	}
}
