package testkit

import (
	"encoding/base64"
	"io"
	"testing"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// StartSerf starts a plain serf member on 127.0.0.1 (the library, as a
// stock serf agent or any holder of the gossip key would run it) with the
// given name and tags, and joins it to join: the way tests put a forged or
// hostile member into a cluster. It is shut down at the end of the test
// unless the test shuts it down first.
func StartSerf(t testing.TB, name string, tags map[string]string, join string) *serf.Serf {
	t.Helper()
	return startSerf(t, name, tags, join, nil)
}

// StartSerfKeyed is StartSerf with gossip encryption: key is the base64
// gossip key, as a holder of that key (and of nothing else) runs serf.
func StartSerfKeyed(t testing.TB, name string, tags map[string]string, join, key string) *serf.Serf {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatalf("gossip key: %v", err)
	}
	return startSerf(t, name, tags, join, raw)
}

func startSerf(t testing.TB, name string, tags map[string]string, join string, key []byte) *serf.Serf {
	t.Helper()
	mc := memberlist.DefaultLocalConfig()
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = "127.0.0.1", 0, 0
	mc.LogOutput = io.Discard
	mc.SecretKey = key
	sc := serf.DefaultConfig()
	sc.NodeName = name
	sc.Tags = tags
	sc.MemberlistConfig = mc
	sc.LogOutput = io.Discard
	s, err := serf.Create(sc)
	if err != nil {
		t.Fatalf("serf.Create %.40q: %v", name, err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	if _, err := s.Join([]string{join}, false); err != nil {
		t.Fatalf("serf %.40q join %s: %v", name, join, err)
	}
	return s
}
