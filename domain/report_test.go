package domain

import (
	"math"
	"testing"
	"time"
)

func TestOldestSnapshotAge(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ranks := func(after ...time.Duration) []RankLoad {
		out := make([]RankLoad, len(after))
		for i, d := range after {
			out[i] = RankLoad{DPRank: int64(i), SnapshotTime: t0.Add(d)}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		report time.Time
		ranks  []RankLoad
		want   time.Duration
	}{
		{"no ranks", t0.Add(time.Hour), nil, 0},
		{"the oldest rank counts, wherever it sits", t0.Add(5 * time.Second), ranks(4*time.Second, 0, 3*time.Second), 5 * time.Second},
		// 3001 ms − 0 ms on the wire, though only 3000.2 ms apart.
		{"whole milliseconds as the wire carries them", t0.Add(3*time.Second + 1100*time.Microsecond), ranks(900 * time.Microsecond), 3001 * time.Millisecond},
		{"a snapshot ahead of the report is no age", t0, ranks(2 * time.Millisecond), 0},
		{"a rank ahead does not hide an older one", t0.Add(time.Second), ranks(2*time.Second, 0), time.Second},
		{"an unset snapshot time saturates", t0, []RankLoad{{SnapshotTime: time.Time{}}}, math.MaxInt64},
		{"an unset report time is no age", time.Time{}, ranks(0), 0},
	} {
		r := &Report{ReportTime: tc.report, Ranks: tc.ranks}
		if got := r.OldestSnapshotAge(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
