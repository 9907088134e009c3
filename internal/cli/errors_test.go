package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/testutil/ports"
)

// With no agent at the address, the CLI prints the client's error and its
// own advice (the client library's error carries none), and exits 1.
func TestNoAgentAdvice(t *testing.T) {
	addr := ports.Free(t)
	var out, errb bytes.Buffer
	code := Execute(t.Context(), []string{"members", "--http-addr", addr}, &out, &errb)
	msg := errb.String()
	if code != ExitError || !strings.HasPrefix(msg, "Error: no shoal agent reachable at "+addr+" (") ||
		!strings.HasSuffix(msg, "); start one with `shoal agent`, or point elsewhere with --http-addr or SHOAL_HTTP_ADDR\n") {
		t.Fatalf("exit %d, stderr %q", code, msg)
	}
}

// A switchover the agent refuses for the request itself (HTTP 400: an
// unknown node or cluster) exits 2; one it refuses for the fleet's state
// (409: not a voter, no leader) exits 1. Both print the agent's reason.
func TestSwitchoverRefusalExitCodes(t *testing.T) {
	for _, tc := range []struct {
		status int
		msg    string
		code   int
	}{
		{http.StatusBadRequest, `switchover refused: to "db9": not a db member of any cluster in this agent's pool`, ExitUsage},
		{http.StatusConflict, "switchover refused: there is no raft leader (no quorum): no term can be granted", ExitError},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": tc.msg})
		}))
		var out, errb bytes.Buffer
		code := Execute(t.Context(), []string{"switchover", "--to", "db9", "--token", "t0ken", "--http-addr", srv.URL}, &out, &errb)
		srv.Close()
		if code != tc.code || errb.String() != "Error: "+tc.msg+"\n" {
			t.Errorf("HTTP %d: exit %d, stderr %q; want exit %d with the agent's reason", tc.status, code, errb.String(), tc.code)
		}
	}
}
