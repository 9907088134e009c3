package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shoaldb/shoal/internal/apitoken"
	"github.com/shoaldb/shoal/internal/fsutil"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/tags"
)

// Files is what the files a configuration names hold, read and checked
// without changing anything and without the network. The agent starts from
// it and `shoal agent --config-check` runs the very same checks
// (CheckFiles), so that a configuration the check accepts is one the agent
// starts with.
type Files struct {
	// Keys is the keyring file's content, primary first; nil when no
	// keyring_file is set or it does not exist yet (the agent then creates
	// it from encrypt).
	Keys []string
	// ConsensusKeys are the consensus keys, primary first: the consensus
	// keyring file's content, else (no file yet, or none) consensus.key;
	// nil when consensus is off. ConsensusKeyringFile is the consensus
	// keyring file ("" when none is set), which the agent creates from
	// consensus.key when it does not exist (Config.ConsensusKeyring).
	ConsensusKeys        []string
	ConsensusKeyringFile string
	// Tags is the tags file's content (user tags, and the maintenance
	// reason under tags.KeyMaint); nil when no tags_file is set or it does
	// not exist yet.
	Tags map[string]string
	// APITokenFile is the absolute path of the API token file.
	APITokenFile string
	// Probe is the MySQL probe's configuration, password included; zero on
	// an app agent.
	Probe probe.Config
	// Warnings are problems the agent logs at start but does not refuse.
	Warnings []string
}

// CheckFiles reads and checks every file the configuration names, and
// everything else the agent checks at start that needs no network: the
// keyring file, the consensus keyring file and data directory, the tags
// file, the API token file, the MySQL probe's
// credentials (password file, option file, user), the HTTPS certificate,
// the history file and the event handlers' programs. It creates and changes
// nothing. Every error names its config key and flag; the errors are joined.
func (c *Config) CheckFiles(getenv func(string) string, euid int) (*Files, error) {
	f := &Files{}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	keys, warn, err := c.checkKeyring()
	f.Keys = keys
	add(err)
	if warn != "" {
		f.Warnings = append(f.Warnings, warn)
	}
	f.ConsensusKeys, warn, err = c.checkConsensusFiles()
	f.ConsensusKeyringFile = c.Consensus.KeyringFile
	add(err)
	add(c.checkSeparateKeys(f.Keys, f.ConsensusKeys))
	if warn != "" {
		f.Warnings = append(f.Warnings, warn)
	}
	f.Tags, warn, err = c.checkTagsFile()
	add(err)
	if warn != "" {
		f.Warnings = append(f.Warnings, warn)
	}
	f.APITokenFile, err = c.checkAPITokenFile(getenv, euid)
	add(err)
	if c.EffectiveRole() == tags.RoleDB {
		f.Probe, err = c.ProbeConfig(getenv)
		add(err)
		_, _, err = c.ReplicationAccount()
		add(err)
	}
	add(c.checkTLSFiles())
	add(c.checkHistoryFile())
	f.Warnings = append(f.Warnings, c.checkHandlerPrograms()...)
	return f, c.annotate(errors.Join(errs...))
}

// ReadKeyringFile reads a keyring file (the serf format, a JSON array of
// base64 keys, primary first) and checks every key. Like a password file, it
// must not be accessible by group or other: it holds the cluster's keys.
func ReadKeyringFile(path string) ([]string, error) {
	data, err := fsutil.ReadPrivateFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := DecodeKeyring(data, path)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		if err := CheckKey(k); err != nil {
			return nil, fmt.Errorf("keyring file %s: key %d: %w", path, i+1, err)
		}
	}
	return keys, nil
}

// keyringSetting is a keyring file setting and the key it is created
// from: the gossip keyring (keyring_file, encrypt) or the consensus one
// (consensus.keyring_file, consensus.key).
type keyringSetting struct {
	fileKey, path string // "keyring_file"
	keyName, key  string // "encrypt key", as the messages name it
	keyFlag       string // "--encrypt"
	keyEnv        string // "$SHOAL_ENCRYPT"
	install       string // how to add a key to the file, "" for no hint
	// checkKey checks each key beyond ReadKeyringFile; nil for none.
	checkKey func(string) error
}

// checkKeyring reads keyring_file.
func (c *Config) checkKeyring() (keys []string, warning string, err error) {
	return checkKeyringFile(keyringSetting{fileKey: "keyring_file", path: c.KeyringFile, keyName: "encrypt key", key: c.Encrypt,
		keyFlag: "--encrypt", keyEnv: "$SHOAL_ENCRYPT", install: "shoal keys install"})
}

