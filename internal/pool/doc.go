// Package pool computes the routing pool: which database servers take writes,
// which take reads, and why every other one is out.
//
// [Compute] is a pure function of the member list and a [Policy]: every agent
// that sees the same members computes the same pool, sorted by name.
// [ComputeFresh] adds replica freshness from a [History] of GTID positions,
// which each agent records with its own receipt times, so agents agree on it
// up to the gossip delay. The stateful helpers take injected time and never
// read the clock: [History], [IsolationDetector], which tells an agent when
// it, rather than the cluster, is probably cut off, and [Damper], which holds
// back a flapping reader. [Diff] turns
// two pools into the changes that drive sinks, hooks and history.
//
// # Rules
//
// Only members tagged role=db are considered; app agents, members without a
// role and stock serf agents are ignored and not listed. Each db member lands
// in the cluster named by its cluster tag ("default" when absent) and appears
// there exactly once: as the writer, as a reader, or out with a [Reason]. With
// Policy.WriterServesReads the writer is also listed as a reader, and so it is
// with reason fallback in place of stale readers (see Read fallback).
//
// A member is out, whatever else its tags say, if its name or tags break the
// rules for what other machines may send (Member.Bad, set by package member
// where the member enters shoal's view; its name and tags are then escaped
// display forms, so its cluster may be one no valid member can name), it is
// in maintenance, its agent is leaving, left or failed, its health tag is
// missing or undecodable, its probe says critical, or it is a Galera node not
// synced in the primary component. These hard reasons are never overridden.
//
// Writer, in a cluster that requires a writer term: one whose db members
// advertise a voter tag (tags.Voter; consensus grants its terms) and that
// is not Galera. The writer is the term's holder (the member with the
// term's writer name and address, [TermView]) while it is writable:
// passing, or in warning by the floor, whatever else is writable. Every
// other writable node is out, with reason conflict while the holder is the
// writer and no-term while it is not (holder read-only or gone, no term
// known, or this agent cannot verify terms); then the cluster has no
// writer and Cluster.AskTerm says a newer term may exist. The previous
// writer plays no part: every agent that knows the same term routes to
// the same writer.
//
// Writer, in a cluster that requires no term: a passing node with
// read_only=OFF. Two or more such candidates are a conflict: the previous
// writer stays if it is still a candidate, otherwise there is no writer;
// the others are out with reason conflict and the cluster's Conflict lists
// every candidate. Galera is the exception: when all candidates are synced
// Galera nodes (which are all writable by design) the first by name is the
// writer and the others serve reads. The previous writer plays no part:
// it is each agent's own history, and only a choice made from the gossiped
// members alone is the same on every agent.
//
// Reader: a passing node with read_only=ON whose replication IO and SQL
// threads run and whose lag is at most Policy.MaxLag (Galera nodes: passing
// and synced is enough). The lag is measured against the writer when both
// publish a GTID position ([ComputeFresh] with a [History]): the time since
// this agent saw the writer pass the replica's position, by this agent's own
// clock, whatever the replica's Seconds_Behind_Master and IO thread say (a
// silently cut link leaves them at 0 and Yes for slave_net_timeout); a
// replica over max_lag is out with reason stale. A replica whose position
// covers the writer's has no lag, so an idle cluster is never stale. Without
// GTID positions (no GTID, more than tags.MaxDomains domains, an older agent,
// no writer) the replica's Seconds_Behind_Master is the lag: known and at
// most max_lag, or out with reason lag. In a cluster that follows writer
// terms, while the term holder is read-only (fenced, demoted by a
// switchover) and nothing else is the writer, replicas are measured against
// the holder instead: it has every write the fleet took.
//
// Wrong source: while the cluster has a writer with a known server_id, a
// read-only replica whose published source server_id is known and differs
// from it is out with reason wrong-source, for example after someone
// else's failover re-pointed it, or when it replicates from another replica
// (chained replication is not followed). It serves data that is not the
// writer's, possibly never will be, so the reason is hard: the floor never
// keeps it. A source of 0 (unknown, an older agent) keeps the rules above.
//
// Floor: soft reasons (warning, replication-stopped, lag, stale) never drain a role
// below its minimum. If fewer than Policy.MinReaders readers remain, the
// least-bad soft-out read-only nodes are kept in with reason floor: known lag
// before unknown, least lag first, then by name. The writer floor is one: when
// no node is a passing writer candidate, a writable node in warning state is
// kept as writer with reason floor (a degraded writer beats no writes; the
// conflict rule still applies among such nodes). Nothing else is floored: a
// lagging writer is not a thing and a read-only server is not a writer.
//
// Read fallback: Policy.ReadFallback says what the reader floor does with a
// stale candidate (reason lag, stale or replication-stopped; a warning is
// not stale). stale-reader (and the zero value) keeps it as above. none never
// keeps it. writer (DefaultSettings) never keeps it while the cluster has
// a passing writer (not one kept by the floor): if the floor still lacks
// readers that only stale candidates could give, the writer is listed among
// the readers with reason fallback (unless it already serves reads), and
// every stale candidate is out. Without a writer, the read-only term holder
// that freshness was measured against takes the writer's place. Otherwise,
// without a passing writer, it acts as stale-reader.
//
// # Reasons
//
// Reasons are a closed set, shown to operators; Node.Detail adds specifics.
//
//	reason               in/out  meaning
//	floor                in      kept in despite a soft reason so the role is not drained below its minimum
//	fallback             in      the writer (or the read-only term holder), listed among the readers instead of stale ones the floor would keep (read_fallback writer)
//	bad-name             out     the gossiped name breaks the name rules (package member); Detail says which; Name is escaped
//	bad-tags             out     the gossiped tags break the tag rules (package member); Detail says which
//	maintenance          out     the node has the maint tag (shoal maint); Detail is the operator's reason
//	leaving              out     the agent is leaving the gossip cluster gracefully
//	left                 out     the agent left the gossip cluster gracefully
//	agent-failed         out     serf declared the agent failed (unreachable); its last health is stale
//	no-health            out     db agent publishing no health tag yet (not probed, or an old agent)
//	bad-health-tag       out     the health tag could not be decoded (unknown version, corrupt); Detail has the error
//	critical             out     the local probe says critical (down, unreachable, errors); Detail is its reason code
//	galera-not-synced    out     Galera node not Synced or not in the primary component (or critical from that, until it rises)
//	warning              out     the probe says warning (soft)
//	replication-stopped  out     read-only, but replication is not configured or a thread is stopped (soft)
//	lag                  out     Seconds_Behind_Master above max_lag or unknown, when GTID positions are not known (soft)
//	stale                out     the writer passed the replica's GTID position more than max_lag ago, whatever the replica reports (soft)
//	wrong-source         out     read-only replica whose source server_id is known and is not the writer's (Detail names both)
//	conflict             out     writable while another node of the cluster is writable too (with a term: while the holder is the writer)
//	no-term              out     writable in a cluster that requires a writer term, whose holder is not the writer (none known, holder read-only or gone)
//	damped               out     flapping (health removals only): re-entry held by the Damper until Node.Until
//
// A node that is in normally has the empty reason.
package pool
