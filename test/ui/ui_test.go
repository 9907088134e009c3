// Package ui tests the agent's status page (/ui) in a real browser:
// Debian's chromium, driven by chromedp, against a real cluster (three
// MariaDB servers with replication, a db agent for each, an app agent
// driving a real HAProxy).
package ui

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/logging"
	filesink "github.com/shoaldb/shoal/internal/sink/file"
	"github.com/shoaldb/shoal/internal/sink/haproxy"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/haproxytest"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// hostileName is a member name that is markup: the page must show it as
// text and run nothing.
const hostileName = `<img src=x onerror=window.__pwned=1>`

// hostileTag is a user tag value that tries to break out of an attribute
// and of a text node.
const hostileTag = `"'><script>window.__pwned=2</script>&amp;`

// TestStatusPageInBrowser loads the app agent's /ui in headless chromium and
// checks what a person would see: the pool with 1 writer and 2 readers; a
// replica whose mariadbd is killed shown out (with its reason) within 2 s,
// and back after a restart; a db agent's own server facts; a writer
// conflict banner; no sideways scrolling at 700 px; a member named with markup shown as literal
// text with nothing injected or run; a "disconnected" state when the agent
// stops answering; no CSP violation and no script error. Screenshots go to
// build/ui/ (and, with SHOAL_UI_DOCS_SCREENSHOT=1, docs/status-page.png).
func TestStatusPageInBrowser(t *testing.T) {
	bin := chromiumBin(t)
	mariadbtest.Require(t)
	shots := shotDir(t)

	primary, r1, r2 := replicatedServers(t)
	hx := haproxytest.Start(t, func(p *haproxytest.Proc) string {
		return haproxytest.WriterReaderConfig(p.Sock, primary.Addr(), r1.Addr(), r2.Addr())
	})
	db1 := startAgent(t, dbConfig(t, "db1", primary))
	db2 := startAgent(t, dbConfig(t, "db2", r1, db1.cfg.Bind))
	db3 := startAgent(t, dbConfig(t, "db3", r2, db1.cfg.Bind))
	appCfg := baseConfig(t, "app1", db1.cfg.Bind)
	appCfg.Role = tags.RoleApp
	appCfg.Sinks.HAProxy = haproxy.Config{Address: hx.Addr, Interval: time.Second,
		Backends: haproxy.WriterReader("default", "db_rw", "db_ro")}
	out := t.TempDir()
	appCfg.Sinks.File = filesink.Config{Path: filepath.Join(out, "pool.json"), ListsDir: out}
	if err := appCfg.Validate(); err != nil {
		t.Fatal(err)
	}
	app := startAgent(t, appCfg)

	srv := serveAPI(t, app.a)

	testkit.WaitFor(t, 60*time.Second, "the app agent's pool: 1 writer, 2 readers", func() bool {
		return poolOf(app.a) == "db1|db2,db3|"
	})

	ctx, consoleMsgs := browser(t, bin)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 860),
		chromedp.Navigate(srv.URL+"/ui"),
	); err != nil {
		t.Fatalf("load %s/ui: %v", srv.URL, err)
	}

	pageWait(t, ctx, 10*time.Second, "the page shows 1 writer (db1) and 2 readers (db2, db3)", func(p pageState) bool {
		return p.places() == "writer:db1 reader:db2 reader:db3" && p.Conn == "live"
	})
	p := readPage(t, ctx)
	for _, want := range []string{"app1", "db1", "db2", "db3", "haproxy", "file"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("page text lacks %q", want)
		}
	}
	// Probe facts of the db members, from their published health.
	pageWait(t, ctx, 10*time.Second, "db members show their probe facts", func(p pageState) bool {
		return strings.Contains(p.Members, "db1 alive db default") && strings.Contains(p.Members, "writable") &&
			strings.Contains(p.Members, "read_only · io on · sql on · lag 0 s") && p.Sinks == "ok ok"
	})
	pageWait(t, ctx, 10*time.Second, "both sinks shown at the pool's generation", func(p pageState) bool {
		return atPool(p, "file") && atPool(p, "haproxy")
	})
	// Each replica's lag, as this agent judges it (by GTID when the servers
	// publish their positions, else Seconds_Behind_Master); none for the
	// writer.
	lagCell := regexp.MustCompile(`^(\d+ tx / \d+(\.\d)?s \(gtid\)|\d+s \(sbm\))$`)
	pageWait(t, ctx, 10*time.Second, "the readers show their lag, the writer none", func(p pageState) bool {
		lags := map[string]string{}
		for _, l := range p.Lags {
			node, lag, _ := strings.Cut(l, ":")
			lags[node] = lag
		}
		return lags["db1"] == "—" && lagCell.MatchString(lags["db2"]) && lagCell.MatchString(lags["db3"])
	})
	// A fact the page has no place of its own for is listed by its name:
	// each replica's source server_id.
	source := fmt.Sprintf("source server id %d", primary.ServerID())
	pageWait(t, ctx, 10*time.Second, "replicas show their source server_id", func(p pageState) bool {
		return strings.Contains(memberRow(p, "db2"), source) && strings.Contains(memberRow(p, "db3"), source) &&
			!strings.Contains(memberRow(p, "db1"), "source server id")
	})
	screenshot(t, ctx, filepath.Join(shots, "healthy.png"))

	// kill -9 a replica's mariadbd: out, with its reason, within 2 s.
	start := time.Now()
	r2.Kill()
	outBy := pageWait(t, ctx, 10*time.Second, "db3 shown out with reason critical", func(p pageState) bool {
		return slices.Contains(p.Rows, "out:db3:critical") && p.places() == "writer:db1 reader:db2 out:db3"
	})
	shown := outBy.Sub(start)
	t.Logf("kill -9 of db3's mariadbd → the page shows db3 out (critical): %s", shown.Round(time.Millisecond))
	if shown > 2*time.Second {
		t.Errorf("the page showed db3 out %s after the kill, want within 2s", shown.Round(time.Millisecond))
	}
	pageWait(t, ctx, 5*time.Second, "the timeline shows db3 reader → out", func(p pageState) bool {
		return strings.Contains(p.History, "pool default / db3 reader → out critical")
	})
	// Its row keeps the facts its agent last read, marked as not current.
	pageWait(t, ctx, 10*time.Second, "db3's facts shown as last known", func(p pageState) bool {
		row := memberRow(p, "db3")
		return strings.Contains(row, "critical") && strings.Contains(row, "last known, not current: read_only · io on")
	})
	screenshot(t, ctx, filepath.Join(shots, "replica-out.png"))
	if os.Getenv("SHOAL_UI_DOCS_SCREENSHOT") == "1" {
		docs := filepath.Join(repoRoot(t), "docs", "status-page.png")
		screenshot(t, ctx, docs)
		if fi, err := os.Stat(docs); err != nil || fi.Size() > 300<<10 {
			t.Errorf("docs screenshot %s: %v, size %d bytes (limit 300 KB)", docs, err, fi.Size())
		}
	}

	// db3's own page: its server's facts, as last read, dimmed and labelled.
	db3Srv := serveAPI(t, db3.a)
	if err := chromedp.Do(ctx, chromedp.Navigate(db3Srv.URL+"/ui")); err != nil {
		t.Fatal(err)
	}
	pageWait(t, ctx, 10*time.Second, "db3's page shows its server's facts as last known", func(p pageState) bool {
		return strings.Contains(p.Local, "state critical") &&
			strings.Contains(p.Local, "server facts last known, not current: the latest check did not reach the server") &&
			strings.Contains(p.Local, "read_only ON") && p.OldFacts >= 5
	})
	screenshot(t, ctx, filepath.Join(shots, "db-agent-server-down.png"))
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/ui")); err != nil {
		t.Fatal(err)
	}

	// Restart: back as a reader, its facts current again.
	r2.Restart()
	pageWait(t, ctx, 60*time.Second, "db3 back as a reader", func(p pageState) bool {
		return p.places() == "writer:db1 reader:db2 reader:db3" && strings.Contains(memberRow(p, "db3"), "passing") &&
			!strings.Contains(p.Members, "last known")
	})

	// A db agent's page: its own server's probe facts, version included.
	dbSrv := serveAPI(t, db2.a)
	if err := chromedp.Do(ctx, chromedp.Navigate(dbSrv.URL+"/ui")); err != nil {
		t.Fatal(err)
	}
	pageWait(t, ctx, 10*time.Second, "db2's page shows its local database", func(p pageState) bool {
		return p.Local != "" && strings.Contains(p.Local, "server version 10.") && strings.Contains(p.Local, "MariaDB") &&
			strings.Contains(p.Local, "read_only ON") && strings.Contains(p.Local, "state passing") &&
			strings.Contains(p.Local, source) && p.places() == "writer:db1 reader:db2 reader:db3"
	})
	screenshot(t, ctx, filepath.Join(shots, "db-agent.png"))
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/ui")); err != nil {
		t.Fatal(err)
	}
	pageWait(t, ctx, 10*time.Second, "the app agent's page again", func(p pageState) bool { return p.Conn == "live" && p.Local == "" })

	// A second writable server: the conflict banner, one writer kept.
	r1.MustExec("SET GLOBAL read_only=OFF")
	pageWait(t, ctx, 15*time.Second, "the conflict banner", func(p pageState) bool {
		return strings.Contains(p.Banners, "Writer conflict in cluster default: db1, db2 are writable") &&
			strings.Count(p.places(), "writer:") == 1
	})
	screenshot(t, ctx, filepath.Join(shots, "conflict.png"))
	r1.MustExec("SET GLOBAL read_only=ON")
	pageWait(t, ctx, 15*time.Second, "the conflict over", func(p pageState) bool {
		return !strings.Contains(p.Banners, "conflict") && p.places() == "writer:db1 reader:db2 reader:db3"
	})

	// A narrow (~80-column) window: nothing overflows the page sideways.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(700, 1000)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	p = readPage(t, ctx)
	if p.ScrollWidth > 700 {
		t.Errorf("at 700 px the page is %d px wide: it scrolls sideways", p.ScrollWidth)
	}
	if p.HistoryClipped {
		t.Errorf("at 700 px the history box shows part of its events (the last one sliced): it should show them all")
	}
	screenshot(t, ctx, filepath.Join(shots, "narrow.png"))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 860)); err != nil {
		t.Fatal(err)
	}

	// A forged member named with markup, with markup in a tag.
	hostileHealth := tags.Encode(tags.Health{State: tags.Critical, Reason: "probe-failed"})
	hostile := testkit.StartSerf(t, hostileName, map[string]string{"role": "db", "sh": hostileHealth, "note": hostileTag}, app.cfg.Bind)
	pageWait(t, ctx, 20*time.Second, "the hostile member shown as literal text, in the pool and the members", func(p pageState) bool {
		return slices.Contains(p.Rows, "out:"+hostileName+":critical") && slices.Contains(p.MemberNames, hostileName) &&
			strings.Contains(p.Members, "note="+hostileTag)
	})
	p = readPage(t, ctx)
	if p.Pwned != "undefined" {
		t.Errorf("window.__pwned = %s: markup from a member ran", p.Pwned)
	}
	if p.Images != 0 || p.Scripts != 1 {
		t.Errorf("the page has %d <img> and %d <script> elements, want 0 and 1: markup from a member was injected", p.Images, p.Scripts)
	}
	screenshot(t, ctx, filepath.Join(shots, "hostile.png"))

	// The file sink's directory goes away, then the pool changes (the forged
	// member leaves): the file sink fails and is shown behind the pool at
	// the generation it applied; HAProxy applies the new pool.
	pageWait(t, ctx, 10*time.Second, "both sinks at the pool with the forged member", func(p pageState) bool {
		return atPool(p, "file") && atPool(p, "haproxy")
	})
	before := readPage(t, ctx)
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := hostile.Leave(); err != nil {
		t.Fatal(err)
	}
	pageWait(t, ctx, 20*time.Second, "the file sink shown behind the pool, HAProxy at it", func(p pageState) bool {
		kind, cell := appliedOf(p, "file")
		var applied, gen int
		n, _ := fmt.Sscanf(cell, "%d / %d behind", &applied, &gen)
		_, was := appliedOf(before, "file")
		return kind == "behind" && n == 2 && applied < gen && strings.HasPrefix(was, fmt.Sprintf("%d / ", applied)) &&
			atPool(p, "haproxy") && strings.Contains(p.Banners, "Sink file failing:")
	})
	screenshot(t, ctx, filepath.Join(shots, "sink-behind.png"))

	// The agent stops answering: the page says so, and dims its old data.
	srv.CloseClientConnections()
	srv.Close()
	stopped := time.Now()
	pageWait(t, ctx, 10*time.Second, "the page shows disconnected", func(p pageState) bool {
		return p.Conn == "disconnected" && p.Stale && strings.Contains(p.Banners, "Disconnected since") &&
			strings.Contains(p.Banners, "it is not live")
	})
	t.Logf("agent stopped answering → the page shows disconnected: %s", time.Since(stopped).Round(time.Millisecond))
	screenshot(t, ctx, filepath.Join(shots, "disconnected.png"))

	// No CSP violation, no script error, in the whole run.
	for _, m := range consoleMsgs() {
		low := strings.ToLower(m)
		if strings.Contains(low, "content security policy") || strings.Contains(low, "exception") ||
			strings.Contains(low, "uncaught") || strings.Contains(low, "refused to") {
			t.Errorf("browser console: %s", m)
		}
	}
}

