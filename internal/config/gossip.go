package config

import (
	"fmt"

	"github.com/shoaldb/shoal/internal/gossip"
)

// Effective returns the gossip timings in force: the profile's values with
// the gossip settings on top.
func (c *Config) Effective() gossip.Tuning { return gossip.Profiles[c.Profile].Effective(c.Gossip) }

// GossipSettings are the gossip layer's settings (gossip.SerfConfig).
func (c *Config) GossipSettings() (gossip.Settings, error) {
	s := gossip.Settings{
		Node: c.Node, Profile: c.Profile, Tuning: c.Gossip,
		Snapshot: c.Snapshot, Rejoin: c.Rejoin, KeyringFile: c.KeyringFile,
	}
	var err error
	if s.BindAddr, s.BindPort, err = SplitHostPortDefault(c.Bind, DefaultGossipPort); err != nil {
		return s, fmt.Errorf("bind %q: %w", c.Bind, err)
	}
	if c.Advertise != "" {
		if s.AdvertiseAddr, s.AdvertisePort, err = SplitHostPortDefault(c.Advertise, s.BindPort); err != nil {
			return s, fmt.Errorf("advertise %q: %w", c.Advertise, err)
		}
	}
	return s, nil
}
