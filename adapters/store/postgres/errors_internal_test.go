package postgres

import (
	"context"
	"testing"
	"time"
)

// TestACutOffCallSaysSoOnce: a call its context ended reads "append timed
// out: <cause>", not the cause twice ("context canceled: context canceled").
func TestACutOffCallSaysSoOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := wrapErr(ctx, "append", context.Canceled)
	if got := err.Error(); got != "UNAVAILABLE: history database: append was cancelled: context canceled" {
		t.Errorf("err = %q", got)
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Now())
	defer cancel()
	<-ctx.Done()
	if got := wrapErr(ctx, "append", ctx.Err()).Error(); got != "UNAVAILABLE: history database: append timed out: context deadline exceeded" {
		t.Errorf("err = %q", got)
	}
}
