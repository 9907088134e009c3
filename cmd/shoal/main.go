// Command shoal is the shoal agent and its command-line client.
package main

import (
	"context"
	"os"

	"github.com/shoaldb/shoal/internal/cli"
)

func main() {
	os.Exit(cli.Execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
