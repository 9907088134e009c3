package pool

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// dedupe returns members sorted by name with one member per name. Of members
// sharing a name it keeps the first by compareMembers, so the choice does not
// depend on input order.
func dedupe(members []Member) []Member {
	ms := slices.Clone(members)
	slices.SortFunc(ms, compareMembers)
	return slices.CompactFunc(ms, func(a, b Member) bool { return a.Name == b.Name })
}

// compareMembers is a total order on members by content.
func compareMembers(a, b Member) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c // the common case: no tag comparison needed
	}
	return cmp.Or(
		cmp.Compare(a.Status, b.Status),
		strings.Compare(a.Addr, b.Addr),
		compareTags(a.Tags, b.Tags),
	)
}

func compareTags(a, b map[string]string) int {
	ka, kb := slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))
	for i := 0; i < len(ka) && i < len(kb); i++ {
		if c := cmp.Or(strings.Compare(ka[i], kb[i]), strings.Compare(a[ka[i]], b[kb[i]])); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ka), len(kb))
}