// serveAPI serves a's HTTP API on loopback, as `shoal agent` does.
func serveAPI(t *testing.T, a *agent.Agent) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = api.New(a, slog.New(slog.DiscardHandler), srv.Listener.Addr().String(), nil)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// pageState is what the page shows, read from its DOM.
type pageState struct {
	// Rows are the pool rows, "place:node:reason".
	Rows []string `json:"rows"`
	// Lags are the pool rows' lag cells, "node:lag".
	Lags        []string `json:"lags"`
	Conn        string   `json:"conn"` // the connection chip: live, disconnected, connecting
	Stale       bool     `json:"stale"`
	Banners     string   `json:"banners"`
	Members     string   `json:"members"` // the members table's text, cells joined by spaces
	MemberNames []string `json:"memberNames"`
	Sinks       string   `json:"sinks"` // sink states, space separated
	Local       string   `json:"local"` // the local database section, "" when hidden
	History     string   `json:"history"`
	Text        string   `json:"text"`
	Pwned       string   `json:"pwned"` // typeof window.__pwned
	Images      int      `json:"images"`
	Scripts     int      `json:"scripts"`
	ScrollWidth int      `json:"scrollWidth"`
	// HistoryClipped: the history list is taller than its box.
	HistoryClipped bool `json:"historyClipped"`
	OldFacts       int  `json:"oldFacts"` // elements showing facts marked not current
	// SinkApplied is each sink's "name:kind:cell" (kind current, behind or
	// none; cell the applied / pool text), one a line.
	SinkApplied string `json:"sinkApplied"`
}

