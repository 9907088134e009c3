package term

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fsutil"
)

// The terms file keeps the signed terms this agent learned from the
// voters, next to the serf snapshot (snapshot + ".terms"), so that a
// restarted agent routes by the term it knew at once, instead of routing
// no writes until a voter answers (the soak measured 0.45-0.55 s of
// HAProxy's writer out, and its write sessions shut down, at each app
// agent restart). Each term is verified again when it is read, and the
// agent asks the voters once for every cluster's term after a start, so
// a term that moved while it was down is replaced within a second.

// fileVersion is the version of the terms file's format.
const fileVersion = 1

// maxFile bounds what the book reads of the terms file.
const maxFile = 4 << 20

// termsFile is the terms file's content.
type termsFile struct {
	V     int               `json:"v"`
	Terms map[string][]byte `json:"terms"` // cluster -> signed term
}

// saveSigned records the signed term of cluster and, when write is set,
// rewrites the terms file (atomically; terms change rarely). A failure is
// logged: the file is an optimisation, never the source of truth.
func (b *Book) saveSigned(cluster string, signed []byte, write bool) {
	path := b.cfg.File
	if path == "" {
		return
	}
	b.fileMu.Lock()
	defer b.fileMu.Unlock()
	if b.signed == nil {
		b.signed = map[string][]byte{}
	}
	b.signed[cluster] = signed
	if !write {
		return
	}
	data, err := json.Marshal(termsFile{V: fileVersion, Terms: b.signed})
	if err == nil {
		err = fsutil.WriteFileAtomic(path, data, 0o600)
	}
	if err != nil {
		b.cfg.Log.Warn("writer terms not saved", "file", path, "error", err)
	}
}

// Load learns the terms saved by an earlier run, each verified again
// (call it after SetKeys). A missing file is no error; a bad one is
// logged and ignored.
func (b *Book) Load() {
	path := b.cfg.File
	if path == "" || b.keys.Load().unverifiable != "" {
		return
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		defer f.Close()
		var data []byte
		if data, err = io.ReadAll(io.LimitReader(f, maxFile+1)); err == nil {
			err = b.learnSaved(data)
		}
	}
	if err != nil {
		b.cfg.Log.Warn("saved writer terms ignored", "file", path, "error", err)
	}
}

// learnSaved learns every term of a terms file that verifies, and keeps
// it as the file's content (the file is rewritten only when a term is
// learned from a voter).
func (b *Book) learnSaved(data []byte) error {
	if len(data) > maxFile {
		return fmt.Errorf("larger than %d bytes", maxFile)
	}
	var tf termsFile
	if err := json.Unmarshal(data, &tf); err != nil {
		return err
	}
	if tf.V != fileVersion {
		return fmt.Errorf("version %d, want %d", tf.V, fileVersion)
	}
	for cluster, signed := range tf.Terms {
		t, err := consensus.DecodeSignedTerm(signed, b.Verify())
		if err != nil || t.Cluster != cluster {
			b.cfg.Log.Warn("a saved writer term does not verify; ignored", "cluster", cluster, "error", err)
			continue
		}
		if b.learn(t, "saved", false) {
			b.saveSigned(cluster, signed, false)
		}
	}
	return nil
}
