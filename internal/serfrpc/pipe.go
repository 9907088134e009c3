package serfrpc

import (
	"errors"
	"net"
	"sync"
	"time"
)

// pipeListener is an in-process net.Listener: its connections are the
// server ends of net.Pipe pairs whose other ends the gate holds. Nothing
// outside the process can reach it.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr("serf-rpc-gate") }

var errDialTimeout = errors.New("the agent's rpc server did not take the connection in time")

// dial hands the server end of a new pipe to Accept and returns the client
// end. remote names the server end's peer: serf's AgentIPC keys its
// clients by RemoteAddr().String(), so it must be unique.
func (l *pipeListener) dial(remote string, timeout time.Duration, stop <-chan struct{}) (net.Conn, error) {
	server, client := net.Pipe()
	t := time.NewTimer(timeout)
	defer t.Stop()
	var err error
	select {
	case l.conns <- &pipeConn{Conn: server, remote: pipeAddr(remote)}:
		return client, nil
	case <-l.done:
		err = net.ErrClosed
	case <-stop:
		err = net.ErrClosed
	case <-t.C:
		err = errDialTimeout
	}
	_ = server.Close()
	_ = client.Close()
	return nil, err
}

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

// pipeConn is a net.Pipe end with a name for its peer.
type pipeConn struct {
	net.Conn
	remote pipeAddr
}

func (c *pipeConn) RemoteAddr() net.Addr { return c.remote }
