package probe

import (
	"hash/crc32"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/tags"
)

func position(t *testing.T, ds ...tags.Domain) tags.Position {
	t.Helper()
	p, err := tags.NewPosition(ds)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParseMariaDBPosition: gtid_current_pos loses its server ids; empty,
// too many domains and garbage give no position and a note saying why.
func TestParseMariaDBPosition(t *testing.T) {
	tests := []struct {
		in   string
		want tags.Position
		note string // substring; "" = known
	}{
		{"0-1-5", position(t, tags.Domain{ID: 0, Seq: 5}), ""},
		{"1-2-7,0-1-5", position(t, tags.Domain{ID: 0, Seq: 5}, tags.Domain{ID: 1, Seq: 7}), ""},
		{"0-1-5,\n1-3-18446744073709551615", position(t, tags.Domain{ID: 0, Seq: 5}, tags.Domain{ID: 1, Seq: 18446744073709551615}), ""},
		{"", tags.Position{}, "no GTID position (no transaction with a GTID yet)"},
		{"  ", tags.Position{}, "no transaction with a GTID yet"},
		{"0-1-5,1-1-6,2-1-7", tags.Position{}, "3 GTID domains; shoal compares at most 2"},
		{"0-1", tags.Position{}, `unreadable gtid_current_pos "0-1"`},
		{"0-1-x", tags.Position{}, "unreadable"},
		{"0-1-5,", tags.Position{}, "unreadable"},
		{"4294967296-1-5", tags.Position{}, "unreadable"},
		{"-1-1-5", tags.Position{}, "unreadable"},
		{"0-1-18446744073709551616", tags.Position{}, "unreadable"},
		{strings.Repeat("\x00garbage", 20), tags.Position{}, `"\x00garbage`},
	}
	for _, tc := range tests {
		got, note := parseMariaDBPosition(tc.in)
		if got != tc.want || (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
			t.Errorf("parseMariaDBPosition(%q) = %v, %q; want %v, note with %q", tc.in, got, note, tc.want, tc.note)
		}
		if len(note) > 120 {
			t.Errorf("parseMariaDBPosition(%q): note of %d bytes: %q", tc.in, len(note), note)
		}
	}
}

// TestParseMySQLPosition: a writable server counts its own UUID's
// transactions, a read-only replica its source's; anything else gives a
// note. Only table inputs: no MySQL server runs in these tests.
func TestParseMySQLPosition(t *testing.T) {
	const (
		self = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
		src  = "8a94f357-aab4-11df-86ab-c80aa9429562"
	)
	selfID := crc32.ChecksumIEEE([]byte(strings.ToLower(self)))
	srcID := crc32.ChecksumIEEE([]byte(src))
	replica := Replication{Known: true, Channels: 1, SourceUUID: strings.ToUpper(src)}
	exec := strings.ToLower(self) + ":1-5:7-9,\n" + src + ":1-3:5"
	tests := []struct {
		name                 string
		mode, exec, selfUUID string
		readOnly             bool
		repl                 Replication
		want                 tags.Position
		note                 string
	}{
		{"writer", "ON", exec, self, false, Replication{Known: true}, position(t, tags.Domain{ID: selfID, Seq: 9}), ""},
		{"replica", "ON", exec, self, true, replica, position(t, tags.Domain{ID: srcID, Seq: 5}), ""},
		{"writable replica counts its own", "ON", exec, self, false, replica, position(t, tags.Domain{ID: selfID, Seq: 9}), ""},
		{"tagged", "ON", src + ":1-3:mytag:4-8", self, true, replica, position(t, tags.Domain{ID: srcID, Seq: 8}), ""},
		{"gtid off", "OFF", "", self, false, Replication{}, tags.Position{}, `gtid_mode is "OFF", not ON`},
		{"transitional", "ON_PERMISSIVE", exec, self, false, Replication{}, tags.Position{}, "not ON"},
		{"empty", "ON", "", self, false, Replication{}, tags.Position{}, "no transaction of"},
		{"never connected", "ON", exec, self, true, Replication{Known: true, Channels: 1}, tags.Position{}, "source's UUID is unknown"},
		{"garbage interval", "ON", src + ":1-x", self, true, replica, tags.Position{}, "unreadable gtid_executed"},
		{"garbage", "ON", "\x00\xff:::,,", self, false, Replication{}, tags.Position{}, "no transaction of"},
		{"no uuid", "ON", exec, "", false, Replication{}, tags.Position{}, "server_uuid is empty"},
	}
	for _, tc := range tests {
		got, note := parseMySQLPosition(tc.mode, tc.exec, tc.selfUUID, tc.readOnly, tc.repl)
		if got != tc.want || (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
			t.Errorf("%s: got %v, %q; want %v, note with %q", tc.name, got, note, tc.want, tc.note)
		}
	}
}

// TestReadPositionWithoutGTID: a server too old for GTIDs says so.
func TestReadPositionWithoutGTID(t *testing.T) {
	f := Facts{gtid: [3]string{"0-1-5"}}
	readPosition(parseServerInfo(map[string]string{"version": "5.5.68-MariaDB"}), &f)
	if f.Position.Known() || !strings.Contains(f.PositionNote, "no GTID support") || f.gtid != [3]string{} {
		t.Fatalf("facts %+v", f)
	}
	f = Facts{gtid: [3]string{"0-1-5"}}
	readPosition(parseServerInfo(map[string]string{"version": "10.11.6-MariaDB"}), &f)
	if f.Position != position(t, tags.Domain{Seq: 5}) || f.PositionNote != "" {
		t.Fatalf("facts %+v", f)
	}
}
