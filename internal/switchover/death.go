package switchover

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/tags"
)

// verdict is what the witnesses say of a term's writer.
type verdict struct {
	Dead bool
	// Fast: the writer's own agent reports its server down, so that no
	// lease need pass (the agent keeps a returning server read-only).
	// Otherwise the agent is gone too, and the failover waits until the
	// writer's lease has passed: by then it fenced itself, if it lives.
	Fast bool
	// Gone: the writer's agent is not alive in the gossip (failed, left,
	// no member), dead or not; the lease of the slow path counts from the
	// first time the leader saw it gone.
	Gone bool
	Why  string // why dead, or why not
}

// downReasons are the probe reasons that say the server process is gone:
// nothing listens, the connection was cut, or it is shutting down. A
// timeout (a hung or overloaded server), refused logins or too many
// connections are not death: the server runs.
var downReasons = map[string]bool{string(probe.ReasonRefused): true, string(probe.ReasonConnLost): true, string(probe.ReasonShutdown): true}

// writerDeath judges the writer of term t from the members (the pool's
// view): dead only when more than one witness says so. The writer's
// agent is one (it reports its server down, or it is itself gone from the
// gossip); the cluster's replicas are the others: each that the gossip
// shows must have lost the writer (its IO thread not running, or running
// but receiving nothing, not even heartbeats: a frozen host or a cut link,
// which the IO thread itself notices only after slave_net_timeout), and
// there must be at least one. A replica still receiving from the writer, a
// slow or warning writer, or a writer whose state is unknown is not dead.
func writerDeath(t pool.Term, members []pool.Member) verdict {
	var holder *pool.Member
	var replicas []pool.Member
	for i, m := range members {
		if m.Tags[tags.KeyRole] != tags.RoleDB || tags.Cluster(m.Tags) != t.Cluster {
			continue
		}
		if m.Name == t.Writer {
			holder = &members[i]
			continue
		}
		if m.Status == pool.StatusAlive && m.Health != nil && m.Health.Replica {
			replicas = append(replicas, m)
		}
	}
	var agent string
	fast := false
	switch {
	case holder == nil:
		agent = "its agent is no member"
	case holder.Status != pool.StatusAlive:
		agent = "its agent is " + holder.Status.String()
	case holder.Health == nil:
		return verdict{Why: "its agent publishes no health"}
	case holder.Health.State == tags.Critical && downReasons[holder.Health.Reason]:
		agent, fast = "its agent reports mysqld down ("+holder.Health.Reason+")", true
	default:
		return verdict{Why: fmt.Sprintf("its agent reports it %s", stateText(holder.Health))}
	}
	gone := !fast
	var serverID uint32
	if holder != nil && holder.Health != nil {
		serverID = holder.Health.ServerID
	}
	if len(replicas) == 0 {
		return verdict{Gone: gone, Why: agent + ", but no replica is there to confirm it"}
	}
	var lost []string
	for _, r := range replicas {
		if r.Health.SourceServerID != 0 && serverID != 0 && r.Health.SourceServerID != serverID {
			continue // replicates from another server: no witness
		}
		if r.Health.IORunning && !r.Health.NotReceiving {
			return verdict{Gone: gone, Why: fmt.Sprintf("%s, but replica %s still receives from it", agent, r.Name)}
		}
		if r.Health.IORunning {
			lost = append(lost, r.Name+": receives nothing")
		} else {
			lost = append(lost, r.Name)
		}
	}
	if len(lost) == 0 {
		return verdict{Gone: gone, Why: agent + ", but no replica of it is there to confirm it"}
	}
	slices.Sort(lost)
	return verdict{Dead: true, Fast: fast, Gone: gone, Why: fmt.Sprintf("%s and its replicas lost it (%s)", agent, strings.Join(lost, ", "))}
}

func stateText(h *tags.Health) string {
	if h.Reason != "" && h.Reason != string(probe.ReasonOK) {
		return h.State.String() + " (" + h.Reason + ")"
	}
	return h.State.String()
}
