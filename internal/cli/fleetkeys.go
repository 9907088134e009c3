package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fsutil"
)

// The files `shoal keygen --fleet DIR` writes: what each host of a fleet
// needs, named as deploy/config's examples name them in /var/lib/shoal.
const (
	fleetGossipRing    = "keyring.json"           // every host: keyring_file
	fleetConsensusRing = "consensus-keyring.json" // db hosts only: consensus.keyring_file
	fleetTermKey       = "term-key"               // app hosts: consensus.term_key (public)
)

// fleetKeygenHelp is the part of keygen's help about --fleet.
const fleetKeygenHelp = `With --fleet DIR, create everything the hosts of a fleet need, once, in DIR
(created with mode 0700; an existing DIR must be mode 0700):

  keyring.json            gossip keyring (mode 0600): every host
  consensus-keyring.json  consensus keyring (mode 0600): db hosts only, never an app host
  term-key                the public term key (mode 0644): app hosts, as consensus.term_key

and print which file goes to which host; the last line is the term key.
Existing files are never replaced unless --force is given: a fleet may
already use them.`

// fleetKeys are a new fleet's keys: the gossip key, the consensus key
// (never the gossip key) and the consensus key's public term key.
type fleetKeys struct {
	gossip, consensus, termKey string
}

// newFleetKeys generates the keys of a new fleet.
func newFleetKeys() (fleetKeys, error) {
	var k fleetKeys
	var err error
	if k.gossip, err = agent.GenerateKey(); err != nil {
		return k, err
	}
	// Two draws of 32 random bytes never collide; the check keeps the
	// two-key model explicit (the agent refuses equal keys).
	for k.consensus == "" || k.consensus == k.gossip {
		if k.consensus, err = agent.GenerateKey(); err != nil {
			return k, err
		}
	}
	kr, err := consensus.ParseKeyring([]string{k.consensus})
	if err != nil {
		return k, fmt.Errorf("consensus key: %w", err)
	}
	pubs := kr.TermPublicKeys()
	if len(pubs) != 1 {
		return k, fmt.Errorf("consensus key: %d term keys, want 1", len(pubs))
	}
	k.termKey = consensus.EncodePublicKey(pubs[0])
	return k, nil
}

// fleetFile is one file keygen --fleet writes.
type fleetFile struct {
	name string
	mode os.FileMode
	data []byte
}

// files are the files that hold k.
func (k fleetKeys) files() ([]fleetFile, error) {
	ring := func(key string) ([]byte, error) {
		b, err := json.MarshalIndent([]string{key}, "", "  ")
		return append(b, '\n'), err
	}
	g, err := ring(k.gossip)
	if err != nil {
		return nil, err
	}
	c, err := ring(k.consensus)
	if err != nil {
		return nil, err
	}
	return []fleetFile{
		{fleetGossipRing, 0o600, g},
		{fleetConsensusRing, 0o600, c},
		{fleetTermKey, 0o644, []byte(k.termKey + "\n")},
	}, nil
}

// fleetDir makes sure dir is a directory only its owner can enter:
// created with mode 0700 when it does not exist, refused when it is not a
// directory or group or others may enter it.
func fleetDir(dir string) error {
	if dir == "" {
		return usagef("--fleet: want a directory, got an empty path")
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return usagef("--fleet %s: %v", dir, err)
		}
		return nil
	case err != nil:
		return usagef("--fleet %s: %v", dir, err)
	case !st.IsDir():
		return usagef("--fleet %s: not a directory (mode %s)", dir, st.Mode())
	case st.Mode().Perm()&0o077 != 0:
		return usagef("--fleet %s: mode %#o lets others in, and it will hold secret keys: name a new directory, or chmod 700 %s", dir, st.Mode().Perm(), dir)
	}
	return nil
}

// writeFleet writes k's files in dir (fleetDir checked it): each
// atomically, never replacing an existing file unless force. Without
// force, nothing is written when any of the files exists.
func writeFleet(dir string, k fleetKeys, force bool) error {
	files, err := k.files()
	if err != nil {
		return err
	}
	if !force {
		var exist []string
		for _, f := range files {
			if _, err := os.Lstat(filepath.Join(dir, f.name)); err == nil {
				exist = append(exist, f.name)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return usagef("--fleet %s: %v", dir, err)
			}
		}
		if len(exist) > 0 {
			return usagef("--fleet %s: already holds %s: refusing to replace keys a fleet may already use (--force replaces them)",
				dir, strings.Join(exist, ", "))
		}
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if force {
			err = fsutil.WriteFileAtomic(path, f.data, f.mode)
		} else {
			err = writeNewFile(path, f.data, f.mode)
		}
		if err != nil {
			return usagef("--fleet %s: %v", dir, err)
		}
	}
	return nil
}

// writeNewFile creates path with data and exactly mode, atomically (a
// temporary file linked into place once complete) and only when path does
// not exist: a file created meanwhile is never replaced.
func writeNewFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// writeFleetGuide says which of dir's files goes to which host; the last
// line is the term key alone.
func writeFleetGuide(w io.Writer, dir, termKey string) {
	fmt.Fprintf(w, `wrote %[1]s (mode 0700):
  %[2]s            gossip keyring (mode 0600): every host
  %[3]s  consensus keyring (mode 0600): db hosts only
  %[4]s                public term key (mode 0644): app hosts

db hosts (each):  install -o shoal -g shoal -m 0600 %[2]s %[3]s /var/lib/shoal/
                  (keyring_file and consensus.keyring_file in deploy/config/db-host.yaml)
app hosts (each): install -o shoal -g shoal -m 0600 %[2]s /var/lib/shoal/
                  and the term key as consensus.term_key (SHOAL_CONSENSUS_TERM_KEY)
Never copy %[3]s to an app host; keep %[1]s offline once the hosts have their files.
term key (consensus.term_key):
%[5]s
`, dir, fleetGossipRing, fleetConsensusRing, fleetTermKey, termKey)
}
