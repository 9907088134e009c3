package cli

import (
	"bytes"
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
