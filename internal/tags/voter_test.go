package tags

import "testing"

func TestVoterTag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want VoterTag
		ok   bool
	}{
		{"7950", VoterTag{Port: 7950}, true},
		{"7950e3", VoterTag{Port: 7950, Expect: 3}, true},
		{"7950+", VoterTag{Port: 7950, InConfig: true}, true},
		{"65535+0123abcd", VoterTag{Port: 65535, InConfig: true, Group: "0123abcd"}, true},
		{"7950+0123ABCD", VoterTag{}, false},
		{"7950+0123abc", VoterTag{}, false},
		{"7950+0123abcde", VoterTag{}, false},
		{"7950e0", VoterTag{}, false},
		{"7950e10", VoterTag{}, false},
		{"7950e", VoterTag{}, false},
		{"e3", VoterTag{}, false},
		{"+0123abcd", VoterTag{}, false},
		{"07950", VoterTag{}, false},
		{"0", VoterTag{}, false},
		{"65536", VoterTag{}, false},
		{"7950x", VoterTag{}, false},
		{"7950+\x1b[31m", VoterTag{}, false},
		{"", VoterTag{}, false},
	} {
		got, ok := Voter(map[string]string{KeyVoter: tc.in})
		if got != tc.want || ok != tc.ok {
			t.Errorf("Voter(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if ok {
			if back := FormatVoter(got); back != tc.in {
				t.Errorf("FormatVoter(%+v) = %q, want %q", got, back, tc.in)
			}
		}
	}
	if _, ok := Voter(map[string]string{}); ok {
		t.Error("no tag read as a voter")
	}
}
