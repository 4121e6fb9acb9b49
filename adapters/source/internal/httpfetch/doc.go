// Package httpfetch is what the HTTP snapshot sources (sglang-http,
// vllm-metrics) share: one GET of a fixed endpoint below an operator-given
// base URL, over a client kept alive between pulls, returning the body of a
// 2xx response or a one-line domain error that names the cause.
//
// It owns the failure messages every HTTP source reports through
// last_error, byte for byte the same for each of them: the transport error,
// "timed out after …" or "pull canceled" when the pull's context ends (code
// domain.CodePullTimeout, and errors.Is matches the context's error), the
// HTTP status with a snippet of the body, a body over the size bound, a body
// cut short (all domain.CodeSourceFailed). It also validates the base URL
// and the API key once, at construction (domain.CodeInvalidArgument, naming
// the flag the operator has to fix: a URL without its scheme gets one
// suggested), accepts the endpoint's own URL (…/metrics, …/v1/loads) for
// the base URL it ends in, and never shows a password or the API key in a
// message.
//
// It must not know any response format (JSON, Prometheus text), snapshots or
// ranks, the fire loop, the pull budget (that arrives as the context's
// deadline or cancellation) or retries: a source parses the body it gets,
// and a failed pull is simply the next fire's to repeat.
package httpfetch
