package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// POST /v1/switchover answers 400 when the request itself is wrong (no
// target, an unknown node or cluster, a wait out of bounds: asking again
// fails again) and 409 when the agent cannot do it now (here: it is not a
// voter). The CLI exits 2 on the first and 1 on the second.
func TestSwitchoverRefusals(t *testing.T) {
	a, c, bind := startAgentWith(t, "app1", "", nil, func(c *config.Config) { c.Role = tags.RoleApp })
	testkit.StartSerf(t, "db1", map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main",
		tags.KeyHealth: tags.Encode(tags.Health{State: tags.Passing, Port: 3306})}, bind)
	testkit.WaitFor(t, 20*time.Second, "db1 in app1's pool", func() bool {
		p, err := c.Pool(t.Context(), "main")
		return err == nil && len(p.Writers)+len(p.Readers)+len(p.Out) == 1
	})
	tok := []string{"X-Shoal-Token", a.APIToken()}
	for _, tc := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{}`, http.StatusBadRequest, `switchover refused: to "": required`},
		{`{"to": "db9"}`, http.StatusBadRequest, `to "db9": not a db member of any cluster in this agent's pool`},
		{`{"to": "db1", "cluster": "nope"}`, http.StatusBadRequest, `cluster "nope": no such cluster in this agent's pool`},
		{`{"to": "app1", "cluster": "main"}`, http.StatusBadRequest, `to "app1": not a db member of cluster "main"`},
		{`{"to": "db1", "catch_up_seconds": 121}`, http.StatusBadRequest, `catch_up 2m1s: must be from 1s to 2m0s`},
		{`{"to": "db1", "applied_seconds": 0.5}`, http.StatusBadRequest, `applied 500ms: must be from 1s to 2m0s`},
		{`{"to": "db1", "catch_up_seconds": 120, "applied_seconds": 1}`, http.StatusConflict, `this agent is not a voter`},
	} {
		status, body := do(t, "POST", c.Addr()+"/v1/switchover", tc.body, tok...)
		var e struct{ Error string }
		if err := json.Unmarshal(body, &e); err != nil || status != tc.status || !strings.Contains(e.Error, tc.msg) {
			t.Errorf("POST %s: %d %s; want %d saying %s", tc.body, status, body, tc.status, tc.msg)
		}
	}
}
