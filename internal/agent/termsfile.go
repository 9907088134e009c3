package agent

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

// termsFileVersion is the version of the terms file's format.
const termsFileVersion = 1

// maxTermsFile bounds what the agent reads of the terms file.
const maxTermsFile = 4 << 20

// termsFile is the terms file's content.
type termsFile struct {
	V     int               `json:"v"`
	Terms map[string][]byte `json:"terms"` // cluster -> signed term
}

// termsPath is the terms file, "" without a snapshot.
func (a *Agent) termsPath() string {
	if a.cfg.Snapshot == "" {
		return ""
	}
	return a.cfg.Snapshot + ".terms"
}

// saveSignedTerm records the signed term of cluster and, when write is
// set, rewrites the terms file (atomically; terms change rarely). A
// failure is logged: the file is an optimisation, never the source of
// truth.
func (a *Agent) saveSignedTerm(cluster string, signed []byte, write bool) {
	path := a.termsPath()
	if path == "" {
		return
	}
	ts := &a.cons.terms
	ts.fileMu.Lock()
	defer ts.fileMu.Unlock()
	if ts.signed == nil {
		ts.signed = map[string][]byte{}
	}
	ts.signed[cluster] = signed
	if !write {
		return
	}
	data, err := json.Marshal(termsFile{V: termsFileVersion, Terms: ts.signed})
	if err == nil {
		err = fsutil.WriteFileAtomic(path, data, 0o600)
	}
	if err != nil {
		a.log.Warn("writer terms not saved", "file", path, "error", err)
	}
}

// loadTerms learns the terms saved by an earlier run, each verified again.
// A missing file is no error; a bad one is logged and ignored.
func (a *Agent) loadTerms() {
	path := a.termsPath()
	if path == "" || a.cons.terms.unverifiable != "" {
		return
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		defer f.Close()
		var data []byte
		if data, err = io.ReadAll(io.LimitReader(f, maxTermsFile+1)); err == nil {
			err = a.learnSaved(data)
		}
	}
	if err != nil {
		a.log.Warn("saved writer terms ignored", "file", path, "error", err)
	}
}

// learnSaved learns every term of a terms file that verifies, and keeps
// it as the file's content (the file is rewritten only when a term is
// learned from a voter).
func (a *Agent) learnSaved(data []byte) error {
	if len(data) > maxTermsFile {
		return fmt.Errorf("larger than %d bytes", maxTermsFile)
	}
	var tf termsFile
	if err := json.Unmarshal(data, &tf); err != nil {
		return err
	}
	if tf.V != termsFileVersion {
		return fmt.Errorf("version %d, want %d", tf.V, termsFileVersion)
	}
	for cluster, signed := range tf.Terms {
		t, err := consensus.DecodeSignedTerm(signed, a.cons.terms.verify)
		if err != nil || t.Cluster != cluster {
			a.log.Warn("a saved writer term does not verify; ignored", "cluster", cluster, "error", err)
			continue
		}
		if a.learnTerm(t, "saved") {
			a.saveSignedTerm(cluster, signed, false)
		}
	}
	return nil
}
