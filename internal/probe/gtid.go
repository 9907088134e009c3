package probe

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/shoaldb/shoal/internal/tags"
)

// The GTID position is read by the per-check SELECT (checkQuery), so it
// costs no extra round trip. It is the clock every agent measures replica
// lag against (docs/pool.md): a position that cannot be published comes with
// a note saying why, and freshness then falls back to Seconds_Behind_Master.

// hasGTID reports whether the server has the GTID variables checkQuery
// reads: gtid_current_pos since MariaDB 10.0.2, gtid_mode and gtid_executed
// since MySQL 5.6.5.
func (si serverInfo) hasGTID() bool {
	if si.flavor == FlavorMariaDB {
		// A version may carry the "5.5.5-" prefix MariaDB 10 sends old
		// clients.
		mv := si
		mv.major, mv.minor, mv.patch = parseVersion(strings.TrimPrefix(si.version, "5.5.5-"))
		return mv.atLeast(10, 0, 2)
	}
	return si.atLeast(5, 6, 5)
}

// gtidColumns are checkQuery's GTID columns for this server.
func (si serverInfo) gtidColumns() []string {
	switch {
	case !si.hasGTID():
		return nil
	case si.flavor == FlavorMariaDB:
		return []string{"@@global.gtid_current_pos"}
	default:
		return []string{"@@global.gtid_mode", "@@global.gtid_executed", "@@global.server_uuid"}
	}
}

// noteNoGTIDYet is the note of a server whose GTID position is empty.
const noteNoGTIDYet = "no GTID position (no transaction with a GTID yet)"

// shortValue quotes at most 40 bytes of a server's value for a note.
func shortValue(v string) string {
	if len(v) > 40 {
		return strconv.Quote(v[:40]) + "..."
	}
	return strconv.Quote(v)
}

// positionOf turns domains into a position, or a note when there are more
// than tags.MaxDomains.
func positionOf(ds []tags.Domain) (tags.Position, string) {
	p, err := tags.NewPosition(ds)
	if err != nil {
		seen := map[uint32]bool{}
		for _, d := range ds {
			seen[d.ID] = true
		}
		return tags.Position{}, fmt.Sprintf("%d GTID domains; shoal compares at most %d", len(seen), tags.MaxDomains)
	}
	return p, ""
}

// parseMariaDBPosition reads @@gtid_current_pos, "D-S-N[,D-S-N...]": the
// server id S is dropped, each domain D keeps its sequence number N. The
// note says why the position is unknown (empty when it is known).
func parseMariaDBPosition(v string) (tags.Position, string) {
	v = strings.TrimSpace(v)
	if v == "" {
		return tags.Position{}, noteNoGTIDYet
	}
	var ds []tags.Domain
	for _, part := range strings.Split(v, ",") {
		fields := strings.Split(strings.TrimSpace(part), "-")
		if len(fields) != 3 {
			return tags.Position{}, "unreadable gtid_current_pos " + shortValue(v) + ": want domain-server-seq"
		}
		d, err1 := strconv.ParseUint(fields[0], 10, 32)
		_, err2 := strconv.ParseUint(fields[1], 10, 32)
		n, err3 := strconv.ParseUint(fields[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return tags.Position{}, "unreadable gtid_current_pos " + shortValue(v) + ": want domain-server-seq"
		}
		ds = append(ds, tags.Domain{ID: uint32(d), Seq: n})
	}
	return positionOf(ds)
}

// parseMySQLPosition reads MySQL's GTID state. It is untested against a
// real MySQL server (only MariaDB runs in shoal's tests); the inputs follow
// the MySQL 8 manual. A writable server publishes the highest transaction
// number of its own server_uuid in gtid_executed ("uuid:1-5:7-9,uuid2:1-3",
// MySQL 8.3 tags "uuid:tag:1-5" count too), a read-only replica that of its
// source's UUID (Source_UUID): the writer's transactions. The domain id is
// the CRC-32 of the UUID, lowercased, so that all servers agree on it.
func parseMySQLPosition(mode, executed, serverUUID string, readOnly bool, repl Replication) (tags.Position, string) {
	if !strings.EqualFold(strings.TrimSpace(mode), "ON") {
		return tags.Position{}, "gtid_mode is " + shortValue(mode) + ", not ON: no GTID position"
	}
	uuid := serverUUID
	if readOnly && repl.IsReplica() {
		uuid = repl.SourceUUID
		if uuid == "" {
			return tags.Position{}, "no GTID position (the source's UUID is unknown: the replica never connected)"
		}
	}
	uuid = strings.ToLower(strings.TrimSpace(uuid))
	if uuid == "" {
		return tags.Position{}, "no GTID position (server_uuid is empty)"
	}
	var seq uint64
	found := false
	for _, set := range strings.Split(executed, ",") {
		parts := strings.Split(strings.TrimSpace(set), ":")
		if len(parts) < 2 || !strings.EqualFold(parts[0], uuid) {
			continue
		}
		for _, iv := range parts[1:] {
			lo, hi, isRange := strings.Cut(iv, "-")
			if !isRange {
				hi = lo
			}
			n, err := strconv.ParseUint(hi, 10, 64)
			switch {
			case err == nil:
				seq, found = max(seq, n), true
			case !isRange && isGTIDTag(iv): // MySQL 8.3 tagged GTIDs
			default:
				return tags.Position{}, "unreadable gtid_executed " + shortValue(executed)
			}
		}
	}
	if !found {
		return tags.Position{}, "no GTID position (no transaction of " + shortValue(uuid) + " yet)"
	}
	return positionOf([]tags.Domain{{ID: crc32.ChecksumIEEE([]byte(uuid)), Seq: seq}})
}

// isGTIDTag reports whether s is a MySQL 8.3 GTID tag: a letter or
// underscore, then letters, digits or underscores.
func isGTIDTag(s string) bool {
	for i, r := range s {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}
