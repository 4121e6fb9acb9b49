package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/internal/connectcode"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

// fakeHistory answers Reports with whatever reports returns; the other
// queries are not served.
type fakeHistory struct {
	ports.HistoryQuery
	reports func(ctx context.Context) error
}

func (f fakeHistory) Reports(ctx context.Context, _ audit.ReportsQuery) (audit.ReportsPage, error) {
	return audit.ReportsPage{}, f.reports(ctx)
}

// historyClient serves a History over reports on an HTTP/2 test server and
// returns a client of it whose http.Client has the given timeout (0: none).
func historyClient(t *testing.T, timeout time.Duration, reports func(ctx context.Context) error) *HistoryClient {
	t.Helper()
	h := NewHistory(fakeHistory{reports: reports}, time.Now, time.Second)
	srv := serve(t, h.Handler)
	c := *srv.Client()
	c.Timeout = timeout
	return NewHistoryClient(&c, srv.URL, "")
}

// TestErrorCodeRoundTrip: every domain code a server can send comes back
// to a client of ours as itself or as its documented equivalent, with its
// message; codes the table does not list travel as Internal and never leak
// their message.
func TestErrorCodeRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code string
		wire connect.Code // what the server sends
		back string       // what the client reads
	}{
		{domain.CodeInvalidArgument, connect.CodeInvalidArgument, domain.CodeInvalidArgument},
		{domain.CodeInvalidFirstFrame, connect.CodeInvalidArgument, domain.CodeInvalidArgument},
		{domain.CodeNotFound, connect.CodeNotFound, domain.CodeNotFound},
		{domain.CodeFailedPrecondition, connect.CodeFailedPrecondition, domain.CodeFailedPrecondition},
		{domain.CodeResourceExhausted, connect.CodeResourceExhausted, domain.CodeResourceExhausted},
		{domain.CodeUnavailable, connect.CodeUnavailable, domain.CodeUnavailable},
		{domain.CodeShuttingDown, connect.CodeUnavailable, domain.CodeUnavailable},
		{domain.CodeLeaseExpired, connect.CodeDeadlineExceeded, domain.CodeUnavailable},
		{domain.CodeReplaced, connect.CodeAborted, domain.CodeReplaced},
		{domain.CodeUnauthenticated, connect.CodeUnauthenticated, domain.CodeUnauthenticated},
		{domain.CodePermissionDenied, connect.CodePermissionDenied, domain.CodePermissionDenied},
		{domain.CodeInternal, connect.CodeInternal, domain.CodeInternal},
		{domain.CodeInvalidSnapshot, connect.CodeInternal, domain.CodeInternal},
		{domain.CodeRankSetChanged, connect.CodeInternal, domain.CodeInternal},
		{domain.CodePullTimeout, connect.CodeInternal, domain.CodeInternal},
		{domain.CodeSourceFailed, connect.CodeInternal, domain.CodeInternal},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.code] = true
	}
	for _, r := range connectcode.Rows() {
		if !covered[r.Domain] {
			t.Errorf("code table row %s → %s has no round-trip case", r.Domain, r.Connect)
		}
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			sent := domain.Errorf(c.code, "the message of %s", c.code)
			var ce *connect.Error
			if !errors.As(connectcode.ToConnect(sent), &ce) || ce.Code() != c.wire {
				t.Fatalf("connectcode.ToConnect(%s) = %v, want Connect code %s", c.code, connectcode.ToConnect(sent), c.wire)
			}
			client := historyClient(t, 0, func(context.Context) error { return sent })
			_, err := client.Reports(testContext(t), anyWindow)
			if got := domain.ErrorCode(err); got != c.back {
				t.Fatalf("the client read %v (%s), want %s", err, got, c.back)
			}
			leaked := strings.Contains(domain.ErrorMessage(err), sent.Message)
			if c.wire == connect.CodeInternal && leaked {
				t.Errorf("an Internal error leaked its message: %v", err)
			}
			if c.wire != connect.CodeInternal && !leaked {
				t.Errorf("the client read message %q, want %q", domain.ErrorMessage(err), sent.Message)
			}
		})
	}
}

