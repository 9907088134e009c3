package serfrpc

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// conn is one client connection and its agent side. Two goroutines: serve
// reads the client's requests and forwards them; relay reads the agent's
// responses and writes them to the client.
type conn struct {
	g      *Gate
	id     uint64
	log    *slog.Logger
	h      *codec.MsgpackHandle
	client net.Conn
	in     *boundedReader
	dec    *codec.Decoder // client requests

	closeMu  sync.Mutex
	isClosed bool
	backend  net.Conn // agent side, set once dialled

	wmu sync.Mutex // one whole message at a time to the client

	// Owned by serve.
	handshook bool
	authed    bool
	nextSeq   uint64

	mu      sync.Mutex
	pending map[uint64]*request // by the gate's Seq on the agent side
	streams map[uint64]uint64   // client Seq → gate Seq of an open stream or monitor, for stop
	nrec    int                 // entries of pending that are streams, monitors or queries
}

// request is a forwarded request waiting for its response, or a stream,
// monitor or query whose records are still coming.
type request struct {
	seq     uint64 // the client's
	name    string
	cmd     command
	authed  bool // the client had authenticated when it sent the request
	records bool // answered without error: what comes next are records
	stopped bool // the client stopped it: its records are no longer relayed
}

func newConn(g *Gate, id uint64, nc net.Conn) *conn {
	c := &conn{
		g:       g,
		id:      id,
		log:     g.log.With("remote", nc.RemoteAddr().String(), "conn", id),
		h:       msgpackHandle(),
		client:  nc,
		in:      &boundedReader{r: bufio.NewReader(nc)},
		pending: map[uint64]*request{},
		streams: map[uint64]uint64{},
	}
	c.dec = codec.NewDecoder(c.in, c.h)
	return c
}

func (c *conn) close() {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	c.isClosed = true
	_ = c.client.Close()
	if c.backend != nil {
		_ = c.backend.Close()
	}
}

// recoverPanic turns a panic in one connection's goroutine into the end of
// that connection (the deferred close), not of the agent.
func (c *conn) recoverPanic(where string) {
	if v := recover(); v != nil {
		c.log.Error("serf rpc: panic, closing the connection", "in", where, "panic", fmt.Sprint(v))
	}
}

func (c *conn) closing() bool {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	return c.isClosed
}

// errClose ends a connection after an answer, as serf does for the same
// requests.
var errClose = errors.New("connection closed after the answer")

func (c *conn) serve() {
	remote := fmt.Sprintf("%s#%d", c.client.RemoteAddr(), c.id)
	backend, err := c.g.backend.dial(remote, c.g.cfg.SetupTimeout, c.g.done)
	if err != nil {
		if !c.closing() {
			c.log.Error("serf rpc: connect to the agent's rpc server", "err", err)
		}
		return
	}
	c.closeMu.Lock()
	if c.isClosed {
		c.closeMu.Unlock()
		_ = backend.Close()
		return
	}
	c.backend = backend
	c.closeMu.Unlock()
	bdec := codec.NewDecoder(bufio.NewReader(backend), c.h)
	if err := c.handshakeBackend(bdec); err != nil {
		c.log.Error("serf rpc: handshake with the agent's rpc server", "err", err)
		return
	}

	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		defer c.close()
		defer c.recoverPanic("relay")
		c.log.Debug("serf rpc: relay ended", "err", c.relay(bdec))
	}()
	defer func() { <-relayed }()
	defer c.close()

	_ = c.client.SetReadDeadline(time.Now().Add(c.g.cfg.SetupTimeout))
	for {
		c.in.reset(c.g.cfg.MaxRequestBytes)
		var h requestHeader
		if err := c.dec.Decode(&h); err != nil {
			if !errors.Is(err, io.EOF) && !c.closing() {
				c.log.Warn("serf rpc: read request, closing the connection", "err", err)
			}
			return
		}
		if err := c.handle(&h); err != nil {
			if !errors.Is(err, errClose) && !c.closing() {
				c.log.Warn("serf rpc: bad request, closing the connection", "command", h.Command, "err", err)
			}
			return
		}
	}
}

// handshakeBackend performs the handshake on the agent side: the client's
// own handshake is answered by the gate.
func (c *conn) handshakeBackend(bdec *codec.Decoder) error {
	_ = c.backend.SetDeadline(time.Now().Add(c.g.cfg.SetupTimeout))
	defer func() { _ = c.backend.SetDeadline(time.Time{}) }()
	msg, err := encode(c.h, &requestHeader{Command: cmdHandshake, Seq: 0}, &handshakeRequest{Version: ipcVersion})
	if err != nil {
		return err
	}
	if _, err := c.backend.Write(msg); err != nil {
		return err
	}
	var resp responseHeader
	if err := bdec.Decode(&resp); err != nil {
		return err
	}
	if resp.Error != "" {
		return errors.New(resp.Error)
	}
	return nil
}

