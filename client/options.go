package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// Protocol is the RPC protocol a Worker speaks on the Monitor stream. The
// worker serves all of them on one port; both need HTTP/2.
type Protocol int

const (
	// ProtocolGRPC is gRPC over HTTP/2 (the default): what SGLang's router
	// and stock gRPC clients speak.
	ProtocolGRPC Protocol = iota
	// ProtocolConnect is the Connect protocol over HTTP/2.
	ProtocolConnect
)

// String names the protocol.
func (p Protocol) String() string {
	switch p {
	case ProtocolGRPC:
		return "grpc"
	case ProtocolConnect:
		return "connect"
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// Defaults of Options; a zero field takes its default.
const (
	DefaultReportInterval      = time.Second
	DefaultLease               = 10 * time.Second
	DefaultStaleAfterIntervals = 3
	DefaultMaxSnapshotAge      = 10 * time.Second
)

// maxRouterIDBytes is the worker's own bound on router_id (docs/routers.md).
const maxRouterIDBytes = 256

// Options configure a Worker (and, through Fleet, every worker of a fleet).
// Zero fields take their defaults; Dial clamps what it can and refuses
// what it cannot mean.
type Options struct {
	// RouterID names this router to the worker; required, at most 256
	// bytes. A reconnect registers under the same id, so the worker
	// replaces the abandoned session instead of keeping two. Every router
	// needs its own: two routers sharing one take turns (see Worker).
	RouterID string
	// ReportInterval is the report interval asked for (default 1s, whole
	// milliseconds, at most 24h). The worker refuses one outside its own
	// bounds (default 10ms..60s) with INVALID_ARGUMENT, a permanent error.
	ReportInterval time.Duration
	// Lease is the lease asked for (default 10s, at most 24h); the worker
	// clamps it and keep-alives go every renew_after_ms of its answer,
	// bounded to [max(100ms, lease/10), lease/2] of the lease it granted.
	Lease time.Duration
	// Protocol is gRPC (default) or Connect.
	Protocol Protocol
	// TLS, when set, dials https with this configuration; nil dials
	// plaintext HTTP/2 (h2c).
	TLS *tls.Config
	// BearerToken, when set, is sent as "Authorization: Bearer <token>"
	// (the worker's --auth-token).
	BearerToken string
	// HTTPClient replaces the HTTP/2 client Dial builds from TLS. It must
	// speak HTTP/2 (bidi streams need it); TLS then only picks the scheme.
	// Dial's own client pings an idle connection and drops it when the
	// ping goes unanswered, which a replacement should do too.
	HTTPClient connect.HTTPClient
	// Backoff bounds the waits between reconnects.
	Backoff Backoff
	// StaleAfterIntervals: a view with no new report for more than this
	// many report intervals is Stale (default 3).
	StaleAfterIntervals int
	// MaxSnapshotAge: a report whose oldest rank's snapshot is older than
	// this when it arrives is Stale (default 10s, negative: no bound). It
	// compares the worker's clock with ours, so leave room for skew.
	MaxSnapshotAge time.Duration
	// Choices (a Fleet's only) is the d of its best of d: each pick compares d
	// workers drawn at random and takes the least loaded (default 2, the
	// power of two choices). 1, or any d at least the number of workers,
	// compares them all: least loaded over all, which herds onto one
	// worker between two reports unless Accounting counts what was sent.
	Choices int
	// Accounting (a Fleet's only) says whether a Fleet adds what its router sent since a
	// worker's report to that worker's score (see Fleet.PickFor); the zero
	// value means DefaultAccounting.
	Accounting Accounting
	// Registerer, when set, receives the client's metrics (see doc.go).
	// Workers sharing one Registerer share the collectors.
	Registerer prometheus.Registerer
	// Logger, when set, hears about reconnects and rejected reports.
	Logger *slog.Logger
}

// Accounting switches a Fleet's counting of its router's own dispatches.
type Accounting int

const (
	// AccountingDefault is DefaultAccounting.
	AccountingDefault Accounting = iota
	// AccountingOn counts every dispatch into the score until Done or
	// until the worker's reports count it (see Ledger).
	AccountingOn
	// AccountingOff scores on the reports only.
	AccountingOff
)

// DefaultAccounting is on: in the project's routing benchmark (make
// bench-route, 4 routers, a report every 100 ms) it lowers p99 TTFT at 15
// of the 16 points of its sweep, by 19–23 % on average.
const DefaultAccounting = AccountingOn

// DefaultChoices is the d of the best of d when Options.Choices is 0.
const DefaultChoices = 2

// String names the setting.
func (a Accounting) String() string {
	switch a {
	case AccountingDefault:
		return "default"
	case AccountingOn:
		return "on"
	case AccountingOff:
		return "off"
	}
	return fmt.Sprintf("Accounting(%d)", int(a))
}

// Backoff is a jittered exponential backoff: the n-th wait (from 0) is
// min(Max, Initial·Multiplier^n) scaled by a uniform factor in
// [1-Jitter, 1+Jitter], and never more than Max.
type Backoff struct {
	// Initial is the first wait (default 100ms, at least 1ms).
	Initial time.Duration
	// Max bounds every wait (default 5s, at least Initial).
	Max time.Duration
	// Multiplier grows the wait per failed attempt (default 1.6, at least 1).
	Multiplier float64
	// Jitter is the relative spread in [0, 1] (default 0.2; negative: none).
	Jitter float64
}

// defaultBackoff is what a zero Backoff means.
var defaultBackoff = Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 1.6, Jitter: 0.2}

// normalized fills defaults and clamps into range.
func (b Backoff) normalized() Backoff {
	d := defaultBackoff
	if b.Initial > 0 {
		d.Initial = max(b.Initial, time.Millisecond)
	}
	if b.Max > 0 {
		d.Max = b.Max
	}
	d.Max = max(d.Max, d.Initial)
	// NaN (or ±Inf) compares false with everything, and max passes NaN
	// on: such a value takes the default.
	if b.Multiplier != 0 && !math.IsNaN(b.Multiplier) && !math.IsInf(b.Multiplier, 0) {
		d.Multiplier = max(b.Multiplier, 1)
	}
	switch {
	case math.IsNaN(b.Jitter):
	case b.Jitter < 0:
		d.Jitter = 0
	case b.Jitter > 0:
		d.Jitter = min(b.Jitter, 1)
	}
	return d
}

// delay is the wait before reconnect attempt n (from 0); r is uniform in
// [0, 1).
func (b Backoff) delay(n int, r float64) time.Duration {
	d := float64(b.Initial)
	for i := 0; i < n && d < float64(b.Max); i++ {
		d *= b.Multiplier
	}
	d = min(d, float64(b.Max))
	d *= 1 + b.Jitter*(2*r-1)
	return time.Duration(min(d, float64(b.Max)))
}

// normalized validates o and fills its defaults.
func (o Options) normalized() (Options, error) {
	switch {
	case strings.TrimSpace(o.RouterID) == "":
		return o, errors.New("client: RouterID is required")
	case len(o.RouterID) > maxRouterIDBytes:
		return o, fmt.Errorf("client: RouterID is %d bytes, at most %d", len(o.RouterID), maxRouterIDBytes)
	case o.ReportInterval < 0 || o.Lease < 0:
		return o, errors.New("client: ReportInterval and Lease must not be negative")
	case o.ReportInterval > 0 && o.ReportInterval < time.Millisecond, o.Lease > 0 && o.Lease < time.Millisecond:
		return o, errors.New("client: ReportInterval and Lease are whole milliseconds, at least 1ms")
	case o.Protocol != ProtocolGRPC && o.Protocol != ProtocolConnect:
		return o, fmt.Errorf("client: unknown %v", o.Protocol)
	case o.StaleAfterIntervals < 0:
		return o, errors.New("client: StaleAfterIntervals must not be negative")
	case o.Choices < 0:
		return o, fmt.Errorf("client: Choices is %d, want 0 (default %d), 1 (least loaded over all) or more", o.Choices, DefaultChoices)
	case o.Accounting < AccountingDefault || o.Accounting > AccountingOff:
		return o, fmt.Errorf("client: unknown %v, want AccountingDefault, AccountingOn or AccountingOff", o.Accounting)
	}
	if o.Choices == 0 {
		o.Choices = DefaultChoices
	}
	if o.Accounting == AccountingDefault {
		o.Accounting = DefaultAccounting
	}
	if o.ReportInterval == 0 {
		o.ReportInterval = DefaultReportInterval
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	o.ReportInterval = min(o.ReportInterval, maxDuration).Truncate(time.Millisecond)
	o.Lease = min(o.Lease, maxDuration).Truncate(time.Millisecond)
	if o.StaleAfterIntervals == 0 {
		o.StaleAfterIntervals = DefaultStaleAfterIntervals
	}
	if o.MaxSnapshotAge == 0 {
		o.MaxSnapshotAge = DefaultMaxSnapshotAge
	}
	o.Backoff = o.Backoff.normalized()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// MaxFrameBytes bounds one frame a Worker accepts from a worker: a
// report of 1 024 ranks takes some 100 KiB.
const MaxFrameBytes = 4 << 20
