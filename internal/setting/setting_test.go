package setting

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrors(t *testing.T) {
	var errs Errors
	if errs.Err() != nil {
		t.Fatal("no errors: Err() is not nil")
	}
	errs.Add("a", 1, nil)
	errs.Add("timeout", "20s", errors.New("must be from 10ms to 10s"))
	errs.Add("ignored", "x", Errorf("nested", "v", "kept as it is"))
	errs.Addf("rise", 0, "must be from %d to %d", 1, 100)
	got := Leaves(errs.Err())
	want := []string{`timeout "20s": must be from 10ms to 10s`, `nested "v": kept as it is`, `rise "0": must be from 1 to 100`}
	if len(got) != len(want) {
		t.Fatalf("Leaves = %q", got)
	}
	for i, e := range got {
		var se *Error
		if e.Error() != want[i] || !errors.As(e, &se) {
			t.Errorf("error %d = %q (%T), want the *Error %q", i, e, e, want[i])
		}
	}
	if One(errs.Err()) != nil || One(nil) != nil || One(errors.New("plain")) != nil {
		t.Error("One of several, none or a plain error is not nil")
	}
	if e := One(fmt.Errorf("wrapped: %w", Errorf("k", 1, "m"))); e == nil || e.Key != "k" {
		t.Errorf("One of a wrapped *Error = %v", e)
	}
	p := Leaves(Prefix("backends[0].", errors.Join(Errorf("role", "x", "bad"), errors.New("plain"))))
	if len(p) != 2 || p[0].Error() != `backends[0].role "x": bad` || p[1].Error() != "plain" {
		t.Errorf("Prefix = %q", p)
	}
}
