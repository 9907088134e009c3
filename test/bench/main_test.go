//go:build bench

package bench

import (
	"os"
	"testing"

	"github.com/shoaldb/shoal/test/e2e"
)

func TestMain(m *testing.M) {
	e2e.HandleSignals()
	code := m.Run()
	e2e.RemoveBuiltBin()
	os.Exit(code)
}
