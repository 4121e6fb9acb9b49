package client

import (
	"crypto/tls"
	"math"
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaultsAndRefusals(t *testing.T) {
	t.Parallel()
	o, err := Options{RouterID: "r"}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	if o.ReportInterval != DefaultReportInterval || o.Lease != DefaultLease || o.StaleAfterIntervals != 3 ||
		o.MaxSnapshotAge != DefaultMaxSnapshotAge || o.Backoff != defaultBackoff || o.Logger == nil ||
		o.Choices != 2 || o.Accounting != AccountingOn {
		t.Fatalf("defaults not filled: %+v", o)
	}
	o, err = Options{RouterID: "r", ReportInterval: 1500 * time.Microsecond}.normalized()
	if err != nil || o.ReportInterval != time.Millisecond {
		t.Fatalf("interval not truncated to whole ms: %v %v", o.ReportInterval, err)
	}
	bad := []Options{
		{},
		{RouterID: "  "},
		{RouterID: strings.Repeat("x", 257)},
		{RouterID: "r", ReportInterval: -time.Second},
		{RouterID: "r", Lease: time.Microsecond},
		{RouterID: "r", Protocol: 9},
		{RouterID: "r", StaleAfterIntervals: -1},
		{RouterID: "r", Choices: -1},
		{RouterID: "r", Accounting: -1},
		{RouterID: "r", Accounting: AccountingOff + 1},
	}
	for _, b := range bad {
		if _, err := b.normalized(); err == nil {
			t.Errorf("%+v accepted", b)
		}
	}
	if _, err := Dial("", Options{RouterID: "r"}); err == nil {
		t.Error("empty address accepted")
	}
	// TLS to an http:// URL fails every stream, for ever.
	if _, err := Dial("http://127.0.0.1:1", Options{RouterID: "r", TLS: &tls.Config{}}); err == nil || !strings.Contains(err.Error(), "https://") {
		t.Errorf("http:// with TLS: %v", err)
	}
}

func TestBackoffClamps(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: time.Microsecond, Max: time.Nanosecond, Multiplier: 0.5, Jitter: 3}.normalized()
	want := Backoff{Initial: time.Millisecond, Max: time.Millisecond, Multiplier: 1, Jitter: 1}
	if b != want {
		t.Fatalf("got %+v, want %+v", b, want)
	}
	if b := (Backoff{Jitter: -1}).normalized(); b.Jitter != 0 {
		t.Fatalf("negative jitter: %v", b.Jitter)
	}
	// NaN passes max and min: it made every wait negative, a hot loop.
	nan := Backoff{Multiplier: math.NaN(), Jitter: math.NaN()}.normalized()
	if nan.Multiplier != defaultBackoff.Multiplier || nan.Jitter != defaultBackoff.Jitter {
		t.Fatalf("NaN: %+v, want the defaults", nan)
	}
	for n := range 10 {
		if d := nan.delay(n, 0.5); d <= 0 || d > nan.Max {
			t.Fatalf("NaN multiplier: delay(%d) = %v", n, d)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.5}.normalized()
	cases := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{0, 0.5, 100 * time.Millisecond}, // r = 0.5: no jitter
		{1, 0.5, 200 * time.Millisecond},
		{3, 0.5, 800 * time.Millisecond},
		{4, 0.5, time.Second}, // capped
		{1000, 0.5, time.Second},
		{0, 0, 50 * time.Millisecond},     // -50%
		{1, 0.75, 250 * time.Millisecond}, // +25%
		{4, 0.99, time.Second},            // jitter never exceeds Max
		{4, 0, 500 * time.Millisecond},
	}
	for _, c := range cases {
		if got := b.delay(c.n, c.r); got != c.want {
			t.Errorf("delay(%d, %v) = %v, want %v", c.n, c.r, got, c.want)
		}
	}
}
