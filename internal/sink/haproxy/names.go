package haproxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"text/template"

	"github.com/shoaldb/shoal/internal/pool"
)

// NameData is what Config.ServerName is executed over: a pool node and its
// cluster.
type NameData struct {
	Cluster string
	Name    string // the node (agent) name
	Addr    string // the node's "host:port"
	Host    string // Addr's host, "" if Addr does not split
	Port    string // Addr's port, "" if Addr does not split
}

// templateFuncs are the functions a ServerName template may call, with
// sprig's argument order so that they work in pipelines.
var templateFuncs = template.FuncMap{
	"lower":      strings.ToLower,
	"upper":      strings.ToUpper,
	"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
	"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
	"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
}

// namer maps nodes and servers to the keys they are matched by: server
// names (MatchName) or addresses (MatchAddr).
type namer struct {
	match string
	tmpl  *template.Template // MatchName only
}

// newNamer compiles c's naming rule; c must have its defaults. With
// MatchName it executes the template once over a sample node, so that a
// template that cannot run fails validation rather than every reconcile.
func newNamer(c Config) (*namer, error) {
	if c.Match != MatchName {
		return &namer{match: c.Match}, nil
	}
	t, err := template.New("server_name").Funcs(templateFuncs).Option("missingkey=error").Parse(c.ServerName)
	if err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	n := &namer{match: c.Match, tmpl: t}
	sample := pool.Node{Name: "db1", Addr: "10.0.0.1:3306"}
	if _, err := n.nodeKey("default", sample); err != nil {
		return nil, fmt.Errorf("with node %+v: %w", sample, err)
	}
	return n, nil
}

// nodeKey is the key of a node of cluster: its server name or its address.
func (n *namer) nodeKey(cluster string, node pool.Node) (string, error) {
	if n.match == MatchAddr {
		host, port, err := net.SplitHostPort(node.Addr)
		if err != nil || host == "" {
			return "", fmt.Errorf("node %s addr %q: not host:port", node.Name, node.Addr)
		}
		return addrKey(host, port), nil
	}
	d := NameData{Cluster: cluster, Name: node.Name, Addr: node.Addr}
	d.Host, d.Port, _ = net.SplitHostPort(node.Addr)
	var b strings.Builder
	if err := n.tmpl.Execute(&b, d); err != nil {
		return "", fmt.Errorf("node %s: server_name: %w", node.Name, err)
	}
	name := b.String()
	if err := checkIdent(name); err != nil {
		if name == "" {
			err = errors.New("empty")
		}
		return "", fmt.Errorf("node %s: server_name %q: %w", node.Name, name, err)
	}
	return name, nil
}

// serverKeys are the keys a server matches: its name, or its address and,
// for a server declared by host name, that name with the port.
func (n *namer) serverKeys(s Server) []string {
	if n.match != MatchAddr {
		return []string{s.Name}
	}
	port := strconv.Itoa(s.Port)
	keys := []string{addrKey(s.Addr, port)}
	if s.FQDN != "" {
		keys = append(keys, addrKey(s.FQDN, port))
	}
	return keys
}

// addrKey is a canonical "host:port": IP addresses in their canonical form
// (IPv4-mapped IPv6 as IPv4), host names in lower case without a final dot.
func addrKey(host, port string) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	} else {
		host = strings.TrimSuffix(strings.ToLower(host), ".")
	}
	return net.JoinHostPort(host, port)
}
