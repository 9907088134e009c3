package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/mariadb/launch"
)

// ErrMissing is wrapped by Up's error when programs the demo needs are not
// installed.
var ErrMissing = errors.New("missing programs")

// Missing lists the Debian packages whose programs are not installed.
func Missing() []string {
	var pkgs []string
	if _, err := launch.FindBinaries(); err != nil {
		pkgs = append(pkgs, "mariadb-server")
	}
	if _, err := launch.Lookup("haproxy"); err != nil {
		pkgs = append(pkgs, "haproxy")
	}
	return pkgs
}

func randomSecret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// prepareDir makes the state dir ready for a fresh demo: a demo still
// running in it is stopped first; an existing dir that is not a demo's (no
// marker file) and not empty is refused, never deleted.
func (l *Layout) prepareDir(out io.Writer) error {
	if running := l.Running(); len(running) > 0 {
		fmt.Fprintf(out, "A demo is already running in %s (%s): stopping it first.\n", l.Dir, strings.Join(running, ", "))
		if err := l.Down(out); err != nil {
			return fmt.Errorf("stop the running demo: %w", err)
		}
	}
	entries, err := os.ReadDir(l.Dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	case len(entries) == 0:
	default:
		if _, err := os.Stat(l.Path(marker)); err != nil {
			return fmt.Errorf("%s exists and is not a shoal demo's state dir (no %s in it): choose another DEMO_DIR", l.Dir, marker)
		}
		if err := os.RemoveAll(l.Dir); err != nil {
			return fmt.Errorf("remove the old demo state %s: %w", l.Dir, err)
		}
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(l.Path(marker), []byte("state of `shoal-demo up`; removed by the next one\n"), 0o600)
}

// Up starts the whole demo in the background and prints how to use it. On
// failure it stops what it started.
func (l *Layout) Up(ctx context.Context, out io.Writer) (err error) {
	t0 := time.Now()
	if pkgs := Missing(); len(pkgs) > 0 {
		return fmt.Errorf("%w: the demo needs the Debian packages %s; install them as root: apt-get install -y %s (make demo does it when run as root)",
			ErrMissing, strings.Join(pkgs, " "), strings.Join(pkgs, " "))
	}
	if _, err := os.Stat(l.Shoal); err != nil {
		return fmt.Errorf("shoal binary %s: %w (make build)", l.Shoal, err)
	}
	if err := l.prepareDir(out); err != nil {
		return err
	}
	if err := l.checkPortsFree(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(out, "start failed: %v\nstopping what was started (logs kept in %s)\n", err, l.Dir)
			_ = l.Down(io.Discard)
		}
	}()

	secrets := map[string]string{"shoal.password": randomSecret(), "repl.password": randomSecret(), "demo.password": randomSecret()}
	key, err := l.keygen(ctx)
	if err != nil {
		return err
	}
	secrets["gossip.key"] = key
	if secrets["consensus.key"], err = l.keygen(ctx); err != nil {
		return err
	}
	for name, v := range secrets {
		if err := l.writeSecret(name, v); err != nil {
			return err
		}
	}

	// Three MariaDB servers from the cached template datadir.
	bins, err := launch.FindBinaries()
	if err != nil {
		return err
	}
	tpl, err := launch.Template(bins)
	if err != nil {
		return fmt.Errorf("template datadir: %w", err)
	}
	for _, n := range DBNodes {
		cfg := l.DBConfig(n)
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return err
		}
		if err := launch.CopyTree(tpl, cfg.Datadir()); err != nil {
			return fmt.Errorf("%s: copy template datadir: %w", n, err)
		}
		if err := cfg.Write(); err != nil {
			return err
		}
		if err := l.startMariaDB(ctx, bins, n); err != nil {
			return err
		}
	}
	primary := DBNodes[0]
	if err := l.setUpPrimary(ctx, primary, secrets["shoal.password"], secrets["repl.password"], secrets["demo.password"]); err != nil {
		return err
	}
	for _, n := range DBNodes[1:] {
		if err := l.replicate(ctx, n, primary, "slave_pos", secrets["repl.password"]); err != nil {
			return err
		}
	}
	for _, n := range DBNodes[1:] {
		if err := l.waitReplicating(ctx, n, 30*time.Second); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "MariaDB: %s primary on %s, %s replicas (GTID) on %s, %s (%s)\n", primary, l.MySQLAddr(primary),
		strings.Join(DBNodes[1:], " and "), l.MySQLAddr(DBNodes[1]), l.MySQLAddr(DBNodes[2]), time.Since(t0).Round(100*time.Millisecond))

	if err := l.startHAProxy(ctx); err != nil {
		return err
	}
	if err := os.WriteFile(l.Path("app.yaml"), []byte(l.appConfig()), 0o600); err != nil {
		return err
	}
	for _, n := range l.Nodes() {
		if err := l.startAgent(n); err != nil {
			return err
		}
	}
	if err := l.waitHealthy(ctx, primary, 45*time.Second); err != nil {
		return fmt.Errorf("%w (agent logs: %s)", err, l.Path("agent-*.log"))
	}
	fmt.Fprintf(out, "agents: %s (fast profile) and %s driving HAProxy; pool agreed everywhere (%s)\n",
		strings.Join(DBNodes, ", "), App, time.Since(t0).Round(100*time.Millisecond))

	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := l.spawn("client", []string{self, "client", "--dir", l.Dir, "--port-base", fmt.Sprint(l.PortBase)}, nil, l.Path("client.log")); err != nil {
		return err
	}
	fmt.Fprintf(out, "demo up in %s\n\n", time.Since(t0).Round(100*time.Millisecond))
	l.printPool(ctx, out)
	fmt.Fprintf(out, "\nStatus page: %s\n\nThe load client (%s), its first seconds:\n", l.UIURL(), l.Path("client.log"))
	time.Sleep(3500 * time.Millisecond)
	fmt.Fprintln(out, tail(l.Path("client.log"), 5))
	fmt.Fprint(out, l.nextSteps())
	return nil
}

