package session

import (
	"testing"
	"time"
)

var epoch = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return epoch.Add(time.Duration(n) * time.Millisecond) }

func TestAnchoredAfterReport(t *testing.T) {
	t.Parallel()
	ivl := 100 * time.Millisecond
	// Registered at 37, reported at once: next deadline is anchored at 37.
	if got := Anchored.afterReport(epoch, ivl, ms(37), ms(38), true); !got.Equal(ms(137)) {
		t.Fatalf("next = %v", got.Sub(epoch))
	}
	// Delivered late (after 3 missed deadlines): skip to the next future one.
	if got := Anchored.afterReport(epoch, ivl, ms(137), ms(420), false); !got.Equal(ms(437)) {
		t.Fatalf("skip = %v, want 437ms", got.Sub(epoch))
	}
	// Delivered exactly at the following deadline: that one is skipped too, no burst.
	if got := Anchored.afterReport(epoch, ivl, ms(137), ms(237), false); !got.Equal(ms(337)) {
		t.Fatalf("boundary = %v, want 337ms", got.Sub(epoch))
	}
}

func TestAlignedAfterReport(t *testing.T) {
	t.Parallel()
	ivl := 100 * time.Millisecond
	// First report at 37: first grid point at least 50ms later is 100.
	if got := Aligned.afterReport(epoch, ivl, ms(37), ms(37), true); !got.Equal(ms(100)) {
		t.Fatalf("first = %v", got.Sub(epoch))
	}
	// First report at 61: 111 → grid 200 (half an interval at least).
	if got := Aligned.afterReport(epoch, ivl, ms(61), ms(61), true); !got.Equal(ms(200)) {
		t.Fatalf("first = %v", got.Sub(epoch))
	}
	// On the grid: next grid point.
	if got := Aligned.afterReport(epoch, ivl, ms(200), ms(203), false); !got.Equal(ms(300)) {
		t.Fatalf("next = %v", got.Sub(epoch))
	}
	// Fell behind: skip to the next future grid point.
	if got := Aligned.afterReport(epoch, ivl, ms(200), ms(555), false); !got.Equal(ms(600)) {
		t.Fatalf("skip = %v", got.Sub(epoch))
	}
	// Harmonic intervals land on shared points.
	if got := Aligned.afterReport(epoch, time.Second, ms(10), ms(10), true); !got.Equal(ms(1000)) {
		t.Fatalf("1s grid = %v", got.Sub(epoch))
	}
}

func TestAfterUpdate(t *testing.T) {
	t.Parallel()
	if got := Anchored.afterUpdate(epoch, 250*time.Millisecond, ms(1010)); !got.Equal(ms(1260)) {
		t.Fatalf("anchored = %v", got.Sub(epoch))
	}
	if got := Aligned.afterUpdate(epoch, 200*time.Millisecond, ms(1010)); !got.Equal(ms(1200)) {
		t.Fatalf("aligned = %v", got.Sub(epoch))
	}
	if got := Aligned.afterUpdate(epoch, 200*time.Millisecond, ms(1150)); !got.Equal(ms(1400)) {
		t.Fatalf("aligned, less than half an interval to 1200 = %v", got.Sub(epoch))
	}
}

func TestGridCeilBeforeEpoch(t *testing.T) {
	t.Parallel()
	if got := gridCeil(epoch, 100*time.Millisecond, ms(-150)); !got.Equal(ms(-100)) {
		t.Fatalf("got %v", got.Sub(epoch))
	}
	if got := gridCeil(epoch, 100*time.Millisecond, ms(300)); !got.Equal(ms(300)) {
		t.Fatalf("a grid point is its own ceiling, got %v", got.Sub(epoch))
	}
}

func TestParseSchedule(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"aligned", "anchored"} {
		got, err := ParseSchedule(s)
		if err != nil || got.String() != s {
			t.Fatalf("%s: %v %v", s, got, err)
		}
	}
	if _, err := ParseSchedule("random"); err == nil {
		t.Fatal("accepted an unknown schedule")
	}
}
