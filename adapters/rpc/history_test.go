package rpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain/audit"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/ports"
)

// TestListGapsRefusesAnIntervalItCannotHold: interval_ms beyond the
// largest history interval is refused naming the field, before it is
// turned into a duration (2^58 ms wrapped into 1 s and was answered).
func TestListGapsRefusesAnIntervalItCannotHold(t *testing.T) {
	t.Parallel()
	h := NewHistory(gapsOnly{}, time.Now, time.Second)
	now := time.Now().UnixMilli()
	window := &lrv1.Window{SinceUnixMs: now - 60_000, UntilUnixMs: now}
	for _, ms := range []int64{-1, 86_400_001, 288230376151712504, 9223372036854775807} {
		_, err := h.ListGaps(context.Background(), connect.NewRequest(&lrv1.ListGapsRequest{Window: window, IntervalMs: ms}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "interval_ms must be within [1, 86400000]") {
			t.Errorf("interval_ms %d: %v, want INVALID_ARGUMENT naming interval_ms and its range", ms, err)
		}
	}
	for _, ms := range []int64{0, 1, 86_400_000} {
		if _, err := h.ListGaps(context.Background(), connect.NewRequest(&lrv1.ListGapsRequest{Window: window, IntervalMs: ms})); err != nil {
			t.Errorf("interval_ms %d: %v", ms, err)
		}
	}
}

// gapsOnly answers Gaps, checking its query as a store does.
type gapsOnly struct{ ports.HistoryQuery }

func (gapsOnly) Gaps(_ context.Context, q audit.GapsQuery) (audit.GapsResult, error) {
	return audit.GapsResult{}, q.Validate()
}

// TestAWindowWithoutAStartNamesTheField: the 400 names the request's own
// field, not the query's "since".
func TestAWindowWithoutAStartNamesTheField(t *testing.T) {
	t.Parallel()
	h := NewHistory(nil, time.Now, time.Second)
	for name, call := range map[string]func() error{
		"ListReports": func() error {
			_, err := h.ListReports(context.Background(), connect.NewRequest(&lrv1.ListReportsRequest{}))
			return err
		},
		"ListOutages": func() error {
			_, err := h.ListOutages(context.Background(), connect.NewRequest(&lrv1.ListOutagesRequest{Window: &lrv1.Window{UntilUnixMs: 5}}))
			return err
		},
	} {
		err := call()
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "window.since_unix_ms is required (JSON: window.sinceUnixMs)") {
			t.Errorf("%s without since: %v", name, err)
		}
	}
}
