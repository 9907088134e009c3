package switchover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/shoaldb/shoal/internal/fsutil"
	"github.com/shoaldb/shoal/internal/tags"
)

// A survey stops this server's IO thread for a failover; should the agent
// restart before the failover is recorded or done, the hold must outlive
// it, or the IO thread stays stopped for good. The holds are kept in a
// small file next to the agent's snapshot (Config.HoldFile); an agent
// that starts with holds counts each from its start: surveyHold later it
// starts the IO thread again unless raft records that failover.

// maxHolds bounds the holds a file may give (one per cluster at most).
const maxHolds = 64

// holdRecord is one hold as the file keeps it.
type holdRecord struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// saveHolds writes the holds (fo.mu held); the file goes with the last.
func (s *Switcher) saveHolds() {
	path := s.cfg.HoldFile
	if path == "" {
		return
	}
	if len(s.fo.held) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.cfg.Log.Warn("failover: survey hold file not removed", "file", path, "error", err)
		}
		return
	}
	out := make(map[string]holdRecord, len(s.fo.held))
	for c, h := range s.fo.held {
		out[c] = holdRecord{ID: h.id, At: h.at}
	}
	b, err := json.Marshal(out)
	if err == nil {
		err = fsutil.WriteFileAtomic(path, b, 0o600)
	}
	if err != nil {
		s.cfg.Log.Warn("failover: survey hold not saved: an agent restart would leave the IO thread stopped", "file", path, "error", err)
	}
}

// loadHolds reads the holds a previous run left, each counted from now.
func (s *Switcher) loadHolds() error {
	path := s.cfg.HoldFile
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var in map[string]holdRecord
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(in) > maxHolds {
		return fmt.Errorf("%s: %d holds, more than %d", path, len(in), maxHolds)
	}
	now := s.cfg.Clock.Now()
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	for c, h := range in {
		if !tags.ValidCluster(c) || len(h.ID) != 16 {
			return fmt.Errorf("%s: hold of %.80q: not a cluster and a failover ID", path, c)
		}
		s.fo.held[c] = heldMark{id: h.ID, at: now}
	}
	return nil
}