// printPool runs `shoal pool` against the app agent.
func (l *Layout) printPool(ctx context.Context, out io.Writer) {
	fmt.Fprintf(out, "$ shoal pool --http-addr %s\n", l.HTTPAddr(App))
	cmd := exec.CommandContext(ctx, l.Shoal, "pool", "--http-addr", l.HTTPAddr(App))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(out, "(shoal pool: %v)\n", err)
	}
}

func (l *Layout) nextSteps() string {
	shoal := rel(l.Shoal)
	dir := rel(l.Dir)
	return fmt.Sprintf(`
Try next:
  tail -f %[2]s/client.log                         # the load client, every second
  %[1]s pool --http-addr %[3]s            # the pool as the app agent sees it
  %[1]s members --http-addr %[3]s
  %[1]s history --http-addr %[3]s --since 10m
  kill -9 $(cat %[2]s/mariadb-db2.pid); sleep 1; %[1]s pool --http-addr %[3]s
  %[1]s maint enable --reason test --http-addr %[4]s --token-file %[11]s   # drain db3 (disable to undo)
  mariadb --no-defaults -h127.0.0.1 -P%[5]d -u%[6]s -p"$(cat %[2]s/demo.password)" %[6]s   # through HAProxy, read-write
  make demo-fault     # a narrated tour of faults, with times measured by the agents
  make demo-stop      # stop everything (by PID)
HAProxy: writes %[7]s, reads %[8]s; agents' HTTP API on 127.0.0.1:%[9]d-%[10]d (db1-db3, app1).
`, shoal, dir, l.HTTPAddr(App), l.HTTPAddr("db3"), l.PortBase+7, appUser, l.RWAddr(), l.ROAddr(), l.PortBase+21, l.PortBase+24, rel(l.Path("api-token")))
}

// rel shortens p to a path relative to the working directory when it is
// under it.
func rel(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if strings.HasPrefix(p, wd+"/") {
		return strings.TrimPrefix(p, wd+"/")
	}
	return p
}
