package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// A client for the local agent, with its API token from the environment
// and a bound of its own on each call.
func ExampleNew() {
	c := client.New("127.0.0.1:8946",
		client.WithToken(os.Getenv("SHOAL_HTTP_TOKEN")),
		client.WithTimeout(5*time.Second),
	)
	h, err := c.Health(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.Status)
}

// An agent that serves TLS, verified with the CA that signed its
// certificate (a PEM file named by SHOAL_HTTP_CA_FILE, as for the CLI).
func ExampleWithTLSConfig() {
	pem, err := os.ReadFile(os.Getenv("SHOAL_HTTP_CA_FILE"))
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c := client.New("https://db1.example.net:8946", client.WithTLSConfig(&tls.Config{RootCAs: roots}))
	ms, err := c.Members(context.Background(), client.MemberFilter{Status: "alive"})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range ms {
		fmt.Println(m.Name, m.Addr)
	}
}

// The routing pool of one cluster. (The agent here is a stand-in that
// answers as a real one does.)
func ExampleClient_Pool() {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"clusters":[{"name":"main","writers":[{"name":"db1","addr":"10.0.0.1:3306"}],
			"readers":[{"name":"db2","addr":"10.0.0.2:3306"}],"out":[{"name":"db3","addr":"10.0.0.3:3306","reason":"lag","detail":"lag 42s > 30s"}],
			"conflict":[]}],"writers":[],"readers":[],"out":[],"isolated":false,"sinks":[]}`)
	}))
	defer agent.Close()

	p, err := client.New(agent.URL).Pool(context.Background(), "main")
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range p.Clusters {
		for _, n := range c.Writers {
			fmt.Println("writer", n.Name, n.Addr)
		}
		for _, n := range c.Readers {
			fmt.Println("reader", n.Name, n.Addr)
		}
		for _, n := range c.Out {
			fmt.Println("out", n.Name, n.Reason+":", n.Detail)
		}
	}
	// Output:
	// writer db1 10.0.0.1:3306
	// reader db2 10.0.0.2:3306
	// out db3 lag: lag 42s > 30s
}

// A refused call is an *APIError with the agent's status and message.
func ExampleAPIError() {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"this call needs the API token"}`)
	}))
	defer agent.Close()

	_, err := client.New(agent.URL).UpdateTags(context.Background(), map[string]string{"team": "dba"}, nil)
	var ae *client.APIError
	if errors.As(err, &ae) {
		fmt.Println(ae.Status, ae.Message)
	}
	// Output:
	// 401 this call needs the API token
}

// No agent at the address: an *UnreachableError, wrapping the network
// error.
func ExampleUnreachableError() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more

	_, err = client.New(addr).Members(context.Background(), client.MemberFilter{})
	var ue *client.UnreachableError
	var oe *net.OpError
	fmt.Println(errors.As(err, &ue), ue.Addr == addr, errors.As(err, &oe))
	// Output:
	// true true true
}

// Follow the agent's log at warn and above until interrupted; the stream
// is bounded by its context only, not by the client's timeout.
func ExampleClient_Monitor() {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	c := client.New(client.DefaultAddr, client.WithToken(os.Getenv("SHOAL_HTTP_TOKEN")))
	err := c.Monitor(ctx, "warn", func(line string) { fmt.Println(line) })
	if err != nil {
		log.Fatal(err)
	}
}

// Find the API token only when the agent asks for it (the first 401): here
// in the file the agent names (an open route), readable when this program
// runs as root or as the agent's user on the agent's host.
func ExampleWithTokenFinder() {
	c := client.New(client.DefaultAddr, client.WithTokenFinder(func(ctx context.Context, c *client.Client) (string, error) {
		in, err := c.Info(ctx)
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(in.APITokenFile)
		return strings.TrimSpace(string(b)), err
	}))
	if _, err := c.SetMaint(context.Background(), true, "kernel upgrade"); err != nil {
		log.Fatal(err)
	}
}

// Send the requests through an http.Client of the program's own (a proxy,
// tracing, connection limits).
func ExampleWithHTTPClient() {
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 2}}
	c := client.New(client.DefaultAddr, client.WithHTTPClient(hc))
	in, err := c.Info(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.Node, in.Serf.Members)
}
