package postgres

import (
	"fmt"
	"testing"
	"time"
)

// TestMinuteRanges checks how the minutes whose values rank statistics
// read are asked for: consecutive minutes of a worker in one range, the
// ranks wanted as bits, and every rank when one does not fit a bit.
func TestMinuteRanges(t *testing.T) {
	t.Parallel()
	m0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	at := func(w string, min int, dp int32) rankKey {
		return rankKey{minuteKey{w, m0.Add(time.Duration(min) * time.Minute)}, dp}
	}
	keys := map[rankKey]*usageBand{
		at("a", 0, 1): nil, at("a", 1, 5): nil, at("a", 1, 1): nil, // one range, ranks 1 and 5
		at("a", 3, 0): nil,                      // a minute apart: a range of its own
		at("b", 4, 2): nil, at("b", 5, 70): nil, // rank 70 has no bit: every rank
	}
	workers, froms, lasts, masks := minuteRanges(keys)
	var got []string
	for i := range workers {
		got = append(got, fmt.Sprintf("%s %s-%s %d", workers[i], froms[i].Format("15:04"), lasts[i].Format("15:04"), masks[i]))
	}
	want := []string{"a 10:00-10:01 34", "a 10:03-10:03 1", "b 10:04-10:05 -1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("minuteRanges = %q, want %q", got, want)
	}
}
