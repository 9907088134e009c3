package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestGossipNames(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"shoal", "memberlist", "probeNode"}, []string{"shoal", "memberlist", "probe_node"}},
		{[]string{"shoal", "serf", "queue", "Intent"}, []string{"shoal", "serf", "queue", "intent"}},
		{[]string{"shoal", "serf", "coordinate", "adjustment-ms"}, []string{"shoal", "serf", "coordinate", "adjustment_ms"}},
		{[]string{"shoal", "memberlist", "udp", "sent"}, []string{"shoal", "memberlist", "udp", "sent"}},
	} {
		if got := snake(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("snake(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if !perName([]string{"shoal", "serf", "events", "deploy"}) || !perName([]string{"serf", "queries", "q"}) ||
		perName([]string{"shoal", "serf", "events"}) || perName([]string{"shoal", "serf", "member", "join"}) {
		t.Error("perName")
	}
	k, v := seconds([]string{"shoal", "serf", "coordinate", "adjustment-ms"}, 250)
	if strings.Join(k, ".") != "shoal.serf.coordinate.adjustment_seconds" || v != 0.25 {
		t.Errorf("seconds: %v %v", k, v)
	}
}

func TestStateCollector(t *testing.T) {
	probe := func() (ProbeState, bool) {
		return ProbeState{Reachable: true, State: "warning", LagKnown: true, LagSeconds: 3, ReadOnly: true, Checks: 10, Connects: 1,
			Facts: map[string]float64{"read_only": 1, "source_server_id": 4294967295}}, true
	}
	hooks := func() []HookState {
		return []HookState{{Handler: "user=/bin/true", QueueDepth: 2, DroppedByReason: map[string]uint64{"queue_full": 5},
			DroppedByClass: map[string]map[string]uint64{"user": {"queue_full": 4}, "query": {"queue_full": 1}}, Coalesced: 1}}
	}
	c := NewStateCollector(probe, hooks)
	want := `
# HELP shoal_mysql_health 1 for the probe's current health state (passing, warning, critical), 0 for the others.
# TYPE shoal_mysql_health gauge
shoal_mysql_health{state="critical"} 0
shoal_mysql_health{state="passing"} 0
shoal_mysql_health{state="warning"} 1
# HELP shoal_mysql_fact Each fact the agent publishes about the local server in its health tag, by its API name: the number, or 1/0 for yes/no (absent when unknown).
# TYPE shoal_mysql_fact gauge
shoal_mysql_fact{fact="read_only"} 1
shoal_mysql_fact{fact="source_server_id"} 4.294967295e+09
# HELP shoal_mysql_replication_lag_seconds Replication lag of the local server (absent when unknown or not a replica).
# TYPE shoal_mysql_replication_lag_seconds gauge
shoal_mysql_replication_lag_seconds 3
# HELP shoal_hook_dropped_total Events an event handler's queue dropped, by event class (member, shoal, user, query) and reason (queue_full, superseded, handler_removed, runner_closed).
# TYPE shoal_hook_dropped_total counter
shoal_hook_dropped_total{class="member",handler="user=/bin/true",reason="queue_full"} 0
shoal_hook_dropped_total{class="member",handler="user=/bin/true",reason="superseded"} 0
shoal_hook_dropped_total{class="member",handler="user=/bin/true",reason="handler_removed"} 0
shoal_hook_dropped_total{class="member",handler="user=/bin/true",reason="runner_closed"} 0
shoal_hook_dropped_total{class="shoal",handler="user=/bin/true",reason="queue_full"} 0
shoal_hook_dropped_total{class="shoal",handler="user=/bin/true",reason="superseded"} 0
shoal_hook_dropped_total{class="shoal",handler="user=/bin/true",reason="handler_removed"} 0
shoal_hook_dropped_total{class="shoal",handler="user=/bin/true",reason="runner_closed"} 0
shoal_hook_dropped_total{class="user",handler="user=/bin/true",reason="queue_full"} 4
shoal_hook_dropped_total{class="user",handler="user=/bin/true",reason="handler_removed"} 0
shoal_hook_dropped_total{class="user",handler="user=/bin/true",reason="runner_closed"} 0
shoal_hook_dropped_total{class="query",handler="user=/bin/true",reason="queue_full"} 1
shoal_hook_dropped_total{class="query",handler="user=/bin/true",reason="handler_removed"} 0
shoal_hook_dropped_total{class="query",handler="user=/bin/true",reason="runner_closed"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "shoal_mysql_health", "shoal_mysql_fact", "shoal_mysql_replication_lag_seconds", "shoal_hook_dropped_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c); n != 26 {
		t.Errorf("%d series, want 26", n)
	}
	app := NewStateCollector(func() (ProbeState, bool) { return ProbeState{}, false }, func() []HookState { return nil })
	if n := testutil.CollectAndCount(app); n != 0 {
		t.Errorf("app agent without hooks: %d series, want 0", n)
	}
}
