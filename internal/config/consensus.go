package config

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fsutil"
	"github.com/shoaldb/shoal/internal/tags"
)

// ConsensusHost is what the rest of the configuration tells the consensus
// settings: the role and the gossip addresses as ip:port (a bare IP gets
// the default gossip port).
func (c *Config) ConsensusHost() consensus.Host {
	h := consensus.Host{Role: c.EffectiveRole(), GossipBind: withPort(c.Bind)}
	if c.Advertise != "" {
		h.GossipAdvertise = withPort(c.Advertise)
	}
	return h
}

// withPort is an ip[:port] address as ip:port, DefaultGossipPort when it
// has none; as given when it is malformed (Validate reports it).
func withPort(addr string) string {
	host, port, err := SplitHostPortDefault(addr, DefaultGossipPort)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// ConsensusVoter reports whether this agent is a raft voter: consensus.voter
// when given, else a db agent with consensus on.
func (c *Config) ConsensusVoter() bool { return c.Consensus.IsVoter(c.EffectiveRole()) }

// NoTermWarning is what a db agent without writer terms warns at start,
// and --config-check with it: its cluster's writes follow the old rule.
// "" for an app agent, with consensus on, with consensus.disabled, and
// with --dev.
func (c *Config) NoTermWarning() string {
	if c.EffectiveRole() != tags.RoleDB || c.Consensus.Enabled() || c.Consensus.Disabled || c.Dev {
		return ""
	}
	return "no writer term: this db agent has no consensus key, so its cluster's writes follow the old rule " +
		"(any single writable server: a replica made writable, or a slow primary's, can take them) and `shoal pool` " +
		"marks the cluster unsafe; turn writer terms on with `shoal keygen --fleet DIR` and consensus.keyring_file " +
		"on every db agent (docs/consensus.md), or set consensus.disabled: true (--consensus-disabled) to run without them"
}

// checkConsensusHost checks the consensus settings that depend on the rest
// of the configuration (consensus.Settings.CheckHost).
func (c *Config) checkConsensusHost() error {
	return c.Consensus.CheckHost(c.ConsensusHost())
}

// consensusKeyring is the consensus keyring setting.
func (c *Config) consensusKeyring() keyringSetting {
	return keyringSetting{fileKey: "consensus.keyring_file", path: c.Consensus.KeyringFile, keyName: "consensus.key", key: c.Consensus.Key,
		keyFlag: "--consensus-key", keyEnv: "$SHOAL_CONSENSUS_KEY", checkKey: consensus.CheckKey}
}

// checkConsensusFiles reads the consensus keyring file, as the gossip one
// (checkKeyringFile), and checks the data directory of a voter. It returns
// the consensus keys: the file's, else consensus.key.
func (c *Config) checkConsensusFiles() (keys []string, warning string, err error) {
	if !c.Consensus.Enabled() {
		return nil, "", nil
	}
	keys, warning, err = checkKeyringFile(c.consensusKeyring())
	if keys == nil && err == nil && c.Consensus.Key != "" {
		keys = []string{c.Consensus.Key}
	}
	if c.ConsensusVoter() {
		err = errors.Join(err, c.checkDataDir(c.Consensus.DataDirPath()))
	}
	return keys, warning, err
}

// setKey is a key and the setting it comes from, as a message names it:
// "encrypt", or "keyring_file PATH, key N".
type setKey struct{ from, key string }

// hiddenKey stands for a key in a message: a FieldError shows its value,
// and a key is never shown, not even its first characters.
const hiddenKey = "[not shown]"

// checkSeparateKeys refuses a consensus key that is also a gossip key: the
// gossip key holder would then hold the consensus key too, and the two-key
// model (a gossip key alone does not make a voter) would be gone. Every key
// of both keyrings is compared by its decoded bytes: fileKeys are
// keyring_file's keys (nil when it does not exist yet), consKeys the
// consensus keyring's (checkConsensusFiles); encrypt and consensus.key are
// compared too, also when the keyring files win over them.
func (c *Config) checkSeparateKeys(fileKeys, consKeys []string) error {
	if len(consKeys) == 0 {
		return nil // consensus is off, or its keyring has an error of its own
	}
	var gossipKeys []setKey
	if c.Encrypt != "" {
		gossipKeys = append(gossipKeys, setKey{"encrypt", c.Encrypt})
	}
	for i, k := range fileKeys {
		gossipKeys = append(gossipKeys, setKey{fmt.Sprintf("keyring_file %s, key %d", c.KeyringFile, i+1), k})
	}
	var errs []error
	// consKeys are the file's when it exists (checkConsensusFiles read it).
	fromFile := false
	if c.Consensus.KeyringFile != "" {
		_, err := os.Stat(c.Consensus.KeyringFile)
		fromFile = err == nil
	}
	for i, k := range consKeys {
		g, ok := sameKey(k, gossipKeys)
		switch {
		case !ok:
		case fromFile:
			errs = append(errs, fieldErr("consensus.keyring_file", c.Consensus.KeyringFile, "key %d is the same key as the gossip key (%s): %s", i+1, g, separateKeyHint))
		default:
			errs = append(errs, fieldErr("consensus.key", hiddenKey, "the same key as the gossip key (%s): %s", g, separateKeyHint))
		}
	}
	if c.Consensus.Key != "" && !slices.Contains(consKeys, c.Consensus.Key) {
		if g, ok := sameKey(c.Consensus.Key, gossipKeys); ok {
			errs = append(errs, fieldErr("consensus.key", hiddenKey, "the same key as the gossip key (%s): %s", g, separateKeyHint))
		}
	}
	return errors.Join(errs...)
}

// separateKeyHint says what to do about a consensus key that is a gossip key.
const separateKeyHint = "the consensus key must be a separate secret; generate one with shoal keygen"

// sameKey returns where the gossip key whose decoded bytes are key's comes
// from. Keys that do not decode have errors of their own.
func sameKey(key string, gossipKeys []setKey) (from string, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return "", false
	}
	for _, g := range gossipKeys {
		if b, err := base64.StdEncoding.DecodeString(g.key); err == nil && bytes.Equal(b, raw) {
			return g.from, true
		}
	}
	return "", false
}

