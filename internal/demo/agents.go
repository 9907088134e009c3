package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/pkg/client"
)

// dampHalfLife is shorter than the default (60 s) so that the tour, which
// takes replicas out on purpose several times, can be run again at once
// without a replica being held out as flapping.
const dampHalfLife = "10s"

// agentArgs is node's shoal agent command line. Secrets are not in it: the
// gossip key comes through the environment, the probe password from a file.
func (l *Layout) agentArgs(node string) []string {
	args := []string{l.Shoal, "agent",
		"--node", node,
		"--bind", l.GossipAddr(node),
		"--http-addr", l.HTTPAddr(node),
		"--rpc-addr", l.RPCAddr(node),
		"--profile", "fast",
		"--cluster", Cluster,
		"--keyring-file", l.Path("keyring-" + node + ".json"),
		"--snapshot", l.Path("snapshot-" + node),
		"--api-token-file", l.Path("api-token"),
		"--damp-half-life", dampHalfLife,
		"--history-file", l.Path("history-" + node + ".jsonl"),
	}
	for _, n := range DBNodes {
		args = append(args, "--join", l.GossipAddr(n))
	}
	if node == App {
		return append(args, "--role", "app", "--config", l.Path("app.yaml"))
	}
	return append(args,
		"--mysql-addr", l.MySQLAddr(node),
		"--mysql-user", probeUser,
		"--mysql-password-file", l.Path("shoal.password"),
		// The account a former writer replicates with after shoal
		// switchover demoted it.
		"--mysql-replication-user", replUser,
		"--mysql-replication-password-file", l.Path("repl.password"),
		// The db agents are the raft voters that grant the writer term
		// (docs/consensus.md); the key comes through the environment.
		"--consensus-keyring-file", l.Path("consensus-"+node+".json"),
		"--consensus-data-dir", l.Path("raft-"+node),
		"--consensus-bind", l.RaftAddr(node),
		"--consensus-bootstrap-expect", strconv.Itoa(len(DBNodes)))
}

// appConfig is the app agent's config file: the HAProxy sink, and the pool
// as a file for anyone who wants to look.
func (l *Layout) appConfig() string {
	return fmt.Sprintf(`# written by shoal-demo: the app agent drives the demo's HAProxy
sinks:
  haproxy:
    address: unix:%s
    backends:
      - {cluster: %s, role: writer, backend: %s}
      - {cluster: %s, role: reader, backend: %s}
  file:
    path: %s
`, l.HAProxySock(), Cluster, BackendRW, Cluster, BackendRO, l.Path("pool.json"))
}

// startAgent starts node's agent in the background. The db agents get
// the consensus key; the app agent only its public half, the term key,
// which verifies the writer terms and cannot sign one.
func (l *Layout) startAgent(node string) error {
	key, err := l.readSecret("gossip.key")
	if err != nil {
		return err
	}
	ckey, err := l.readSecret("consensus.key")
	if err != nil {
		return err
	}
	args, env := l.agentArgs(node), []string{"SHOAL_ENCRYPT=" + key}
	if node == App {
		pub, err := termKey(ckey)
		if err != nil {
			return err
		}
		args = append(args, "--consensus-term-key", pub)
	} else {
		env = append(env, "SHOAL_CONSENSUS_KEY="+ckey)
	}
	_, err = l.spawn("agent-"+node, args, env, l.Path("agent-"+node+".log"))
	return err
}

// termKey is the public term key of a consensus key, as
// `shoal term-key` prints it.
func termKey(ckey string) (string, error) {
	kr, err := consensus.ParseKeyring([]string{ckey})
	if err != nil {
		return "", fmt.Errorf("consensus key: %w", err)
	}
	return consensus.EncodePublicKey(kr.TermPublicKeys()[0]), nil
}

// keygen asks the shoal binary for a gossip key.
func (l *Layout) keygen(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, l.Shoal, "keygen").Output()
	if err != nil {
		return "", fmt.Errorf("%s keygen: %w", l.Shoal, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// Client is an API client for node's agent, with the demo's token.
func (l *Layout) Client(node string) *client.Client {
	tok, _ := l.readSecret("api-token")
	return client.New("http://"+l.HTTPAddr(node), client.WithToken(tok))
}

// healthy reports whether node's agent sees the demo's healthy pool: writer
// w and the two other db nodes as readers. It says what differs.
func (l *Layout) poolIs(ctx context.Context, node, w string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	p, err := l.Client(node).Pool(ctx, Cluster)
	if err != nil {
		return false, err.Error()
	}
	got := describePool(p)
	var readers []string
	for _, n := range DBNodes {
		if n != w {
			readers = append(readers, n)
		}
	}
	want := fmt.Sprintf("writers [%s] readers %v out []", w, readers)
	return got == want, got
}

// describePool is a pool in one line: writers [..] readers [..] out [..].
func describePool(p *client.PoolResponse) string {
	names := func(ns []client.PoolNode, withReason bool) string {
		var out []string
		for _, n := range ns {
			// Names and reasons come from other machines' gossip: escaped.
			s := printable(n.Name)
			if withReason && n.Reason != "" {
				s += "(" + printable(n.Reason) + ")"
			}
			out = append(out, s)
		}
		return "[" + strings.Join(out, " ") + "]"
	}
	return fmt.Sprintf("writers %s readers %s out %s", names(p.Writers, false), names(p.Readers, false), names(p.Out, true))
}

// waitHealthy waits until every agent sees writer w and two readers and
// HAProxy routes accordingly.
func (l *Layout) waitHealthy(ctx context.Context, w string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var problems []string
		for _, n := range l.Nodes() {
			if ok, got := l.poolIs(ctx, n, w); !ok {
				problems = append(problems, fmt.Sprintf("%s sees %s", n, got))
			}
		}
		st, err := l.HAProxyStates()
		if err != nil {
			problems = append(problems, err.Error())
		} else {
			for k, v := range wantHAProxy(w) {
				if st[k] != v {
					problems = append(problems, fmt.Sprintf("haproxy %s is %s, want %s", k, st[k], v))
				}
			}
		}
		if len(problems) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not healthy (writer %s, 2 readers) after %s: %s", w, timeout, strings.Join(problems, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeSecret writes a 0600 file under the state dir.
func (l *Layout) writeSecret(name, value string) error {
	return os.WriteFile(l.Path(name), []byte(value+"\n"), 0o600)
}

// printable escapes what would not print as itself (control, bidi and
// invalid UTF-8): a remote string never reaches the terminal raw.
func printable(s string) string {
	q := strconv.QuoteToGraphic(s)
	if q[1:len(q)-1] == s {
		return s
	}
	return q
}