// handle answers or forwards one request whose header has been read.
func (c *conn) handle(h *requestHeader) error {
	switch {
	case h.Command == cmdHandshake:
		var req handshakeRequest
		if err := c.dec.Decode(&req); err != nil {
			return fmt.Errorf("decode handshake body: %w", err)
		}
		msg := ""
		switch {
		case req.Version != ipcVersion:
			msg = errUnsupportedVersion
		case c.handshook:
			msg = errDuplicateHandshake
		default:
			c.handshook = true
			_ = c.client.SetReadDeadline(time.Time{})
		}
		return c.reply(h.Seq, msg)
	case !c.handshook:
		// serf answers and drops the connection, reading no body.
		_ = c.reply(h.Seq, errHandshakeRequired)
		return errClose
	case h.Command == cmdAuth:
		var req authRequest
		if err := c.dec.Decode(&req); err != nil {
			return fmt.Errorf("decode auth body: %w", err)
		}
		if !tokenEqual(req.AuthKey, c.g.cfg.Token) {
			c.log.Warn("serf rpc: wrong auth token")
			return c.reply(h.Seq, errInvalidAuthToken)
		}
		c.authed = true
		return c.reply(h.Seq, "")
	}

	cmd, known := lookup(h.Command)
	if !known {
		// Whether a body follows is unknown, so the connection cannot
		// stay in sync: answer and close, as serf does.
		msg := errUnsupportedCommand
		if !c.authed {
			msg = errAuthRequired
		}
		_ = c.reply(h.Seq, msg)
		return errClose
	}
	var body codec.Raw
	if cmd.reqBody {
		if err := c.dec.Decode(&body); err != nil {
			return fmt.Errorf("decode %s body: %w", h.Command, err)
		}
		if len(body) == 0 {
			body = codec.Raw{msgpackNil}
		}
	}
	if !c.authed && (c.g.cfg.Strict || !cmd.open) {
		c.log.Debug("serf rpc: refused a command before auth", "command", h.Command)
		return c.reply(h.Seq, errAuthRequired)
	}

	switch h.Command {
	case cmdTags:
		if c.g.cfg.CheckTags != nil {
			var req tagsRequest
			if err := codec.NewDecoderBytes(body, c.h).Decode(&req); err != nil {
				return c.reply(h.Seq, fmt.Sprintf("decode tags request: %v", err))
			}
			if err := c.g.cfg.CheckTags(req.Tags, req.DeleteTags); err != nil {
				c.log.Info("serf rpc: refused a tag change", "err", err)
				return c.reply(h.Seq, err.Error())
			}
		}
	case cmdLeave:
		if c.g.cfg.Leave != nil {
			msg := ""
			if err := c.g.cfg.Leave(); err != nil {
				msg = err.Error()
			}
			err := c.reply(h.Seq, msg)
			if c.g.cfg.AfterLeave != nil {
				c.g.cfg.AfterLeave()
			}
			// The connection stays until the agent's shutdown closes it,
			// as in serf: closing it now could beat the client's reader
			// to the answer (serf's client then reports "client closed").
			return err
		}
	case cmdStop:
		var req stopRequest
		if err := codec.NewDecoderBytes(body, c.h).Decode(&req); err != nil {
			return fmt.Errorf("decode stop body: %w", err)
		}
		c.mu.Lock()
		seq, ok := c.streams[req.Stop]
		if ok {
			delete(c.streams, req.Stop)
			if r := c.pending[seq]; r != nil {
				r.stopped = true
			}
		}
		c.mu.Unlock()
		// The gate's Seq 0 was its handshake: a stop of it stops nothing,
		// and serf answers a stop of nothing with success.
		b, err := encode(c.h, &stopRequest{Stop: seq})
		if err != nil {
			return err
		}
		body = b
	}
	return c.forward(h, cmd, body)
}

// forward sends a request to the agent under the gate's next Seq.
func (c *conn) forward(h *requestHeader, cmd command, body codec.Raw) error {
	c.mu.Lock()
	if cmd.records && c.nrec >= maxRecordSeqs {
		c.mu.Unlock()
		return c.reply(h.Seq, fmt.Sprintf("too many streams, monitors and queries on this connection (%d): open a new connection", maxRecordSeqs))
	}
	c.nextSeq++
	seq := c.nextSeq
	c.pending[seq] = &request{seq: h.Seq, name: h.Command, cmd: cmd, authed: c.authed}
	if cmd.records {
		c.nrec++
		if h.Command != cmdQuery {
			c.streams[h.Seq] = seq
		}
	}
	c.mu.Unlock()
	msg, err := encode(c.h, &requestHeader{Command: h.Command, Seq: seq})
	if err != nil {
		return err
	}
	if _, err := c.backend.Write(append(msg, body...)); err != nil {
		return fmt.Errorf("forward %s to the agent: %w", h.Command, err)
	}
	return nil
}

