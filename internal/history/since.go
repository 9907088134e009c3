package history

import (
	"fmt"
	"time"
)

// ParseSince parses the value of --since: a positive Go duration ("10m",
// "1h30m"), meaning that long before now, or an RFC3339 time
// ("2024-05-01T12:00:00Z", fractional seconds allowed).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--since %q: the duration must be positive", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a duration like 10m or an RFC3339 time like 2006-01-02T15:04:05Z", s)
}
