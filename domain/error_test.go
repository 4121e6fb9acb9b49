package domain

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPullEndedKeepsTheContextsError(t *testing.T) {
	t.Parallel()
	err := PullEnded("GET x", context.DeadlineExceeded, 1234567*time.Microsecond)
	if !errors.Is(err, context.DeadlineExceeded) || ErrorCode(err) != CodePullTimeout ||
		ErrorMessage(err) != "GET x: timed out after 1.235s" {
		t.Fatalf("%v", err)
	}
	err = PullEnded("GetLoads y", context.Canceled, 0)
	if !errors.Is(err, context.Canceled) || ErrorMessage(err) != "GetLoads y: pull canceled" {
		t.Fatalf("%v", err)
	}
}

func TestWrapShowsItsCauseToLogsOnly(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 127.0.0.1:5432: connection refused")
	err := Wrap(cause, CodeUnavailable, "history database unavailable (%s)", "append")
	if !errors.Is(err, cause) || ErrorCode(err) != CodeUnavailable {
		t.Fatalf("%v", err)
	}
	if ErrorMessage(err) != "history database unavailable (append)" {
		t.Fatalf("message %q leaks the cause", ErrorMessage(err))
	}
	if !strings.HasSuffix(err.Error(), cause.Error()) {
		t.Fatalf("Error() %q hides the cause from logs", err.Error())
	}
}