// relay copies the agent's responses to the client, one whole message at a
// time, under the client's Seq.
func (c *conn) relay(bdec *codec.Decoder) error {
	for {
		var h responseHeader
		if err := bdec.Decode(&h); err != nil {
			return fmt.Errorf("read response header: %w", err)
		}
		c.mu.Lock()
		r, ok := c.pending[h.Seq]
		record := ok && r.records
		c.mu.Unlock()
		if !ok {
			return fmt.Errorf("response for seq %d, which has no request", h.Seq)
		}
		var body codec.Raw
		if record || r.cmd.respBody {
			if err := bdec.Decode(&body); err != nil {
				return fmt.Errorf("read %s response body: %w", r.name, err)
			}
			if len(body) == 0 {
				body = codec.Raw{msgpackNil}
			}
		}
		if r.name == cmdStats && h.Error == "" && c.g.cfg.EventHandlers != nil {
			b, err := c.statsWithHandlers(body, c.g.cfg.EventHandlers(r.authed))
			if err != nil {
				return fmt.Errorf("rewrite the stats response: %w", err)
			}
			body = b
		}
		c.mu.Lock()
		switch {
		case !record && r.cmd.records && h.Error == "":
			r.records = true
		case !record:
			c.drop(h.Seq, r)
		case r.name == cmdQuery:
			var rec queryRecord
			if err := codec.NewDecoderBytes(body, c.h).Decode(&rec); err != nil {
				c.mu.Unlock()
				return fmt.Errorf("decode query record: %w", err)
			}
			if rec.Type == queryRecordDone {
				c.drop(h.Seq, r)
			}
		}
		stopped := r.stopped
		c.mu.Unlock()
		if record && stopped {
			continue // the client no longer reads them (serf's client drops the handler first)
		}
		if err := c.write(r.seq, h.Error, body); err != nil {
			return err
		}
	}
}

// statsWithHandlers returns the stats response body with its
// event_handlers section replaced by handlers; every other section is
// kept as serf sent it.
func (c *conn) statsWithHandlers(body codec.Raw, handlers map[string]string) (codec.Raw, error) {
	var stats map[string]map[string]string
	if err := codec.NewDecoderBytes(body, c.h).Decode(&stats); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if stats == nil {
		stats = map[string]map[string]string{}
	}
	if handlers == nil {
		handlers = map[string]string{}
	}
	stats["event_handlers"] = handlers
	return encode(c.h, stats)
}

// drop forgets a request; c.mu is held.
func (c *conn) drop(seq uint64, r *request) {
	delete(c.pending, seq)
	if r.cmd.records {
		c.nrec--
		if s, ok := c.streams[r.seq]; ok && s == seq {
			delete(c.streams, r.seq)
		}
	}
}

// reply sends the gate's own answer: a header without a body.
func (c *conn) reply(seq uint64, errMsg string) error {
	return c.write(seq, errMsg, nil)
}

// write sends one response (header, then body if any) as one write.
func (c *conn) write(seq uint64, errMsg string, body codec.Raw) error {
	msg, err := encode(c.h, &responseHeader{Seq: seq, Error: errMsg})
	if err != nil {
		return err
	}
	msg = append(msg, body...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.client.Write(msg); err != nil {
		return fmt.Errorf("write to the client: %w", err)
	}
	return nil
}

// tokenEqual compares in constant time (over fixed-length digests, so the
// token's length does not show either). An empty token never matches.
func tokenEqual(got, want string) bool {
	if want == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

var errRequestTooLarge = errors.New("request too large")

// boundedReader bounds the bytes the decoder may consume for one request.
// It is an io.ByteScanner, so the decoder reads through it byte-exactly and
// buffers nothing of its own.
type boundedReader struct {
	r    *bufio.Reader
	left int
}

func (b *boundedReader) reset(n int) { b.left = n }

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errRequestTooLarge
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= n
	return n, err
}

func (b *boundedReader) ReadByte() (byte, error) {
	if b.left <= 0 {
		return 0, errRequestTooLarge
	}
	c, err := b.r.ReadByte()
	if err == nil {
		b.left--
	}
	return c, err
}

func (b *boundedReader) UnreadByte() error {
	if err := b.r.UnreadByte(); err != nil {
		return err
	}
	b.left++
	return nil
}
