package testkit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Second, "three polls", func() bool { n++; return n == 3 })
	f := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != f {
				panic(r)
			}
		}()
		WaitFor(f, 20*time.Millisecond, "never", func() bool { return false })
	}()
	if f.msg != "timed out after 20ms waiting for: never" {
		t.Fatalf("failure message %q", f.msg)
	}
}

func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _ = b.Write([]byte("x")) })
	}
	wg.Wait()
	if b.String() != "xxxxxxxx" {
		t.Fatalf("got %q", b.String())
	}
}
