package agent

import (
	"github.com/shoaldb/shoal/internal/agent/publish"
	"github.com/shoaldb/shoal/internal/view"
)

// Publishing the local tags, health first, is package publish's.

// ReasonCannotPublish is the health reason published when the node's tags
// cannot be published as they should: the node is critical everywhere.
const ReasonCannotPublish = publish.ReasonCannotPublish

// PublishStatus reports whether this agent's tags, its health above all,
// reach the cluster.
func (a *Agent) PublishStatus() view.PublishStatus { return a.pub.Status() }

// publishFailures is the value of shoal_health_publish_failures_total.
func (a *Agent) publishFailures() uint64 { return a.pub.Failures() }

// UpdateTags sets and deletes user tags, persists them when a tags file is
// configured, and gossips the change. It returns the new user tag set.
// shoal's own keys (role, cluster, maint, sh) cannot be changed this way,
// and the result must fit in the user tag budget.
func (a *Agent) UpdateTags(set map[string]string, del []string) (map[string]string, error) {
	return a.pub.Update(set, del)
}

// CheckTagChange reports whether setting set and deleting del on the local
// user tags is allowed: no reserved key, valid keys and values, and the
// result within the user tag budget, so that the health tag always fits
// beside them. Every entry point that changes tags (HTTP API, Serf RPC)
// calls it before changing anything.
func (a *Agent) CheckTagChange(set map[string]string, del []string) error {
	_, err := a.pub.Change(set, del)
	return err
}
