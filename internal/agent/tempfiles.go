package agent

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/fsutil"
)

// tokenTempAge spares a temporary API token file younger than this: the
// token path may be shared by agents of one user starting at the same time.
const tokenTempAge = time.Minute

// removeStaleTemps deletes the temporary files an earlier run of this agent
// left when it was killed in the middle of replacing one of its files
// (tags, keyring, peers, pool file and lists, API token). Each is logged;
// a failure to remove one is logged and does not stop the start.
func (a *Agent) removeStaleTemps() {
	type target struct {
		dir    string
		match  func(base string) bool
		minAge time.Duration
	}
	exact := func(path string, minAge time.Duration) target {
		base := filepath.Base(path)
		return target{filepath.Dir(path), func(b string) bool { return b == base }, minAge}
	}
	var ts []target
	for _, p := range []string{a.cfg.TagsFile, a.cfg.KeyringFile, a.peersPath(), a.cfg.Sinks.File.Path} {
		if p != "" {
			ts = append(ts, exact(p, 0))
		}
	}
	if d := a.cfg.Sinks.File.ListsDir; d != "" {
		ts = append(ts, target{d, func(b string) bool {
			return strings.HasSuffix(b, "-writers.txt") || strings.HasSuffix(b, "-readers.txt")
		}, 0})
	}
	if a.rpc.tokenFile != "" {
		ts = append(ts, exact(a.rpc.tokenFile, tokenTempAge))
	}
	for _, t := range ts {
		removed, err := fsutil.RemoveStaleTemps(t.dir, t.match, t.minAge)
		for _, p := range removed {
			a.log.Info("removed a temporary file left by an earlier run", "path", p)
		}
		if err != nil {
			a.log.Warn("could not remove temporary files left by an earlier run", "err", err)
		}
	}
}
