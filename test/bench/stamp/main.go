// Command stamp is the benchmarks' event handler: it appends one line per
// member named on stdin, "<unix-nanos> <event> <member>", to the file given
// as its only argument. It is run by shoal agents (exec'd directly) and by
// stock serf agents (through sh -c), so both are timed the same way. The
// timestamp is taken once, when the handler starts.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	now := time.Now().UnixNano()
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: stamp LOGFILE (event on SERF_EVENT, members on stdin)")
		os.Exit(2)
	}
	event := os.Getenv("SERF_EVENT")
	var b strings.Builder
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%d %s %s\n", now, event, f[0])
	}
	if b.Len() == 0 {
		fmt.Fprintf(&b, "%d %s -\n", now, event)
	}
	f, err := os.OpenFile(os.Args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// One write: O_APPEND keeps concurrent handlers' lines whole.
	if _, err := f.WriteString(b.String()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
