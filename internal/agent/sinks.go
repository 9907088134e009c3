package agent

import (
	"context"
	"fmt"

	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/sink"
	filesink "github.com/shoaldb/shoal/internal/sink/file"
	"github.com/shoaldb/shoal/internal/sink/haproxy"
	"github.com/shoaldb/shoal/internal/switchover"
	"github.com/shoaldb/shoal/internal/view"
)

// newSinks builds the configured sinks, in the order of the list: one line
// per kind of sink (see package sink). It does no I/O.
func (a *Agent) newSinks() ([]sink.Sink, error) {
	c, opts := a.cfg.Sinks, sink.Options{Logger: a.logs.Logger, Clock: a.clock}
	kinds := []struct {
		key string
		on  bool
		new func() (sink.Sink, error)
	}{
		{"sinks.file", c.FileEnabled(), func() (sink.Sink, error) { return filesink.New(c.File, a.cfg.Node, opts) }},
		{"sinks.haproxy", c.HAProxyEnabled(), func() (sink.Sink, error) { return haproxy.New(c.HAProxy, opts) }},
	}
	var out []sink.Sink
	for _, k := range kinds {
		if !k.on {
			continue
		}
		s, err := k.new()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.key, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// startSinks starts every sink and feeds it each new pool. The router calls
// listeners in order from its goroutine; Update only hands the pool over. A
// panic is recovered and counted as the part "sink:<name>". Each sink is
// wrapped so that the writer terms of every pool are recorded before a
// sink gets it (package switchover): a switchover asks what the sinks applied.
func (a *Agent) startSinks(ctx context.Context) {
	record := switchover.NewRecord()
	for i, s := range a.pool.sinks {
		s = switchover.RecordedSink{Sink: s, Log: record}
		a.pool.sinks[i] = s
		s.Start(ctx)
		part := "sink:" + s.Status().Name
		a.pool.router.Listen(func(u routing.Update) {
			a.guardPart(part, func() { s.Update(sink.Update{Pool: u.Routed, Frozen: u.Isolated, Generation: u.Generation}) })
		})
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
