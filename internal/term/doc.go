// Package term is the book of the writer terms an agent knows (docs/
// consensus.md, "Publishing"): the highest verified term of each cluster,
// the raft groups the voters' tags name (Groups), the terms file that lets
// a restarted agent route at once, and the loop that learns terms from the
// raft leader's broadcasts, answers and asks the voters' queries, and
// signs and saves the terms this voter's raft applies (handed over by a
// consensus.TermQueue, so raft's apply goroutine does no I/O). Its ports
// (Config) are the gossip (Gossip: members, user events, queries), the
// local node's name, the terms file's path, the current pool (which
// clusters to ask about), the raft voter's state machine when this agent
// is one (Voter), a Changed func for the router, an Other func for the
// internal queries the book does not own, a clock and a logger.
package term
