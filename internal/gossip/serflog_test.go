package gossip

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/serf/serf"
)

func TestSerfLogLevel(t *testing.T) {
	for _, tc := range []struct {
		lv             slog.Level
		component, msg string
		stopping, left bool
		want           slog.Level
	}{
		{slog.LevelInfo, "serf", "attempting reconnect to node1 127.0.0.1:7946", false, false, slog.LevelDebug},
		{slog.LevelWarn, "agent", "Serf shutdown detected, quitting", true, false, slog.LevelInfo},
		{slog.LevelWarn, "agent", "Serf shutdown detected, quitting", false, false, slog.LevelWarn},
		{slog.LevelError, "serf", "Node name conflicts with another node at 10.0.0.1:7946", true, true, slog.LevelError},
		{slog.LevelInfo, "memberlist", "attempting reconnect to node1", false, false, slog.LevelInfo},
		{slog.LevelWarn, "serf", "Shutdown without a Leave", true, true, slog.LevelDebug},
		{slog.LevelWarn, "serf", "Shutdown without a Leave", true, false, slog.LevelWarn},
	} {
		if got := SerfLogLevel(tc.lv, tc.component, tc.msg, tc.stopping, tc.left); got != tc.want {
			t.Errorf("SerfLogLevel(%v, %q, %q, %v, %v) = %v, want %v", tc.lv, tc.component, tc.msg, tc.stopping, tc.left, got, tc.want)
		}
	}
}

func TestIsLeaveTimeout(t *testing.T) {
	for msg, want := range map[string]bool{
		"timeout while waiting for graceful leave":                       true,
		"timeout waiting for leave broadcast: context deadline exceeded": true,
		"EventMemberLeave: node1 127.0.0.1":                              false,
	} {
		if got := IsLeaveTimeout("serf", msg); got != want {
			t.Errorf("IsLeaveTimeout(serf, %q) = %v, want %v", msg, got, want)
		}
		if IsLeaveTimeout("memberlist", msg) {
			t.Errorf("IsLeaveTimeout(memberlist, %q) = true", msg)
		}
	}
}

// The leave intent is serf's messageLeave: type byte 0, then a msgpack map
// with serf's field names.
func TestLeaveIntent(t *testing.T) {
	b, err := LeaveIntent(42, "db1")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0 {
		t.Fatalf("intent %x: want message type 0 first", b)
	}
	var m map[string]any
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	if err := codec.NewDecoder(bytes.NewReader(b[1:]), h).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || m["Node"] != "db1" || m["Prune"] != false {
		t.Errorf("intent fields %v: want LTime, Node db1, Prune false", m)
	}
	if lt := fmt.Sprint(m["LTime"]); lt != "42" {
		t.Errorf("LTime %#v, want 42", m["LTime"])
	}
}

func TestAlivePeers(t *testing.T) {
	ms := []serf.Member{
		{Name: "self", Addr: net.IPv4(10, 0, 0, 1), Port: 7946, Status: serf.StatusAlive},
		{Name: "b", Addr: net.IPv4(10, 0, 0, 3), Port: 7946, Status: serf.StatusAlive},
		{Name: "a", Addr: net.IPv4(10, 0, 0, 2), Port: 7947, Status: serf.StatusAlive},
		{Name: "gone", Addr: net.IPv4(10, 0, 0, 4), Port: 7946, Status: serf.StatusFailed},
		{Name: "v6", Addr: net.ParseIP("fd00::1"), Port: 7946, Status: serf.StatusAlive},
	}
	got := AlivePeers(ms, "self")
	want := []string{"10.0.0.2:7947", "10.0.0.3:7946", "[fd00::1]:7946"}
	if !slices.Equal(got, want) {
		t.Errorf("AlivePeers = %v, want %v", got, want)
	}
	var many []serf.Member
	for i := range 3 * maxPeersFile {
		many = append(many, serf.Member{Name: string(rune('a' + i%26)), Addr: net.IPv4(10, 1, byte(i/250), byte(i%250)), Port: 7946, Status: serf.StatusAlive})
	}
	if got := AlivePeers(many, "self"); len(got) != maxPeersFile || !slices.IsSorted(got) {
		t.Errorf("AlivePeers of %d members: %d addresses (sorted: %v), want %d sorted", len(many), len(got), slices.IsSorted(got), maxPeersFile)
	}
}
