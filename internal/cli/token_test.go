package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/testutil/agenttest"
)

// startTestAgent starts an in-process agent with gossip encryption and its
// token in a temporary api_token_file.
func startTestAgent(t *testing.T) (*agent.Agent, *config.Config) {
	t.Helper()
	key, err := agent.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	c := agenttest.Config(t, "cli1", key)
	return agenttest.Start(t, c), c
}

// serveOn serves a's API on ln (as runAgent does) and returns its address.
func serveOn(t *testing.T, a *agent.Agent, ln net.Listener) string {
	t.Helper()
	srv := api.NewHTTPServer(api.New(a, slog.New(slog.DiscardHandler), ln.Addr().String(), nil), api.DefaultLimits())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// run runs the CLI with args and returns its exit code, stdout, stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Execute(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCLIFindsTheToken: without --token the CLI reads the token file
// named by --token-file, else SHOAL_API_TOKEN_FILE, else the default path
// (never the one the agent reports), after a 401; --token and
// SHOAL_HTTP_TOKEN take precedence; a wrong one is refused; a token file
// it cannot use gives one clear line and exit 1.
func TestCLIFindsTheToken(t *testing.T) {
	t.Setenv("SHOAL_HTTP_TOKEN", "")
	t.Setenv("SHOAL_API_TOKEN_FILE", "")
	empty := t.TempDir()
	t.Setenv("STATE_DIRECTORY", empty)
	a, cfg := startTestAgent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, a, ln)

	// No token where the CLI looks: it says where it looked and how to
	// give one, and does not read the file the agent reports.
	code, out, errOut := run(t, "keys", "list", "--http-addr", addr)
	if code != ExitError || strings.Contains(out, cfg.Encrypt) || !strings.Contains(errOut, filepath.Join(empty, "api-token")) ||
		!strings.Contains(errOut, "--token-file or SHOAL_API_TOKEN_FILE") || !strings.Contains(errOut, "pass --token") {
		t.Fatalf("keys list without a token where the CLI looks: exit %d\n%s%s", code, out, errOut)
	}
	// The default path ($STATE_DIRECTORY/api-token), --token-file,
	// SHOAL_API_TOKEN_FILE.
	t.Setenv("STATE_DIRECTORY", filepath.Dir(cfg.APITokenFile))
	if code, out, errOut = run(t, "keys", "list", "--http-addr", addr); code != ExitOK || !strings.Contains(out, cfg.Encrypt) {
		t.Fatalf("keys list with the token at the default path: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("STATE_DIRECTORY", empty)
	if code, out, errOut = run(t, "keys", "list", "--http-addr", addr, "--token-file", cfg.APITokenFile); code != ExitOK || !strings.Contains(out, cfg.Encrypt) {
		t.Fatalf("keys list --token-file: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("SHOAL_API_TOKEN_FILE", cfg.APITokenFile)
	if code, out, errOut = run(t, "keys", "list", "--http-addr", addr); code != ExitOK || !strings.Contains(out, cfg.Encrypt) {
		t.Fatalf("keys list with SHOAL_API_TOKEN_FILE: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, "keys", "list", "--http-addr", addr, "--token", a.APIToken())
	if code != ExitOK || !strings.Contains(out, cfg.Encrypt) {
		t.Fatalf("keys list --token: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = run(t, "keys", "list", "--http-addr", addr, "--token", "wrong-token-0123456789")
	if code != ExitError || strings.Contains(errOut, "agent answered") || !strings.Contains(errOut, "wrong API token") || strings.Contains(errOut, a.APIToken()) {
		t.Fatalf("keys list with a wrong --token: exit %d: %s", code, errOut)
	}
	t.Setenv("SHOAL_HTTP_TOKEN", "wrong-from-env-0123456789")
	if code, _, errOut = run(t, "keys", "list", "--http-addr", addr); code != ExitError || !strings.Contains(errOut, "wrong API token") {
		t.Fatalf("keys list with a wrong SHOAL_HTTP_TOKEN: exit %d: %s", code, errOut)
	}
	t.Setenv("SHOAL_HTTP_TOKEN", a.APIToken())
	if code, out, errOut = run(t, "keys", "list", "--http-addr", addr); code != ExitOK {
		t.Fatalf("keys list with SHOAL_HTTP_TOKEN: exit %d\n%s%s", code, out, errOut)
	}
	// Help never shows the token, even when it is in the environment.
	if _, out, _ = run(t, "keys", "list", "--help"); strings.Contains(out, a.APIToken()) || !strings.Contains(out, "--token") {
		t.Fatalf("help shows the token or lacks --token:\n%s", out)
	}
	t.Setenv("SHOAL_HTTP_TOKEN", "")

	// A token file open to others is refused by the reader: one line, exit 1.
	if err := os.Chmod(cfg.APITokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(t, "leave", "--http-addr", addr)
	if code != ExitError || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, cfg.APITokenFile) || !strings.Contains(errOut, "--token") {
		t.Fatalf("leave with an unusable token file: exit %d: %q", code, errOut)
	}
	select {
	case <-a.LeaveRequested():
		t.Fatal("the agent was asked to leave without the token")
	default:
	}
	// Reads need no token at all.
	if code, out, errOut = run(t, "members", "--http-addr", addr); code != ExitOK {
		t.Fatalf("members: exit %d\n%s%s", code, out, errOut)
	}
}

// TestAddrHelpers: an --http-addr without a port gets the agent's.
func TestAddrHelpers(t *testing.T) {
	for in, want := range map[string]string{
		"localhost": "localhost:8946", "127.0.0.1:9000": "127.0.0.1:9000", "https://db1": "https://db1:8946",
		"http://[::1]": "http://[::1]:8946", "::1": "[::1]:8946", "[::1]:1": "[::1]:1", "https://db1:443": "https://db1:443",
	} {
		if got := withDefaultPort(in); got != want {
			t.Errorf("withDefaultPort(%q) = %q, want %q", in, got, want)
		}
	}
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key to dir, and returns their paths.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shoal test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestTLSListenerAndCLI: with http_tls_cert_file/key_file the agent's
// listener speaks TLS 1.2+ only; the CLI talks to https://ADDR verifying
// the certificate with --ca-file (or SHOAL_HTTP_CA_FILE), and refuses an
// unknown one.
func TestTLSListenerAndCLI(t *testing.T) {
	t.Setenv("SHOAL_HTTP_TOKEN", "")
	t.Setenv("SHOAL_HTTP_CA_FILE", "")
	a, cfg := startTestAgent(t)
	t.Setenv("SHOAL_API_TOKEN_FILE", cfg.APITokenFile)
	certFile, keyFile := writeSelfSigned(t, t.TempDir())
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.HTTPTLSCertFile, cfg.HTTPTLSKeyFile = certFile, keyFile
	ln, err := listenHTTP(cfg, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, a, ln)
	url := "https://" + addr

	code, out, errOut := run(t, "keys", "list", "--http-addr", url, "--ca-file", certFile)
	if code != ExitOK || !strings.Contains(out, cfg.Encrypt) {
		t.Fatalf("keys list over TLS: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("SHOAL_HTTP_CA_FILE", certFile)
	if code, out, errOut = run(t, "info", "--http-addr", url); code != ExitOK || !strings.Contains(out, "api token file") {
		t.Fatalf("info over TLS with SHOAL_HTTP_CA_FILE: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("SHOAL_HTTP_CA_FILE", "")
	if code, _, errOut = run(t, "info", "--http-addr", url); code != ExitError || !strings.Contains(errOut, "certificate") {
		t.Fatalf("info over TLS without the CA: exit %d: %s", code, errOut)
	}
	if code, _, errOut = run(t, "info", "--http-addr", url, "--ca-file", keyFile); code != ExitUsage || !strings.Contains(errOut, "no PEM certificate") {
		t.Fatalf("--ca-file without a certificate: exit %d: %s", code, errOut)
	}
	// Plain HTTP to the TLS port gets nothing useful.
	if code, _, _ = run(t, "info", "--http-addr", addr); code == ExitOK {
		t.Fatal("plain HTTP answered on the TLS listener")
	}
	// TLS 1.1 is refused.
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(certFile)
	pool.AppendCertsFromPEM(pem)
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get(url + "/v1/health"); err == nil {
		resp.Body.Close()
		t.Fatal("a TLS 1.1 client was served")
	}

	// A missing certificate file is an error naming the keys.
	cfg.HTTPTLSCertFile = filepath.Join(t.TempDir(), "missing.crt")
	if _, err := listenHTTP(cfg, 16, nil); err == nil || !strings.Contains(err.Error(), "http_tls_cert_file") {
		t.Fatalf("missing certificate: %v", err)
	}
}
