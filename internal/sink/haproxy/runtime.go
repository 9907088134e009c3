package haproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// maxResponse caps what one command may return (a state dump of tens of
// thousands of servers fits).
const maxResponse = 16 << 20

// Client talks to HAProxy's runtime API, one command per connection: it
// writes the command line and reads the answer until HAProxy closes the
// connection. A Client is safe for concurrent use.
type Client struct {
	network, address string
	timeout          time.Duration
	dialer           net.Dialer
}

// NewClient returns a client of the runtime API at address ("unix:/path" or
// "host:port"); each command is bounded by timeout (DefaultTimeout if 0). It
// does no I/O.
func NewClient(address string, timeout time.Duration) (*Client, error) {
	network, addr, err := parseAddress(address)
	if err != nil {
		return nil, fmt.Errorf("haproxy runtime api address %q: %w", address, err)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{network: network, address: addr, timeout: timeout}, nil
}

// ResponseError is an answer HAProxy gave to a command that should have
// answered nothing, such as "No such server.": the command was delivered and
// refused. Other errors from Client are transport errors.
type ResponseError struct {
	Command  string
	Response string
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("haproxy refused %q: %s", e.Command, firstLine(e.Response))
}

// Do sends one command and returns HAProxy's answer. The command must be one
// line without ';' (which the runtime API reads as a command separator).
func (c *Client) Do(ctx context.Context, cmd string) (string, error) {
	if cmd == "" || strings.ContainsAny(cmd, "\r\n;") {
		return "", fmt.Errorf("haproxy command %q: must be one line without ';'", cmd)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn, err := c.dialer.DialContext(ctx, c.network, c.address)
	if err != nil {
		return "", fmt.Errorf("haproxy %q: %w", cmd, err)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	// Cancellation interrupts a blocked read or write.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", fmt.Errorf("haproxy %q: write: %w", cmd, ctxErr(ctx, err))
	}
	out, err := io.ReadAll(io.LimitReader(conn, maxResponse+1))
	if err != nil {
		return "", fmt.Errorf("haproxy %q: read: %w", cmd, ctxErr(ctx, err))
	}
	if len(out) > maxResponse {
		return "", fmt.Errorf("haproxy %q: answer longer than %d bytes", cmd, maxResponse)
	}
	return string(out), nil
}

// Exec sends a command that answers nothing on success (set, shutdown) and
// returns a *ResponseError when HAProxy answers something.
func (c *Client) Exec(ctx context.Context, cmd string) error {
	out, err := c.Do(ctx, cmd)
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" {
		return &ResponseError{Command: cmd, Response: out}
	}
	return nil
}

// ServersState reads and parses `show servers state`.
func (c *Client) ServersState(ctx context.Context) ([]Server, error) {
	out, err := c.Do(ctx, "show servers state")
	if err != nil {
		return nil, err
	}
	servers, err := ParseServersState(out)
	if err != nil {
		return nil, fmt.Errorf("haproxy show servers state: %w", err)
	}
	return servers, nil
}

// ctxErr names the context's error as the cause of a socket timeout: the
// socket's deadlines are only ever the context's.
func ctxErr(ctx context.Context, err error) error {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	// The deadline passed but the context's timer has not fired yet.
	return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
}
