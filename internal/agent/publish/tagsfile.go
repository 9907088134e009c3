package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/fsutil"
	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/tags"
)

// Saved is what the agent starts with: its user tags and, from the tags
// file, its maintenance state.
type Saved struct {
	User    map[string]string
	InMaint bool   // the tags file holds a maintenance reason
	Maint   string // that reason
}

// Load returns the tags to start with: the tags file when it exists (it
// holds runtime changes), else configured, which is then written to a new
// tags file. A tags file that differs from configured wins, with a warning.
func (p *Publisher) Load(configured map[string]string) (Saved, error) {
	user := maps.Clone(configured)
	if user == nil {
		user = map[string]string{}
	}
	path := p.cfg.TagsFile
	if path == "" {
		return Saved{User: user}, nil
	}
	// A warning (a maintenance reason cut to this release's limit) is
	// config.CheckFiles' too, which the agent logs at start.
	fileTags, _, err := config.ReadTagsFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Saved{User: user}, p.WriteTagsFile(user)
	}
	if err != nil {
		return Saved{}, fmt.Errorf("tags_file %s: %w", path, err)
	}
	p.fileMu.Lock()
	p.written = maps.Clone(fileTags)
	p.fileMu.Unlock()
	saved := Saved{User: fileTags}
	saved.Maint, saved.InMaint = fileTags[tags.KeyMaint]
	delete(fileTags, tags.KeyMaint)
	if len(configured) > 0 && !maps.Equal(fileTags, configured) {
		p.cfg.Log.Warn("tags file holds runtime tag changes and takes precedence over the configured tags; delete it to return to the configured tags", "tags_file", path)
	}
	return saved, nil
}

// WriteTagsFile persists the user tags and the maintenance reason (under
// the reserved key "maint"). It writes only when they differ from what was
// last written: the local member-update event also fires for every health
// publish, which leaves both alone.
func (p *Publisher) WriteTagsFile(user map[string]string) error {
	if p.cfg.TagsFile == "" {
		return nil
	}
	p.fileMu.Lock()
	defer p.fileMu.Unlock()
	content := maps.Clone(user)
	if content == nil {
		content = map[string]string{}
	}
	if m := p.cfg.Maint(); m != "" {
		content[tags.KeyMaint] = m
	}
	if p.written != nil && maps.Equal(p.written, content) {
		return nil
	}
	data, err := json.MarshalIndent(content, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(p.cfg.TagsFile, append(data, '\n'), 0o600); err != nil {
		return err
	}
	p.written = content
	return nil
}

// SavedMaint is the maintenance reason the tags file holds, as last
// written or read ("" for none).
func (p *Publisher) SavedMaint() string {
	p.fileMu.Lock()
	defer p.fileMu.Unlock()
	return p.written[tags.KeyMaint]
}

// Update sets and deletes user tags, persists them when a tags file is
// configured, and gossips the change. It returns the new user tag set.
// shoal's own keys (role, cluster, maint, sh) cannot be changed this way,
// and the result must fit in the user tag budget.
func (p *Publisher) Update(set map[string]string, del []string) (map[string]string, error) {
	user, err := p.Change(set, del)
	if err != nil {
		return nil, err
	}
	if err := p.WriteTagsFile(user); err != nil {
		return nil, err
	}
	if err := p.Publish(user); err != nil {
		return nil, err
	}
	return user, nil
}

// Change returns the wanted user tags with set and del applied, or why
// that is not allowed: a reserved key, an invalid key or value, or a
// result over the user tag budget (so that the health tag always fits
// beside them).
func (p *Publisher) Change(set map[string]string, del []string) (map[string]string, error) {
	for _, k := range del {
		if tags.IsReserved(k) {
			return nil, fmt.Errorf("tag %q is reserved by shoal and cannot be deleted", k)
		}
	}
	user := p.Wanted()
	if user == nil {
		user = map[string]string{}
	}
	maps.Copy(user, set)
	for _, k := range del {
		delete(user, k)
	}
	if err := tags.CheckUserTags(user); err != nil {
		return nil, err
	}
	// The rules every agent applies to gossiped tags (package member): an
	// agent never publishes tags that make it bad-tags everywhere else.
	if d := member.CheckTags(user); d != "" {
		return nil, errors.New(d)
	}
	return user, nil
}
