// Package haproxy makes a local HAProxy follow the routing pool through its
// runtime API (a `stats socket ... level admin`).
//
// # What it does
//
// Each [Mapping] ties one role (writer or reader) of one cluster to one
// HAProxy backend. A reconcile reads `show servers state` once, maps every
// server of each mapped backend to a pool node of the mapping's cluster, and
// then, only for servers whose state differs from the desired one:
//
//   - a server whose node is in the role: `set server B/S state ready`, and
//     `set server B/S weight N` first when Config.Weight is set;
//   - a server whose node is in the cluster but not in the role: the drain
//     state. "maint" (the default) sends `set server B/S state maint` and then
//     `shutdown sessions server B/S`, so new and existing connections go
//     elsewhere (HAProxy's maint alone keeps established TCP sessions).
//     "drain" sends `set server B/S state drain`: no new connections, existing
//     ones finish.
//
// In steady state a reconcile costs one read. The state compared is the one
// the runtime API sets (HAProxy's forced maint and drain flags), not health
// checks, which this package never touches.
//
// Order: in a writer backend servers are taken out before others are put in
// (never two writers at once); in a reader backend servers are put in before
// others are taken out (never an empty pool on the way).
//
// # Names
//
// Config.Match chooses how servers map to nodes:
//
//   - "name" (the default): the server's name must equal Config.ServerName, a
//     text/template executed over [NameData] (Cluster, Name, Addr, Host,
//     Port), default "{{.Name}}". Functions: lower, upper, replace OLD NEW S,
//     trimPrefix P S, trimSuffix S S (sprig's argument order, so
//     `{{.Name | trimSuffix ".db.example"}}` works).
//   - "addr": the server's address as HAProxy reports it (srv_addr:srv_port,
//     or srv_fqdn:srv_port for a server declared by host name) must equal the
//     node's Addr. IP addresses are compared in canonical form.
//
// Servers that map to no node of the cluster are left alone and reported;
// nodes of the cluster with no server in a mapped backend are reported too.
// Each report is logged once per change.
//
// # Frozen
//
// The sink follows the frozen rule of package sink, which every sink
// shares: when the agent thinks it is cut off from the cluster (frozen), a
// reconcile never takes a server out: it only puts servers in (and sets
// their weight). The withheld commands are reported. In the writer backend
// of a cluster without a writer term this can leave two servers ready until
// the agent is no longer frozen; the writer backend of a cluster that
// follows a term follows the pool exactly (never two). A
// frozen reconcile does not advance the applied generation (package sink).
//
// # Loop
//
// [Sink] runs reconciles in one goroutine: at once after each [Sink.Update]
// (coalesced: updates that arrive during a reconcile cause one more reconcile
// with the newest pool), and every Config.Interval with the last pool, which
// restores the runtime state after HAProxy restarts or reloads (the runtime
// API's state does not survive them). Errors are logged and counted in
// [Sink.Status] (kept by a sink.Recorder); the loop keeps going.
package haproxy
