package tags

import (
	"errors"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    Health
		want string
	}{
		{"zero value is critical", Health{}, "v1;h=c;ro=0;sro=0;rep=0;io=0;sql=0;sid=0;n=0"},
		{"writer", Health{State: Passing, ServerID: 1, Seq: 4},
			"v1;h=p;ro=0;sro=0;rep=0;io=0;sql=0;sid=1;n=4"},
		{"replica", Health{State: Passing, ReadOnly: true, SuperReadOnly: true, Replica: true,
			IORunning: true, SQLRunning: true, LagKnown: true, LagSeconds: 3, ServerID: 2, Seq: 17},
			"v1;h=p;ro=1;sro=1;rep=1;io=1;sql=1;lag=3;sid=2;n=17"},
		{"lag zero is known", Health{State: Passing, LagKnown: true},
			"v1;h=p;ro=0;sro=0;rep=0;io=0;sql=0;lag=0;sid=0;n=0"},
		{"warning with reason", Health{State: Warning, ReadOnly: true, Replica: true, IORunning: true,
			Reason: "sql-stopped", ServerID: 3}, "v1;h=w;ro=1;sro=0;rep=1;io=1;sql=0;sid=3;rs=sql-stopped;n=0"},
		{"replica with its source", Health{State: Passing, ReadOnly: true, Replica: true, IORunning: true,
			SQLRunning: true, LagKnown: true, ServerID: 2, SourceServerID: 1, Seq: 3},
			"v1;h=p;ro=1;sro=0;rep=1;io=1;sql=1;lag=0;sid=2;src=1;n=3"},
		{"galera synced", Health{State: Passing, Galera: true, GaleraSynced: true, ServerID: 9},
			"v1;h=p;ro=0;sro=0;rep=0;io=0;sql=0;sid=9;g=1;n=0"},
		{"galera donor", Health{State: Warning, Galera: true, Reason: "donor"},
			"v1;h=w;ro=0;sro=0;rep=0;io=0;sql=0;sid=0;g=0;rs=donor;n=0"},
		{"maximum numbers", Health{State: Passing, LagKnown: true, LagSeconds: MaxLagSeconds,
			ServerID: 1<<32 - 1, Seq: 1<<32 - 1},
			"v1;h=p;ro=0;sro=0;rep=0;io=0;sql=0;lag=999999999;sid=4294967295;n=4294967295"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Encode(tt.h)
			if got != tt.want {
				t.Fatalf("Encode = %q, want %q", got, tt.want)
			}
			back, err := Decode(got)
			if err != nil {
				t.Fatalf("Decode(%q): %v", got, err)
			}
			if back != tt.h {
				t.Fatalf("Decode(Encode(h)) = %+v, want %+v", back, tt.h)
			}
		})
	}
}

