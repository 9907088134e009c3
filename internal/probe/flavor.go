package probe

import (
	"strconv"
	"strings"
)

// Flavor is the server family; it decides the statements the probe uses.
type Flavor string

// Flavors.
const (
	FlavorMariaDB Flavor = "mariadb"
	FlavorMySQL   Flavor = "mysql" // MySQL and its forks (Percona Server, PXC)
)

// serverInfoQuery reads, once per connection, what decides the per-check
// statements. SHOW VARIABLES simply omits variables the server lacks
// (super_read_only on MariaDB, wsrep_on on MySQL without Galera), where
// SELECT @@x would fail.
const serverInfoQuery = "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('version', 'version_comment', 'super_read_only', 'wsrep_on')"

// serverInfo is what the probe knows about the server of one connection.
type serverInfo struct {
	flavor              Flavor
	version             string
	major, minor, patch int
	hasSuperReadOnly    bool
	wsrepOn             bool
}

// parseServerInfo interprets the rows of serverInfoQuery.
func parseServerInfo(vars map[string]string) serverInfo {
	si := serverInfo{version: vars["version"]}
	si.major, si.minor, si.patch = parseVersion(si.version)
	si.flavor = FlavorOf(si.version, vars["version_comment"])
	_, si.hasSuperReadOnly = vars["super_read_only"]
	si.wsrepOn = strings.EqualFold(vars["wsrep_on"], "ON") || vars["wsrep_on"] == "1"
	return si
}

// FlavorOf is the flavor of a server by its @@version and
// @@version_comment.
func FlavorOf(version, comment string) Flavor {
	if strings.Contains(strings.ToLower(version+" "+comment), "mariadb") {
		return FlavorMariaDB
	}
	return FlavorMySQL
}

// parseVersion reads the leading "major.minor.patch" of a version string;
// missing parts are 0.
func parseVersion(v string) (major, minor, patch int) {
	end := strings.IndexFunc(v, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if end >= 0 {
		v = v[:end]
	}
	parts := strings.SplitN(v, ".", 3)
	nums := [3]int{}
	for i, p := range parts {
		nums[i], _ = strconv.Atoi(p)
	}
	return nums[0], nums[1], nums[2]
}

func (si serverInfo) atLeast(major, minor, patch int) bool {
	if si.major != major {
		return si.major > major
	}
	if si.minor != minor {
		return si.minor > minor
	}
	return si.patch >= patch
}

// replicationQuery is the replication status statement for this server:
// every channel on MariaDB (multi-source) and MySQL.
func (si serverInfo) replicationQuery() string {
	switch {
	case si.flavor == FlavorMariaDB:
		return "SHOW ALL SLAVES STATUS"
	case si.atLeast(8, 0, 22):
		return "SHOW REPLICA STATUS"
	default:
		return "SHOW SLAVE STATUS"
	}
}

// checkQuery is the per-check SELECT. Its columns, in order: server_id,
// read_only, then super_read_only if the server has it, then the GTID
// variables (gtidColumns), then the two wsrep status values if wsrep is on.
func (si serverInfo) checkQuery() string {
	var b strings.Builder
	b.WriteString("SELECT @@global.server_id, @@global.read_only")
	if si.hasSuperReadOnly {
		b.WriteString(", @@global.super_read_only")
	}
	for _, c := range si.gtidColumns() {
		b.WriteString(", " + c)
	}
	if si.wsrepOn {
		table := "information_schema.GLOBAL_STATUS"
		if si.flavor == FlavorMySQL {
			table = "performance_schema.global_status"
		}
		for _, v := range []string{"wsrep_local_state", "wsrep_cluster_status"} {
			b.WriteString(", (SELECT VARIABLE_VALUE FROM " + table + " WHERE VARIABLE_NAME = '" + v + "')")
		}
	}
	return b.String()
}
