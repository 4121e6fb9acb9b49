package ports

import "time"

// Backoff paces the retries of a failing write: the caller waits
// NextBackOff before each new attempt and calls Reset before retrying
// something new. One goroutine uses it at a time. A jittered exponential
// backoff (cenkalti/backoff's *ExponentialBackOff) satisfies it; tests use
// a deterministic one.
type Backoff interface {
	NextBackOff() time.Duration
	Reset()
}
