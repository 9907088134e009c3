package fence

import "strings"

// Conn is one row of the server's process list.
type Conn struct {
	ID      uint64
	User    string
	Command string
}

// systemUsers are the process-list users of the server's own threads.
var systemUsers = map[string]bool{"system user": true, "event_scheduler": true}

// keptCommands are the process-list commands of threads fencing leaves
// alone: the server's daemons, the replica threads (MariaDB names them),
// and the binlog dumps that feed this server's replicas (they write
// nothing here).
var keptCommands = map[string]bool{
	"daemon": true, "binlog dump": true, "binlog dump gtid": true,
	"slave_io": true, "slave_sql": true, "slave_worker": true,
}

// Keep reports whether fencing leaves the connection c alone, and why:
// the server's own threads, replication, and the connections of self,
// the fencing account (the probe's, which writes no data). Every other
// connection is killed.
func Keep(c Conn, self string) (bool, string) {
	switch {
	case systemUsers[strings.ToLower(c.User)]:
		return true, "system thread"
	case keptCommands[strings.ToLower(c.Command)]:
		return true, "replication or daemon"
	case c.User == self && self != "":
		return true, "fencing account"
	}
	return false, ""
}
