package hooks

import (
	"encoding/json"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
)

var timeZero time.Time

func TestMemberLinesSerfFormat(t *testing.T) {
	members := []serf.Member{
		{Name: "mitchellh.local", Addr: net.ParseIP("127.0.0.1"), Tags: map[string]string{"role": "web", "datacenter": "east"}},
		{Name: "db\t1\nx", Addr: net.ParseIP("::1"), Tags: map[string]string{"role": "r\tw", "a": "x\ny", "b": "1,2=3"}},
		{Name: "bare"},
	}
	got := string(memberLines(members))
	want := "mitchellh.local\t127.0.0.1\tweb\tdatacenter=east,role=web\n" +
		"db\\t1\\nx\t::1\tr\\tw\ta=x\\ny,b=1,2=3,role=r\\tw\n" +
		"bare\t<nil>\t\t\n"
	if got != want {
		t.Errorf("member lines:\n%q\nwant\n%q", got, want)
	}
}

func TestPayloadLine(t *testing.T) {
	for in, want := range map[string]string{"": "", "x": "x\n", "x\n": "x\n", "a\nb": "a\nb\n"} {
		p := []byte(in)
		if got := string(payloadLine(p)); got != want {
			t.Errorf("payloadLine(%q) = %q, want %q", in, got, want)
		}
		if string(p) != in {
			t.Errorf("payloadLine modified its input %q", in)
		}
	}
}

func TestTagEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"role": "ROLE", "dc": "DC", "bad-tag": "BAD_TAG", "a.b c": "A_B_C", "x9_y": "X9_Y", "é": "_", "": "",
	} {
		if got := TagEnvName(in); got != want {
			t.Errorf("TagEnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBuildEnv(t *testing.T) {
	parent := map[string]string{"PATH": "/p", "HOME": "/h", "SECRET": "s", "EXTRA": "e", "TZ": "UTC"}
	lookup := func(k string) (string, bool) { v, ok := parent[k]; return v, ok }
	self := serf.Member{Name: "db1", Tags: map[string]string{"role": "db", "dc": "east", "nul": "a\x00b", "a-b": "1", "a_b": "2"}}

	user, _ := newSerfItem(serf.UserEvent{Name: "deploy", LTime: 42})
	got := buildEnv(lookup, append(slices.Clone(InheritedEnv), "EXTRA"), self, user)
	want := []string{
		"EXTRA=e", "HOME=/h", "PATH=/p",
		"SERF_EVENT=user", "SERF_SELF_NAME=db1", "SERF_SELF_ROLE=db",
		"SERF_TAG_A_B=2", "SERF_TAG_DC=east", "SERF_TAG_NUL=a\\0b", "SERF_TAG_ROLE=db",
		"SERF_USER_EVENT=deploy", "SERF_USER_LTIME=42",
		"SHOAL_EVENT=user", "SHOAL_SELF_NAME=db1", "SHOAL_SELF_ROLE=db",
		"SHOAL_TAG_A_B=2", "SHOAL_TAG_DC=east", "SHOAL_TAG_NUL=a\\0b", "SHOAL_TAG_ROLE=db",
		"SHOAL_USER_EVENT=deploy", "SHOAL_USER_LTIME=42",
		"TZ=UTC",
	}
	if !slices.Equal(got, want) {
		t.Errorf("env:\n%q\nwant\n%q", got, want)
	}

	q, _ := newSerfItem(&serf.Query{Name: "ping", LTime: 7})
	got = buildEnv(func(string) (string, bool) { return "", false }, InheritedEnv, serf.Member{Name: "n"}, q)
	want = []string{
		"PATH=" + DefaultPath,
		"SERF_EVENT=query", "SERF_QUERY_LTIME=7", "SERF_QUERY_NAME=ping", "SERF_SELF_NAME=n", "SERF_SELF_ROLE=",
		"SHOAL_EVENT=query", "SHOAL_QUERY_LTIME=7", "SHOAL_QUERY_NAME=ping", "SHOAL_SELF_NAME=n", "SHOAL_SELF_ROLE=",
	}
	if !slices.Equal(got, want) {
		t.Errorf("query env:\n%q\nwant\n%q", got, want)
	}

	pool, _ := newShoalItem(Event{Type: PoolChange}, timeZero)
	got = buildEnv(func(string) (string, bool) { return "", false }, nil, serf.Member{Name: "n"}, pool)
	if !slices.Contains(got, "SERF_EVENT=pool-change") || !slices.Contains(got, "SHOAL_EVENT=pool-change") {
		t.Errorf("pool-change env %q lacks SERF_EVENT/SHOAL_EVENT", got)
	}
}

func TestShoalStdin(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	it, err := newShoalItem(Event{Type: PoolChange, Time: at, Data: json.RawMessage(`{"writers": ["db1"]}`)}, timeZero)
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildStdin(serf.Member{Name: "app1"}, it)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"event":"pool-change","time":"2025-03-04T05:06:07.000000008Z","node":"app1","data":{"writers":["db1"]}}` + "\n"
	if string(b) != want {
		t.Errorf("stdin %s\nwant %s", b, want)
	}

	it, _ = newShoalItem(Event{Type: HealthChange}, at)
	b, _ = buildStdin(serf.Member{Name: "db1"}, it)
	want = `{"version":1,"event":"health-change","time":"2025-03-04T05:06:07.000000008Z","node":"db1","data":null}` + "\n"
	if string(b) != want {
		t.Errorf("stdin %s\nwant %s", b, want)
	}

	if _, err := newShoalItem(Event{Type: "pool"}, at); err == nil {
		t.Error("unknown shoal event type accepted")
	}
	if _, err := newShoalItem(Event{Type: PoolChange, Data: json.RawMessage(`{`)}, at); err == nil {
		t.Error("invalid JSON data accepted")
	}
}

func TestNewSerfItem(t *testing.T) {
	if _, err := newSerfItem(nil); err == nil {
		t.Error("nil event accepted")
	}
	if _, err := newSerfItem(serf.MemberEvent{Type: serf.EventUser}); err == nil {
		t.Error("member event of type user accepted")
	}
	it, err := newSerfItem(&serf.UserEvent{Name: "x"})
	if err != nil || it.typ != User || it.name != "x" {
		t.Errorf("*serf.UserEvent: %+v, %v", it, err)
	}
	it, err = newSerfItem(&serf.MemberEvent{Type: serf.EventMemberFailed})
	if err != nil || it.typ != MemberFailed || !it.isMember() {
		t.Errorf("*serf.MemberEvent: %+v, %v", it, err)
	}
}
