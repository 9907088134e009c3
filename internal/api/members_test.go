package api_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/pkg/client"
)

// TestMemberHealthDecoded: /v1/members carries a valid db member's health
// tag decoded (the status page shows these facts); a tag that does not
// decode gives the reason; app members and invalid members get none.
func TestMemberHealthDecoded(t *testing.T) {
	mk := func(name string, tg map[string]string) serf.Member {
		return serf.Member{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Tags: tg, Status: serf.StatusAlive}
	}
	replica := tags.Encode(tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true,
		SQLRunning: true, LagKnown: true, LagSeconds: 3, ServerID: 2, Port: 3307})

	m := api.ToMember(mk("db2", map[string]string{"role": "db", "sh": replica}))
	h := m.Health
	if h == nil || h.State != "passing" || !h.ReadOnly || !h.Replica || !h.IORunning || !h.SQLRunning ||
		h.LagSeconds == nil || *h.LagSeconds != 3 || h.ServerID != 2 || h.Port != 3307 || h.Error != "" {
		t.Errorf("replica health = %+v", h)
	}

	unknownLag := tags.Encode(tags.Health{State: tags.Warning, Replica: true, Reason: "io-stopped", ServerID: 3})
	if h := api.ToMember(mk("db3", map[string]string{"role": "db", "sh": unknownLag})).Health; h == nil ||
		h.State != "warning" || h.Reason != "io-stopped" || h.LagSeconds != nil {
		t.Errorf("warning health = %+v", h)
	}
	if h := api.ToMember(mk("db4", map[string]string{"role": "db", "sh": "v1;h=x"})).Health; h == nil || h.State != "" || h.Error == "" {
		t.Errorf("bad tag: health = %+v, want an error", h)
	}
	if h := api.ToMember(mk("db5", map[string]string{"role": "db"})).Health; h == nil || h.Error != "no health tag published" {
		t.Errorf("no tag: health = %+v", h)
	}
	if h := api.ToMember(mk("app1", map[string]string{"role": "app", "sh": replica})).Health; h != nil {
		t.Errorf("app member: health = %+v, want none", h)
	}
	if m := api.ToMember(mk("db\xff", map[string]string{"role": "db", "sh": replica})); m.Health != nil || m.Invalid == nil {
		t.Errorf("invalid member: health = %+v, invalid = %+v", m.Health, m.Invalid)
	}
}

// TestMemberRTT: /v1/members gives the estimated round trip to a peer once
// serf has a coordinate for it, and none for the agent itself.
func TestMemberRTT(t *testing.T) {
	_, _, bind1 := startAgent(t, "rtt1", "", nil)
	_, c2, _ := startAgentWith(t, "rtt2", "", nil, join(bind1))
	deadline := time.Now().Add(20 * time.Second)
	for {
		ms, err := c2.Members(context.Background(), client.MemberFilter{})
		var peer, self *client.Member
		for i := range ms {
			switch ms[i].Name {
			case "rtt1":
				peer = &ms[i]
			case "rtt2":
				self = &ms[i]
			}
		}
		if err == nil && peer != nil && self != nil && peer.RTTSeconds != nil {
			if *peer.RTTSeconds < 0 || *peer.RTTSeconds > 1 {
				t.Errorf("rtt to a loopback peer = %vs", *peer.RTTSeconds)
			}
			if self.RTTSeconds != nil {
				t.Errorf("rtt to itself = %v, want none", *self.RTTSeconds)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rtt for the peer within 20s: %+v, %v", ms, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
