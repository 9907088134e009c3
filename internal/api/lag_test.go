package api

import (
	"encoding/json"
	"testing"

	"github.com/shoaldb/shoal/internal/view"
	"github.com/shoaldb/shoal/pkg/client"
)

// TestLagJSON: a replica's lag in the API's JSON: unknown seconds and the
// transactions of an sbm lag are null, not 0 (0 is a lag: none); a node
// without a lag has no lag field at all.
func TestLagJSON(t *testing.T) {
	sec, tx := 1.25, uint64(3)
	for _, tc := range []struct {
		in   view.PoolNode
		want string
	}{
		{view.PoolNode{Name: "db1"}, `{"name":"db1","addr":""}`},
		{view.PoolNode{Name: "db2", Lag: &view.Lag{Source: "gtid", Seconds: &sec, Transactions: &tx}},
			`{"name":"db2","addr":"","lag":{"source":"gtid","seconds":1.25,"at_least":false,"transactions":3}}`},
		{view.PoolNode{Name: "db3", Lag: &view.Lag{Source: "gtid", Seconds: &sec, AtLeast: true, Transactions: &tx}},
			`{"name":"db3","addr":"","lag":{"source":"gtid","seconds":1.25,"at_least":true,"transactions":3}}`},
		{view.PoolNode{Name: "db4", Lag: &view.Lag{Source: "sbm", Seconds: &sec}},
			`{"name":"db4","addr":"","lag":{"source":"sbm","seconds":1.25,"at_least":false,"transactions":null}}`},
		{view.PoolNode{Name: "db5", Lag: &view.Lag{Source: "sbm"}},
			`{"name":"db5","addr":"","lag":{"source":"sbm","seconds":null,"at_least":false,"transactions":null}}`},
	} {
		b, err := json.Marshal(toPoolNode(tc.in))
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %s (%v), want %s", tc.in.Name, b, err, tc.want)
		}
	}
}

// TestMembersGetTheirLag: a member gets the lag of the node of its name;
// other members and invalid ones (whose name is a display form) get none.
func TestMembersGetTheirLag(t *testing.T) {
	sec := 4.0
	ms := []client.Member{{Name: "db1"}, {Name: "db2"}, {Name: "app1"}, {Name: `db\xff`, Invalid: &client.MemberProblem{Reason: "bad-name"}}}
	withLags(ms, map[string]view.Lag{"db2": {Source: "sbm", Seconds: &sec}, `db\xff`: {Source: "sbm"}})
	if ms[0].Lag != nil || ms[2].Lag != nil || ms[3].Lag != nil {
		t.Errorf("lag on a member without one: %+v %+v %+v", ms[0].Lag, ms[2].Lag, ms[3].Lag)
	}
	if l := ms[1].Lag; l == nil || l.Source != "sbm" || l.Seconds == nil || *l.Seconds != 4 || l.Transactions != nil {
		t.Errorf("db2's lag = %+v", l)
	}
}
