package consensus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/setting"
	"github.com/shoaldb/shoal/internal/tags"
)

// testKey is a 32-byte key, base64.
const testKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func ptr(b bool) *bool { return &b }

func TestDefaultSettingsPass(t *testing.T) {
	d := DefaultSettings()
	if err := d.Check(); err != nil {
		t.Fatalf("DefaultSettings().Check() = %v", err)
	}
	if d.Enabled() || d.IsVoter(tags.RoleDB) || d.IsVoter(tags.RoleApp) {
		t.Fatalf("default: consensus on or a voter: %+v", d)
	}
	if err := d.CheckHost(Host{Role: tags.RoleDB, GossipBind: "0.0.0.0:7950"}); err != nil {
		t.Fatalf("consensus off: CheckHost = %v", err)
	}
}

// Each refused setting is one *setting.Error naming its key, with the
// value as given (the key redacted) and why.
func TestCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Settings)
		key    string
		value  string
		msg    string
	}{
		{"key not base64", func(s *Settings) { s.Key = "not base64!" }, "key", "not ...", "not valid base64"},
		{"key of 16 bytes", func(s *Settings) { s.Key = "MDEyMzQ1Njc4OWFiY2RlZg==" }, "key", "MDEy...", "key is 16 bytes; must be 32 bytes (use shoal keygen)"},
		{"voter without a key", func(s *Settings) { s.Voter = ptr(true) }, "voter", "true", "a voter needs the consensus key: give keyring_file"},
		{"bind without a port", func(s *Settings) { s.Bind = "10.0.0.1" }, "bind", "10.0.0.1", "want ip:port"},
		{"bind to a name", func(s *Settings) { s.Bind = "db1:7950" }, "bind", "db1:7950", `host "db1" must be an IP address`},
		{"bind port 0", func(s *Settings) { s.Bind = "10.0.0.1:0" }, "bind", "10.0.0.1:0", "port must be a number from 1 to 65535"},
		{"bind port 65536", func(s *Settings) { s.Bind = "10.0.0.1:65536" }, "bind", "10.0.0.1:65536", "port must be a number from 1 to 65535"},
		{"advertise unspecified", func(s *Settings) { s.Advertise = "0.0.0.0:7950" }, "advertise", "0.0.0.0:7950", "must be a reachable address, not 0.0.0.0"},
		{"advertise bad port", func(s *Settings) { s.Advertise = "10.0.0.1:x" }, "advertise", "10.0.0.1:x", "port must be a number from 1 to 65535"},
		{"bootstrap_expect 0", func(s *Settings) { s.BootstrapExpect = 0 }, "bootstrap_expect", "0", "must be from 1 to 9"},
		{"bootstrap_expect 10", func(s *Settings) { s.BootstrapExpect = 10 }, "bootstrap_expect", "10", "must be from 1 to 9"},
		{"heartbeat_timeout short", func(s *Settings) {
			s.HeartbeatTimeout = 99 * time.Millisecond
			s.LeaderLeaseTimeout = 50 * time.Millisecond
		},
			"heartbeat_timeout", "99ms", "must be from 100ms to 1m"},
		{"heartbeat_timeout long", func(s *Settings) { s.HeartbeatTimeout = 2 * time.Minute },
			"heartbeat_timeout", "2m0s", "must be from 100ms to 1m"},
		{"election_timeout long", func(s *Settings) { s.ElectionTimeout = time.Hour }, "election_timeout", "1h0m0s", "must be from 100ms to 1m"},
		{"election below heartbeat", func(s *Settings) { s.HeartbeatTimeout = 2 * time.Second }, "election_timeout", "1s", "must be at least heartbeat_timeout (2s)"},
		{"leader_lease_timeout short", func(s *Settings) { s.LeaderLeaseTimeout = 10 * time.Millisecond }, "leader_lease_timeout", "10ms", "must be at least 50ms"},
		{"leader_lease_timeout over heartbeat", func(s *Settings) { s.LeaderLeaseTimeout = 1500 * time.Millisecond },
			"leader_lease_timeout", "1.5s", "must be at most heartbeat_timeout (1s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultSettings()
			tc.mutate(&s)
			se := setting.One(s.Check())
			if se == nil {
				t.Fatalf("Check() = %v, want one *setting.Error", s.Check())
			}
			if se.Key != tc.key || se.Value != tc.value || !strings.Contains(se.Msg, tc.msg) {
				t.Fatalf("Check() = %q %q %q, want %q %q containing %q", se.Key, se.Value, se.Msg, tc.key, tc.value, tc.msg)
			}
			if strings.Contains(s.Check().Error(), testKey) || tc.key == "key" && strings.Contains(se.Error(), s.Key) {
				t.Fatalf("the key is shown: %v", se)
			}
		})
	}
}

