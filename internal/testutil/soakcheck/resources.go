package soakcheck

import (
	"fmt"
	"sort"
	"time"
)

// Resource is one sample of one agent process.
type Resource struct {
	At         time.Time
	Agent      string
	PID        int
	RSS        int64 // bytes (VmRSS)
	Goroutines int
	FDs        int
	// The process's MySQL probe counters so far (db agents): check
	// timeouts, and those during a host stall (counted as one failure).
	Timeouts, StalledTimeouts int
}

// ProbeTimeouts sums, over every agent process, the probe's timeout
// counters at that process's last sample: a lower bound, since a process
// may time out again after its last sample.
func ProbeTimeouts(ls []Lifetime) (timeouts, stalled int) {
	for _, l := range ls {
		if n := len(l.Samples); n > 0 {
			timeouts += l.Samples[n-1].Timeouts
			stalled += l.Samples[n-1].StalledTimeouts
		}
	}
	return timeouts, stalled
}

// Limits are the resource targets: RSS growth below MaxRSSGrowth (a
// fraction) after the warm-up; goroutines and fds flat (at most
// MaxGoroutineRise and MaxFDRise above the baseline).
type Limits struct {
	Warmup           time.Duration // from the process's first sample
	MaxRSSGrowth     float64
	MaxGoroutineRise int
	MaxFDRise        int
	// Voters are the raft voters' agents, allowed VoterRise more
	// goroutines and fds: raft keeps up to 3 pooled connections to each
	// peer and serves each peer's pool with a goroutine per connection, so
	// a leader change or a partition adds connections up to that bound.
	// VoterRSSGrowth replaces MaxRSSGrowth for them: those connections'
	// buffers and raft's log cache grow the heap at a leader change (not
	// shown to plateau yet: an hour-long run will tell).
	Voters         map[string]bool
	VoterRise      int
	VoterRSSGrowth float64
	// MinSamples after the warm-up for a lifetime to be judged.
	MinSamples int
}

// Lifetime is one agent process's resource series (a restarted agent
// starts a new one) and its verdict.
type Lifetime struct {
	Agent   string
	PID     int
	Samples []Resource
	// Judged: enough samples after the warm-up. Base and End are the
	// medians of the first and last three samples after the warm-up.
	Judged          bool
	BaseRSS, EndRSS int64
	BaseGor, EndGor int
	BaseFD, EndFD   int
	RSSGrowth       float64 // fraction
	OK              bool
	Why             string // when not OK, or not judged
}

// Lifetimes splits the samples per agent process and judges each.
func Lifetimes(rs []Resource, lim Limits) []Lifetime {
	type key struct {
		agent string
		pid   int
	}
	idx := map[key]int{}
	var out []Lifetime
	for _, r := range rs {
		k := key{r.Agent, r.PID}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Lifetime{Agent: r.Agent, PID: r.PID})
		}
		out[i].Samples = append(out[i].Samples, r)
	}
	for i := range out {
		judge(&out[i], lim)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Agent < out[j].Agent })
	return out
}

func judge(l *Lifetime, lim Limits) {
	s := l.Samples
	sort.Slice(s, func(i, j int) bool { return s[i].At.Before(s[j].At) })
	var after []Resource
	for _, r := range s {
		if r.At.Sub(s[0].At) >= lim.Warmup {
			after = append(after, r)
		}
	}
	if len(after) < max(lim.MinSamples, 6) {
		l.OK = true
		l.Why = fmt.Sprintf("not judged: %d samples after the warm-up, %d needed", len(after), max(lim.MinSamples, 6))
		return
	}
	l.Judged = true
	first, last := after[:3], after[len(after)-3:]
	l.BaseRSS, l.EndRSS = median(first, func(r Resource) int64 { return r.RSS }), median(last, func(r Resource) int64 { return r.RSS })
	l.BaseGor = int(median(first, func(r Resource) int64 { return int64(r.Goroutines) }))
	l.EndGor = int(median(last, func(r Resource) int64 { return int64(r.Goroutines) }))
	l.BaseFD = int(median(first, func(r Resource) int64 { return int64(r.FDs) }))
	l.EndFD = int(median(last, func(r Resource) int64 { return int64(r.FDs) }))
	if l.BaseRSS > 0 {
		l.RSSGrowth = float64(l.EndRSS-l.BaseRSS) / float64(l.BaseRSS)
	}
	l.OK = true
	maxRSS := lim.MaxRSSGrowth
	if lim.Voters[l.Agent] && lim.VoterRSSGrowth > maxRSS {
		maxRSS = lim.VoterRSSGrowth
	}
	if l.RSSGrowth >= maxRSS {
		l.OK, l.Why = false, fmt.Sprintf("RSS grew %.1f%% (limit %.0f%%)", 100*l.RSSGrowth, 100*maxRSS)
	}
	gorRise, fdRise := lim.MaxGoroutineRise, lim.MaxFDRise
	if lim.Voters[l.Agent] {
		gorRise, fdRise = gorRise+lim.VoterRise, fdRise+lim.VoterRise
	}
	if l.EndGor-l.BaseGor > gorRise {
		l.OK, l.Why = false, join(l.Why, fmt.Sprintf("goroutines %d → %d", l.BaseGor, l.EndGor))
	}
	if l.EndFD-l.BaseFD > fdRise {
		l.OK, l.Why = false, join(l.Why, fmt.Sprintf("fds %d → %d", l.BaseFD, l.EndFD))
	}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func median(rs []Resource, f func(Resource) int64) int64 {
	v := make([]int64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[len(v)/2]
}
