package tags

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// worstHealth is the longest health tag Encode can produce.
var worstHealth = Health{
	State: Passing, ReadOnly: true, SuperReadOnly: true, Replica: true, IORunning: true, SQLRunning: true, NotReceiving: true,
	LagKnown: true, LagSeconds: MaxLagSeconds, ServerID: 1<<32 - 1, SourceServerID: 1<<32 - 1,
	Position: Position{N: MaxDomains, Domains: [MaxDomains]Domain{{1<<32 - 2, 1<<64 - 1}, {1<<32 - 1, 1<<64 - 1}}}, Galera: true, GaleraSynced: true,
	Reason: strings.Repeat("r", MaxReasonLen), Seq: 1<<32 - 1, Port: 65535,
}

func TestWorstCaseFits(t *testing.T) {
	if n := len(Encode(worstHealth)); n > MaxHealthLen {
		t.Fatalf("longest health tag is %d bytes, Decode accepts %d", n, MaxHealthLen)
	}
	cluster := strings.Repeat("c", MaxClusterLen)
	maint := strings.Repeat("m", MaxMaintLen)

	// Many tiny user tags push the map header to its 3-byte form.
	many := map[string]string{}
	for i := 0; UserTagsSize(many)+3 <= UserTagBudget; i++ {
		many[fmt.Sprintf("%c", 'A'+i)] = ""
	}
	for UserTagsSize(many) < UserTagBudget {
		many["A"] += "x"
	}
	one := map[string]string{"k": strings.Repeat("u", UserTagBudget-2-3)}
	for name, user := range map[string]map[string]string{"many small": many, "one large": one} {
		t.Run(name, func(t *testing.T) {
			if got := UserTagsSize(user); got != UserTagBudget {
				t.Fatalf("test user tags take %d bytes, want exactly the budget %d", got, UserTagBudget)
			}
			h := worstHealth
			tags, err := Merge(user, RoleDB, cluster, &h, maint, "65535+0123abcd")
			if err != nil {
				t.Fatalf("worst case does not fit: %v", err)
			}
			size := EncodedSize(tags)
			t.Logf("worst case with %d user tags: %d of %d bytes (%d spare)",
				len(user), size, MetaMaxSize, MetaMaxSize-size)
			if size > MetaMaxSize {
				t.Fatalf("size %d > %d", size, MetaMaxSize)
			}
		})
	}
}

func TestMergeTooLarge(t *testing.T) {
	user := map[string]string{
		"big":    strings.Repeat("b", 300),
		"medium": strings.Repeat("m", 100),
		"small":  "s",
		"tiny":   "",
	}
	h := worstHealth
	_, err := Merge(user, RoleDB, "c1", &h, "", "")
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	var be *BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("err %v is not a *BudgetError", err)
	}
	// 1 magic + 1 fixmap + 431 user + 8 role + 11 cluster + 204 health = 656.
	want := `merge tags: tags encode to 656 bytes, 144 over the 512-byte memberlist metadata limit; ` +
		`largest user tags: "big" (307 bytes), "medium" (110 bytes), "small" (8 bytes)`
	if err.Error() != want {
		t.Fatalf("error\n got %s\nwant %s", err, want)
	}
}

