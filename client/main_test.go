package client

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/loadreporter/loadreporter/ports/porttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testCtx bounds every wait of a test.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// fakeClock is porttest.Clock behind the client's clock, whose timers
// are armed by duration: tests advance it and wait for "timer armed"
// instead of sleeping.
type fakeClock struct{ *porttest.Clock }

func newFakeClock(start time.Time) *fakeClock { return &fakeClock{porttest.NewClock(start)} }

// onFakeClock is a fake clock and the deps of a Worker or Fleet that run
// on it, with the backoff's jitter at the middle of its range: a test
// moves every timer itself.
func onFakeClock() (*fakeClock, deps) {
	clk := newFakeClock(time.UnixMilli(1_700_000_000_000))
	return clk, deps{clock: clk, rand: func() float64 { return 0.5 }}
}

func (c *fakeClock) NewTimer(d time.Duration) timer { return c.Clock.NewTimer(c.Now().Add(d)) }

// waitTimer blocks until a timer due exactly at at is armed, or ctx ends.
func (c *fakeClock) waitTimer(ctx context.Context, at time.Time) error { return c.WaitTimerAt(ctx, at) }

// counterValue reads one counter.
func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
