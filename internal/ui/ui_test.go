package ui_test

import (
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/testutil/agenttest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/internal/ui"
)

// serve starts an agent and serves its API (the page included) as
// `shoal agent` does; it returns the base URL and the agent's token.
func serve(t *testing.T) (string, string) {
	t.Helper()
	a := agenttest.Start(t, agenttest.Config(t, "ui1", ""))
	return agenttest.Serve(t, a), a.APIToken()
}

func request(t *testing.T, method, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return testkit.Fetch(t, req)
}

// TestPageServedOpenWithHeaders: /ui and its two assets are served without
// a token, each with its content type, the strict CSP, nosniff and
// no-referrer; the page is the embedded file and loads only them.
func TestPageServedOpenWithHeaders(t *testing.T) {
	base, _ := serve(t)
	index, err := fs.ReadFile(ui.Files(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, ctype, file string }{
		{"/ui", "text/html; charset=utf-8", "index.html"},
		{"/ui/app.js", "text/javascript; charset=utf-8", "app.js"},
		{"/ui/style.css", "text/css; charset=utf-8", "style.css"},
	} {
		resp, body := request(t, "GET", base+tc.path) // no token
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s", tc.path, resp.StatusCode, body)
			continue
		}
		want, err := fs.ReadFile(ui.Files(), tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if body != string(want) || len(body) < 200 {
			t.Errorf("GET %s: body is not the embedded %s (%d bytes)", tc.path, tc.file, len(body))
		}
		h := resp.Header
		if got := h.Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		csp := h.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
			"connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, d+";") && !strings.HasSuffix(csp, d) {
				t.Errorf("GET %s: CSP %q lacks %q", tc.path, csp, d)
			}
		}
		if strings.Contains(csp, "unsafe-") || strings.Contains(csp, "*") || strings.Contains(csp, "http") {
			t.Errorf("GET %s: CSP %q is not strict", tc.path, csp)
		}
		for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
			if got := h.Get(k); got != v {
				t.Errorf("GET %s: %s %q, want %q", tc.path, k, got, v)
			}
		}
		for k := range h {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				t.Errorf("GET %s: CORS header %s", tc.path, k)
			}
		}
	}
	if resp, _ := request(t, "HEAD", base+"/ui"); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /ui: %d", resp.StatusCode)
	}
	// The page loads exactly its two assets, by relative URL.
	refs := regexp.MustCompile(`(?i)\b(?:src|href)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(string(index), -1)
	var got []string
	for _, r := range refs {
		got = append(got, r[1])
	}
	if strings.Join(got, " ") != "data:, ui/style.css ui/app.js" {
		t.Errorf("index.html references %q, want the favicon stub, ui/style.css and ui/app.js", got)
	}
}

// TestPageRefusesWritesAndUnknownAssets: no method but GET/HEAD reaches the
// page, with or without the token; only the two assets are served.
func TestPageRefusesWritesAndUnknownAssets(t *testing.T) {
	base, token := serve(t)
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		for _, path := range []string{"/ui", "/ui/app.js", "/ui/style.css"} {
			for _, hdr := range [][]string{nil, {api.TokenHeader, token}} {
				resp, body := request(t, method, base+path, hdr...)
				if resp.StatusCode != http.StatusMethodNotAllowed || strings.Contains(body, "<html") {
					t.Errorf("%s %s (token %v): %d %.80s, want 405", method, path, hdr != nil, resp.StatusCode, body)
				}
			}
		}
	}
	for _, path := range []string{"/ui/index.html", "/ui/nope.js", "/ui/..%2fgo.mod", "/ui/app.js.map", "/ui/"} {
		resp, body := request(t, "GET", base+path)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d %.80s, want 404", path, resp.StatusCode, body)
		}
	}
	// A page of another site cannot read it either (the API's origin check).
	resp, _ := request(t, "GET", base+"/ui", "Origin", "http://evil.example")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /ui with a foreign Origin: %d, want 403", resp.StatusCode)
	}
}

// externalRef finds a reference to another site: an http(s) or websocket
// URL, a protocol-relative //host, a CSS import or a url() that is not
// data:.
var externalRef = regexp.MustCompile(`(?i)(?:https?|wss?|ftp):|(?:^|[^:/\w])//[a-z0-9-]+\.[a-z0-9.-]+|@import|url\(\s*['"]?(?:[a-z]+:|//)`)

func TestExternalRefDetector(t *testing.T) {
	for _, bad := range []string{
		`<script src="https://cdn.example/x.js">`, `<link href="http://fonts.example/a.css">`,
		`<img src="//tracker.example/p.gif">`, `@import "a.css";`, `background: url(http://x.example/a.png)`,
		`new WebSocket("wss://x.example")`, `fetch('//evil.example/v1')`, `url( 'https:x')`,
	} {
		if !externalRef.MatchString(bad) {
			t.Errorf("detector misses %q", bad)
		}
	}
	for _, ok := range []string{`// a comment`, `<link rel="icon" href="data:,">`, `fetch('v1/pool')`, `/* style */`, `a // b.c`} {
		if externalRef.MatchString(ok) {
			t.Errorf("detector flags %q", ok)
		}
	}
}

// TestEmbeddedFilesAreSelfContained: the three files are embedded, and none
// references anything outside the agent: no URL of another site, no
// inline script or style (the CSP forbids them), and the script never turns
// data into markup.
func TestEmbeddedFilesAreSelfContained(t *testing.T) {
	var names []string
	err := fs.WalkDir(ui.Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, path)
		b, err := fs.ReadFile(ui.Files(), path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := externalRef.FindString(line); m != "" {
				t.Errorf("%s:%d references something outside the agent (%q): %s", path, i+1, m, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != "app.js index.html style.css" {
		t.Fatalf("embedded files %q, want app.js index.html style.css", names)
	}
	index, _ := fs.ReadFile(ui.Files(), "index.html")
	if re := regexp.MustCompile(`(?i)<style|\sstyle\s*=|\son[a-z]+\s*=|<script(?:\s[^>]*)?>[^<]+</script>|=\s*"?\s*javascript:`); re.Match(index) {
		t.Errorf("index.html has inline style, script or event handler: %q", re.Find(index))
	}
	script, _ := fs.ReadFile(ui.Files(), "app.js")
	for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('on", "setAttribute('href", "setAttribute('src", "setAttribute('style"} {
		if strings.Contains(string(script), banned) {
			t.Errorf("app.js uses %s: remote text must only become text nodes", banned)
		}
	}
}
