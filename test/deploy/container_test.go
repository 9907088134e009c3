package deploy_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	dockerfile  = "deploy/container/Dockerfile"
	composeFile = "deploy/container/compose.yaml"
	k8sFile     = "deploy/kubernetes/statefulset.yaml"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case
	args string
}

func parseDockerfile(text string) []instruction {
	var out []instruction
	pending := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && pending == "") {
			continue
		}
		if c, ok := strings.CutSuffix(trimmed, `\`); ok {
			pending += c + " "
			continue
		}
		full := strings.TrimSpace(pending + trimmed)
		pending = ""
		if full == "" {
			continue
		}
		cmd, args, _ := strings.Cut(full, " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
	}
	return out
}

// TestDockerfile checks the image recipe without Docker: a Go build stage
// with CGO_ENABLED=0, a runtime stage running as a non-root user, the ports,
// a health check through `shoal health`, and sources that exist.
func TestDockerfile(t *testing.T) {
	var froms, users, runs, envs, volumes []string
	var expose, healthcheck, entrypoint string
	var copyFromBuild bool
	for _, in := range parseDockerfile(readFile(t, dockerfile)) {
		switch in.cmd {
		case "FROM":
			froms = append(froms, in.args)
		case "USER":
			users = append(users, in.args)
		case "RUN":
			runs = append(runs, in.args)
		case "EXPOSE":
			expose += " " + in.args
		case "HEALTHCHECK":
			healthcheck = in.args
		case "ENV":
			envs = append(envs, in.args)
		case "VOLUME":
			volumes = append(volumes, in.args)
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			f := strings.Fields(in.args)
			if slices.Contains(f, "--from=build") {
				copyFromBuild = true
				continue
			}
			// Sources from the build context (the repository root).
			var srcs []string
			for _, a := range f[:len(f)-1] {
				if !strings.HasPrefix(a, "--") {
					srcs = append(srcs, a)
				}
			}
			for _, s := range srcs {
				if m, _ := filepath.Glob(repoPath(t, s)); len(m) == 0 && s != "." {
					t.Errorf("COPY source %q matches nothing in the repository", s)
				}
			}
		}
	}
	if len(froms) < 2 {
		t.Fatalf("FROM %q: want a build stage and a runtime stage", froms)
	}
	if f := strings.Fields(froms[0]); len(f) != 3 || !strings.HasPrefix(f[0], "golang:") || !strings.EqualFold(f[1], "AS") || f[2] != "build" {
		t.Errorf("first stage FROM %q: want golang:<version> AS build", froms[0])
	}
	if !copyFromBuild {
		t.Error("no COPY --from=build: the runtime stage does not take the binary from the build stage")
	}
	var built bool
	for _, r := range runs {
		if strings.Contains(r, "CGO_ENABLED=0") && strings.Contains(r, "go build") && strings.Contains(r, "./cmd/shoal") {
			built = true
		}
	}
	if !built {
		t.Errorf("no RUN CGO_ENABLED=0 go build ... ./cmd/shoal in %q", runs)
	}
	if len(users) == 0 {
		t.Fatal("no USER: the agent would run as root")
	}
	last := users[len(users)-1]
	if name, _, _ := strings.Cut(last, ":"); name == "root" || name == "0" {
		t.Errorf("USER %s: want a non-root user", last)
	}
	for _, p := range []string{"7946/tcp", "7946/udp", "8946"} {
		if !slices.Contains(strings.Fields(expose), p) {
			t.Errorf("EXPOSE%s: lacks %s", expose, p)
		}
	}
	if !strings.Contains(healthcheck, `["shoal", "health"]`) {
		t.Errorf("HEALTHCHECK %q: want CMD [\"shoal\", \"health\"]", healthcheck)
	}
	// The API token is created at the first start: on the volume, where
	// the agent's user can write and where it survives a restart.
	var tokenFile string
	for _, e := range envs {
		if v, ok := strings.CutPrefix(e, "SHOAL_API_TOKEN_FILE="); ok {
			tokenFile = v
		}
	}
	if tokenFile == "" || !slices.ContainsFunc(volumes, func(v string) bool {
		var vs []string
		return json.Unmarshal([]byte(v), &vs) == nil && slices.ContainsFunc(vs, func(d string) bool { return strings.HasPrefix(tokenFile, d+"/") })
	}) {
		t.Errorf("ENV SHOAL_API_TOKEN_FILE=%q: want a file on a VOLUME %q", tokenFile, volumes)
	}
	var ep []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || !slices.Equal(ep, []string{"shoal", "agent"}) {
		t.Errorf("ENTRYPOINT %s: want [\"shoal\", \"agent\"] (exec form)", entrypoint)
	}
}

// TestCompose parses compose.yaml and checks its wiring: three MariaDB
// servers with a shoal sidecar in each one's network namespace, an app
// agent sharing HAProxy's admin socket volume, and files that exist.
func TestCompose(t *testing.T) {
	var c struct {
		Services map[string]struct {
			Image       string         `yaml:"image"`
			Build       map[string]any `yaml:"build"`
			NetworkMode string         `yaml:"network_mode"`
			Volumes     []string       `yaml:"volumes"`
			Environment map[string]any `yaml:"environment"`
			Command     []string       `yaml:"command"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, composeFile)), &c); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	dir := filepath.Dir(composeFile)
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(repoPath(t, filepath.Join(dir, src))); err != nil {
					t.Errorf("service %s: volume %q: %v", name, v, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("service %s: named volume %q not declared", name, src)
			}
		}
		if s.Build != nil {
			ctx := filepath.Join(dir, str(s.Build["context"]))
			if _, err := os.Stat(repoPath(t, filepath.Join(ctx, str(s.Build["dockerfile"])))); err != nil {
				t.Errorf("service %s: build: %v", name, err)
			}
		}
	}
	for _, db := range []string{"db1", "db2", "db3"} {
		if img := c.Services[db].Image; img != "mariadb:10.11" {
			t.Errorf("service %s: image %q, want mariadb:10.11", db, img)
		}
		side := c.Services["shoal-"+db]
		if side.NetworkMode != "service:"+db {
			t.Errorf("service shoal-%s: network_mode %q, want service:%s", db, side.NetworkMode, db)
		}
		if side.Environment["SHOAL_NODE"] != db || side.Environment["SHOAL_MYSQL_ADDR"] != "127.0.0.1:3306" {
			t.Errorf("service shoal-%s: environment %v: want SHOAL_NODE %s probing 127.0.0.1:3306", db, side.Environment, db)
		}
	}
	// Writer terms: the db sidecars vote with the consensus key, from the
	// environment, keyring on their volume; app1 gets the term key only.
	for _, db := range []string{"db1", "db2", "db3"} {
		env := c.Services["shoal-"+db].Environment
		if !strings.HasPrefix(str(env["SHOAL_CONSENSUS_KEY"]), "${SHOAL_CONSENSUS_KEY:?") ||
			!strings.HasPrefix(str(env["SHOAL_CONSENSUS_KEYRING_FILE"]), "/var/lib/shoal/") {
			t.Errorf("service shoal-%s: SHOAL_CONSENSUS_KEY %q, SHOAL_CONSENSUS_KEYRING_FILE %q: want the key from the environment and the keyring on the state volume",
				db, env["SHOAL_CONSENSUS_KEY"], env["SHOAL_CONSENSUS_KEYRING_FILE"])
		}
	}
	app := c.Services["app1"].Environment
	if app["SHOAL_CONSENSUS_KEY"] != nil || app["SHOAL_CONSENSUS_KEYRING_FILE"] != nil || !strings.HasPrefix(str(app["SHOAL_CONSENSUS_TERM_KEY"]), "${SHOAL_CONSENSUS_TERM_KEY:?") {
		t.Errorf("service app1: environment %v: want SHOAL_CONSENSUS_TERM_KEY and never the consensus key", app)
	}
	for _, db := range []string{"db2", "db3"} {
		if c.Services[db].Environment["REPLICATE_FROM"] != "db1" || !slices.Contains(c.Services[db].Command, "--read-only=ON") {
			t.Errorf("service %s: want a read-only replica of db1", db)
		}
	}
	if img := c.Services["haproxy"].Image; img != "haproxy:2.6" {
		t.Errorf("service haproxy: image %q, want haproxy:2.6", img)
	}
	shared := func(svc string) string {
		for _, v := range c.Services[svc].Volumes {
			if src, dst, _ := strings.Cut(v, ":"); dst == "/run/haproxy" {
				return src
			}
		}
		return ""
	}
	if a, h := shared("app1"), shared("haproxy"); a == "" || a != h {
		t.Errorf("app1 and haproxy must share one volume at /run/haproxy (the admin socket); got %q and %q", a, h)
	}
}

