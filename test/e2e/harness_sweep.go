//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// nsPattern matches the namespaces of any run: sh + 6 hex digits + "-".
var nsPattern = regexp.MustCompile(`^(sh[0-9a-f]{6})-`)

// Sweep deletes namespaces left behind by earlier runs that died without
// cleaning up (kill -9 of the test binary, a machine crash). A run's
// namespaces (same prefix) are deleted only when every one of them was
// created before `before` and no process lives in any of them; a run whose
// agents or servers still run is someone's live run and is left alone, as
// are namespaces that do not look like ours and the prefix `keep`. It
// returns what it deleted and what it left, one line each.
func Sweep(before time.Time, keep string) (deleted, left []string, err error) {
	entries, err := os.ReadDir("/run/netns")
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	runs := map[string][]string{}
	for _, e := range entries {
		m := nsPattern.FindStringSubmatch(e.Name())
		if m == nil || m[1] == keep {
			continue
		}
		runs[m[1]] = append(runs[m[1]], e.Name())
	}
	prefixes := make([]string, 0, len(runs))
	for p := range runs {
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	for _, prefix := range prefixes {
		names := runs[prefix]
		if why := liveReason(names, before); why != "" {
			left = append(left, fmt.Sprintf("%s (%d namespaces): %s", prefix, len(names), why))
			continue
		}
		// Hosts before the fabric: the fabric holds the bridge.
		sort.Slice(names, func(i, j int) bool {
			return !strings.HasSuffix(names[i], "-fabric") && strings.HasSuffix(names[j], "-fabric")
		})
		for _, ns := range names {
			if err := run("ip", "netns", "del", ns); err != nil {
				left = append(left, fmt.Sprintf("%s: %v", ns, err))
				continue
			}
			deleted = append(deleted, ns)
		}
	}
	return deleted, left, nil
}

// liveReason says why a run's namespaces must be kept, or "" if they can go.
func liveReason(names []string, before time.Time) string {
	for _, ns := range names {
		fi, err := os.Stat(filepath.Join("/run/netns", ns))
		if err != nil {
			return err.Error()
		}
		if !fi.ModTime().Before(before) {
			return ns + " is newer than this run"
		}
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return fmt.Sprintf("ip netns pids %s: %v", ns, err)
		}
		if pids := strings.Fields(string(out)); len(pids) > 0 {
			return fmt.Sprintf("%s still has processes %v", ns, pids)
		}
	}
	return ""
}
