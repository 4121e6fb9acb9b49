package sourcetest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// Wait bounds every wait in the sources' tests: a call that outlives it has
// ignored its context.
const Wait = 10 * time.Second

// Serve serves h on 127.0.0.1 until the test ends and returns its base URL.
func Serve(t testing.TB, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// ServeBlocking is Serve for handlers that may block until the client gives
// up, like Hang: h gets a channel that is closed when the test ends, before
// the server's Close waits for its handlers.
func ServeBlocking(t testing.TB, h func(done <-chan struct{}) http.HandlerFunc) string {
	t.Helper()
	done := make(chan struct{})
	url := Serve(t, h(done))
	t.Cleanup(func() { close(done) }) // cleanups run last-in first-out
	return url
}

// Within calls f under a context that ends after d (0 means Wait) and
// returns what f returns. It fails the test if f has not returned within
// Wait.
func Within[T any](t testing.TB, d time.Duration, f func(context.Context) (T, error)) (T, error) {
	t.Helper()
	if d == 0 {
		d = Wait
	}
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		ch <- result{v, err}
	}()
	wait, stop := context.WithTimeout(t.Context(), Wait)
	defer stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-wait.Done():
		t.Fatalf("call did not return within %s of its ctx ending", Wait)
		var zero T
		return zero, nil
	}
}

// Failure checks err, returned with got, as a failed pull: an error on one
// line with code, that matches context.DeadlineExceeded exactly when timeout
// is set. It returns the message (last_error) for the caller to check.
func Failure(t testing.TB, got any, err error, code string, timeout bool) string {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded with %+v, want a %s error", got, code)
	}
	msg := domain.ErrorMessage(err)
	t.Logf("last_error: %s", msg)
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	if c := domain.ErrorCode(err); c != code {
		t.Errorf("code %s, want %s (%v)", c, code, err)
	}
	if isTimeout := errors.Is(err, context.DeadlineExceeded); isTimeout != timeout {
		t.Errorf("errors.Is(err, DeadlineExceeded) = %v, want %v", isTimeout, timeout)
	}
	return msg
}

// Mentions checks that msg contains each of want, after replacing in
// want the placeholder pairs of vars ("{url}", url, ...).
func Mentions(t testing.TB, msg string, want []string, vars ...string) {
	t.Helper()
	r := strings.NewReplacer(vars...)
	for _, w := range want {
		if w = r.Replace(w); !strings.Contains(msg, w) {
			t.Errorf("error %q\ndoes not contain %q", msg, w)
		}
	}
}

// Rejected checks a pull whose values parse but break the snapshot's
// invariants: it succeeded (err is nil), and domain.ValidateSnapshot,
// expecting ranks 0 and 1, refuses snap with a message containing want.
func Rejected(t testing.TB, snap domain.Snapshot, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	verr := domain.ValidateSnapshot(snap, domain.RankRange(2))
	if verr == nil {
		t.Fatalf("ValidateSnapshot accepted %+v", snap)
	}
	if msg := domain.ErrorMessage(verr); !strings.Contains(msg, want) {
		t.Errorf("validation error %q\ndoes not contain %q", msg, want)
	}
}

// Invalid checks that err is a construction error with code
// domain.CodeInvalidArgument and exactly the message want.
func Invalid(t testing.TB, err error, want string) {
	t.Helper()
	if domain.ErrorCode(err) != domain.CodeInvalidArgument || domain.ErrorMessage(err) != want {
		t.Errorf("error %v\nwant INVALID_ARGUMENT: %s", err, want)
	}
}

// Hang is a handler that never answers: it returns when the client gives
// up or when done is closed, which a test does before its server's Close
// waits for handlers.
func Hang(done <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}
}
