// Package version holds the build version, set with -ldflags at build time.
package version

// Version and Revision are overridden by the Makefile through -ldflags -X.
var (
	Version  = "0.1.0-dev"
	Revision = "unknown"
)
