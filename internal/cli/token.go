package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/shoaldb/shoal/internal/apitoken"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/fsutil"
	"github.com/shoaldb/shoal/pkg/client"
)

// tokenFile is where the CLI reads the API token when neither --token nor
// SHOAL_HTTP_TOKEN gives it: --token-file, else SHOAL_API_TOKEN_FILE (the
// agent's own variable), else the agent's default path
// (config.APITokenPath). Never a path an agent names: whatever listens on
// --http-addr could name any file of this host.
//
// A token read from a file goes only to a process of this host running as
// the file's owner or root: every connection the client makes once the
// token is read is checked against the host's socket table (peerUID)
// before a byte is sent. A program of another user on the agent's port
// (the agent down, or a port given by mistake) gets no token.
type tokenFile struct {
	path string // absolute
	from string // how path was chosen, for messages

	mu    sync.Mutex
	read  bool // the token was read: connections are checked from now on
	owner int  // uid owning the file
}

// tokenFile returns where this command reads the API token from.
func (g *globals) tokenFile() *tokenFile {
	explicit, from := g.tokenFilePath, "from --token-file"
	if explicit == "" {
		explicit, from = g.getenv("SHOAL_API_TOKEN_FILE"), "from SHOAL_API_TOKEN_FILE"
	}
	switch {
	case explicit != "":
	case g.getenv("STATE_DIRECTORY") != "":
		from = "the default path under $STATE_DIRECTORY"
	case os.Geteuid() == 0:
		from = "the default path for root"
	default:
		from = "the default path for a user other than root"
	}
	c := config.Config{APITokenFile: explicit}
	return &tokenFile{path: c.APITokenPath(g.getenv, os.Geteuid()), from: from}
}

// httpClient sends requests on fresh connections (no keep-alive: each one
// is checked once the token is read), to the address given (no proxy, no
// redirect).
func (f *tokenFile) httpClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DisableKeepAlives = true
	tr.DialContext = f.dial
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// dial connects to addr; once the token is read, it keeps the connection
// only if the process at the far end runs as the token file's owner or
// root.
func (f *tokenFile) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	read, owner := f.read, f.owner
	f.mu.Unlock()
	if !read {
		return conn, nil
	}
	if err := f.checkPeer(conn, addr, owner); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// checkPeer refuses a connection whose far end is not a process of this
// host running as owner or root.
func (f *tokenFile) checkPeer(conn net.Conn, addr string, owner int) error {
	uid, err := peerUID(conn)
	switch {
	case errors.Is(err, errNotLocal):
		return fmt.Errorf("not sending the API token of %s to %s: no process of this host listens there (a remote agent's token is on its host): pass --token or set SHOAL_HTTP_TOKEN", f.path, addr)
	case err != nil:
		return fmt.Errorf("not sending the API token of %s to %s: cannot tell which user serves it (%v): pass --token or set SHOAL_HTTP_TOKEN", f.path, addr, err)
	case uid != owner && uid != 0:
		return fmt.Errorf("not sending the API token of %s to %s: the process listening there runs as uid %d, not as the file's owner (uid %d) or root; is another program on the agent's port? pass --token to send a token anyway", f.path, addr, uid, owner)
	}
	return nil
}

// find is the client's token finder: it reads the file, then checks the
// agent's address once (so that a refusal is this message, not a failed
// request) before handing the token over.
func (f *tokenFile) find(ctx context.Context, c *client.Client) (string, error) {
	tok, owner, err := readTokenFile(f.path)
	if err != nil {
		return "", f.readError(c.Addr(), err)
	}
	f.mu.Lock()
	f.read, f.owner = true, owner
	f.mu.Unlock()
	hostport, err := dialAddr(c.Addr())
	if err != nil {
		return "", err
	}
	conn, err := f.dial(ctx, "tcp", hostport)
	if err != nil {
		return "", err
	}
	conn.Close()
	return tok, nil
}

// readError says which file was tried, and how to give the token instead.
func (f *tokenFile) readError(addr string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the agent at %s needs the API token; there is none in %s (%s): pass --token or set SHOAL_HTTP_TOKEN, or name the agent's api_token_file with --token-file or SHOAL_API_TOKEN_FILE", addr, f.path, f.from)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("permission denied reading %s (%s): run as root or the agent's user, or pass --token", f.path, f.from)
	}
	return fmt.Errorf("read the API token (%s): %w; run as root or the agent's user, or pass --token", f.from, err)
}

// readTokenFile reads the token and the uid owning its file.
func readTokenFile(path string) (string, int, error) {
	tok, err := apitoken.Read(path)
	if err != nil {
		return "", 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", 0, fmt.Errorf("api token file: %w", err)
	}
	owner, ok := fsutil.Owner(st)
	if !ok {
		return "", 0, fmt.Errorf("api token file %s: cannot tell its owner", path)
	}
	return tok, owner, nil
}

// dialAddr is the host:port of an --http-addr (host:port or a URL).
func dialAddr(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		return addr, nil
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", usagef("--http-addr %q: %w", addr, err)
	}
	return u.Host, nil
}

// withDefaultPort adds the agent's default API port to an --http-addr
// that has none ("localhost", "https://db1"), which would otherwise dial
// port 80 or 443.
func withDefaultPort(addr string) string {
	scheme, hostport := "", addr
	if i := strings.Index(addr, "://"); i >= 0 {
		scheme, hostport = addr[:i+3], addr[i+3:]
	}
	if hostport == "" || strings.ContainsAny(hostport, "/?#") {
		return addr
	}
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return addr
	}
	_, port, _ := net.SplitHostPort(client.DefaultAddr)
	host := strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	return scheme + net.JoinHostPort(host, port)
}

// caTLSConfig trusts the PEM certificates in path (and nothing else) to
// verify the agent.
func caTLSConfig(path string) (*tls.Config, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usagef("--ca-file %s: no PEM certificate in it", path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
