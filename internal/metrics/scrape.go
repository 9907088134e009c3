package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewPublishCollectors returns the families of the agent's tag publishing,
// read when scraped: failures counts the publishes that failed or left
// something out; ok says whether the last one carried everything wanted.
func NewPublishCollectors(failures func() uint64, ok func() bool) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "health_publish_failures_total",
			Help: "Publishes of this agent's tags that failed or left something out: user tags withheld so that the health tag fits, a minimal critical health (reason cannot-publish), or a gossip error (retried).",
		}, func() float64 { return float64(failures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "tags_published",
			Help: "1 when the last publish of this agent's tags carried everything wanted (health and user tags), 0 otherwise.",
		}, func() float64 {
			if ok() {
				return 1
			}
			return 0
		}),
	}
}

// GateCounts is what the failure-confirmation gate's families read when
// scraped (the gate's counters, gossip.Gate).
type GateCounts struct {
	Confirmed, Refuted, Expired func() uint64 // checks, by result
	Careful                     func() uint64 // checks that got a second round
	ConfirmPings, RevivePings   func() uint64
	Pending                     func() int    // failures still being checked
	Syncs                       func() uint64 // state exchanges after a member came back
}

// NewGateCollectors returns the failure-confirmation gate's families.
func NewGateCollectors(g GateCounts) []prometheus.Collector {
	var cs []prometheus.Collector
	for _, r := range []struct {
		result string
		n      func() uint64
	}{{"confirmed", g.Confirmed}, {"refuted", g.Refuted}, {"expired", g.Expired}} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "member_failure_checks_total",
			Help:        "Member failures reported by gossip and checked with direct pings, by result: confirmed (unanswered, acted on), refuted (answered, then alive again: not acted on), expired (answered, but gossip still said failed after the hold: acted on).",
			ConstLabels: prometheus.Labels{"result": r.result},
		}, func() float64 { return float64(r.n()) }))
	}
	cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Name: "member_failure_second_checks_total",
		Help: "Member failure checks that got a second, longer round: the member missed the first but had sent a packet just before its failure arrived, or failures did not arrive alone (another failure or comeback within 1 s, another confirmed failure within 30 s), or this agent's memberlist health score was 4 or more.",
	}, func() float64 { return float64(g.Careful()) }))
	for _, k := range []struct {
		kind string
		n    func() uint64
	}{{"confirm", g.ConfirmPings}, {"revive", g.RevivePings}} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "member_failure_pings_total",
			Help:        "Direct pings this agent sent to members gossip reported failed, by kind: confirm (checking a failure before acting on it), revive (watching a confirmed-failed member until it answers again).",
			ConstLabels: prometheus.Labels{"kind": k.kind},
		}, func() float64 { return float64(k.n()) }))
	}
	cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Name: "member_state_syncs_total",
		Help: "Full state exchanges with the member that came back and two other alive members, run 2 s and 10 s after a member this agent had confirmed failed came back (so that incarnation numbers converge after a heal).",
	}, func() float64 {
		if g.Syncs == nil {
			return 0
		}
		return float64(g.Syncs())
	}))
	return append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "member_failures_withheld",
		Help: "Member failures reported by gossip that this agent is still checking (not yet acted on).",
	}, func() float64 { return float64(g.Pending()) }))
}

// HTTPConns are the families of the HTTP API's connection limiter
// (api.LimitedListener), which counts on them.
type HTTPConns struct {
	Evicted, Refused, Reserved prometheus.Counter
}

// NewHTTPConns returns the limiter's counters, not registered.
func NewHTTPConns() *HTTPConns {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "http", Name: name, Help: help})
	}
	return &HTTPConns{
		Evicted:  c("connections_evicted_total", "Idle HTTP API connections closed to make room for a new one at the connection limit."),
		Refused:  c("connections_refused_total", "HTTP API connections closed at once: every slot, reserved ones included, busy with a request."),
		Reserved: c("connections_reserved_total", "HTTP API connections given a reserved slot (liveness only) because every normal slot was busy with a request."),
	}
}

// Collectors returns the counters and the open connections, read from open
// when scraped.
func (h *HTTPConns) Collectors(open func() int) []prometheus.Collector {
	o := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "http", Name: "connections_open",
		Help: "HTTP API connections open, reserved ones included."}, func() float64 { return float64(open()) })
	return []prometheus.Collector{h.Evicted, h.Refused, h.Reserved, o}
}

// ReachCounts reads the counters of isolation's reachability rounds
// (gossip.Reach).
type ReachCounts struct {
	Rounds, Pings, Refused func() uint64
}

// NewReachCollectors reports the reachability rounds.
func NewReachCollectors(r ReachCounts) []prometheus.Collector {
	return counterFuncs(
		counter{"reach_rounds_total", "Reachability rounds: before acting on a db node's failure, and while isolated, this agent pings a sample of the fleet to learn whether it can still reach it.", nil, r.Rounds},
		counter{"reach_pings_total", "Members pinged by reachability rounds.", nil, r.Pings},
		counter{"reach_probes_refused_total", "Reachability rounds asked while one was running (asked again when it ends).", nil, r.Refused},
	)
}

// counter is a counter read at scrape time: its name (without the
// namespace), help, constant labels and value.
type counter struct {
	name, help string
	labels     prometheus.Labels
	n          func() uint64
}

// counterFuncs returns a collector for each of cs.
func counterFuncs(cs ...counter) []prometheus.Collector {
	out := make([]prometheus.Collector, 0, len(cs))
	for _, c := range cs {
		out = append(out, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: c.name, Help: c.help, ConstLabels: c.labels},
			func() float64 { return float64(c.n()) }))
	}
	return out
}

// PositionCounts reads the position stream's counters (gossip.Positions).
type PositionCounts struct {
	Published, PacketsSent, BytesSent, SendErrors, Received, New, Bad, Dropped func() uint64
}

// NewPositionCollectors reports the position stream.
func NewPositionCollectors(p PositionCounts) []prometheus.Collector {
	return counterFuncs(
		counter{"position_stream_published_total", "GTID positions of this agent's server published to the position stream.", nil, p.Published},
		counter{"position_stream_packets_sent_total", "Position stream packets sent: this agent's positions and the new ones it passed on, each to a few random agents.", nil, p.PacketsSent},
		counter{"position_stream_bytes_sent_total", "Bytes of the position stream packets sent (UDP payload).", nil, p.BytesSent},
		counter{"position_stream_send_errors_total", "Position stream packets that could not be sealed or sent.", nil, p.SendErrors},
		counter{"position_stream_received_total", "Positions received from other agents.", nil, p.Received},
		counter{"position_stream_new_total", "Positions received that were newer than what this agent had of their server.", nil, p.New},
		counter{"position_stream_bad_packets_total", "Position stream packets dropped because they did not open with the gossip keyring or did not decode.", nil, p.Bad},
		counter{"position_stream_dropped_total", "Position stream packets dropped because the stream's queue was full.", nil, p.Dropped},
	)
}
