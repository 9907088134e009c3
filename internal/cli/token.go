package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/apitoken"
	"github.com/shoaldb/shoal/pkg/client"
)

// findToken finds the API token of the agent c talks to, after it answered
// 401: it asks the agent where its token file is (/v1/agent/self, open)
// and reads it. Only for an agent on this host: a remote agent's path
// names a file of another machine, and a local token must never be sent
// to another host because it asked.
func findToken(ctx context.Context, c *client.Client) (string, error) {
	if !localAddr(c.Addr()) {
		return "", fmt.Errorf("the agent at %s needs the API token: pass --token or set SHOAL_HTTP_TOKEN (the token is in the agent's api_token_file on its host)", c.Addr())
	}
	info, err := c.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("find the API token: %w", err)
	}
	path := info.APITokenFile
	if path == "" {
		return "", errors.New("the agent needs the API token and does not say where it keeps it: pass --token or set SHOAL_HTTP_TOKEN")
	}
	tok, err := apitoken.Read(path)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return "", fmt.Errorf("permission denied reading %s: run as root or the agent's user, or pass --token", path)
		}
		return "", fmt.Errorf("read the API token: %w; run as root or the agent's user, or pass --token", err)
	}
	return tok, nil
}

// localAddr reports whether an --http-addr names this host's loopback.
func localAddr(addr string) bool {
	hostport := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return false
		}
		hostport = u.Host
	}
	return api.LoopbackHost(hostport)
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