// appliedOf is the kind (current, behind, none) and the applied / pool
// cell of the sink named name ("" when absent).
func appliedOf(p pageState, name string) (kind, cell string) {
	for _, s := range strings.Split(p.SinkApplied, "\n") {
		if rest, ok := strings.CutPrefix(s, name+":"); ok {
			kind, cell, _ = strings.Cut(rest, ":")
			return kind, cell
		}
	}
	return "", ""
}

// atPool: the sink named name is shown at the pool's generation, "N / N".
func atPool(p pageState, name string) bool {
	kind, cell := appliedOf(p, name)
	var applied, gen int
	n, _ := fmt.Sscanf(cell, "%d / %d", &applied, &gen)
	return kind == "current" && n == 2 && applied == gen && gen > 0 && cell == fmt.Sprintf("%d / %d", applied, gen)
}

// memberRow is node's row of the members table ("" when absent).
func memberRow(p pageState, node string) string {
	for _, row := range strings.Split(p.Members, "\n") {
		if strings.HasPrefix(row, node+" ") {
			return row
		}
	}
	return ""
}

// places is "place:node ..." in page order.
func (p pageState) places() string {
	var out []string
	for _, r := range p.Rows {
		place, rest, _ := strings.Cut(r, ":")
		if i := strings.LastIndex(rest, ":"); i >= 0 {
			rest = rest[:i]
		}
		out = append(out, place+":"+rest)
	}
	return strings.Join(out, " ")
}

