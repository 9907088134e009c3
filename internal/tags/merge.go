package tags

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrTooLarge means a tag map would not fit in memberlist's node metadata.
var ErrTooLarge = errors.New("tags too large")

// BudgetError is returned by Merge when the tags would exceed MetaMaxSize.
// It matches ErrTooLarge.
type BudgetError struct {
	Size    int         // encoded size of the merged tags
	Largest []TagWeight // the largest user tags, largest first (at most 3)
}

// TagWeight is a user tag and the bytes it takes in the encoded map.
type TagWeight struct {
	Key   string
	Bytes int
}

func (e *BudgetError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tags encode to %d bytes, %d over the %d-byte memberlist metadata limit",
		e.Size, e.Size-MetaMaxSize, MetaMaxSize)
	writeLargest(&b, "; largest user tags: ", e.Largest)
	return b.String()
}

// writeLargest appends the largest tags after prefix.
func writeLargest(b *strings.Builder, prefix string, ws []TagWeight) {
	for i, w := range ws {
		if i == 0 {
			b.WriteString(prefix)
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%q (%d bytes)", short(w.Key), w.Bytes)
	}
}

// Is makes errors.Is(err, ErrTooLarge) true for a BudgetError.
func (e *BudgetError) Is(target error) bool { return target == ErrTooLarge }

// Merge builds the full tag map an agent publishes: a copy of the user tags
// plus role, cluster (omitted when empty, which means DefaultCluster), maint
// (omitted when empty) and, when h is not nil, the health tag Encode(*h).
//
// It returns an error when a user tag uses a reserved key, role is not RoleDB
// or RoleApp, h is given for an app agent or has an unknown state, cluster is
// not 1 to MaxClusterLen bytes of [A-Za-z0-9._-], maint is longer than
// MaxMaintLen bytes or not printable UTF-8, or the result would exceed
// MetaMaxSize once encoded (a *BudgetError).
//
// voter is the consensus voter tag's value (see Voter), "" for none.
func Merge(user map[string]string, role, cluster string, h *Health, maint, voter string) (map[string]string, error) {
	if err := checkMerge(user, role, cluster, h, maint); err != nil {
		return nil, fmt.Errorf("merge tags: %w", err)
	}
	out := make(map[string]string, len(user)+4)
	for k, v := range user {
		out[k] = v
	}
	out[KeyRole] = role
	if cluster != "" {
		out[KeyCluster] = cluster
	}
	if maint != "" {
		out[KeyMaint] = maint
	}
	if h != nil {
		out[KeyHealth] = Encode(*h)
	}
	if voter != "" {
		if _, ok := Voter(map[string]string{KeyVoter: voter}); !ok {
			return nil, fmt.Errorf("merge tags: voter tag %q: want a port, with +GROUP when in a raft configuration or eN before", voter)
		}
		out[KeyVoter] = voter
	}
	if size := EncodedSize(out); size > MetaMaxSize {
		return nil, fmt.Errorf("merge tags: %w", &BudgetError{Size: size, Largest: largest(user, 3)})
	}
	return out, nil
}

func checkMerge(user map[string]string, role, cluster string, h *Health, maint string) error {
	var reserved []string
	for k := range user {
		if IsReserved(k) {
			reserved = append(reserved, k)
		}
	}
	if len(reserved) > 0 {
		sort.Strings(reserved)
		return fmt.Errorf("user tag %q: key is reserved by shoal (reserved: %s, %s, %s, %s, %s)",
			reserved[0], KeyRole, KeyCluster, KeyMaint, KeyHealth, KeyVoter)
	}
	switch role {
	case RoleDB:
		if h != nil && h.State > Passing {
			return fmt.Errorf("health: unknown state %d", h.State)
		}
	case RoleApp:
		if h != nil {
			return errors.New("health given for an app agent: only db agents publish health")
		}
	default:
		return fmt.Errorf("role %q: want %q or %q", role, RoleDB, RoleApp)
	}
	if cluster != "" && !ValidCluster(cluster) {
		return fmt.Errorf("cluster %q: want 1 to %d bytes of [A-Za-z0-9._-]", short(cluster), MaxClusterLen)
	}
	if len(maint) > MaxMaintLen {
		return fmt.Errorf("maintenance reason: %d bytes, limit %d", len(maint), MaxMaintLen)
	}
	if !printable(maint) {
		return fmt.Errorf("maintenance reason %q: want printable UTF-8 text", short(maint))
	}
	return nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// largest returns the n user tags that take the most bytes, largest first,
// ties broken by key.
func largest(user map[string]string, n int) []TagWeight {
	ws := make([]TagWeight, 0, len(user))
	for k, v := range user {
		ws = append(ws, TagWeight{Key: k, Bytes: UserTagsSize(map[string]string{k: v})})
	}
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].Bytes != ws[j].Bytes {
			return ws[i].Bytes > ws[j].Bytes
		}
		return ws[i].Key < ws[j].Key
	})
	if len(ws) > n {
		ws = ws[:n]
	}
	return ws
}