// TestErrorCodeFromServer: Connect codes no domain code sends (the auth
// middleware's, connect's own, a newer server's) still read as the closest
// domain code, and an unknown one as INTERNAL naming it.
func TestErrorCodeFromServer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		wire connect.Code
		back string
	}{
		{connect.CodeUnauthenticated, domain.CodeUnauthenticated},
		{connect.CodePermissionDenied, domain.CodePermissionDenied},
		{connect.CodeDeadlineExceeded, domain.CodeUnavailable},
		{connect.CodeCanceled, domain.CodeUnavailable},
		{connect.CodeUnknown, domain.CodeInternal},
		{connect.CodeUnimplemented, domain.CodeInternal},
		{connect.CodeOutOfRange, domain.CodeInternal},
		{connect.CodeDataLoss, domain.CodeInternal},
	}
	for _, c := range cases {
		t.Run(c.wire.String(), func(t *testing.T) {
			client := historyClient(t, 0, func(context.Context) error {
				return connect.NewError(c.wire, errors.New("from the server"))
			})
			_, err := client.Reports(testContext(t), anyWindow)
			if got := domain.ErrorCode(err); got != c.back {
				t.Fatalf("the client read %v (%s), want %s", err, got, c.back)
			}
			msg := domain.ErrorMessage(err)
			if !strings.Contains(msg, "from the server") {
				t.Errorf("message %q lost the server's", msg)
			}
			if c.back == domain.CodeInternal && !strings.Contains(msg, c.wire.String()) {
				t.Errorf("message %q does not name the unknown code %s", msg, c.wire)
			}
		})
	}
}

// TestErrorClientGaveUp: a call that ends on the client's side is
// UNAVAILABLE (worth a retry), never LEASE_EXPIRED or REPLACED, and keeps
// the context's error for errors.Is.
func TestErrorClientGaveUp(t *testing.T) {
	t.Parallel()
	// blocked answers only once its context ended (the deadline the client
	// sent) and the client's call returned (released), so the client's own
	// end always comes first: a server answering at that very moment could
	// win the race on a loaded machine, and the client would read its
	// "gave up" instead.
	blocked := func(started chan<- struct{}, released <-chan struct{}) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			<-released
			return domain.Wrap(ctx.Err(), domain.CodeUnavailable, "gave up")
		}
	}
	check := func(t *testing.T, err, want error) {
		t.Helper()
		if domain.ErrorCode(err) != domain.CodeUnavailable || !errors.Is(err, want) {
			t.Fatalf("the client read %v (%s), want UNAVAILABLE matching %v", err, domain.ErrorCode(err), want)
		}
	}
	t.Run("caller's deadline already passed", func(t *testing.T) {
		client := historyClient(t, 0, func(context.Context) error { return nil })
		ctx, cancel := context.WithDeadline(testContext(t), time.Now())
		defer cancel()
		_, err := client.Reports(ctx, anyWindow)
		check(t, err, context.DeadlineExceeded)
	})
	t.Run("caller cancels mid-call", func(t *testing.T) {
		started, released := make(chan struct{}), make(chan struct{})
		defer close(released) // before the server closes, at cleanup
		client := historyClient(t, 0, blocked(started, released))
		ctx, cancel := context.WithCancel(testContext(t))
		defer cancel()
		go func() {
			select {
			case <-started:
				cancel()
			case <-ctx.Done():
			}
		}()
		_, err := client.Reports(ctx, anyWindow)
		check(t, err, context.Canceled)
	})
	t.Run("caller's deadline passes mid-call", func(t *testing.T) {
		released := make(chan struct{})
		defer close(released)
		client := historyClient(t, 0, blocked(make(chan struct{}), released))
		ctx, cancel := context.WithTimeout(testContext(t), 20*time.Millisecond)
		defer cancel()
		_, err := client.Reports(ctx, anyWindow)
		check(t, err, context.DeadlineExceeded)
	})
	t.Run("http.Client timeout, caller's context alive", func(t *testing.T) {
		released := make(chan struct{})
		defer close(released)
		client := historyClient(t, 20*time.Millisecond, blocked(make(chan struct{}), released))
		ctx := testContext(t)
		_, err := client.Reports(ctx, anyWindow)
		if ctx.Err() != nil {
			t.Fatalf("the test's own bound passed: %v", ctx.Err())
		}
		check(t, err, context.DeadlineExceeded)
	})
	t.Run("client-side codes without a wire", func(t *testing.T) {
		for code, cause := range map[connect.Code]error{
			connect.CodeDeadlineExceeded: context.DeadlineExceeded,
			connect.CodeCanceled:         context.Canceled,
		} {
			err := connectcode.FromConnect(t.Context(), connect.NewError(code, cause))
			check(t, err, cause)
		}
	})
}