// readPageJS reads the page's state; textContent only.
const readPageJS = `(() => {
  const text = (el) => el ? el.textContent.replace(/\s+/g, ' ').trim() : '';
  const cells = (tr) => Array.from(tr.children).map(text).filter(s => s !== '').join(' ');
  return {
    rows: Array.from(document.querySelectorAll('#pool tr[data-place]')).map(tr =>
      tr.getAttribute('data-place') + ':' + text(tr.querySelector('.c-node')) + ':' + text(tr.querySelector('.c-reason')).replace('—', '')),
    lags: Array.from(document.querySelectorAll('#pool tr[data-place]')).map(tr =>
      text(tr.querySelector('.c-node')) + ':' + text(tr.querySelector('.c-lag'))),
    conn: text(document.querySelector('#conn .chip')),
    stale: document.body.classList.contains('stale'),
    banners: text(document.getElementById('banners')),
    members: Array.from(document.querySelectorAll('#members tbody tr')).map(cells).join('\n'),
    memberNames: Array.from(document.querySelectorAll('#members tbody .c-node .node')).map(text),
    sinks: Array.from(document.querySelectorAll('#sinks tbody .c-status .chip:first-child')).map(text).join(' '),
    sinkApplied: Array.from(document.querySelectorAll('#sinks tbody tr')).map(tr =>
      text(tr.querySelector('.c-node')) + ':' + tr.getAttribute('data-sink-applied') + ':' + text(tr.children[4])).join('\n'),
    local: document.getElementById('local-section').hidden ? '' :
      Array.from(document.querySelectorAll('#local dt, #local dd')).map(text).join(' '),
    history: Array.from(document.querySelectorAll('#history li')).map(cells).join('\n'),
    text: text(document.body),
    pwned: typeof window.__pwned,
    images: document.getElementsByTagName('img').length,
    scripts: document.getElementsByTagName('script').length,
    scrollWidth: document.documentElement.scrollWidth,
    historyClipped: (() => { const tl = document.querySelector('#history .timeline'); return !!tl && tl.scrollHeight > tl.clientHeight + 1; })(),
    oldFacts: document.querySelectorAll('.facts-old').length,
  };
})()`

