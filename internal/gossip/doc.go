// Package gossip holds shoal's gossip layer on top of hashicorp/serf and
// memberlist: memberlist's network transport (Transport) with its keyring
// packet check, the failure-confirmation gate (Gate, NewSerfGate), the
// agent's own pings (ownping.go: memberlist pings with this agent's own
// sequence numbers, nothing piggybacked), isolation's reachability rounds
// (Reach, NewSerfReach), the name-conflict vote (Conflicts), the peers file kept
// next to serf's snapshot (Peers), serf's and memberlist's configuration
// from the gossip settings, which this package owns with their defaults,
// limits and timing profiles (SerfConfig, Settings, Tuning, Profiles), the
// bound on memberlist's log lines about what others sent (LogThrottle), and
// the few serf log lines and wire messages the agent reads or writes
// (SerfLogLevel, IsLeaveTimeout, LeaveIntent).
// Package agent wires these parts; nothing here knows about the agent.
//
// # Serf internals: what to re-check when serf or memberlist is upgraded
//
// Everything in shoal that depends on serf's or memberlist's internals,
// rather than their exported API, is in this package or listed here: package
// agent's use of serf's agent package (item 9) and the Serf RPC gate
// (internal/serfrpc, item 10), which speaks serf's wire protocol itself.
// The versions it was
// written against are pinned in go.mod (serf v0.11.0, memberlist v0.7.0,
// go-msgpack/v2 v2.1.5). Before bumping either, check each of these against
// the new source:
//
//  1. The name-conflict log line (conflict.go conflictPrefix): serf reports
//     a conflict over its own name only by logging "[ERR] serf: Node name
//     conflicts with another node at ADDR:PORT. Names must be unique!"
//     (serf/serf.go handleNodeConflict). TestConflictWithRealSerf drives a
//     real serf into a conflict and fails when the line changes.
//  2. The conflict query (conflict.go): serf's internal query name
//     "_serf_conflict" (serf/internal_query.go: "_serf_" + "conflict"), its
//     payload (the contested node name), and the answer: a one-byte message
//     type messageConflictResponseType = 6 (serf/messages.go) followed by a
//     msgpack serf.Member. TestConflictWithRealSerf runs the vote against a
//     real serf, but only its "nobody answers" case.
//  3. serf's own resolution stays off (SerfConfig sets
//     EnableNameConflictResolution = false): check the option still exists
//     and still does only that.
//  4. The leave intent (leavemsg.go): messageLeaveType = 0 and the
//     messageLeave struct {LTime, Node, Prune} (serf/messages.go), sent with
//     memberlist's SendBestEffort.
//  5. The leave timeout log lines (serflog.go serfLeaveTimeouts): "timeout
//     while waiting for graceful leave" and "timeout waiting for leave
//     broadcast" (serf/serf.go Leave).
//  6. The routine log lines SerfLogLevel relevels: "attempting reconnect
//     to " (serf) and "Serf shutdown detected, quitting" (serf's agent).
//  7. The transport (transport.go): memberlist.Transport and
//     NodeAwareTransport (memberlist/transport.go: FinalAdvertiseAddr,
//     WriteTo, WriteToAddress, PacketCh, DialTimeout, DialAddressTimeout,
//     StreamCh, Shutdown; the compile-time assertion catches a new method)
//     and NetTransport's behaviour it copies (memberlist/net_transport.go:
//     the advertise address rules, one TCP and one UDP listener on the same
//     port, "[ERR] memberlist:" log lines).
//  8. The keyring packet check (keycheck.go): memberlist's packet
//     encryption (memberlist/security.go: version byte, 12-byte nonce,
//     AES-GCM, PKCS7 padding for version 0) and label header
//     (memberlist/label.go RemoveLabelHeaderFromPacket, net.go
//     ingestPacket). TestTransportCountsOnlyKeyHolders checks it against a
//     real memberlist.
//  9. serf's agent package (cmd/serf/command/agent), which package agent
//     uses to serve the Serf RPC protocol: Agent.Start sets its serf before
//     it starts the event loop (the hooks' local member relies on it), and
//     NewAgentIPC's signature.
//  10. The Serf RPC gate's copy of serf's IPC protocol
//     (internal/serfrpc/protocol.go, from cmd/serf/command/agent/ipc.go and
//     the ipc_*_stream.go files): the command names, the error strings
//     stock clients match ("Authentication required": the client reads no
//     body after it), the IPC version, the request and response headers and
//     request bodies it decodes, the msgpack handle, the framing of each
//     command (request body, response body, records after the answer) and
//     which commands are read-only. TestProtocolMatchesSerf parses serf's
//     ipc.go from the module cache and fails when any of these but the
//     records and the read-only set changes; check those two by hand.
//  11. Own pings (ownping.go): memberlist's message types (pingMsg 0,
//     ackRespMsg 2, compoundMsg 7, compressMsg 9, hasCrcMsg 12), the ping
//     and ackResp field names (net.go), handlePing answering to
//     SourceAddr:SourcePort, invokeAckHandler ignoring an unknown sequence
//     number (state.go), nextSeqNo counting up from 0 (own numbers have the
//     high bit set), the compound and LZW compression framing (util.go).
//     TestOwnPingLiveStoppedReplayed and TestOwnPingBetweenSerfs ping real
//     memberlists; TestOwnPingSpendsNoBroadcasts checks nothing piggybacks.
package gossip
