package history

import (
	"strings"
	"testing"
	"time"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    time.Time
		wantErr string
	}{
		{in: "10m", want: now.Add(-10 * time.Minute)},
		{in: "1h30m", want: now.Add(-90 * time.Minute)},
		{in: "1.5s", want: now.Add(-1500 * time.Millisecond)},
		{in: "2024-04-30T08:00:00Z", want: time.Date(2024, 4, 30, 8, 0, 0, 0, time.UTC)},
		{in: "2024-04-30T10:00:00.25+02:00", want: time.Date(2024, 4, 30, 8, 0, 0, 250e6, time.UTC)},
		{in: "0s", wantErr: `--since "0s": the duration must be positive`},
		{in: "-5m", wantErr: `--since "-5m": the duration must be positive`},
		{in: "abc", wantErr: `--since "abc": want a duration like 10m or an RFC3339 time`},
		{in: "", wantErr: `--since "": want a duration`},
		{in: "10", wantErr: `--since "10": want a duration`},
		{in: "2024-04-30", wantErr: `--since "2024-04-30": want a duration`},
		{in: "2024-04-30 08:00:00", wantErr: `want a duration`},
	}
	for _, tt := range tests {
		got, err := ParseSince(tt.in, now)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSince(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
