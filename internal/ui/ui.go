// Package ui serves the agent's live status page: one HTML page, one style
// sheet and one script, embedded in the binary. The page reads the agent's
// open JSON endpoints (same origin, no token) about once a second and
// renders every string it gets with text nodes only. Nothing is loaded
// from anywhere else, and the page can change nothing.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
)

//go:embed static
var static embed.FS

// CSP is the page's Content-Security-Policy: its own script and style
// only (no inline code, no eval), data: images (the favicon), requests to
// the agent itself, no framing, no <base>.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// assets maps each served asset to its content type. Only these names are
// served; anything else under /ui/ is a 404.
var assets = map[string]string{
	"app.js":    "text/javascript; charset=utf-8",
	"style.css": "text/css; charset=utf-8",
}

// Files returns the embedded files (index.html and the assets), for tests.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	return sub
}

// Page serves the status page (GET /ui).
func Page(w http.ResponseWriter, r *http.Request) {
	serve(w, "index.html", "text/html; charset=utf-8")
}

// Asset serves one of the page's assets (GET /ui/{asset}).
func Asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("asset")
	ct, ok := assets[name]
	if !ok || path.Base(name) != name {
		securityHeaders(w)
		http.Error(w, "no such asset", http.StatusNotFound)
		return
	}
	serve(w, name, ct)
}

func serve(w http.ResponseWriter, name, contentType string) {
	b, err := fs.ReadFile(Files(), name)
	securityHeaders(w)
	if err != nil {
		http.Error(w, "no such asset", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", contentType)
	// The files change only with the binary; revalidating each load is
	// cheap and never shows a page of another version.
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// securityHeaders sets the headers every answer of the page carries.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}
