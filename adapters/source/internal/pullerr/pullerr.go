package pullerr

import (
	"context"
	"errors"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// FromContext returns, once ctx has ended, "<what>: timed out after <d>"
// (deadline) or "<what>: pull canceled", measured from start; nil while
// ctx lives.
func FromContext(ctx context.Context, what string, start time.Time) error {
	cerr := ctx.Err()
	if cerr == nil {
		return nil
	}
	if errors.Is(cerr, context.DeadlineExceeded) {
		return Wrap(domain.Errorf(domain.CodePullTimeout, "%s: timed out after %s", what, time.Since(start).Round(time.Millisecond)), cerr)
	}
	return Wrap(domain.Errorf(domain.CodePullTimeout, "%s: pull canceled", what), cerr)
}

// Wrap returns e, which also matches cause under errors.Is.
func Wrap(e *domain.Error, cause error) error { return &wrapped{err: e, cause: cause} }

type wrapped struct {
	err   *domain.Error
	cause error
}

func (w *wrapped) Error() string   { return w.err.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.err, w.cause} }
