package pool

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

// maxFuzzMembers bounds the member list: bigger lists find nothing new and
// slow the fuzzer's input minimization to a crawl.
const maxFuzzMembers = 48

// membersFromBytes builds a member list and a policy from fuzz input. Each
// member takes 5 bytes; the top bit of its first byte makes its name a
// duplicate of an earlier one.
func membersFromBytes(data []byte) ([]Member, Policy) {
	var policy Policy
	if len(data) > 0 {
		b := data[0]
		policy.WriterServesReads = b&1 != 0
		policy.MinReaders = int(b>>1&3) - 1                 // -1..2
		policy.MaxLag = time.Duration(b>>3&7) * time.Second // 0 (default)..7s
		policy.ReadFallback = []ReadFallback{"", ReadFallbackWriter, ReadFallbackNone, ReadFallbackStaleReader}[b>>6]
		data = data[1:]
	}
	var members []Member
	for i := 0; len(data) >= 5 && i < maxFuzzMembers; i++ {
		b := data[:5]
		data = data[5:]
		name := fmt.Sprintf("n%02d", i)
		if b[0]&0x80 != 0 && i > 0 {
			name = fmt.Sprintf("n%02d", int(b[0]&0x7f)%i) // a duplicate name
		}
		m := Member{Name: name, Addr: name + ":3306", Status: Status(b[0] % 6), Tags: map[string]string{}}
		switch b[1] % 6 {
		case 0, 1, 2:
			m.Tags[tags.KeyRole] = tags.RoleDB
		case 3:
			m.Tags[tags.KeyRole] = tags.RoleApp
		case 4:
			m.Tags[tags.KeyRole] = "web"
		}
		switch b[1] >> 3 % 4 {
		case 1:
			m.Tags[tags.KeyCluster] = "a"
		case 2:
			m.Tags[tags.KeyCluster] = "b"
		}
		if b[1]&0x80 != 0 && b[2]&0x80 != 0 {
			m.Tags[tags.KeyMaint] = "m"
		}
		h := tags.Health{
			State:        tags.State(b[2] % 4),
			ReadOnly:     b[3]&1 != 0,
			Replica:      b[3]&2 != 0,
			IORunning:    b[3]&4 != 0,
			SQLRunning:   b[3]&8 != 0,
			LagKnown:     b[3]&16 != 0,
			Galera:       b[3]&32 != 0,
			GaleraSynced: b[3]&64 != 0,
			LagSeconds:   uint32(b[4] % 16),
			// server_id 0..3, source 0..3: the writer's, another's or unknown
			ServerID:       uint32(b[4] >> 4 & 3),
			SourceServerID: uint32(b[4] >> 6),
		}
		if b[3]&0x80 != 0 {
			m.Tags[tags.KeyVoter] = "8300"
		}
		switch b[2] >> 2 % 8 {
		case 0:
			// no health tag
		case 1:
			m.Tags[tags.KeyHealth] = string(b) // garbage
		default:
			m.Tags[tags.KeyHealth] = tags.Encode(h)
		}
		members = append(members, admitted(m))
	}
	return members, policy
}

// fuzzTerms is a term view for members: each cluster's term is held by the
// first voter listed in it, at its address when its status is even (alive,
// left, ...) and at another one otherwise; the number is its position + 1.
func fuzzTerms(members []Member) TermView {
	tv := TermView{Terms: map[string]Term{}}
	for i, m := range members {
		c := tags.Cluster(m.Tags)
		if _, ok := tv.Terms[c]; ok || m.Tags[tags.KeyVoter] == "" {
			continue
		}
		t := Term{Cluster: c, Number: uint64(i + 1), Writer: m.Name, Addr: m.Addr}
		if m.Status%2 == 1 {
			t.Addr = "elsewhere:3306"
		}
		tv.Terms[c] = t
	}
	return tv
}

// FuzzCompute checks that Compute never panics, never puts two writers in a
// cluster, lists every db member exactly once, and does not depend on input
// order; that the Damper and Diff keep those properties; and that with
// writer terms the writer is always the term's holder.
func FuzzCompute(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1, 1, 0, 10, 0, 0, 2, 0, 10, 3, 0, 2, 1, 10, 31, 5})
	f.Add([]byte{3, 1, 8, 10, 96, 0, 1, 8, 10, 96, 0, 1, 16, 10, 0, 0, 0x81, 0, 10, 0, 0})
	f.Add([]byte("\x07some longer input to make several members of all kinds"))
	f.Fuzz(func(t *testing.T, data []byte) {
		members, policy := membersFromBytes(data)
		// A previous pool from part of the view, to exercise conflicts.
		prev := Compute(members[:len(members)/2], policy, nil)
		p := Compute(members, policy, prev)
		checkInvariants(t, members, policy, p)

		reversed := slices.Clone(members)
		slices.Reverse(reversed)
		if q := Compute(reversed, policy, prev); !reflect.DeepEqual(p, q) {
			t.Fatalf("order changed the pool:\n%s\n%s", summary(p), summary(q))
		}

		tv := fuzzTerms(members)
		for _, tv := range []TermView{tv, {Terms: tv.Terms, Unverifiable: "no key"}} {
			pt, _ := ComputeFresh(members, policy, prev, Freshness{}, tv)
			checkInvariants(t, members, policy, pt)
			checkTermInvariants(t, pt, tv)
			if qt, _ := ComputeFresh(reversed, policy, prev, Freshness{}, tv); !reflect.DeepEqual(pt, qt) {
				t.Fatalf("order changed the pool with terms:\n%s\n%s", termSummary(pt), termSummary(qt))
			}
		}

		d := NewDamper(DampConfig{Suppress: 1500})
		d.Apply(at(0), prev, policy)
		damped := d.Apply(at(1), p, policy)
		checkInvariants(t, members, policy, damped)
		Diff(prev, damped)
	})
}
