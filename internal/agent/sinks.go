package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/routing"
	filesink "github.com/shoaldb/shoal/internal/sink/file"
	"github.com/shoaldb/shoal/internal/sink/haproxy"
	"github.com/shoaldb/shoal/internal/view"
)

// poolSink is a local router the agent drives from the pool. Update must not
// block: each sink applies the pool on its own goroutine.
type poolSink interface {
	Start(ctx context.Context)
	Update(p *pool.Pool, frozen bool)
	Close() error
	Status() view.SinkStatus
}

// newSinks builds the configured sinks; it does no I/O.
func (a *Agent) newSinks() ([]poolSink, error) {
	var out []poolSink
	if a.cfg.Sinks.FileEnabled() {
		s, err := filesink.New(a.cfg.Sinks.File, a.cfg.Node, filesink.Options{Logger: a.logs.Logger})
		if err != nil {
			return nil, fmt.Errorf("sinks.file: %w", err)
		}
		out = append(out, fileSink{s, a.cfg.Sinks.File.Path})
	}
	if a.cfg.Sinks.HAProxyEnabled() {
		s, err := haproxy.New(a.cfg.Sinks.HAProxy, haproxy.Options{Logger: a.logs.Logger})
		if err != nil {
			return nil, fmt.Errorf("sinks.haproxy: %w", err)
		}
		out = append(out, haproxySink{s, a.cfg.Sinks.HAProxy.Address})
	}
	return out, nil
}

// startSinks starts every sink and feeds it each new pool. The router calls
// listeners in order from its goroutine; Update only hands the pool over. A
// panic is recovered and counted as the part "sink:<name>".
func (a *Agent) startSinks(ctx context.Context) {
	for _, s := range a.pool.sinks {
		s.Start(ctx)
		part := "sink:" + s.Status().Name
		a.pool.router.Listen(func(u routing.Update) { a.guardPart(part, func() { s.Update(u.Routed, u.Isolated) }) })
	}
}

func (a *Agent) closeSinks() {
	for _, s := range a.pool.sinks {
		if err := s.Close(); err != nil {
			a.log.Warn("close sink", "sink", s.Status().Name, "err", err)
		}
	}
}

func (a *Agent) sinkStatus() []view.SinkStatus {
	out := make([]view.SinkStatus, 0, len(a.pool.sinks))
	for _, s := range a.pool.sinks {
		out = append(out, s.Status())
	}
	return out
}

// sinkState summarizes success and error times.
func sinkState(lastSuccess, lastErrorAt time.Time) string {
	switch {
	case lastSuccess.IsZero() && lastErrorAt.IsZero():
		return "pending"
	case lastErrorAt.After(lastSuccess):
		return "failing"
	}
	return "ok"
}

type haproxySink struct {
	*haproxy.Sink
	addr string
}

func (h haproxySink) Status() view.SinkStatus {
	st := h.Sink.Status()
	var notes []string
	add := func(prefix string, items []string) {
		for _, it := range items {
			notes = append(notes, prefix+it)
		}
	}
	add("withheld while frozen: ", st.Held)
	add("server maps to no node: ", st.Unmapped)
	add("node has no server: ", st.Missing)
	add("naming: ", st.Naming)
	return view.SinkStatus{
		Name: "haproxy", Target: h.addr, State: sinkState(st.LastSuccess, st.LastErrorAt),
		LastSuccess: st.LastSuccess, LastError: st.LastError, LastErrorAt: st.LastErrorAt,
		Failures: st.Failures, Frozen: st.Frozen, Notes: notes,
	}
}

type fileSink struct {
	*filesink.Sink
	path string
}

func (f fileSink) Status() view.SinkStatus {
	st := f.Sink.Status()
	var notes []string
	for _, h := range st.Held {
		notes = append(notes, "kept in its list while frozen: "+h)
	}
	notes = append(notes, st.NoLists...)
	return view.SinkStatus{
		Name: "file", Target: f.path, State: sinkState(st.LastSuccess, st.LastErrorAt),
		LastSuccess: st.LastSuccess, LastError: st.LastError, LastErrorAt: st.LastErrorAt,
		Failures: st.Failures, Frozen: st.Frozen, Notes: notes,
	}
}
