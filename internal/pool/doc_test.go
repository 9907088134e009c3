package pool

import (
	"os"
	"testing"
)

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
