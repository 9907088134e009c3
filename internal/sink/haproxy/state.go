package haproxy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// State is a server's administrative state as the runtime API sets it.
type State string

// Administrative states.
const (
	StateReady State = "ready"
	StateDrain State = "drain"
	StateMaint State = "maint"
)

// AdminFlags is HAProxy's srv_admin_state bit field.
type AdminFlags uint

// Admin flags (HAProxy's enum srv_admin).
const (
	AdminForcedMaint   AdminFlags = 0x01 // set server state maint
	AdminInheritMaint  AdminFlags = 0x02 // from a tracked server
	AdminConfigMaint   AdminFlags = 0x04 // "disabled" in the config; stays set after ready
	AdminForcedDrain   AdminFlags = 0x08 // set server state drain
	AdminInheritDrain  AdminFlags = 0x10 // from a tracked server
	AdminResolverMaint AdminFlags = 0x20 // address resolution failed

	adminMaintMask = AdminForcedMaint | AdminInheritMaint | AdminResolverMaint
	adminDrainMask = AdminForcedDrain | AdminInheritDrain
)

// OpState is HAProxy's srv_op_state, the health-check view.
type OpState int

// Operational states.
const (
	OpStopped  OpState = 0
	OpStarting OpState = 1
	OpRunning  OpState = 2
	OpStopping OpState = 3
)

func (o OpState) String() string {
	switch o {
	case OpStopped:
		return "stopped"
	case OpStarting:
		return "starting"
	case OpRunning:
		return "running"
	case OpStopping:
		return "stopping"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Server is one row of `show servers state`.
type Server struct {
	Backend string
	Name    string
	ID      int
	Addr    string // srv_addr, an IP address
	Port    int    // srv_port
	FQDN    string // srv_fqdn, "" when the server was declared by address
	Op      OpState
	Admin   AdminFlags
	Weight  int // srv_uweight, the current weight
	IWeight int // srv_iweight, the weight from the config
}

// Forced is the state the runtime API controls: maint if forced into
// maintenance, else drain if forced into drain, else ready.
func (s Server) Forced() State {
	switch {
	case s.Admin&AdminForcedMaint != 0:
		return StateMaint
	case s.Admin&AdminForcedDrain != 0:
		return StateDrain
	}
	return StateReady
}

// Effective is the state HAProxy applies, inherited and resolver flags
// included.
func (s Server) Effective() State {
	switch {
	case s.Admin&adminMaintMask != 0:
		return StateMaint
	case s.Admin&adminDrainMask != 0:
		return StateDrain
	}
	return StateReady
}

// serversStateColumns are the columns ParseServersState needs.
var serversStateColumns = []string{
	"be_name", "srv_id", "srv_name", "srv_addr", "srv_op_state",
	"srv_admin_state", "srv_uweight", "srv_iweight", "srv_fqdn", "srv_port",
}

// ParseServersState parses the answer to `show servers state` (format
// version 1, HAProxy 1.8 to 3.x). Columns are found by the header's names.
// An answer that is not a state dump (such as "Permission denied.") is an
// error quoting its first line.
func ParseServersState(out string) ([]Server, error) {
	lines := strings.Split(out, "\n")
	if strings.TrimSpace(lines[0]) != "1" {
		return nil, fmt.Errorf("not a servers state dump: %q", firstLine(out))
	}
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "# ") {
		return nil, errors.New("servers state dump has no header line")
	}
	header := strings.Fields(strings.TrimPrefix(lines[1], "#"))
	col := make(map[string]int, len(header))
	for i, h := range header {
		col[h] = i
	}
	for _, c := range serversStateColumns {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("servers state header has no column %s", c)
		}
	}
	var servers []Server
	for n, line := range lines[2:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != len(header) {
			return nil, fmt.Errorf("servers state line %d: %d fields, header has %d", n+3, len(f), len(header))
		}
		s, err := parseServerRow(f, col)
		if err != nil {
			return nil, fmt.Errorf("servers state line %d: %w", n+3, err)
		}
		servers = append(servers, s)
	}
	return servers, nil
}

func parseServerRow(f []string, col map[string]int) (Server, error) {
	var errs []error
	num := func(name string) int {
		v, err := strconv.Atoi(f[col[name]])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: not a number", name, f[col[name]]))
		}
		return v
	}
	s := Server{
		Backend: f[col["be_name"]],
		Name:    f[col["srv_name"]],
		ID:      num("srv_id"),
		Addr:    f[col["srv_addr"]],
		Port:    num("srv_port"),
		FQDN:    f[col["srv_fqdn"]],
		Op:      OpState(num("srv_op_state")),
		Admin:   AdminFlags(num("srv_admin_state")),
		Weight:  num("srv_uweight"),
		IWeight: num("srv_iweight"),
	}
	if s.FQDN == "-" {
		s.FQDN = ""
	}
	return s, errors.Join(errs...)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	const max = 200
	if len(line) > max {
		line = line[:max] + "..."
	}
	return line
}
