//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// VmRSS is the resident set size of process pid in bytes, from
// /proc/<pid>/status (the soak's resource samples and the benchmarks'
// footprint both read it here).
func VmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
