package tags

import (
	"strings"
	"testing"
)

// FuzzDecode checks that Decode never panics on outside input, that whatever
// it accepts re-encodes to an equal Health, and that Decode(Encode(h)) is
// h.Normalize() for any h built from the remaining arguments.
func FuzzDecode(f *testing.F) {
	f.Add("v1;h=p;ro=1;sro=1;rep=1;io=1;sql=1;lag=3;sid=2;n=17", byte(2), byte(0xff), uint32(3), uint32(2), uint32(17), "ok")
	f.Add(Encode(worstHealth), byte(1), byte(0), uint32(1<<31), uint32(0), uint32(0), "a;b=c")
	f.Add("v1;h=w;ro=0;sro=0;rep=0;io=0;sql=0;sid=0;g=0;rs=donor;n=0;zz=x", byte(9), byte(0x40), uint32(0), uint32(1), uint32(1), "")
	f.Add("v2;h=p", byte(0), byte(0), uint32(0), uint32(0), uint32(0), strings.Repeat("é", 20))
	f.Add("v1;lag=01", byte(0), byte(0), uint32(0), uint32(0), uint32(0), "\x00")
	f.Fuzz(func(t *testing.T, s string, state, flags byte, lag, sid, seq uint32, reason string) {
		if h, err := Decode(s); err == nil {
			back, err := Decode(Encode(h))
			if err != nil {
				t.Fatalf("Decode(Encode(Decode(%q))): %v", s, err)
			}
			if back != h {
				t.Fatalf("Decode(%q) = %+v, after re-encoding %+v", s, h, back)
			}
		}

		h := Health{
			State:          State(state),
			ReadOnly:       flags&1 != 0,
			SuperReadOnly:  flags&2 != 0,
			Replica:        flags&4 != 0,
			IORunning:      flags&8 != 0,
			SQLRunning:     flags&16 != 0,
			LagKnown:       flags&32 != 0,
			LagSeconds:     lag,
			ServerID:       sid,
			SourceServerID: sid ^ seq,
			Galera:         flags&64 != 0,
			GaleraSynced:   flags&128 != 0,
			Reason:         reason,
			Seq:            seq,
		}
		enc := Encode(h)
		got, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)) = %q: %v", h, enc, err)
		}
		if got != h.Normalize() {
			t.Fatalf("Decode(Encode(h)) = %+v, want %+v", got, h.Normalize())
		}
	})
}