// checkKeyringFile reads a keyring file. A missing file is fine when the
// key to create it with is given, in a directory that exists.
func checkKeyringFile(k keyringSetting) (keys []string, warning string, err error) {
	if k.path == "" {
		return nil, "", nil
	}
	keys, err = ReadKeyringFile(k.path)
	switch {
	case err == nil:
		for i, key := range keys {
			if k.checkKey == nil {
				break
			}
			if err := k.checkKey(key); err != nil {
				return nil, "", fieldErr(k.fileKey, k.path, "key %d: %v", i+1, err)
			}
		}
		if k.key != "" && !slices.Contains(keys, k.key) {
			warning = fmt.Sprintf("keyring file %s exists and does not contain the %s key; the keyring file wins", k.path, k.keyFlag)
			if k.install != "" {
				warning += " (install the key with " + k.install + ")"
			}
		}
		return keys, warning, nil
	case errors.Is(err, fs.ErrNotExist):
		if k.key == "" {
			return nil, "", fieldErr(k.fileKey, k.path, "does not exist, and no %s (%s, %s) was given to create it with", k.keyName, k.keyFlag, k.keyEnv)
		}
		if err := dirExists(k.path); err != nil {
			return nil, "", fieldErr(k.fileKey, k.path, "cannot be created from %s: %v", strings.TrimSuffix(k.keyName, " key"), err)
		}
		return nil, "", nil
	}
	return nil, "", fieldErr(k.fileKey, k.path, "%v", err)
}

// LegacyMaxMaintLen is the longest maintenance reason releases before
// issue 25 accepted (tags.MaxMaintLen was 128 bytes before the GTID
// position took room in the tags). Their tags files may hold one.
const LegacyMaxMaintLen = 128

// LegacyUserTagBudget is the user tag budget of releases before issue 25
// (tags.UserTagBudget was 150 bytes). Their tags files may hold user tags
// up to it: they are kept, and published whenever they fit beside the
// health tag (package publish withholds them, never the health, when not).
const LegacyUserTagBudget = 150

// ReadTagsFile reads a tags file and checks it against the rules the agent
// applies to tags set at runtime: a JSON object of string values, user tags
// that pass tags.CheckUserTags, and of the reserved keys only
// tags.KeyMaint, with a valid maintenance reason. A missing file is an
// error wrapping fs.ErrNotExist; the other errors do not name the file.
//
// A maintenance reason of tags.MaxMaintLen to LegacyMaxMaintLen bytes,
// which an older release wrote, is no error: refusing the file would stop
// the agent, and dropping the reason would end a drain. It is cut to
// tags.MaxMaintLen bytes on a character boundary, and warning says so.
func ReadTagsFile(path string) (fileTags map[string]string, warning string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	fileTags, err = tags.DecodeFile(data)
	if err != nil {
		return nil, "", err
	}
	if reason, ok := fileTags[tags.KeyMaint]; ok {
		err := CheckMaintReason(reason)
		if len(reason) > tags.MaxMaintLen && len(reason) <= LegacyMaxMaintLen {
			if err = checkReasonText(reason); err == nil {
				fileTags[tags.KeyMaint] = cutReason(reason)
				warning = fmt.Sprintf("the maintenance reason in the tags file is %d bytes, over the %d this release allows (an older release wrote it): it is kept, cut to %q",
					len(reason), tags.MaxMaintLen, fileTags[tags.KeyMaint])
			}
		}
		if err != nil {
			return nil, "", fmt.Errorf("%q: %w", tags.KeyMaint, err)
		}
	}
	user := make(map[string]string, len(fileTags))
	for k, v := range fileTags {
		if tags.IsReserved(k) {
			if k != tags.KeyMaint {
				return nil, "", fmt.Errorf("tag %q is reserved by shoal; only %q may appear in the file", k, tags.KeyMaint)
			}
			continue
		}
		user[k] = v
	}
	if err := tags.CheckUserTags(user); err != nil {
		var be *tags.UserBudgetError
		if !errors.As(err, &be) || be.Size > LegacyUserTagBudget {
			return nil, "", fmt.Errorf("%w (fix or delete the file; it holds the tags set at runtime)", err)
		}
		w := fmt.Sprintf("the user tags in the tags file take %d bytes, over the %d this release guarantees room for (an older release allowed %d): they are kept, and withheld from gossip whenever they do not fit beside the health tag (shoal info says so); remove some with shoal tags",
			be.Size, tags.UserTagBudget, LegacyUserTagBudget)
		warning = strings.TrimPrefix(warning+"; "+w, "; ")
	}
	return fileTags, warning, nil
}

// cutReason cuts a maintenance reason to tags.MaxMaintLen bytes, on a
// character boundary.
func cutReason(r string) string {
	if len(r) <= tags.MaxMaintLen {
		return r
	}
	n := tags.MaxMaintLen
	for n > 0 && !utf8.RuneStart(r[n]) {
		n--
	}
	return r[:n]
}

func (c *Config) checkTagsFile() (map[string]string, string, error) {
	if c.TagsFile == "" {
		return nil, "", nil
	}
	t, warn, err := ReadTagsFile(c.TagsFile)
	if errors.Is(err, fs.ErrNotExist) {
		if err := dirExists(c.TagsFile); err != nil {
			return nil, "", fieldErr("tags_file", c.TagsFile, "cannot be created: %v", err)
		}
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fieldErr("tags_file", c.TagsFile, "%v", err)
	}
	if warn != "" {
		warn = fmt.Sprintf("tags_file %s: %s", c.TagsFile, warn)
	}
	return t, warn, nil
}

