package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// TestHealthShowsFence: `shoal health` prints the last fencing on one
// line: the result, when, why, and the error and retry when it failed.
func TestHealthShowsFence(t *testing.T) {
	at := time.Date(2026, 11, 27, 7, 1, 2, 0, time.UTC)
	for _, tc := range []struct {
		name string
		f    *client.FenceStatus
		want string
	}{
		{"none", nil, ""},
		{"ok", &client.FenceStatus{Time: at, Why: "writable, but term 3 belongs to db1 (10.0.0.11:3306)", Result: "ok", Killed: 4, Attempt: 1},
			"fenced  ok at 07:01:02 (attempt 1): writable, but term 3 belongs to db1 (10.0.0.11:3306); read-only, 4 connections killed"},
		{"error", &client.FenceStatus{Time: at, Why: "lease lost", Result: "error", Error: "SET GLOBAL read_only=ON: Error 1227", Attempt: 2, Retry: at.Add(2 * time.Second)},
			"fenced  error at 07:01:02 (attempt 2): lease lost; SET GLOBAL read_only=ON: Error 1227; retry at 07:01:04"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			h := &client.HealthResponse{Node: "db2", Role: "db", Status: "ok", MySQL: &client.LocalHealth{State: "passing", Fence: tc.f}}
			if err := writeHealth(&b, h); err != nil {
				t.Fatal(err)
			}
			var line string
			for _, l := range strings.Split(b.String(), "\n") {
				if strings.HasPrefix(l, "fenced") {
					line = strings.Join(strings.Fields(l)[:1], "") + "  " + strings.TrimSpace(strings.TrimPrefix(l, "fenced"))
				}
			}
			if line != tc.want {
				t.Errorf("fenced line %q\nwant        %q\n%s", line, tc.want, b.String())
			}
		})
	}
}
