package config

import (
	"cmp"
	"errors"
	"maps"
	"regexp"
	"slices"

	"github.com/shoaldb/shoal/internal/tags"
)

var clusterRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// reservedTagSetting names what sets each reserved tag, for the message
// refusing it among the configured tags (tags.IsReserved says which are).
var reservedTagSetting = map[string]string{
	tags.KeyRole: "role setting", tags.KeyCluster: "cluster setting", tags.KeyMaint: "shoal maint command", tags.KeyHealth: "probe",
}

func (c *Config) validateDB() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	switch c.Role {
	case "", tags.RoleDB, tags.RoleApp:
	default:
		add(fieldErr("role", c.Role, "must be db or app (serf's role key was a tag; shoal reserves the role tag: put serf's value under tags with another key)"))
	}
	if c.Role == tags.RoleDB && !c.MySQL.Configured() {
		add(fieldErr("role", c.Role, "a db agent needs mysql.addr, mysql.socket or mysql.option_file"))
	}
	if !clusterRe.MatchString(c.Cluster) {
		add(fieldErr("cluster", c.Cluster, "must be 1-64 characters of letters, digits, . _ -"))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Tags)) {
		if tags.IsReserved(k) {
			add(fieldErr("tags", k, "tag key %q is reserved by shoal (set by the %s)", k, cmp.Or(reservedTagSetting[k], "agent")))
		}
	}
	return errors.Join(errs...)
}

// MySQLPort is the port published to the cluster.
func (c *Config) MySQLPort() int { return c.MySQL.PublishedPort() }