func TestCheckAccepts(t *testing.T) {
	for _, mutate := range []func(*Settings){
		func(s *Settings) { s.Key = testKey; s.Voter = ptr(true) },
		func(s *Settings) { s.KeyringFile = "/x/ring.json"; s.Voter = ptr(false) },
		func(s *Settings) { s.Voter = ptr(false) },
		func(s *Settings) { s.Bind = "0.0.0.0:1"; s.Advertise = "[2001:db8::1]:65535" },
		func(s *Settings) { s.BootstrapExpect = 1 },
		func(s *Settings) { s.BootstrapExpect = 9 },
		func(s *Settings) {
			s.HeartbeatTimeout, s.ElectionTimeout, s.LeaderLeaseTimeout = MinTimeout, MinTimeout, MinLeaderLeaseTimeout
		},
		func(s *Settings) {
			s.HeartbeatTimeout, s.ElectionTimeout, s.LeaderLeaseTimeout = MaxTimeout, MaxTimeout, MaxTimeout
		},
	} {
		s := DefaultSettings()
		mutate(&s)
		if err := s.Check(); err != nil {
			t.Errorf("%+v: Check() = %v", s, err)
		}
	}
}

func TestResolvedDefaults(t *testing.T) {
	on := DefaultSettings()
	on.KeyringFile = "/var/lib/shoal/consensus.json"
	keyOnly := DefaultSettings()
	keyOnly.Key = testKey
	set := on
	set.Bind, set.Advertise, set.DataDir, set.Voter = "10.0.0.1:8000", "192.0.2.1:9000", "/data/raft", ptr(false)
	db := Host{Role: tags.RoleDB, GossipBind: "10.0.0.1:7946"}
	app := Host{Role: tags.RoleApp, GossipBind: "0.0.0.0:7946", GossipAdvertise: "192.0.2.7:7946"}
	for _, tc := range []struct {
		name                     string
		s                        Settings
		h                        Host
		voter                    bool
		bind, advertise, dataDir string
	}{
		{"off, db", DefaultSettings(), db, false, "10.0.0.1:7950", "10.0.0.1:7950", ""},
		{"on, db", on, db, true, "10.0.0.1:7950", "10.0.0.1:7950", "/var/lib/shoal/raft"},
		{"on, app", on, app, false, "0.0.0.0:7950", "192.0.2.7:7950", "/var/lib/shoal/raft"},
		{"key only, app", keyOnly, app, false, "0.0.0.0:7950", "192.0.2.7:7950", ""},
		{"given", set, db, false, "10.0.0.1:8000", "192.0.2.1:9000", "/data/raft"},
		{"advertise with the bind port", func() Settings { s := on; s.Bind = "0.0.0.0:8000"; return s }(), app, false, "0.0.0.0:8000", "192.0.2.7:8000", "/var/lib/shoal/raft"},
		{"advertise the bind IP", func() Settings { s := on; s.Bind = "10.0.0.1:8000"; return s }(), app, false, "10.0.0.1:8000", "10.0.0.1:8000", "/var/lib/shoal/raft"},
		{"ipv6", on, Host{Role: tags.RoleDB, GossipBind: "[2001:db8::1]:7946"}, true, "[2001:db8::1]:7950", "[2001:db8::1]:7950", "/var/lib/shoal/raft"},
		{"witness", func() Settings { s := on; s.Voter = ptr(true); return s }(), app, true, "0.0.0.0:7950", "192.0.2.7:7950", "/var/lib/shoal/raft"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			if got := s.IsVoter(tc.h.Role); got != tc.voter {
				t.Errorf("IsVoter = %v, want %v", got, tc.voter)
			}
			if got := s.BindAddr(tc.h); got != tc.bind {
				t.Errorf("BindAddr = %q, want %q", got, tc.bind)
			}
			if got := s.AdvertiseAddr(tc.h); got != tc.advertise {
				t.Errorf("AdvertiseAddr = %q, want %q", got, tc.advertise)
			}
			if got := s.DataDirPath(); got != tc.dataDir {
				t.Errorf("DataDirPath = %q, want %q", got, tc.dataDir)
			}
		})
	}
}

