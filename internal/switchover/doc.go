// Package switchover moves a cluster's writer from one server to another
// on request, out before in (docs/consensus.md, "Switchover"), and keeps
// what every router has applied so that a switchover can wait for them.
//
// A Switcher plays three parts. The coordinator (Switchover) runs on the
// voter asked to switch: it records the switchover's intent in raft
// through the leader, demotes the old writer, waits for the target to
// catch up, has the leader grant the next term, promotes the target and
// re-points the others, then ends the intent. The participant (Answer)
// takes the step addressed to its own server, or the leader's steps
// (begin, grant, end) when it leads. The leader's Resume loop finishes
// what a dead or stuck coordinator left: before the grant it rolls the
// switchover back (the old writer is made writable again), after it the
// switchover is completed (the target promoted, the others re-pointed).
// Its ports are small interfaces: Gossip (serf's queries and members),
// Terms (the term book), Voter (the raft node, when this agent is one),
// Actuator (the local MySQL server), plus funcs for the pool and history,
// and a clock. The applied record (Record) sits between the router and
// its sinks; WaitApplied asks every router what it applied.
package switchover
