package haproxy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/pool"
)

// hx builds HAProxy servers from "backend/server=state" items, where state
// is ready, drain or maint and may be followed by ",wN" for the weight.
// Servers dbN listen on 127.0.0.1:2100N.
func hx(items ...string) []Server {
	var out []Server
	for i, it := range items {
		ref, st, _ := strings.Cut(it, "=")
		be, name, _ := strings.Cut(ref, "/")
		st, w, _ := strings.Cut(st, ",w")
		s := Server{Backend: be, Name: name, ID: i + 1, Addr: "127.0.0.1", Op: OpRunning, Weight: 1, IWeight: 1}
		fmt.Sscanf(name, "db%d", &s.Port)
		s.Port += 21000
		if w != "" {
			fmt.Sscan(w, &s.Weight)
		}
		switch State(st) {
		case StateMaint:
			s.Admin = AdminForcedMaint
		case StateDrain:
			s.Admin = AdminForcedDrain
		}
		out = append(out, s)
	}
	return out
}

// cluster builds a one-cluster pool "c1"; names in readers may also be the
// writer (writer serves reads). Nodes dbN have address 127.0.0.1:2100N.
func cluster(writer string, readers, out []string) *pool.Pool {
	node := func(name string) pool.Node {
		var n int
		fmt.Sscanf(name, "db%d", &n)
		return pool.Node{Name: name, Addr: fmt.Sprintf("127.0.0.1:%d", 21000+n)}
	}
	c := pool.Cluster{Name: "c1"}
	if writer != "" {
		c.Writers = []pool.Node{node(writer)}
	}
	for _, r := range readers {
		c.Readers = append(c.Readers, node(r))
	}
	for _, o := range out {
		n := node(o)
		n.Reason = "test"
		c.Out = append(c.Out, n)
	}
	return &pool.Pool{Clusters: []pool.Cluster{c}}
}

func testConfig(mod ...func(*Config)) Config {
	c := Config{
		Address: "unix:/run/haproxy/admin.sock",
		Backends: []Mapping{
			{Cluster: "c1", Role: RoleWriter, Backend: "db_rw"},
			{Cluster: "c1", Role: RoleReader, Backend: "db_ro"},
		},
	}
	for _, m := range mod {
		m(&c)
	}
	return c
}

// maint is the pair of commands that takes a server out with drain_state
// maint.
func maint(ref string) []string {
	return []string{"set server " + ref + " state maint", "shutdown sessions server " + ref}
}

func cmds(groups ...any) []string {
	var out []string
	for _, g := range groups {
		switch g := g.(type) {
		case string:
			out = append(out, g)
		case []string:
			out = append(out, g...)
		}
	}
	return out
}

