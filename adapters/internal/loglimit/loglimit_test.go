package loglimit

import (
	"testing"
	"time"
)

func TestOneLinePerIntervalWithTheCountHeldBack(t *testing.T) {
	t.Parallel()
	l := Limiter{Every: time.Second}
	t0 := time.Unix(100, 0)
	if ok, n := l.Allow(t0); !ok || n != 0 {
		t.Fatalf("first line: %t %d", ok, n)
	}
	for i := range 3 {
		if ok, _ := l.Allow(t0.Add(time.Duration(i+1) * 100 * time.Millisecond)); ok {
			t.Fatalf("line %d within the interval let through", i)
		}
	}
	if ok, n := l.Allow(t0.Add(time.Second)); !ok || n != 3 {
		t.Fatalf("after the interval: %t %d, want true 3", ok, n)
	}
}
