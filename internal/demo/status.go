package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Status prints which demo processes run, the pool as the app agent sees
// it, HAProxy's server states and the load client's last seconds. It fails
// when a process of the demo is not running.
func (l *Layout) Status(ctx context.Context, out io.Writer) error {
	running := l.Running()
	fmt.Fprintf(out, "demo in %s: %d of %d processes running\n", l.Dir, len(running), len(procNames()))
	for _, r := range running {
		fmt.Fprintf(out, "  %s\n", r)
	}
	if len(running) == 0 {
		return fmt.Errorf("no demo running in %s (make demo)", l.Dir)
	}
	fmt.Fprintln(out)
	l.printPool(ctx, out)
	if st, err := l.HAProxyStates(); err == nil {
		var parts []string
		for _, k := range sortedKeys(st) {
			parts = append(parts, k+"="+st[k])
		}
		fmt.Fprintf(out, "\nHAProxy: %s\n", strings.Join(parts, " "))
	} else {
		fmt.Fprintf(out, "\nHAProxy: %v\n", err)
	}
	fmt.Fprintf(out, "\nStatus page: %s\nClient (%s):\n%s\n", l.UIURL(), l.Path("client.log"), tail(l.Path("client.log"), 3))
	if len(running) < len(procNames()) {
		return fmt.Errorf("%d of %d demo processes are not running", len(procNames())-len(running), len(procNames()))
	}
	return nil
}