func TestEncodeNormalizes(t *testing.T) {
	tests := []struct {
		name string
		in   Health
		want Health
	}{
		{"lag clamped", Health{LagKnown: true, LagSeconds: 1 << 31}, Health{LagKnown: true, LagSeconds: MaxLagSeconds}},
		{"unknown lag zeroed", Health{LagSeconds: 42}, Health{}},
		{"unknown state is critical", Health{State: 7}, Health{State: Critical}},
		{"synced needs galera", Health{GaleraSynced: true}, Health{}},
		{"reason truncated", Health{Reason: strings.Repeat("x", 40)}, Health{Reason: strings.Repeat("x", MaxReasonLen)}},
		{"reason sanitized", Health{Reason: "a;b=c d\xff"}, Health{Reason: "a_b_c_d_"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(Encode(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || tt.in.Normalize() != tt.want {
				t.Fatalf("got %+v, Normalize %+v, want %+v", got, tt.in.Normalize(), tt.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	const ok = "h=p;ro=1;sro=0;rep=1;io=1;sql=1;lag=3;sid=2;n=1"
	tests := []struct {
		name    string
		in      string
		is      error
		field   string // the FieldError's field, if any
		message string // a substring of the message
	}{
		{"empty", "", ErrMalformed, "", "empty"},
		{"too long", "v1;" + strings.Repeat("x", MaxHealthLen), ErrMalformed, "", "limit 256"},
		{"unknown version", "v2;" + ok, ErrUnknownVersion, "", `"v2" (this agent reads v1)`},
		{"no version", ok, ErrUnknownVersion, "", `"h=p"`},
		{"version only", "v1", ErrMalformed, "#1", "empty field"},
		{"trailing separator", "v1;" + ok + ";", ErrMalformed, "#10", "empty field"},
		{"double separator", "v1;h=p;;" + ok[4:], ErrMalformed, "#2", "empty field"},
		{"no equals", "v1;" + ok + ";xyz", ErrMalformed, "xyz", "missing '='"},
		{"bad state", "v1;h=x" + ok[3:], ErrMalformed, "h", "want p, w or c"},
		{"bad bool", "v1;h=p;ro=2" + ok[8:], ErrMalformed, "ro", "want 0 or 1"},
		{"bool with extra equals", "v1;h=p;ro==1" + ok[8:], ErrMalformed, "ro", "want 0 or 1"},
		{"bad sro", strings.Replace("v1;"+ok, "sro=0", "sro=", 1), ErrMalformed, "sro", "want 0 or 1"},
		{"bad rep", strings.Replace("v1;"+ok, "rep=1", "rep=yes", 1), ErrMalformed, "rep", "want 0 or 1"},
		{"bad io", strings.Replace("v1;"+ok, "io=1", "io=true", 1), ErrMalformed, "io", "want 0 or 1"},
		{"bad sql", strings.Replace("v1;"+ok, "sql=1", "sql=-1", 1), ErrMalformed, "sql", "want 0 or 1"},
		{"negative lag", strings.Replace("v1;"+ok, "lag=3", "lag=-3", 1), ErrMalformed, "lag", "decimal"},
		{"lag leading zero", strings.Replace("v1;"+ok, "lag=3", "lag=03", 1), ErrMalformed, "lag", "leading zeros"},
		{"lag empty", strings.Replace("v1;"+ok, "lag=3", "lag=", 1), ErrMalformed, "lag", "decimal"},
		{"lag too big", strings.Replace("v1;"+ok, "lag=3", "lag=1000000000", 1), ErrMalformed, "lag", "out of range"},
		{"lag hex", strings.Replace("v1;"+ok, "lag=3", "lag=0x3", 1), ErrMalformed, "lag", "decimal"},
		{"sid overflow", strings.Replace("v1;"+ok, "sid=2", "sid=4294967296", 1), ErrMalformed, "sid", "out of range"},
		{"sid eleven digits", strings.Replace("v1;"+ok, "sid=2", "sid=99999999999", 1), ErrMalformed, "sid", "decimal"},
		{"seq not a number", strings.Replace("v1;"+ok, "n=1", "n=one", 1), ErrMalformed, "n", "decimal"},
		{"bad galera", "v1;" + ok + ";g=2", ErrMalformed, "g", "want 0 or 1"},
		{"reason bad char", "v1;" + ok + ";rs=a b", ErrMalformed, "rs", "invalid character"},
		{"reason empty", "v1;" + ok + ";rs=", ErrMalformed, "rs", "empty reason"},
		{"reason too long", "v1;" + ok + ";rs=" + strings.Repeat("r", 33), ErrMalformed, "rs", "33 bytes, limit 32"},
		{"duplicate", "v1;" + ok + ";ro=1", ErrMalformed, "ro", "duplicate"},
		{"duplicate optional", "v1;" + ok + ";lag=3", ErrMalformed, "lag", "duplicate"},
		{"missing h", "v1;" + ok[4:], ErrMalformed, "h", "missing field"},
		{"missing sid", strings.Replace("v1;"+ok, ";sid=2", "", 1), ErrMalformed, "sid", "missing field"},
		{"missing n", strings.Replace("v1;"+ok, ";n=1", "", 1), ErrMalformed, "n", "missing field"},
		{"unknown key uppercase", "v1;" + ok + ";X=1", ErrMalformed, "X", "invalid key"},
		{"unknown key too long", "v1;" + ok + ";abcdefghi=1", ErrMalformed, "abcdefghi", "invalid key"},
		{"unknown key empty", "v1;" + ok + ";=1", ErrMalformed, "#10", "invalid key"},
		{"unknown key bad value", "v1;" + ok + ";zz=a b", ErrMalformed, "zz", "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.in)
			if err == nil {
				t.Fatalf("Decode(%q) succeeded", tt.in)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", err, tt.is)
			}
			if !strings.HasPrefix(err.Error(), "decode health tag: ") {
				t.Errorf("error %q lacks the context prefix", err)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not contain %q", err, tt.message)
			}
			var fe *FieldError
			if errors.As(err, &fe) != (tt.field != "") {
				t.Fatalf("error %q: FieldError = %v, want field %q", err, fe, tt.field)
			}
			if fe != nil && fe.Field != tt.field {
				t.Errorf("field = %q, want %q", fe.Field, tt.field)
			}
		})
	}
}

func TestDecodeIgnoresUnknownField(t *testing.T) {
	h := Health{State: Passing, ReadOnly: true, ServerID: 5}
	got, err := Decode(Encode(h) + ";zz=future-1")
	if err != nil {
		t.Fatal(err)
	}
	if got != h {
		t.Fatalf("got %+v, want %+v", got, h)
	}
}

// TestDecodeLongReason: a reason code as long as earlier releases wrote
// (maxTokenLen) is read, cut to MaxReasonLen as Encode would.
func TestDecodeLongReason(t *testing.T) {
	long := strings.Repeat("r", maxTokenLen)
	got, err := Decode("v1;h=w;ro=0;sro=0;rep=0;io=0;sql=0;sid=0;rs=" + long + ";n=0")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Health{State: Warning, Reason: long[:MaxReasonLen]}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestDecodeAnyOrder(t *testing.T) {
	got, err := Decode("v1;n=1;sid=2;lag=3;sql=1;io=1;rep=1;sro=0;ro=1;h=p")
	if err != nil {
		t.Fatal(err)
	}
	want := Health{State: Passing, ReadOnly: true, Replica: true, IORunning: true, SQLRunning: true,
		LagKnown: true, LagSeconds: 3, ServerID: 2, Seq: 1}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
