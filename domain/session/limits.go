package session

import (
	"math"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// MaxRouterIDBytes bounds router_id.
const MaxRouterIDBytes = 256

// Default limits (docs/routers.md).
const (
	DefaultMinInterval = 10 * time.Millisecond
	DefaultMaxInterval = 60 * time.Second
	DefaultMinLease    = time.Second
	DefaultMaxLease    = 10 * time.Minute
	DefaultMaxSessions = 10000
	// DefaultMaxWatchSessions is for the people looking at dashboards,
	// not for a fleet.
	DefaultMaxWatchSessions = 256
)

// MaxLimit bounds --max-report-interval and --max-lease: far beyond any
// router's need, and it keeps deadlines (uptime + lease, interval × phase
// slot) from overflowing the int64 nanoseconds they are kept in.
const MaxLimit = 24 * time.Hour

// Limits bound what a router may ask for.
type Limits struct {
	MinInterval, MaxInterval time.Duration
	MinLease, MaxLease       time.Duration
	MaxSessions              int
	// MaxWatchSessions bounds browsers' Watch streams apart from
	// MaxSessions, so dashboards can never refuse a router.
	MaxWatchSessions int
}

// DefaultLimits returns the limits of docs/routers.md.
func DefaultLimits() Limits {
	return Limits{
		MinInterval: DefaultMinInterval, MaxInterval: DefaultMaxInterval,
		MinLease: DefaultMinLease, MaxLease: DefaultMaxLease,
		MaxSessions: DefaultMaxSessions, MaxWatchSessions: DefaultMaxWatchSessions,
	}
}

// Validate reports a misconfiguration, naming the limit at fault as an
// option (domain.InvalidOption).
func (l Limits) Validate() error {
	switch {
	case l.MinInterval < time.Millisecond || l.MinInterval%time.Millisecond != 0:
		return domain.InvalidOption("min-report-interval", "%s: must be a whole number of milliseconds, at least 1ms (routers ask in ms)", l.MinInterval)
	case l.MaxInterval%time.Millisecond != 0:
		return domain.InvalidOption("max-report-interval", "%s: must be a whole number of milliseconds (routers ask in ms)", l.MaxInterval)
	case l.MaxInterval > MaxLimit:
		return domain.InvalidOption("max-report-interval", "%s: must be at most %s", l.MaxInterval, MaxLimit)
	case l.MaxInterval < l.MinInterval:
		return domain.InvalidOption("max-report-interval", "%s is below min-report-interval %s", l.MaxInterval, l.MinInterval)
	case l.MinLease <= 0:
		return domain.InvalidOption("min-lease", "%s: must be > 0", l.MinLease)
	case l.MaxLease > MaxLimit:
		return domain.InvalidOption("max-lease", "%s: must be at most %s", l.MaxLease, MaxLimit)
	case l.MaxLease < l.MinLease:
		return domain.InvalidOption("max-lease", "%s is below min-lease %s", l.MaxLease, l.MinLease)
	case l.MaxSessions <= 0:
		return domain.InvalidOption("max-sessions", "%d: must be > 0", l.MaxSessions)
	case l.MaxWatchSessions <= 0:
		return domain.InvalidOption("max-watch-sessions", "%d: must be > 0", l.MaxWatchSessions)
	}
	return nil
}

// Config is a session's granted cadence and lease.
type Config struct {
	Interval time.Duration
	Lease    time.Duration
}

// RenewAfter is when a router should send its next keep-alive: a third of
// the lease, at least 1 ms.
func (c Config) RenewAfter() time.Duration {
	return max(time.Millisecond, c.Lease/3)
}

// CheckRouterID validates a router_id.
func CheckRouterID(id string) error {
	if strings.TrimSpace(id) == "" {
		return domain.Errorf(domain.CodeInvalidArgument, "router_id must not be blank")
	}
	if len(id) > MaxRouterIDBytes {
		return domain.Errorf(domain.CodeInvalidArgument, "router_id is %d bytes, at most %d allowed", len(id), MaxRouterIDBytes)
	}
	return nil
}

// Interval validates a requested report interval in milliseconds.
func (l Limits) Interval(ms int64) (time.Duration, error) {
	minMs, maxMs := l.MinInterval.Milliseconds(), l.MaxInterval.Milliseconds()
	if ms <= 0 || ms < minMs || ms > maxMs || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, domain.Errorf(domain.CodeInvalidArgument,
			"report_interval_ms %d is outside the allowed range [%d, %d]", ms, minMs, maxMs)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ClampInterval returns d clamped into [MinInterval, MaxInterval]: for
// protocols whose clients expect a too-short interval to be raised to the
// minimum rather than refused (ORCA's report_interval, as grpc-go's ORCA
// service does with its own minimum), and a too-long one is lowered to the
// maximum the schedule supports. A zero or negative d gets the minimum.
func (l Limits) ClampInterval(d time.Duration) time.Duration {
	return min(max(d, l.MinInterval), l.MaxInterval)
}

// Lease validates a requested lease in milliseconds (> 0) and clamps it
// into [MinLease, MaxLease].
func (l Limits) Lease(ms int64) (time.Duration, error) {
	if ms <= 0 {
		return 0, domain.Errorf(domain.CodeInvalidArgument,
			"lease_ttl_ms must be > 0 (granted leases are clamped to [%d, %d]), got %d",
			l.MinLease.Milliseconds(), l.MaxLease.Milliseconds(), ms)
	}
	if ms > l.MaxLease.Milliseconds() {
		return l.MaxLease, nil
	}
	return max(l.MinLease, time.Duration(ms)*time.Millisecond), nil
}

// Register validates a whole registration request.
func (l Limits) Register(routerID string, intervalMs, leaseMs int64) (Config, error) {
	if err := CheckRouterID(routerID); err != nil {
		return Config{}, err
	}
	return l.config(intervalMs, leaseMs)
}

func (l Limits) config(intervalMs, leaseMs int64) (Config, error) {
	iv, err := l.Interval(intervalMs)
	if err != nil {
		return Config{}, err
	}
	lease, err := l.Lease(leaseMs)
	if err != nil {
		return Config{}, err
	}
	return Config{Interval: iv, Lease: lease}, nil
}

// Update validates an update_config request as a whole against the current
// config: a nil field keeps its value; either both apply or neither does.
func (l Limits) Update(cur Config, intervalMs, leaseMs *int64) (Config, error) {
	next := cur
	if intervalMs != nil {
		iv, err := l.Interval(*intervalMs)
		if err != nil {
			return cur, err
		}
		next.Interval = iv
	}
	if leaseMs != nil {
		lease, err := l.Lease(*leaseMs)
		if err != nil {
			return cur, err
		}
		next.Lease = lease
	}
	return next, nil
}