func TestCheckHost(t *testing.T) {
	on := DefaultSettings()
	on.KeyringFile = "/var/lib/shoal/consensus.json"
	keyOnly := DefaultSettings()
	keyOnly.Key = testKey
	for _, tc := range []struct {
		name       string
		s          Settings
		h          Host
		key, value string
		msg        string
	}{
		{"voter with key only", keyOnly, Host{Role: tags.RoleDB, GossipBind: "10.0.0.1:7946"}, "keyring_file", "", "a voter keeps the consensus key in a keyring file"},
		{"default bind on the gossip port", on, Host{Role: tags.RoleDB, GossipBind: "10.0.0.1:7950"}, "bind", "10.0.0.1:7950", "is the gossip bind address (10.0.0.1:7950)"},
		{"bind on the gossip port", func() Settings { s := on; s.Bind = "10.0.0.1:7946"; return s }(), Host{Role: tags.RoleDB, GossipBind: "0.0.0.0:7946"},
			"bind", "10.0.0.1:7946", "is the gossip bind address"},
		{"every IP on the gossip port", func() Settings { s := on; s.Bind = "0.0.0.0:7946"; return s }(), Host{Role: tags.RoleDB, GossipBind: "10.0.0.1:7946"},
			"bind", "0.0.0.0:7946", "is the gossip bind address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			se := setting.One(tc.s.CheckHost(tc.h))
			if se == nil || se.Key != tc.key || se.Value != tc.value || !strings.Contains(se.Msg, tc.msg) {
				t.Fatalf("CheckHost = %v, want %s %q: %s", tc.s.CheckHost(tc.h), tc.key, tc.value, tc.msg)
			}
		})
	}
	for _, tc := range []struct {
		s Settings
		h Host
	}{
		{keyOnly, Host{Role: tags.RoleApp, GossipBind: "10.0.0.1:7946"}},                                       // not a voter: no file needed
		{on, Host{Role: tags.RoleDB, GossipBind: "10.0.0.1:7946"}},                                             // other port
		{func() Settings { s := on; s.Bind = "10.0.0.2:7946"; return s }(), Host{GossipBind: "10.0.0.1:7946"}}, // other IP
	} {
		if err := tc.s.CheckHost(tc.h); err != nil {
			t.Errorf("%+v %+v: CheckHost = %v", tc.s, tc.h, err)
		}
	}
}

func TestCheckKey(t *testing.T) {
	if err := CheckKey(testKey); err != nil {
		t.Fatal(err)
	}
	var se *setting.Error
	if err := CheckKey("x"); err == nil || errors.As(err, &se) {
		t.Fatalf("CheckKey(x) = %v, want a plain error", err)
	}
}