func TestPlan(t *testing.T) {
	allReady := hx("db_rw/db1=ready", "db_rw/db2=ready", "db_rw/db3=ready",
		"db_ro/db1=ready", "db_ro/db2=ready", "db_ro/db3=ready")
	steady := hx("db_rw/db1=ready", "db_rw/db2=maint", "db_rw/db3=maint",
		"db_ro/db1=maint", "db_ro/db2=ready", "db_ro/db3=ready")
	tests := []struct {
		name     string
		cfg      Config
		servers  []Server
		pool     *pool.Pool
		frozen   bool
		commands []string
		held     []string
		unmapped []string
		missing  []string
		naming   []string
		errors   []string
	}{
		{
			name:    "first apply",
			cfg:     testConfig(),
			servers: allReady,
			pool:    cluster("db1", []string{"db2", "db3"}, nil),
			commands: cmds(maint("db_rw/db2"), maint("db_rw/db3"),
				maint("db_ro/db1")),
		},
		{
			name:    "steady state sends nothing",
			cfg:     testConfig(),
			servers: steady,
			pool:    cluster("db1", []string{"db2", "db3"}, nil),
		},
		{
			name:    "reader goes out",
			cfg:     testConfig(),
			servers: steady,
			pool:    cluster("db1", []string{"db2"}, []string{"db3"}),
			// db_rw/db3 is already in maint.
			commands: maint("db_ro/db3"),
		},
		{
			// pool.read_fallback writer: the writer is among the readers
			// (reason fallback) in place of stale ones, so its server in
			// the read backend is put in before the stale ones go out.
			name:    "writer reads in place of stale readers",
			cfg:     testConfig(),
			servers: steady,
			pool:    cluster("db1", []string{"db1"}, []string{"db2", "db3"}),
			commands: cmds("set server db_ro/db1 state ready",
				maint("db_ro/db2"), maint("db_ro/db3")),
		},
		{
			name:    "failover: writer backend takes out before putting in",
			cfg:     testConfig(),
			servers: steady,
			pool:    cluster("db2", []string{"db3"}, []string{"db1"}),
			commands: cmds(maint("db_rw/db1"), "set server db_rw/db2 state ready",
				maint("db_ro/db2")),
		},
		{
			name:    "reader backend puts in before taking out",
			cfg:     testConfig(),
			servers: steady,
			pool:    cluster("db2", []string{"db1", "db3"}, nil),
			commands: cmds(maint("db_rw/db1"), "set server db_rw/db2 state ready",
				"set server db_ro/db1 state ready", maint("db_ro/db2")),
		},
		{
			name:     "writer serves reads",
			cfg:      testConfig(),
			servers:  steady,
			pool:     cluster("db1", []string{"db1", "db2", "db3"}, nil),
			commands: cmds("set server db_ro/db1 state ready"),
		},
		{
			name:     "frozen: out is held",
			cfg:      testConfig(),
			servers:  steady,
			pool:     cluster("db1", []string{"db3"}, []string{"db2"}),
			frozen:   true,
			held:     maint("db_ro/db2"),
			commands: nil,
		},
		{
			name:     "frozen: in is sent, out is held",
			cfg:      testConfig(),
			servers:  hx("db_rw/db1=ready", "db_rw/db2=maint", "db_rw/db3=maint", "db_ro/db1=maint", "db_ro/db2=ready", "db_ro/db3=maint"),
			pool:     cluster("db2", []string{"db3"}, []string{"db1"}),
			frozen:   true,
			commands: cmds("set server db_rw/db2 state ready", "set server db_ro/db3 state ready"),
			held:     cmds(maint("db_rw/db1"), maint("db_ro/db2")),
		},
		{
			// Issue 26: a frozen router that learns a new writer term
			// must not keep the old writer ready next to the new holder.
			name:     "frozen, a writer term: the writer backend follows the term, readers still held",
			cfg:      testConfig(),
			servers:  hx("db_rw/db1=ready", "db_rw/db2=maint", "db_rw/db3=maint", "db_ro/db1=maint", "db_ro/db2=ready", "db_ro/db3=maint"),
			pool:     withTerm(cluster("db2", []string{"db3"}, []string{"db1"}), 2, "db2"),
			frozen:   true,
			commands: cmds(maint("db_rw/db1"), "set server db_rw/db2 state ready", "set server db_ro/db3 state ready"),
			held:     maint("db_ro/db2"),
		},
		{
			// A frozen router still takes out a reader that reported
			// itself stale (or critical, lagging, ...): what arrived is
			// true. One out for a reason of this agent's view is held.
			name:    "frozen: a reported removal is sent, others held",
			cfg:     testConfig(),
			servers: steady,
			pool: reasons(cluster("db1", []string{"db1"}, []string{"db2", "db3"}),
				map[string]pool.Reason{"db2": pool.ReasonStale, "db3": pool.ReasonAgentFailed}),
			frozen:   true,
			commands: cmds("set server db_ro/db1 state ready", maint("db_ro/db2")),
			held:     maint("db_ro/db3"),
		},
		{
			name:     "frozen: no change to a drained server",
			cfg:      testConfig(func(c *Config) { c.DrainState = StateDrain }),
			servers:  hx("db_rw/db1=ready", "db_rw/db2=maint", "db_rw/db3=drain", "db_ro/db1=drain", "db_ro/db2=ready", "db_ro/db3=ready"),
			pool:     cluster("db1", []string{"db2", "db3"}, nil),
			frozen:   true,
			held:     []string{"set server db_rw/db2 state drain"},
			commands: nil,
		},
		{
			name:    "drain state drain",
			cfg:     testConfig(func(c *Config) { c.DrainState = StateDrain }),
			servers: steady,
			pool:    cluster("db1", []string{"db2", "db3"}, nil),
			commands: cmds("set server db_rw/db2 state drain", "set server db_rw/db3 state drain",
				"set server db_ro/db1 state drain"),
		},
		{
			name:     "maint replaces drain",
			cfg:      testConfig(),
			servers:  hx("db_rw/db1=ready", "db_rw/db2=drain", "db_rw/db3=maint", "db_ro/db1=maint", "db_ro/db2=ready", "db_ro/db3=ready"),
			pool:     cluster("db1", []string{"db2", "db3"}, nil),
			commands: maint("db_rw/db2"),
		},
		{
			name:     "weight is set before ready, only in the pool",
			cfg:      testConfig(func(c *Config) { c.Weight = 100 }),
			servers:  hx("db_rw/db1=ready,w100", "db_rw/db2=maint", "db_rw/db3=maint", "db_ro/db1=maint", "db_ro/db2=ready,w100", "db_ro/db3=maint,w1"),
			pool:     cluster("db1", []string{"db2", "db3"}, nil),
			commands: cmds("set server db_ro/db3 weight 100", "set server db_ro/db3 state ready"),
		},
		{
			name:     "unmapped servers and missing nodes",
			cfg:      testConfig(),
			servers:  hx("db_rw/db1=ready", "db_rw/db2=maint", "db_rw/db9=ready", "db_ro/db1=maint", "db_ro/db2=ready"),
			pool:     cluster("db1", []string{"db2", "db3"}, []string{"db4"}),
			unmapped: []string{"db_rw/db9"},
			missing:  []string{"db_rw: c1/db3", "db_rw: c1/db4", "db_ro: c1/db3", "db_ro: c1/db4"},
		},
		{
			name:     "no pool: everything left alone",
			cfg:      testConfig(),
			servers:  allReady,
			pool:     nil,
			unmapped: []string{"db_rw/db1", "db_rw/db2", "db_rw/db3", "db_ro/db1", "db_ro/db2", "db_ro/db3"},
		},
		{
			name:     "server of another cluster is unmapped",
			cfg:      testConfig(func(c *Config) { c.Backends[1].Cluster = "c2" }),
			servers:  steady,
			pool:     cluster("db1", []string{"db2", "db3"}, nil),
			unmapped: []string{"db_ro/db1", "db_ro/db2", "db_ro/db3"},
		},
		{
			name:     "backend missing in haproxy",
			cfg:      testConfig(),
			servers:  hx("db_rw/db1=ready", "db_rw/db2=maint", "db_rw/db3=ready"),
			pool:     cluster("db1", []string{"db2", "db3"}, nil),
			commands: maint("db_rw/db3"),
			errors:   []string{"backend db_ro: not in haproxy or has no servers"},
		},
		{
			name:     "template: two nodes, one server name",
			cfg:      testConfig(func(c *Config) { c.ServerName = `{{if eq .Name "db3"}}db2{{else}}{{.Name}}{{end}}` }),
			servers:  allReady,
			pool:     cluster("db1", []string{"db2", "db3"}, nil),
			commands: cmds(maint("db_ro/db1")),
			unmapped: []string{"db_rw/db3", "db_ro/db3"},
			naming: []string{"backend db_rw: nodes db2 and db3 both map to server db2; left alone",
				"backend db_ro: nodes db2 and db3 both map to server db2; left alone"},
		},
		{
			name:     "template: invalid server name",
			cfg:      testConfig(func(c *Config) { c.ServerName = `{{.Name}}{{if eq .Name "db3"}} x{{end}}` }),
			servers:  steady,
			pool:     cluster("db1", []string{"db2"}, []string{"db3"}),
			unmapped: []string{"db_rw/db3", "db_ro/db3"},
			naming: []string{`backend db_rw: node db3: server_name "db3 x": invalid character ' ' (HAProxy names use letters, digits, '-', '_', '.', ':')`,
				`backend db_ro: node db3: server_name "db3 x": invalid character ' ' (HAProxy names use letters, digits, '-', '_', '.', ':')`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, err := NewPlanner(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			plan := pl.Plan(tt.servers, tt.pool, tt.frozen)
			check := func(what string, got, want []string) {
				t.Helper()
				if len(got) == 0 && len(want) == 0 {
					return
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\ngot  %q\nwant %q", what, got, want)
				}
			}
			check("commands", stringsOf(plan.Commands), tt.commands)
			check("held", stringsOf(plan.Held), tt.held)
			check("unmapped", stringsOf(plan.Unmapped), tt.unmapped)
			check("missing", stringsOf(plan.Missing), tt.missing)
			check("naming", plan.Naming, tt.naming)
			check("errors", plan.Errors, tt.errors)
		})
	}
}

func TestPlanCommandDetails(t *testing.T) {
	pl, err := NewPlanner(testConfig(func(c *Config) { c.Weight = 5 }))
	if err != nil {
		t.Fatal(err)
	}
	plan := pl.Plan(hx("db_rw/db1=drain,w2", "db_ro/db1=ready"), cluster("db1", nil, nil), false)
	want := []Command{
		{Backend: "db_rw", Server: "db1", Node: "db1", Action: ActionWeight, Value: "5", From: "2"},
		{Backend: "db_rw", Server: "db1", Node: "db1", Action: ActionState, Value: "ready", From: "drain"},
		{Backend: "db_ro", Server: "db1", Node: "db1", Action: ActionState, Value: "maint", From: "ready"},
		{Backend: "db_ro", Server: "db1", Node: "db1", Action: ActionShutdown},
	}
	if !reflect.DeepEqual(plan.Commands, want) {
		t.Errorf("got\n%+v\nwant\n%+v", plan.Commands, want)
	}
}

func TestPlanTemplate(t *testing.T) {
	cfg := testConfig(func(c *Config) {
		c.ServerName = `{{.Name | trimSuffix ".db.example" | replace "-" "_" | upper}}`
	})
	pl, err := NewPlanner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &pool.Pool{Clusters: []pool.Cluster{{Name: "c1",
		Writers: []pool.Node{{Name: "db-1.db.example", Addr: "10.0.0.1:3306"}},
		Readers: []pool.Node{{Name: "db-2.db.example", Addr: "10.0.0.2:3306"}},
	}}}
	servers := []Server{
		{Backend: "db_rw", Name: "DB_1"}, {Backend: "db_rw", Name: "DB_2"},
		{Backend: "db_ro", Name: "DB_1"}, {Backend: "db_ro", Name: "DB_2"},
	}
	plan := pl.Plan(servers, p, false)
	want := cmds(maint("db_rw/DB_2"), maint("db_ro/DB_1"))
	if got := stringsOf(plan.Commands); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if len(plan.Unmapped)+len(plan.Missing)+len(plan.Naming) != 0 {
		t.Errorf("unexpected reports: %+v", plan)
	}
}

// TestPlanMatchAddr uses the servers of the captured fixture: by address,
// by host name (srv_fqdn) and IPv6.
func TestPlanMatchAddr(t *testing.T) {
	servers, err := ParseServersState(readFixture(t, "state-initial.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(func(c *Config) {
		c.Match = MatchAddr
		c.Backends = []Mapping{{Cluster: "c1", Role: RoleReader, Backend: "db_x"}}
	})
	pl, err := NewPlanner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &pool.Pool{Clusters: []pool.Cluster{{Name: "c1",
		Readers: []pool.Node{
			{Name: "a", Addr: "LocalHost.:21004"},
			{Name: "b", Addr: "[0:0::1]:21005"},
		},
		Out: []pool.Node{
			{Name: "c", Addr: "::ffff:127.0.0.1:21006"}, // not host:port
			{Name: "d", Addr: "[::ffff:127.0.0.1]:21006"},
			{Name: "e", Addr: "127.0.0.1:9999"},
		},
	}}}
	plan := pl.Plan(servers, p, false)
	if got, want := stringsOf(plan.Commands), maint("db_x/db6"); !reflect.DeepEqual(got, want) {
		t.Errorf("commands: got %q, want %q", got, want)
	}
	if got, want := plan.Naming, []string{`backend db_x: node c addr "::ffff:127.0.0.1:21006": not host:port`}; !reflect.DeepEqual(got, want) {
		t.Errorf("naming: got %q, want %q", got, want)
	}
	if got, want := stringsOf(plan.Missing), []string{"db_x: c1/e"}; !reflect.DeepEqual(got, want) {
		t.Errorf("missing: got %q, want %q", got, want)
	}
	if len(plan.Unmapped) != 0 {
		t.Errorf("unmapped: %q", stringsOf(plan.Unmapped))
	}
}

// withTerm gives every cluster of p the writer term n of writer.
// reasons sets the reason of each out node of p named in r.
func reasons(p *pool.Pool, r map[string]pool.Reason) *pool.Pool {
	for i := range p.Clusters {
		for j := range p.Clusters[i].Out {
			if why, ok := r[p.Clusters[i].Out[j].Name]; ok {
				p.Clusters[i].Out[j].Reason = why
			}
		}
	}
	return p
}

func withTerm(p *pool.Pool, n uint64, writer string) *pool.Pool {
	for i := range p.Clusters {
		p.Clusters[i].Term = &pool.Term{Cluster: p.Clusters[i].Name, Number: n, Writer: writer, Addr: writer + ":3306"}
	}
	return p
}
