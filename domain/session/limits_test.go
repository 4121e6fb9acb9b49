package session

import (
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

func TestRegisterValidation(t *testing.T) {
	t.Parallel()
	l := DefaultLimits()
	cases := []struct {
		name               string
		id                 string
		interval, lease    int64
		wantErr            string
		wantIvl, wantLease time.Duration
	}{
		{"ok", "r1", 100, 5000, "", 100 * time.Millisecond, 5 * time.Second},
		{"blank id", "  \t", 100, 5000, "router_id must not be blank", 0, 0},
		{"empty id", "", 100, 5000, "router_id must not be blank", 0, 0},
		{"id of 256 bytes", strings.Repeat("x", 256), 100, 5000, "", 100 * time.Millisecond, 5 * time.Second},
		{"id of 257 bytes", strings.Repeat("x", 257), 100, 5000, "router_id is 257 bytes, at most 256", 0, 0},
		{"interval at min", "r", 10, 5000, "", 10 * time.Millisecond, 5 * time.Second},
		{"interval below min", "r", 9, 5000, "report_interval_ms 9 is outside the allowed range [10, 60000]", 0, 0},
		{"interval at max", "r", 60000, 5000, "", time.Minute, 5 * time.Second},
		{"interval above max", "r", 60001, 5000, "report_interval_ms 60001 is outside the allowed range [10, 60000]", 0, 0},
		{"interval zero", "r", 0, 5000, "report_interval_ms 0", 0, 0},
		{"interval huge", "r", 1 << 62, 5000, "outside the allowed range", 0, 0},
		{"lease zero", "r", 100, 0, "lease_ttl_ms must be > 0", 0, 0},
		{"lease negative", "r", 100, -5, "lease_ttl_ms must be > 0", 0, 0},
		{"lease clamped up", "r", 100, 1, "", 100 * time.Millisecond, time.Second},
		{"lease clamped down", "r", 100, 1 << 62, "", 100 * time.Millisecond, 10 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := l.Register(c.id, c.interval, c.lease)
			if c.wantErr != "" {
				if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(domain.ErrorMessage(err), c.wantErr) {
					t.Fatalf("err = %v, want INVALID_ARGUMENT containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Interval != c.wantIvl || cfg.Lease != c.wantLease {
				t.Fatalf("cfg = %+v, want interval %v lease %v", cfg, c.wantIvl, c.wantLease)
			}
		})
	}
}

func TestRenewAfter(t *testing.T) {
	t.Parallel()
	if got := (Config{Lease: 3 * time.Second}).RenewAfter(); got != time.Second {
		t.Fatalf("renew after %v", got)
	}
	if got := (Config{Lease: 2 * time.Millisecond}).RenewAfter(); got != time.Millisecond {
		t.Fatalf("renew after must be at least 1ms, got %v", got)
	}
}

func TestUpdateIsAllOrNothing(t *testing.T) {
	t.Parallel()
	l := DefaultLimits()
	cur := Config{Interval: time.Second, Lease: 5 * time.Second}
	ivl, badLease := int64(200), int64(-1)
	got, err := l.Update(cur, &ivl, &badLease)
	if domain.ErrorCode(err) != domain.CodeInvalidArgument || got != cur {
		t.Fatalf("got %+v, %v; want the current config and INVALID_ARGUMENT", got, err)
	}
	badIvl, lease := int64(5), int64(2000)
	if got, err = l.Update(cur, &badIvl, &lease); err == nil || got != cur {
		t.Fatalf("got %+v, %v", got, err)
	}
	if got, err = l.Update(cur, nil, &lease); err != nil || got != (Config{Interval: time.Second, Lease: 2 * time.Second}) {
		t.Fatalf("lease only: %+v, %v", got, err)
	}
	if got, err = l.Update(cur, &ivl, nil); err != nil || got != (Config{Interval: 200 * time.Millisecond, Lease: 5 * time.Second}) {
		t.Fatalf("interval only: %+v, %v", got, err)
	}
}

func TestLimitsValidate(t *testing.T) {
	t.Parallel()
	bad := []Limits{
		{MinInterval: 0, MaxInterval: time.Second, MinLease: time.Second, MaxLease: time.Minute, MaxSessions: 1},
		{MinInterval: time.Second, MaxInterval: time.Millisecond, MinLease: time.Second, MaxLease: time.Minute, MaxSessions: 1},
		{MinInterval: time.Millisecond, MaxInterval: time.Second, MinLease: time.Minute, MaxLease: time.Second, MaxSessions: 1},
		{MinInterval: time.Millisecond, MaxInterval: time.Second, MinLease: time.Second, MaxLease: time.Minute, MaxSessions: 0},
	}
	for i, l := range bad {
		if l.Validate() == nil {
			t.Errorf("case %d: %+v accepted", i, l)
		}
	}
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	// A lease or interval of centuries would overflow the table's
	// nanosecond deadlines: the lease expired at once, 100 years up.
	for _, tc := range []struct {
		flag string
		set  func(*Limits)
	}{
		{"max-lease", func(l *Limits) { l.MaxLease = MaxLimit + time.Millisecond }},
		{"max-report-interval", func(l *Limits) { l.MaxInterval = MaxLimit + time.Millisecond }},
	} {
		l := DefaultLimits()
		tc.set(&l)
		if err := l.Validate(); err == nil || domain.FieldOf(err) != tc.flag || !strings.Contains(domain.ErrorMessage(err), "must be at most 24h") {
			t.Errorf("%s over %s: %v", tc.flag, MaxLimit, err)
		}
	}
	l := DefaultLimits()
	l.MaxLease, l.MaxInterval = MaxLimit, MaxLimit
	if err := l.Validate(); err != nil {
		t.Fatalf("both at %s: %v", MaxLimit, err)
	}
}

// TestLimitsIntervalsAreWholeMilliseconds: routers ask for intervals in
// milliseconds, so a minimum below 1 ms, or between two, would let
// report_interval_ms 0 through (the check compares whole milliseconds), and
// a zero interval has no schedule.
func TestLimitsIntervalsAreWholeMilliseconds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		min, max time.Duration
		flag     string
	}{
		{time.Microsecond, time.Second, "min-report-interval"},
		{500 * time.Microsecond, time.Second, "min-report-interval"},
		{1500 * time.Microsecond, time.Second, "min-report-interval"},
		{time.Millisecond, time.Second + time.Microsecond, "max-report-interval"},
	} {
		l := DefaultLimits()
		l.MinInterval, l.MaxInterval = c.min, c.max
		err := l.Validate()
		if msg := domain.ErrorMessage(err); err == nil || !strings.Contains(msg, c.flag) || !strings.Contains(msg, "whole number of milliseconds") {
			t.Errorf("min %s, max %s: %v, want %s refused as not whole milliseconds", c.min, c.max, err, c.flag)
		}
	}
	l := DefaultLimits()
	l.MinInterval = time.Millisecond
	if err := l.Validate(); err != nil {
		t.Fatalf("1ms: %v", err)
	}
	// Unvalidated limits still never grant a zero interval.
	l.MinInterval = 0
	for _, ms := range []int64{0, -1} {
		if iv, err := l.Interval(ms); err == nil {
			t.Errorf("Interval(%d) with no minimum = %s, want refused", ms, iv)
		}
	}
}

func TestClampInterval(t *testing.T) {
	t.Parallel()
	l := DefaultLimits()
	for _, c := range []struct{ in, want time.Duration }{
		{-time.Second, 10 * time.Millisecond},
		{0, 10 * time.Millisecond},
		{time.Millisecond, 10 * time.Millisecond},
		{10 * time.Millisecond, 10 * time.Millisecond},
		{250 * time.Millisecond, 250 * time.Millisecond},
		{time.Minute, time.Minute},
		{time.Hour, time.Minute},
	} {
		if got := l.ClampInterval(c.in); got != c.want {
			t.Errorf("ClampInterval(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
