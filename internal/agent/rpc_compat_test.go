package agent

import (
	"maps"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/client"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestSerfClientLibrary drives a shoal agent with the stock
// github.com/hashicorp/serf/client library over the Serf RPC protocol.
func TestSerfClientLibrary(t *testing.T) {
	nodes := startCluster(t, 2, "fast", "")
	c := testConfig(t, "rpc", "fast", "")
	c.RPCAddr = "127.0.0.1:0"
	c.RPCAuth = "s3cret"
	n := startNode(t, c)

	if _, err := client.ClientFromConfig(&client.Config{Addr: n.a.RPCAddr(), AuthKey: "wrong", Timeout: 2 * time.Second}); err == nil {
		t.Fatal("wrong RPC auth key accepted")
	}
	rpc, err := client.ClientFromConfig(&client.Config{Addr: n.a.RPCAddr(), AuthKey: "s3cret", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rpc.Close()

	// Stream events before anything happens.
	evCh := make(chan map[string]any, 64)
	streamH, err := rpc.Stream("member-join,user:deploy", evCh)
	if err != nil {
		t.Fatal(err)
	}
	defer rpc.Stop(streamH)

	joined, err := rpc.Join([]string{nodes[0].cfg.Bind}, false)
	if err != nil || joined != 1 {
		t.Fatalf("join = %d, %v", joined, err)
	}
	testkit.WaitFor(t, 10*time.Second, "three members via RPC", func() bool {
		ms, err := rpc.Members()
		if err != nil {
			return false
		}
		alive := 0
		for _, m := range ms {
			if m.Status == "alive" {
				alive++
			}
		}
		return alive == 3
	})
	filtered, err := rpc.MembersFiltered(map[string]string{}, "alive", "node.*")
	if err != nil || len(filtered) != 2 {
		t.Fatalf("members filtered = %v, %v", filtered, err)
	}

	if err := rpc.UpdateTags(map[string]string{"team": "dba"}, nil); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "tag via RPC seen by node0", func() bool {
		for _, m := range nodes[0].a.Members() {
			if m.Name == "rpc" && m.Tags["team"] == "dba" {
				return true
			}
		}
		return false
	})

	sub := nodes[1].a.Subscribe(64)
	defer sub.Close()
	if err := rpc.UserEvent("deploy", []byte("v42"), false); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case e := <-sub.C:
			if ue, ok := e.(serf.UserEvent); ok && ue.Name == "deploy" && string(ue.Payload) == "v42" {
				got = true
			}
		case <-deadline:
			t.Fatal("node1 never received the user event sent through RPC")
		}
	}
	sawJoin, sawUser := false, false
	for !(sawJoin && sawUser) {
		select {
		case ev := <-evCh:
			switch ev["Event"] {
			case "member-join":
				sawJoin = true
			case "user":
				sawUser = ev["Name"] == "deploy"
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("stream: join %v user %v", sawJoin, sawUser)
		}
	}

	stats, err := rpc.Stats()
	if err != nil || stats["agent"]["name"] != "rpc" {
		t.Fatalf("stats = %v, %v", stats, err)
	}
}

// `serf info` (the stats command) lists the configured event handlers, in
// serf's "EVENT:NAME" form, and follows a reload. Without the RPC token
// the arguments are hidden, as in GET /v1/hooks.
func TestSerfInfoListsEventHandlers(t *testing.T) {
	c := testConfig(t, "info", "fast", "")
	c.RPCAddr = "127.0.0.1:0"
	c.EventHandlers = []string{"member-join,user:deploy=/bin/true --key=s3cret", "/usr/bin/logger"}
	n := startNode(t, c)

	stats := func(token string) map[string]string {
		t.Helper()
		rpc, err := client.ClientFromConfig(&client.Config{Addr: n.a.RPCAddr(), AuthKey: token, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer rpc.Close()
		st, err := rpc.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st["agent"]["name"] != "info" {
			t.Errorf("stats agent section %v", st["agent"])
		}
		return st["event_handlers"]
	}
	want := map[string]string{"member-join:": "/bin/true --key=s3cret", "user:deploy": "/bin/true --key=s3cret", "*:": "/usr/bin/logger"}
	if got := stats(n.a.APIToken()); !maps.Equal(got, want) {
		t.Errorf("event_handlers with the token = %v, want %v", got, want)
	}
	want = map[string]string{"member-join:": "/bin/true …", "user:deploy": "/bin/true …", "*:": "/usr/bin/logger"}
	if got := stats(""); !maps.Equal(got, want) {
		t.Errorf("event_handlers without the token = %v, want %v", got, want)
	}

	re := *c
	re.EventHandlers = []string{"query:ping=/bin/echo pong", "query:ping=/bin/echo pong2"}
	n.a.Reload(&re)
	want = map[string]string{"query:ping": "/bin/echo pong", "query:ping #2": "/bin/echo pong2"}
	if got := stats(n.a.APIToken()); !maps.Equal(got, want) {
		t.Errorf("event_handlers after reload = %v, want %v", got, want)
	}
}

// An agent gossiping on IPv6 logs and reports its address with brackets.
func TestIPv6AddressesBracketed(t *testing.T) {
	c := testConfig(t, "six", "fast", "")
	ln, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Fatalf("no IPv6 loopback here: %v", err) // never skipped silently
	}
	port := ln.LocalAddr().(*net.UDPAddr).Port
	_ = ln.Close()
	c.Bind = net.JoinHostPort("::1", strconv.Itoa(port))
	n := startNode(t, c)
	want := "[::1]:" + strconv.Itoa(int(n.a.Serf().LocalMember().Port))
	if got := n.a.Info("").Addr; got != want {
		t.Errorf("Info().Addr = %q, want %q", got, want)
	}
	if !strings.Contains(n.logs.String(), "gossip="+want) {
		t.Errorf("start log does not say gossip=%s:\n%s", want, n.logs.String())
	}
}
