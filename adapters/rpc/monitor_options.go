package rpc

import (
	"cmp"
	"log/slog"
	"math"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Defaults of MonitorOptions. An honest router sends a register, then a
// keep_alive every renew_after_ms (a third of its lease) and now and then
// an update_config. Some answer every report with a keep_alive: at the
// shortest report interval (10 ms by default) that is 100 frames a second.
// The frame budget allows that, and is still far below what would let one
// stream keep a core busy.
const (
	DefaultFirstFrameTimeout  = 5 * time.Second
	DefaultMaxFramesPerSecond = 100
	DefaultFrameBurst         = 100
	// The budgets every stream of one connection, and of one peer host,
	// share: a router fleet's keep-alives and registers (10 000 routers
	// over 100 connections from one host send ~3 000 frames a second, and
	// register within a second or two) fit; a flooder spreading over
	// streams or reconnecting after each cut is held to a fraction of a
	// core (at ~9 µs a frame, 20 000 a second is under a fifth of one).
	DefaultMaxConnFramesPerSecond = 10000
	DefaultMaxPeerFramesPerSecond = 20000
	DefaultFinalWriteTimeout      = time.Second
	// DefaultMaxPendingStreams is far above what a reconnecting fleet has
	// waiting at once: a router sends register right after opening.
	DefaultMaxPendingStreams = 1000
	DefaultAbuseLogInterval  = 10 * time.Second
)

// MonitorOptions bound what one Monitor stream may cost the reporter. A
// zero field takes its default; a negative one is an argument error.
type MonitorOptions struct {
	// FirstFrameTimeout is how long a new stream may wait before sending
	// register; then it ends with status DEADLINE_EXCEEDED.
	FirstFrameTimeout time.Duration
	// MaxFramesPerSecond and FrameBurst are each stream's budget of router
	// frames (a token bucket: FrameBurst frames at once, refilled at
	// MaxFramesPerSecond). A stream over it gets RESOURCE_EXHAUSTED and ends.
	MaxFramesPerSecond float64
	FrameBurst         int
	// MaxConnFramesPerSecond and MaxPeerFramesPerSecond are the budgets
	// (a second's worth at once) that every stream of one connection, and
	// of one peer host, share. A stream whose frame finds its connection's
	// or its peer's budget spent ends with RESOURCE_EXHAUSTED.
	MaxConnFramesPerSecond float64
	MaxPeerFramesPerSecond float64
	// MaxPendingStreams bounds the streams open but not registered yet,
	// over every connection; one more gets RESOURCE_EXHAUSTED at once.
	MaxPendingStreams int
	// FinalWriteTimeout bounds the send of a stream's last frame (its
	// StreamError), and the send in progress once the session ended or
	// the handler stops: a router that stops reading cannot hold its
	// handler past its session. It needs WithTransportInfo in front of the
	// handler; at shutdown, BoundWritesAtShutdown bounds whatever send is
	// in progress, with the same timeout.
	FinalWriteTimeout time.Duration
	// Stalls, when set, ends a stream whose send stays blocked for its
	// bound while the session lives: keep_alives arrive, reports do not.
	Stalls *Stalls
	// AbuseLogInterval is the least time between two log lines about
	// streams ended for sending no register in time or too many frames;
	// each line counts the ones it stood for.
	AbuseLogInterval time.Duration
	// Clock drives the first-frame deadline and the frame budget (default:
	// the system clock). Write deadlines are the network's, always on the
	// system clock.
	Clock ports.Clock
	// Logger receives the handler's lines (default: none).
	Logger *slog.Logger
}

// withDefaults validates o and fills in its zero fields; its errors are
// INVALID_ARGUMENT naming the option (domain.InvalidOption, the options'
// names in kebab case).
func (o MonitorOptions) withDefaults() (MonitorOptions, error) {
	for _, c := range []struct {
		option string
		value  any
		bad    bool
	}{
		{"first-frame-timeout", o.FirstFrameTimeout, o.FirstFrameTimeout < 0},
		// NaN passes "< 0" and would turn the frame budget off; so would +Inf.
		{"max-frames-per-second", o.MaxFramesPerSecond, !(o.MaxFramesPerSecond >= 0) || math.IsInf(o.MaxFramesPerSecond, 1)},
		{"frame-burst", o.FrameBurst, o.FrameBurst < 0},
		{"max-conn-frames-per-second", o.MaxConnFramesPerSecond, !(o.MaxConnFramesPerSecond >= 0) || math.IsInf(o.MaxConnFramesPerSecond, 1)},
		{"max-peer-frames-per-second", o.MaxPeerFramesPerSecond, !(o.MaxPeerFramesPerSecond >= 0) || math.IsInf(o.MaxPeerFramesPerSecond, 1)},
		{"max-pending-streams", o.MaxPendingStreams, o.MaxPendingStreams < 0},
		{"final-write-timeout", o.FinalWriteTimeout, o.FinalWriteTimeout < 0},
		{"abuse-log-interval", o.AbuseLogInterval, o.AbuseLogInterval < 0},
	} {
		if c.bad {
			return o, domain.InvalidOption(c.option, "%v: want a finite value > 0 (0 takes the default)", c.value)
		}
	}
	o.FirstFrameTimeout = cmp.Or(o.FirstFrameTimeout, DefaultFirstFrameTimeout)
	o.MaxFramesPerSecond = cmp.Or(o.MaxFramesPerSecond, DefaultMaxFramesPerSecond)
	o.FrameBurst = cmp.Or(o.FrameBurst, DefaultFrameBurst)
	o.MaxConnFramesPerSecond = cmp.Or(o.MaxConnFramesPerSecond, DefaultMaxConnFramesPerSecond)
	o.MaxPeerFramesPerSecond = cmp.Or(o.MaxPeerFramesPerSecond, DefaultMaxPeerFramesPerSecond)
	o.MaxPendingStreams = cmp.Or(o.MaxPendingStreams, DefaultMaxPendingStreams)
	o.FinalWriteTimeout = cmp.Or(o.FinalWriteTimeout, DefaultFinalWriteTimeout)
	o.AbuseLogInterval = cmp.Or(o.AbuseLogInterval, DefaultAbuseLogInterval)
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// systemClock is ports.Clock on the machine's clock (adapters/clock is
// another adapter, which this one may not import).
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(at time.Time) ports.Timer {
	return systemTimer{time.NewTimer(time.Until(at))}
}

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }
func (s systemTimer) Stop()               { s.t.Stop() }
