// Package fencing is a db agent's fencing of its own server (docs/
// consensus.md, "Fencing"): when the server is writable while another
// node holds the cluster's writer term and is the writer in this agent's
// pool, for consensus.fence_after without a break, or when this voter
// holds a term and lost its lease (no contact with a raft leader for
// consensus.lease), the Fencer sets the server read-only and kills its
// client connections, once per episode, retrying a failure with backoff;
// a lease fence is undone when contact is back and the terms did not
// move. Its ports (Config) are the node's name, fence_after and the lease,
// the server's Actuator (Fence, Unfence: a *fence.Actuator), the current
// pool, the writer terms (the term book's View), the raft voter's contact
// with a leader, whether a switchover demoted the server, a history
// recorder, a func told when the server went read-only, a clock and a
// logger.
package fencing
