package consensus

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/member"
)

func sampleAnswer() AppliedAnswer {
	return AppliedAnswer{Node: "app1", Cluster: "main", Term: 7, Writer: "db2", Addr: "10.0.0.2:3306", Sinks: 2,
		Why: "haproxy: failing: dial unix /run/haproxy.sock: connect: no such file or directory"}
}

func TestAppliedQueryRoundTrip(t *testing.T) {
	got, err := DecodeAppliedQuery(EncodeAppliedQuery("main-2.eu"))
	if err != nil || got != "main-2.eu" {
		t.Fatalf("decoded %q, %v", got, err)
	}
	for _, b := range [][]byte{nil, {appliedV1}, append([]byte{2}, "main"...), append([]byte{appliedV1}, "a/b"...),
		append([]byte{appliedV1}, strings.Repeat("c", 65)...)} {
		if _, err := DecodeAppliedQuery(b); !errors.Is(err, ErrAppliedMalformed) {
			t.Errorf("query %q: err %v, want malformed", b, err)
		}
	}
}

func TestAppliedAnswerRoundTrip(t *testing.T) {
	for _, a := range []AppliedAnswer{
		sampleAnswer(),
		{Node: "app1", Cluster: "main", Sinks: 1, Why: "file: nothing applied yet"},
		{Node: "app1", Cluster: "main", Term: 3, Sinks: 1}, // a term without a routed writer
		{Node: "db1", Cluster: "main"},                     // no sinks
	} {
		b, err := EncodeAppliedAnswer(a)
		if err != nil {
			t.Fatalf("%+v: %v", a, err)
		}
		got, err := DecodeAppliedAnswer(b)
		a.V = appliedV1
		if err != nil || got != a {
			t.Fatalf("decoded %+v, %v; want %+v", got, err, a)
		}
	}
}

// TestAppliedAnswerShortensWhy: a long why, with control characters,
// invalid UTF-8 and characters JSON escapes, is cut at a rune boundary
// so that the answer fits, and still decodes.
func TestAppliedAnswerShortensWhy(t *testing.T) {
	for _, why := range []string{
		strings.Repeat("é", 1000),
		strings.Repeat("<&>", 300),
		"line one\nline two\x00\xff" + strings.Repeat("x", 500),
	} {
		a := sampleAnswer()
		a.Node, a.Writer = strings.Repeat("n", member.MaxNameLen), strings.Repeat("w", member.MaxNameLen)
		a.Addr = strings.Repeat("h", 200) + ":3306"
		a.Why = why
		b, err := EncodeAppliedAnswer(a)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxAppliedAnswer {
			t.Fatalf("%d bytes, limit %d", len(b), MaxAppliedAnswer)
		}
		got, err := DecodeAppliedAnswer(b)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(got.Why) || !strings.HasSuffix(got.Why, "…") || strings.ContainsAny(got.Why, "\n\x00") {
			t.Errorf("why %q", got.Why)
		}
	}
}

func TestAppliedAnswerRefusesBadAnswers(t *testing.T) {
	good, err := EncodeAppliedAnswer(sampleAnswer())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("no %s in %s", old, good)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	cases := map[string][]byte{
		"empty":           nil,
		"not json":        []byte("{"),
		"two values":      append(append([]byte(nil), good...), "{}"...),
		"version 2":       edit(`"v":1`, `"v":2`),
		"empty node":      edit(`"node":"app1"`, `"node":""`),
		"node backslash":  edit(`"node":"app1"`, `"node":"a\\\\b"`),
		"node control":    edit(`"node":"app1"`, `"node":"a\u0001b"`),
		"bad cluster":     edit(`"cluster":"main"`, `"cluster":"a b"`),
		"writer, no addr": edit(`"addr":"10.0.0.2:3306"`, `"addr":""`),
		"addr, no writer": edit(`"writer":"db2"`, `"writer":""`),
		"addr no port":    edit(`"addr":"10.0.0.2:3306"`, `"addr":"10.0.0.2"`),
		"negative term":   edit(`"term":7`, `"term":-7`),
		"huge term":       edit(`"term":7`, `"term":18446744073709551616`),
		"negative sinks":  edit(`"sinks":2`, `"sinks":-1`),
		"many sinks":      edit(`"sinks":2`, `"sinks":17`),
		"why control":     edit(`"why":"haproxy`, `"why":"\u001bhaproxy`),
		"why long":        edit(`"why":"haproxy`, `"why":"`+strings.Repeat("y", MaxAppliedWhy)),
		"no sinks, term":  edit(`"sinks":2`, `"sinks":0`),
		"too long":        append(append([]byte(nil), good...), bytes.Repeat([]byte(" "), MaxAppliedAnswer)...),
	}
	for name, b := range cases {
		if _, err := DecodeAppliedAnswer(b); !errors.Is(err, ErrAppliedMalformed) {
			t.Errorf("%s: err %v, want malformed", name, err)
		}
	}
	if _, err := EncodeAppliedAnswer(AppliedAnswer{Node: "", Cluster: "main"}); !errors.Is(err, ErrAppliedMalformed) {
		t.Errorf("encoding an answer without a node: err %v", err)
	}
}

// TestAppliedAnswerFitsQueryResponse: the largest answer, sent by a node
// with the longest name, fits the query response limit of the agent's
// serf config in the framing serf gives it (messageQueryResponse,
// msgpack-encoded after one type byte).
func TestAppliedAnswerFitsQueryResponse(t *testing.T) {
	resp := struct {
		LTime   serf.LamportTime
		ID      uint32
		From    string
		Flags   uint32
		Payload []byte
	}{LTime: 1<<64 - 1, ID: 1<<32 - 1, From: strings.Repeat("n", member.MaxNameLen), Flags: 1<<32 - 1, Payload: make([]byte, MaxAppliedAnswer)}
	var buf bytes.Buffer
	buf.WriteByte(0)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(&resp); err != nil {
		t.Fatal(err)
	}
	sc, err := gossip.SerfConfig(gossip.Settings{Node: "n1", BindAddr: "127.0.0.1", Profile: "lan"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if limit := sc.QueryResponseSizeLimit; buf.Len() > limit {
		t.Fatalf("largest response %d bytes, serf's limit %d", buf.Len(), limit)
	} else {
		t.Logf("largest response %d bytes of %d", buf.Len(), limit)
	}
}

// FuzzDecodeAppliedAnswer: any payload decodes or is refused as malformed,
// never panics, and what decodes encodes again to an answer that decodes
// the same.
func FuzzDecodeAppliedAnswer(f *testing.F) {
	good, _ := EncodeAppliedAnswer(sampleAnswer())
	f.Add(good)
	f.Add([]byte(`{"v":1,"node":"db1","cluster":"main","sinks":0}`))
	f.Add([]byte(`{"v":1,"node":"a","cluster":"b","term":1,"writer":"c","addr":"[::1]:1","sinks":1,"why":"\u00e9"}`))
	f.Add([]byte(`{"v":1}{}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAppliedAnswer(b)
		if err != nil {
			if !errors.Is(err, ErrAppliedMalformed) {
				t.Fatalf("error %v is not ErrAppliedMalformed", err)
			}
			return
		}
		again, err := EncodeAppliedAnswer(a)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", a, err)
		}
		if back, err := DecodeAppliedAnswer(again); err != nil || back != a {
			t.Fatalf("re-decoded %+v, %v; want %+v", back, err, a)
		}
		if _, err := DecodeAppliedQuery(b); err != nil && !errors.Is(err, ErrAppliedMalformed) {
			t.Fatalf("query error %v is not ErrAppliedMalformed", err)
		}
	})
}