// TestKubernetes parses the StatefulSet manifests and checks the headless
// gossip Service, the joins, the Secret references and the probes.
func TestKubernetes(t *testing.T) {
	type envVar struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	}
	type probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
	}
	type container struct {
		Name  string `yaml:"name"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
			Protocol      string `yaml:"protocol"`
		} `yaml:"ports"`
		Env          []envVar `yaml:"env"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
	}
	type doc struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		StringData map[string]string `yaml:"stringData"`
		Data       map[string]string `yaml:"data"`
		Spec       struct {
			ClusterIP                string `yaml:"clusterIP"`
			PublishNotReadyAddresses bool   `yaml:"publishNotReadyAddresses"`
			Ports                    []struct {
				Port     int    `yaml:"port"`
				Protocol string `yaml:"protocol"`
			} `yaml:"ports"`
			ServiceName          string `yaml:"serviceName"`
			VolumeClaimTemplates []struct {
				Metadata struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
			} `yaml:"volumeClaimTemplates"`
			Replicas int `yaml:"replicas"`
			Template struct {
				Spec struct {
					Containers []container `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	docs := map[string]doc{}
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, k8sFile)))
	for {
		var d doc
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", k8sFile, err)
		}
		if d.Kind == "" {
			t.Fatalf("%s: a document without kind", k8sFile)
		}
		docs[d.Kind] = d
	}
	svc, sts, secret := docs["Service"], docs["StatefulSet"], docs["Secret"]
	if svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q publishNotReadyAddresses %v: want a headless Service publishing pods before they are ready",
			svc.Metadata.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	var gossipTCP, gossipUDP bool
	for _, p := range svc.Spec.Ports {
		gossipTCP = gossipTCP || p.Port == 7946 && p.Protocol == "TCP"
		gossipUDP = gossipUDP || p.Port == 7946 && p.Protocol == "UDP"
	}
	if !gossipTCP || !gossipUDP {
		t.Errorf("Service %s: want port 7946 over TCP and UDP", svc.Metadata.Name)
	}
	if sts.Spec.ServiceName != svc.Metadata.Name || sts.Spec.Replicas < 3 {
		t.Errorf("StatefulSet: serviceName %q replicas %d: want %q and at least 3", sts.Spec.ServiceName, sts.Spec.Replicas, svc.Metadata.Name)
	}

	var shoal *container
	for i, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == "shoal" {
			shoal = &sts.Spec.Template.Spec.Containers[i]
		}
	}
	if shoal == nil {
		t.Fatal("StatefulSet: no shoal container")
	}
	env := map[string]envVar{}
	for _, e := range shoal.Env {
		env[e.Name] = e
	}
	for _, name := range []string{"SHOAL_ENCRYPT", "SHOAL_CONSENSUS_KEY", "SHOAL_MYSQL_PASSWORD"} {
		ref := env[name].ValueFrom.SecretKeyRef
		if ref.Name != secret.Metadata.Name {
			t.Errorf("shoal env %s: from Secret %q, want the Secret %q of this file", name, ref.Name, secret.Metadata.Name)
		} else if _, ok := secret.StringData[ref.Key]; !ok {
			t.Errorf("shoal env %s: Secret %q has no key %q", name, ref.Name, ref.Key)
		}
	}
	if ref := env["SHOAL_CONSENSUS_KEY"].ValueFrom.SecretKeyRef; ref.Key == env["SHOAL_ENCRYPT"].ValueFrom.SecretKeyRef.Key {
		t.Errorf("shoal env SHOAL_CONSENSUS_KEY: the Secret's %q, the gossip key's: want a key of its own", ref.Key)
	}
	// Writer terms: the consensus keyring (and the raft data next to it)
	// on a volume claim, which outlives the pod, not on the emptyDir.
	claims := map[string]bool{}
	for _, c := range sts.Spec.VolumeClaimTemplates {
		claims[c.Metadata.Name] = true
	}
	ring, onClaim := env["SHOAL_CONSENSUS_KEYRING_FILE"].Value, false
	for _, m := range shoal.VolumeMounts {
		onClaim = onClaim || claims[m.Name] && strings.HasPrefix(ring, m.MountPath+"/")
	}
	if !onClaim {
		t.Errorf("shoal env SHOAL_CONSENSUS_KEYRING_FILE %q: want it on a mounted volume claim (the keyring and the raft data outlive the pod)", ring)
	}
	var wantJoin []string
	for i := range sts.Spec.Replicas {
		wantJoin = append(wantJoin, sts.Metadata.Name+"-"+strconv.Itoa(i)+"."+svc.Metadata.Name)
	}
	if got := strings.Split(env["SHOAL_JOIN"].Value, ","); !slices.Equal(got, wantJoin) {
		t.Errorf("shoal env SHOAL_JOIN %q, want %q (the headless Service's names)", got, wantJoin)
	}
	if env["SHOAL_MYSQL_ADDR"].Value != "127.0.0.1:3306" {
		t.Errorf("shoal env SHOAL_MYSQL_ADDR %q: want the pod's own server, 127.0.0.1:3306", env["SHOAL_MYSQL_ADDR"].Value)
	}
	httpAddr := env["SHOAL_HTTP_ADDR"].Value
	if host, _, _ := strings.Cut(httpAddr, ":"); host == "" || host == "127.0.0.1" {
		t.Errorf("shoal env SHOAL_HTTP_ADDR %q: the kubelet probes the pod IP, not loopback", httpAddr)
	}
	// Beyond loopback the agent refuses to start without TLS or the
	// explicit opt-in.
	if env["SHOAL_INSECURE_HTTP"].Value != "true" && (env["SHOAL_HTTP_TLS_CERT_FILE"].Value == "" || env["SHOAL_HTTP_TLS_KEY_FILE"].Value == "") {
		t.Errorf("shoal env: SHOAL_HTTP_ADDR %q is not loopback, so it needs SHOAL_HTTP_TLS_CERT_FILE and SHOAL_HTTP_TLS_KEY_FILE, or SHOAL_INSECURE_HTTP=true", httpAddr)
	}
	if tf := env["SHOAL_API_TOKEN_FILE"].Value; !strings.HasPrefix(tf, "/var/lib/shoal/") {
		t.Errorf("shoal env SHOAL_API_TOKEN_FILE %q: want it on the state volume /var/lib/shoal (the root file system is read-only)", tf)
	}

	// Probes: readiness is /v1/health; liveness /v1/agent/live, which
	// answers while the agent runs even when other clients hold every API
	// connection (/v1/agent/self could be starved: a restart loop). Both
	// on the port the API listens on.
	httpPort := map[string]int{}
	for _, p := range shoal.Ports {
		httpPort[p.Name] = p.ContainerPort
	}
	checkProbe := func(kind string, p *probe, paths ...string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("shoal %s: want an httpGet probe", kind)
			return
		}
		if !slices.Contains(paths, p.HTTPGet.Path) {
			t.Errorf("shoal %s: path %q, want one of %q", kind, p.HTTPGet.Path, paths)
		}
		port := 0
		switch v := p.HTTPGet.Port.(type) {
		case int:
			port = v
		case string:
			port = httpPort[v]
		}
		if _, want, _ := strings.Cut(httpAddr, ":"); strconv.Itoa(port) != want {
			t.Errorf("shoal %s: port %v, want the API port of SHOAL_HTTP_ADDR %q", kind, p.HTTPGet.Port, httpAddr)
		}
	}
	checkProbe("readinessProbe", shoal.ReadinessProbe, "/v1/health")
	checkProbe("livenessProbe", shoal.LivenessProbe, "/v1/agent/live")

	// The init script is shell the mariadb entrypoint sources.
	for name, script := range docs["ConfigMap"].Data {
		if strings.HasSuffix(name, ".sh") {
			checkShell(t, k8sFile+" "+name, script)
		}
	}
	checkShell(t, "deploy/container/initdb/10-shoal.sh", readFile(t, "deploy/container/initdb/10-shoal.sh"))
}

// checkShell runs bash -n, and shellcheck when installed, on a script.
func checkShell(t *testing.T, name, script string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Logf("bash not found: %s not syntax-checked", name)
		return
	}
	path := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, filepath.Dir(path), bash, "-n", path); err != nil {
		t.Errorf("bash -n %s: %v\n%s", name, err, out)
	}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		if out, err := run(t, filepath.Dir(path), sc, "--shell=bash", path); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", name, err, out)
		}
	}
}