// TestHistoryClientRefusesAGapIntervalMillisecondsCannotCarry: the wire
// counts the history interval in milliseconds, where 0 asks for the
// reporter's own; a positive interval below a millisecond, or between two,
// is refused before any request instead of becoming the default or
// truncated.
func TestHistoryClientRefusesAGapIntervalMillisecondsCannotCarry(t *testing.T) {
	t.Parallel()
	c := historyClient(t, 0, nil) // the fake serves no Gaps: only the client can answer
	for _, d := range []time.Duration{time.Nanosecond, 500 * time.Microsecond, 1500 * time.Microsecond} {
		now := time.Now().Truncate(time.Millisecond)
		_, err := c.Gaps(testContext(t), audit.GapsQuery{Window: audit.Window{Since: now.Add(-time.Hour), Until: now}, Interval: d})
		if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(domain.ErrorMessage(err), "interval must be within [1ms, 24h0m0s] in whole milliseconds") {
			t.Errorf("interval %s: %v, want INVALID_ARGUMENT about whole milliseconds", d, err)
		}
	}
}

// TestHistoryCallsAreBoundedOnTheServer: a caller that sent no deadline
// still has its query cancelled after the server's bound, so a slow query
// cannot hold the store's connections indefinitely.
func TestHistoryCallsAreBoundedOnTheServer(t *testing.T) {
	t.Parallel()
	h := NewHistory(fakeHistory{reports: func(ctx context.Context) error {
		<-ctx.Done() // a query that would run for ever
		return ctx.Err()
	}}, time.Now, time.Second)
	h.queryTimeout = 100 * time.Millisecond
	srv := serve(t, h.Handler)
	c := NewHistoryClient(srv.Client(), srv.URL, "")
	start := time.Now()
	_, err := c.Reports(testContext(t), audit.ReportsQuery{Window: audit.Window{Since: start.Add(-time.Hour), Until: start}})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("after %s: %v, want the call ended by the server's bound", time.Since(start), err)
	}
}

// TestHistoryClientRefusesWhatWouldWrap: the wire carries limits and
// ranks in 32 bits; a larger value is refused with the domain's message, as
// the page and the database give it, instead of arriving wrapped (a limit
// of 4294967297 as 1).
func TestHistoryClientRefusesWhatWouldWrap(t *testing.T) {
	t.Parallel()
	c := historyClient(t, 0, nil) // the fake serves no outages: only the client can answer
	now := time.Now().Truncate(time.Millisecond)
	w := audit.Window{Since: now.Add(-time.Hour), Until: now}
	_, err := c.Outages(testContext(t), audit.OutagesQuery{Window: w, Limit: 1<<32 + 1})
	if want := "limit must be within [1, 10000] (0 means the default 1000), got 4294967297"; domain.ErrorMessage(err) != want {
		t.Errorf("limit 2^32+1: %v, want %q", err, want)
	}
	_, err = c.Reports(testContext(t), audit.ReportsQuery{Window: w, Ranks: []int64{1<<32 + 1}})
	if want := "ranks: dp_rank 4294967297 outside [0, 2147483647]"; domain.ErrorMessage(err) != want {
		t.Errorf("rank 2^32+1: %v, want %q", err, want)
	}
	// Window bounds in milliseconds, where 0 means unset: a finer bound, or
	// the epoch itself, would be answered differently than the store does.
	for _, tc := range []struct {
		w    audit.Window
		want string
	}{
		{audit.Window{Since: now.Add(-time.Hour + 500*time.Microsecond), Until: now}, "the history service takes whole milliseconds"},
		{audit.Window{Since: time.Unix(0, 0), Until: now}, "since 1970-01-01T00:00:00Z: the history service reads it as unset"},
	} {
		_, err := c.Outages(testContext(t), audit.OutagesQuery{Window: tc.w})
		if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(domain.ErrorMessage(err), tc.want) {
			t.Errorf("window %v: %v, want %q", tc.w, err, tc.want)
		}
	}
}

// anyWindow is a query the service passes on to its store.
var anyWindow = audit.ReportsQuery{Window: audit.Window{Since: time.UnixMilli(1_000_000), Until: time.UnixMilli(2_000_000)}}