func TestMerge(t *testing.T) {
	user := map[string]string{"dc": "eu1", "rack": "r7"}
	h := Health{State: Passing, ServerID: 1}
	got, err := Merge(user, RoleDB, "shard1", &h, "kernel upgrade", "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"dc": "eu1", "rack": "r7", "role": "db", "cluster": "shard1", "maint": "kernel upgrade",
		"sh": "v1;h=p;ro=0;sro=0;rep=0;io=0;sql=0;sid=1;n=0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if len(user) != 2 {
		t.Fatalf("Merge modified the user map: %v", user)
	}

	got, err = Merge(nil, RoleApp, "", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"role": "app"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if Cluster(got) != DefaultCluster {
		t.Fatalf("Cluster = %q, want %q", Cluster(got), DefaultCluster)
	}
}

func TestMergeErrors(t *testing.T) {
	ok := &Health{State: Passing}
	tests := []struct {
		name    string
		user    map[string]string
		role    string
		cluster string
		h       *Health
		maint   string
		want    string
	}{
		{"reserved role", map[string]string{"role": "web"}, RoleDB, "", ok, "", `user tag "role": key is reserved`},
		{"reserved sh", map[string]string{"sh": "x", "maint": "y"}, RoleDB, "", ok, "", `user tag "maint": key is reserved`},
		{"bad role", nil, "web", "", nil, "", `role "web": want "db" or "app"`},
		{"empty role", nil, "", "", nil, "", `role "": want`},
		{"health on app", nil, RoleApp, "", ok, "", "health given for an app agent"},
		{"unknown state", nil, RoleDB, "", &Health{State: 9}, "", "unknown state 9"},
		{"cluster too long", nil, RoleDB, strings.Repeat("c", MaxClusterLen+1), ok, "", "want 1 to 64 bytes"},
		{"cluster bad char", nil, RoleDB, "a b", ok, "", `cluster "a b": want 1 to 64 bytes of [A-Za-z0-9._-]`},
		{"maint too long", nil, RoleDB, "", ok, strings.Repeat("m", MaxMaintLen+1), "65 bytes, limit 64"},
		{"maint control", nil, RoleDB, "", ok, "a\nb", "want printable UTF-8"},
		{"maint invalid utf8", nil, RoleDB, "", ok, "a\xffb", "want printable UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Merge(tt.user, tt.role, tt.cluster, tt.h, tt.maint, "")
			if err == nil {
				t.Fatal("Merge succeeded")
			}
			if !strings.HasPrefix(err.Error(), "merge tags: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestMaint(t *testing.T) {
	if _, ok := Maint(map[string]string{"role": "db"}); ok {
		t.Fatal("no maint tag reported as maintenance")
	}
	r, ok := Maint(map[string]string{"maint": "a\x1b[2Jb\xff" + strings.Repeat("é", 100)})
	if !ok || !strings.HasPrefix(r, "a?[2Jb?é") || len(r) > MaxMaintLen {
		t.Fatalf("Maint = %q, %v", r, ok)
	}
}

// The expected sizes were obtained by encoding the same maps with
// github.com/hashicorp/go-msgpack/v2/codec v2.1.5 MsgpackHandle{} the way
// serf's encodeTags does (magic byte + Encode(map)).
func TestEncodedSize(t *testing.T) {
	n15, n16 := map[string]string{}, map[string]string{}
	for i := 0; i < 16; i++ {
		if i < 15 {
			n15[fmt.Sprintf("k%02d", i)] = ""
		}
		n16[fmt.Sprintf("k%02d", i)] = ""
	}
	tests := []struct {
		name string
		tags map[string]string
		want int
	}{
		{"empty", map[string]string{}, 2},
		{"role", map[string]string{"role": "db"}, 10},
		{"fixstr 31", map[string]string{"a": strings.Repeat("x", 31)}, 36},
		{"str16 32", map[string]string{"a": strings.Repeat("x", 32)}, 39},
		{"str16 255 (no str8)", map[string]string{"a": strings.Repeat("x", 255)}, 262},
		{"str16 256", map[string]string{"a": strings.Repeat("x", 256)}, 263},
		{"str16 65535", map[string]string{"a": strings.Repeat("x", 65535)}, 65542},
		{"str32 65536", map[string]string{"a": strings.Repeat("x", 65536)}, 65545},
		{"fixmap 15", n15, 77},
		{"map16 16", n16, 84},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EncodedSize(tt.tags); got != tt.want {
				t.Fatalf("EncodedSize = %d, want %d", got, tt.want)
			}
		})
	}
}