// CheckMaintReason rejects maintenance reasons that the tag would not carry
// as given.
func CheckMaintReason(r string) error {
	if len(r) > tags.MaxMaintLen {
		return fmt.Errorf("maintenance reason is %d bytes; the most is %d", len(r), tags.MaxMaintLen)
	}
	return checkReasonText(r)
}

// checkReasonText rejects a maintenance reason that is not printable UTF-8.
func checkReasonText(r string) error {
	if !utf8.ValidString(r) {
		return errors.New("maintenance reason is not valid UTF-8")
	}
	for _, ch := range r {
		if !unicode.IsPrint(ch) {
			return fmt.Errorf("maintenance reason has the non-printable character %q", ch)
		}
	}
	return nil
}

// APITokenPath is the absolute path of the API token file: api_token_file,
// else apitoken.DefaultPath.
func (c *Config) APITokenPath(getenv func(string) string, euid int) string {
	p := c.APITokenFile
	if p == "" {
		p = apitoken.DefaultPath(getenv, euid)
	}
	// The CLI reads the path the agent reports, from any directory.
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p
}

// checkAPITokenFile checks an existing token file (mode, content); a
// missing one is created at start, with its directories, under the nearest
// existing directory.
func (c *Config) checkAPITokenFile(getenv func(string) string, euid int) (string, error) {
	p := c.APITokenPath(getenv, euid)
	if err := apitoken.CheckDir(filepath.Dir(p), euid); err != nil {
		return p, fieldErr("api_token_file", p, "%v", err)
	}
	_, err := apitoken.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			st, serr := os.Stat(d)
			if serr == nil {
				if !st.IsDir() {
					return p, fieldErr("api_token_file", p, "cannot be created: %s is not a directory", d)
				}
				break
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	default:
		return p, fieldErr("api_token_file", p, "%v", err)
	}
	return p, nil
}

// ProbeConfig is the probe's configuration from the mysql settings, the
// password read from mysql.password_file, the environment variable
// SHOAL_MYSQL_PASSWORD or the option file's [client] section
// (probe.Settings.Config).
func (c *Config) ProbeConfig(getenv func(string) string) (probe.Config, error) {
	pc, err := c.MySQL.Config(getenv)
	return pc, sectionErrors("mysql", err)
}

// ReplicationAccount is the account a former writer replicates with after
// a switchover (mysql.replication_user and replication_password_file);
// "" when none is configured.
func (c *Config) ReplicationAccount() (user, password string, err error) {
	user, password, err = c.MySQL.ReplicationAccount()
	return user, password, sectionErrors("mysql", err)
}

// checkTLSFiles loads the HTTPS certificate and key, as the API listener does.
func (c *Config) checkTLSFiles() error {
	if !c.HTTPTLS() {
		return nil
	}
	if _, err := tls.LoadX509KeyPair(c.HTTPTLSCertFile, c.HTTPTLSKeyFile); err != nil {
		return fieldErr("http_tls_cert_file", c.HTTPTLSCertFile, "with http_tls_key_file %s: %v", c.HTTPTLSKeyFile, err)
	}
	return nil
}

// checkHistoryFile checks that the history file can be appended to: an
// existing one is a regular file the agent may write.
func (c *Config) checkHistoryFile() error {
	p := c.History.File
	if p == "" {
		return nil
	}
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // history.Validate checks the directory
	}
	if err != nil {
		return fieldErr("history.file", p, "%v", err)
	}
	if !st.Mode().IsRegular() {
		return fieldErr("history.file", p, "is not a regular file (mode %s)", st.Mode())
	}
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fieldErr("history.file", p, "cannot be appended to: %v", err)
	}
	return fh.Close()
}

// checkHandlerPrograms reports every event handler whose program cannot be
// run now: missing, or not executable. The agent starts anyway (the program
// may be installed later), so these are warnings.
func (c *Config) checkHandlerPrograms() []string {
	specs, err := c.HookSpecs()
	if err != nil {
		return nil // Validate reports it
	}
	var out []string
	for i, s := range specs {
		prog := s.Argv[0]
		if c.Hooks.Dir != "" && strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
			prog = filepath.Join(c.Hooks.Dir, prog)
		}
		if _, err := exec.LookPath(prog); err != nil {
			src := c.sourceOf("event_handlers")
			if src != "" {
				src += ": "
			}
			out = append(out, fmt.Sprintf("%sevent_handlers[%d] (--event-handler) %q: program %s cannot be run (%v): the handler fails on every event until it can",
				src, i, s.Raw, prog, err))
		}
	}
	return out
}

// dirExists checks that the directory of path exists.
func dirExists(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}
