package tags

import (
	"fmt"
	"sort"
	"strings"
)

// UserBudgetError means user tags exceed UserTagBudget. It matches
// ErrTooLarge.
type UserBudgetError struct {
	Size    int         // encoded size of the user tags (UserTagsSize)
	Largest []TagWeight // the largest user tags, largest first (at most 3)
}

func (e *UserBudgetError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "user tags take %d bytes encoded, over the %d-byte user tag budget (memberlist gossips at most %d bytes of tags per node; shoal keeps the rest for role, cluster, maintenance and health)",
		e.Size, UserTagBudget, MetaMaxSize)
	writeLargest(&b, "; largest: ", e.Largest)
	return b.String()
}

// Is makes errors.Is(err, ErrTooLarge) true for a UserBudgetError.
func (e *UserBudgetError) Is(target error) bool { return target == ErrTooLarge }

// TagError is a problem with one user tag.
type TagError struct {
	Key, Value string
	Msg        string
}

func (e *TagError) Error() string { return fmt.Sprintf("tag %q: %s", short(e.Key), e.Msg) }

// CheckUserTags checks a set of user tags before an agent publishes it:
// valid keys (ValidKey), none reserved, values of printable UTF-8, and the
// whole within UserTagBudget, which guarantees that the health tag always
// fits beside them. Every entry point that sets user tags calls it.
func CheckUserTags(user map[string]string) error {
	keys := make([]string, 0, len(user))
	for k := range user {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := user[k]; {
		case !ValidKey(k):
			return &TagError{k, v, fmt.Sprintf("tag key must be 1-%d characters of letters, digits, . _ -", MaxKeyLen)}
		case IsReserved(k):
			return &TagError{k, v, fmt.Sprintf("key is reserved by shoal (reserved: %s, %s, %s, %s, %s)", KeyRole, KeyCluster, KeyMaint, KeyHealth, KeyVoter)}
		case !printable(v):
			return &TagError{k, v, "value must be printable UTF-8 text (no control characters)"}
		}
	}
	if size := UserTagsSize(user); size > UserTagBudget {
		return &UserBudgetError{Size: size, Largest: largest(user, 3)}
	}
	return nil
}
