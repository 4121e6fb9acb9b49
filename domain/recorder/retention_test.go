package recorder_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// deleteStore is a store whose DeleteBefore answers from a script.
type deleteStore struct {
	fakeStore
	calls   chan time.Time
	answers chan int64
}

func (d deleteStore) DeleteBefore(ctx context.Context, t time.Time, limit int) (int64, error) {
	if limit != 100 {
		return 0, errors.New("wrong limit")
	}
	d.calls <- t
	n := <-d.answers
	if n < 0 {
		return 0, domain.Errorf(domain.CodeUnavailable, "down")
	}
	return n, nil
}

func TestRetentionDeletesInBoundedStepsEveryPeriod(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	store := deleteStore{calls: make(chan time.Time), answers: make(chan int64)}
	removed := make(chan int64, 10)
	runCtx, stop := context.WithCancel(ctx)
	ret, err := recorder.NewRetention(recorder.RetentionOptions{
		Store: store, Clock: clk, Retention: 24 * time.Hour, Every: time.Hour, Limit: 100,
		Removed: func(n int64, err error) {
			if err != nil {
				n = -1
			}
			removed <- n
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ret.Run(runCtx) }()
	round := func(wantBefore time.Time, answers ...int64) {
		t.Helper()
		for _, a := range answers {
			if got := recv(t, ctx, store.calls, "DeleteBefore"); !got.Equal(wantBefore) {
				t.Errorf("DeleteBefore(%s), want %s", got, wantBefore)
			}
			store.answers <- a
		}
	}
	round(t0.Add(-24*time.Hour), 100, 100, 7, 0) // until nothing is left
	if n := recv(t, ctx, removed, "first round"); n != 207 {
		t.Errorf("first round removed %d, want 207", n)
	}
	if err := clk.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	round(t0.Add(-23*time.Hour), -1) // a failure waits for the next round
	if n := recv(t, ctx, removed, "failed round"); n != -1 {
		t.Errorf("failed round reported %d", n)
	}
	if err := clk.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	round(t0.Add(-22*time.Hour), 0)
	recv(t, ctx, removed, "third round")
	stop()
	if err := recv(t, ctx, done, "Run to return"); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if _, err := recorder.NewRetention(recorder.RetentionOptions{Store: store, Clock: clk}); domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(err.Error(), "history-retention") {
		t.Errorf("NewRetention(no retention) = %v, want INVALID_ARGUMENT naming history-retention", err)
	}
	if _, err := recorder.NewRetention(recorder.RetentionOptions{Retention: time.Hour}); domain.ErrorCode(err) != domain.CodeInvalidArgument {
		t.Errorf("NewRetention(no store) = %v", err)
	}
}
