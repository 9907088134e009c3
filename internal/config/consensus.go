package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fsutil"
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
		err = errors.Join(err, checkDataDir(c.Consensus.DataDirPath()))
	}
	return keys, warning, err
}

// checkDataDir checks the raft data directory: a directory when it
// exists, else one that can be created (its nearest existing ancestor is a
// directory).
func checkDataDir(dir string) error {
	if dir == "" {
		return nil // a voter without keyring_file: CheckHost reports it
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		switch {
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
