package fireloop

import (
	"testing"
	"time"
)

// The first change goes at once; those within Every of the last report
// wait for the window's end, one report for all of them; after a quiet
// Every, at once again.
func TestWindow(t *testing.T) {
	t.Parallel()
	w := Window{Every: 10 * time.Millisecond}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	if !w.Changed(at(0)) {
		t.Fatal("the first change waited")
	}
	w.Sent(at(0))
	for _, ms := range []int{3, 7} {
		if w.Changed(at(ms)) {
			t.Fatalf("a change at %d ms, within the window, went at once", ms)
		}
	}
	if due, ok := w.Due(); !ok || !due.Equal(at(10)) {
		t.Fatalf("due %v %v, want the window's end at 10 ms", due.Sub(t0), ok)
	}
	w.Sent(at(10))
	if _, ok := w.Due(); ok {
		t.Error("still due after the report went")
	}
	if !w.Changed(at(25)) {
		t.Error("a change after a quiet window waited")
	}
}
