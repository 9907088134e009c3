package cli

import (
	"os"
	"runtime"
)

// agentProcs is the GOMAXPROCS the agent runs with unless the environment
// sets GOMAXPROCS.
//
// Why one: an idle agent's CPU is almost all thread wake-ups, not work
// (issue 27: with `fast`, about 45 short bursts a second, a timer or a
// packet each). With more than one P, each goroutine made runnable in a
// burst wakes another thread to look for work, which finds none and
// sleeps again; the runtime's sysmon thread also keeps re-checking while
// any P is busy. Measured on 2 cores, 15 idle `fast` agents per cluster,
// three clusters side by side (TestIdleCPU): GOMAXPROCS 8 0.95 %, 2 (the
// default there) 0.83 %, 1 0.68 % of a core per agent; with the gossip
// socket's raw system calls (internal/gossip/rawudp_linux.go) 0.52 % and
// 0.40 %. The agent's work is I/O (gossip, probes, the API, hooks): one P
// runs it with room to spare, and a goroutine that blocks in a system call
// gives the P up as usual. Setting GOMAXPROCS explicitly also stops the
// runtime from re-reading the cgroup CPU limit every second.
const agentProcs = 1

// limitProcs sets GOMAXPROCS to agentProcs for the agent unless the
// environment sets GOMAXPROCS (which then wins, as usual), and returns the
// function that restores the previous value (an agent run in-process by a
// test leaves the test binary as it was).
func limitProcs() (restore func()) {
	if os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(agentProcs)
	return func() { runtime.GOMAXPROCS(prev) }
}