func readPage(t *testing.T, ctx context.Context) pageState {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := chromedp.Run(c, chromedp.Evaluate[pageState](readPageJS))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	return p
}

// pageWait polls the page every 50 ms until cond holds and returns when it
// first did; it fails after d with what the page showed last.
func pageWait(t *testing.T, ctx context.Context, d time.Duration, what string, cond func(pageState) bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		p := readPage(t, ctx)
		if cond(p) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; the page shows pool %q, conn %q, banners %q\nmembers:\n%s\nhistory:\n%s",
				what, d, p.Rows, p.Conn, p.Banners, p.Members, p.History)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d KB)", path, len(png)>>10)
}

// chromiumBin finds Debian's chromium ($SHOAL_CHROMIUM overrides). Without
// it the test skips, loudly, or fails under CI=true.
func chromiumBin(t *testing.T) string {
	t.Helper()
	candidates := []string{"chromium", "chromium-browser", "/usr/bin/chromium"}
	if env := os.Getenv("SHOAL_CHROMIUM"); env != "" {
		candidates = []string{env}
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("chromium not found (%s): the status page's browser test did NOT run; apt-get install -y chromium", strings.Join(candidates, ", "))
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the browser test must not be skipped)", msg)
	}
	fmt.Fprintln(os.Stderr, "SKIP: "+msg)
	t.Skip(msg)
	return ""
}

