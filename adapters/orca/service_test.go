package orca

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
)

// TestRequestedInterval: absent or 0 s gets the default; anything else is
// passed on for the core to clamp; a malformed Duration is refused.
func TestRequestedInterval(t *testing.T) {
	t.Parallel()
	s, err := newService(nil, Options{DefaultInterval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in      *durationpb.Duration
		want    time.Duration
		invalid bool
	}{
		{nil, 2 * time.Second, false},
		{durationpb.New(0), 2 * time.Second, false},
		{durationpb.New(time.Nanosecond), time.Nanosecond, false},
		{durationpb.New(-time.Second), -time.Second, false},
		{durationpb.New(time.Hour), time.Hour, false},
		{&durationpb.Duration{Seconds: 1, Nanos: -1}, 0, true},
		{&durationpb.Duration{Nanos: 2e9}, 0, true},
	} {
		got, err := s.requested(c.in)
		if c.invalid {
			if domain.ErrorCode(err) != domain.CodeInvalidArgument {
				t.Errorf("%v: err %v, want INVALID_ARGUMENT", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: got %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// TestCoreClampsIntoTheLimits: the loop's adapter raises a too-short
// interval to --min-report-interval and lowers a too-long one to
// --max-report-interval, and starts a session of kind ORCA.
func TestCoreClampsIntoTheLimits(t *testing.T) {
	t.Parallel()
	loop := startLoop(t, &engine{ranks: 1}, session.DefaultLimits())
	core := loopCore{loop}
	for _, c := range []struct{ in, want time.Duration }{
		{time.Nanosecond, session.DefaultMinInterval},
		{-time.Second, session.DefaultMinInterval},
		{250 * time.Millisecond, 250 * time.Millisecond},
		{time.Hour, session.DefaultMaxInterval},
	} {
		st, got, err := core.Subscribe("orca test", c.in)
		if err != nil || got != c.want {
			t.Fatalf("%v: granted %v, %v; want %v", c.in, got, err, c.want)
		}
		if n := loop.Count(session.KindORCA); n != 1 {
			t.Fatalf("%d ORCA sessions, want 1", n)
		}
		st.Close()
	}
	loop.Shutdown()
	if st, _, err := core.Subscribe("late", time.Second); st != nil || domain.ErrorCode(err) != domain.CodeShuttingDown {
		t.Fatalf("after shutdown: %v, %v; want no stream and SHUTTING_DOWN", st, err)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{{DefaultInterval: -1}, {NominalRPS: -1}, {NominalRPS: math.Inf(1)}, {NominalRPS: math.NaN()}} {
		if _, err := newService(nil, o); domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("%+v: %v, want INVALID_ARGUMENT", o, err)
		}
	}
}
