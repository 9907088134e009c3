package tags

import (
	"strings"
	"testing"
)

// TestReservedUserTags: every key shoal sets itself is refused as a user
// tag, and the error lists them all (docs/api.md, `shoal tags`); "health"
// is not one of them (the health tag is "sh").
func TestReservedUserTags(t *testing.T) {
	for _, k := range []string{KeyRole, KeyCluster, KeyMaint, KeyHealth, KeyVoter} {
		err := CheckUserTags(map[string]string{k: "x"})
		if err == nil || !strings.Contains(err.Error(), "(reserved: role, cluster, maint, sh, rv)") {
			t.Errorf("user tag %q: %v; want refused, listing every reserved key", k, err)
		}
	}
	if IsReserved("health") {
		t.Error(`"health" is reserved; docs/api.md says it is a user tag`)
	}
	if err := CheckUserTags(map[string]string{"health": "x"}); err != nil {
		t.Errorf("user tag health: %v; want accepted", err)
	}
}
