package metrics

import "github.com/shoaldb/shoal/internal/member"

// Label returns s safe to use as a label value: s itself when it is
// printable text of at most member.MaxEscapedLen bytes (every valid name and
// every display form), else its escaped display form (member.Escape).
// Prometheus refuses a label value that is not valid UTF-8, and the
// refusal fails the whole scrape, so every label value built from data
// another machine controls (cluster and node names, reasons) goes through
// here.
func Label(s string) string { return member.Safe(s) }
