package ports

import "testing"

// TestFreeNeverRepeats: addresses handed out earlier in the process are
// never returned again, even after their probe sockets were closed.
func TestFreeNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		a := Free(t)
		if seen[a] {
			t.Fatalf("call %d returned %s again", i, a)
		}
		seen[a] = true
	}
}