// browser starts headless chromium with the flags this closed network
// needs and a fresh profile. consoleMsgs returns what the page logged.
func browser(t *testing.T, bin string) (ctx context.Context, consoleMsgs func() []string) {
	t.Helper()
	profile, err := os.MkdirTemp("", "shoal-ui-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	var chromeOut testkit.SyncBuffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // root in CI
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 860),
		chromedp.CombinedOutput(&chromeOut),
	)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
		if t.Failed() {
			t.Logf("--- chromium output ---\n%s", chromeOut.String())
		}
	})
	// The first run starts the browser: no timeout on it, or the timeout
	// would end the browser too.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium %s: %v\n%s", bin, err, chromeOut.String())
	}
	var mu sync.Mutex
	var msgs []string
	it := chromedp.Console(ctx)
	go func() {
		for m, err := range it {
			if err != nil {
				return
			}
			mu.Lock()
			msgs = append(msgs, m.String())
			mu.Unlock()
		}
	}()
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(msgs)
	}
}

// shotDir is build/ui/ at the repository root, created.
func shotDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "build", "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

// ---- the cluster -----------------------------------------------------------

const probePW = "probe-pw"

type node struct {
	a   *agent.Agent
	cfg *config.Config
}

func baseConfig(t *testing.T, name string, join ...string) *config.Config {
	t.Helper()
	c := config.Default()
	c.Node, c.Bind, c.Profile = name, ports.Free(t), "fast"
	c.RPCAddr, c.HTTPAddr = "", ""
	c.Join = join
	c.APITokenFile = filepath.Join(t.TempDir(), "api-token")
	c.RetryInterval = 100 * time.Millisecond
	c.RetryMaxWait = time.Second
	c.InsecureNoEncryption = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func dbConfig(t *testing.T, name string, s *mariadbtest.Server, join ...string) *config.Config {
	t.Helper()
	c := baseConfig(t, name, join...)
	c.MySQL.Addr = s.Addr()
	c.MySQL.User = "shoal"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func startAgent(t *testing.T, c *config.Config) *node {
	t.Helper()
	var logs testkit.SyncBuffer
	a, err := agent.New(c, logging.New(&logs, "text", slog.LevelInfo))
	if err != nil {
		t.Fatal(err)
	}
	err = testkit.StartRetrying(func() error { return a.Start(context.Background()) }, func() {
		a.Shutdown()
		c.Bind = ports.Free(t)
		if a, err = agent.New(c, logging.New(&logs, "text", slog.LevelInfo)); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatalf("start %s: %v", c.Node, err)
	}
	t.Cleanup(func() {
		a.Shutdown()
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", c.Node, logs.String())
		}
	})
	return &node{a: a, cfg: c}
}

func replicatedServers(t *testing.T) (primary, r1, r2 *mariadbtest.Server) {
	t.Helper()
	t.Setenv("SHOAL_MYSQL_PASSWORD", probePW)
	primary, rs := mariadbtest.StartReplicated(t, 2, mariadbtest.User{Name: "shoal", Password: probePW, Grants: "SLAVE MONITOR"})
	return primary, rs[0], rs[1]
}

// poolOf is "writers|readers|out" as a sees it.
func poolOf(a *agent.Agent) string {
	v, err := a.PoolView("")
	if err != nil {
		return err.Error()
	}
	var w, r, o []string
	for _, n := range v.Writers {
		w = append(w, n.Name)
	}
	for _, n := range v.Readers {
		r = append(r, n.Name)
	}
	for _, n := range v.Out {
		o = append(o, n.Name+"("+n.Reason+")")
	}
	slices.Sort(w)
	slices.Sort(r)
	slices.Sort(o)
	return strings.Join(w, ",") + "|" + strings.Join(r, ",") + "|" + strings.Join(o, ",")
}