// checkDataDir checks the raft data directory: a directory when it
// exists, and not another node's (consensus.CheckDataDirOwner), else one
// that can be created (its nearest existing ancestor is a directory).
func (c *Config) checkDataDir(dir string) error {
	if dir == "" {
		return nil // a voter without keyring_file: CheckHost reports it
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		switch {
		case err == nil && st.IsDir() && d == dir:
			var de *consensus.DataDirError
			if err := consensus.CheckDataDirOwner(dir, c.Node); errors.As(err, &de) {
				return fieldErr("consensus.data_dir", dir, "%s", de.Msg)
			}
			return nil
		case err == nil && st.IsDir():
			return nil
		case err == nil && d == dir:
			return fieldErr("consensus.data_dir", dir, "is not a directory (mode %s)", st.Mode())
		case err == nil:
			return fieldErr("consensus.data_dir", dir, "cannot be created: %s is not a directory", d)
		case !errors.Is(err, fs.ErrNotExist):
			return fieldErr("consensus.data_dir", dir, "%v", err)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// ConsensusKeyring returns the consensus keys, primary first, for the
// agent to start with: the consensus keyring file's, which it creates
// (mode 0600) from consensus.key when it does not exist, with the checks
// of CheckFiles; consensus.key alone when no file is set; nil when
// consensus is off.
func (c *Config) ConsensusKeyring() (keys []string, warning string, err error) {
	if !c.Consensus.Enabled() {
		return nil, "", nil
	}
	k := c.consensusKeyring()
	keys, warning, err = checkKeyringFile(k)
	switch {
	case err != nil:
		return nil, "", c.annotate(err)
	case keys != nil:
		return keys, warning, nil
	case k.path != "":
		if err := WriteKeyringFile(k.path, []string{k.key}); err != nil {
			return nil, "", c.annotate(fieldErr(k.fileKey, k.path, "create from consensus.key: %v", err))
		}
	}
	return []string{k.key}, "", nil
}

// WriteKeyringFile writes a keyring file (the serf format, a JSON array of
// base64 keys, primary first) atomically with mode 0600.
func WriteKeyringFile(path string, keys []string) error {
	data, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return fmt.Errorf("encode keyring %s: %w", path, err)
	}
	return fsutil.WriteFileAtomic(path, data, 0o600)
}
