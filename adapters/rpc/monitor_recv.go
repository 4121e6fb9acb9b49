package rpc

import (
	"errors"
	"io"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"

	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// inbound is the first thing read from a stream: a frame or why none came.
type inbound struct {
	frame *pb.RouterFrame
	err   error
}

// receiver reads a stream's frames. Each frame spends from the stream's
// budget, and from those its connection's and its peer host's streams
// share, here, before anything else sees it: a flood costs the flooding
// stream's own goroutine and nothing more.
type receiver struct {
	st               stream
	budget           streamBudget
	conn, peer       *rate.Limiter
	connAddr, peerIP string
	opts             *MonitorOptions
}

// newReceiver returns the stream's receiver, holding its share of the
// connection's and the peer's budgets until release.
func (m *Monitor) newReceiver(st stream) *receiver {
	addr := st.peerAddr()
	now := m.opts.Clock.Now()
	r := &receiver{st: st, opts: &m.opts, connAddr: addr, peerIP: peerHost(addr)}
	r.conn, r.peer = m.conns.acquire(addr, now), m.peers.acquire(r.peerIP, now)
	return r
}

// release gives r's share of the connection's and the peer's budgets back.
func (m *Monitor) release(r *receiver) {
	m.conns.release(r.connAddr)
	m.peers.release(r.peerIP)
}

// first reads the first frame in a goroutine of its own, so the handler
// can wait for it with a deadline and a shutdown signal; the goroutine
// ends with that one read.
func (r *receiver) first() <-chan inbound {
	ch := make(chan inbound, 1)
	go func() {
		f, err := r.next()
		ch <- inbound{f, err}
	}()
	return ch
}

// next reads one frame and charges it to the stream's budget. Its errors:
// io.EOF (half-close), a *domain.Error the router should see (a frame that
// does not decode or is too large, a budget overrun), or the transport's.
// It holds nothing but the read: every open stream waits in it, and each
// byte of its frame is a byte of every stream's stack.
func (r *receiver) next() (*pb.RouterFrame, error) {
	f, err := r.st.Receive()
	if err != nil {
		return nil, inboundError(err)
	}
	if err := r.charge(); err != nil {
		return nil, err
	}
	return f, nil
}

// charge spends one frame from the stream's, its connection's and its
// peer's budgets.
//
//go:noinline
func (r *receiver) charge() error {
	now := r.opts.Clock.Now()
	if !r.budget.allow(now, r.opts.MaxFramesPerSecond, r.opts.FrameBurst) {
		return domain.Wrap(errOverBudget, domain.CodeResourceExhausted,
			"more than %d router frames at once or %g a second on one stream; a keep_alive every renew_after_ms is enough",
			r.opts.FrameBurst, r.opts.MaxFramesPerSecond)
	}
	if !r.conn.AllowN(now, 1) {
		return domain.Wrap(errOverBudget, domain.CodeResourceExhausted,
			"the streams of connection %s sent more than %g router frames a second together (--max-conn-frames-per-second)",
			r.connAddr, r.opts.MaxConnFramesPerSecond)
	}
	if !r.peer.AllowN(now, 1) {
		return domain.Wrap(errOverBudget, domain.CodeResourceExhausted,
			"the streams from %s sent more than %g router frames a second together (--max-peer-frames-per-second)",
			r.peerIP, r.opts.MaxPeerFramesPerSecond)
	}
	return nil
}

// streamBudget is a stream's own token bucket: burst frames at once,
// refilled at perSecond a second. Only one goroutine charges it at a time (the
// first frame's reader, then the handler), so it needs no lock, and it
// lives in the receiver rather than in an allocation of its own.
type streamBudget struct {
	tokens  float64
	last    time.Time // of the last charge
	started bool      // charged once: the burst was granted
}

// allow spends a token at now if there is one.
func (b *streamBudget) allow(now time.Time, perSecond float64, burst int) bool {
	switch {
	case !b.started:
		b.tokens, b.last, b.started = float64(burst), now, true
	case now.After(b.last):
		b.tokens = min(float64(burst), b.tokens+now.Sub(b.last).Seconds()*perSecond)
		b.last = now
	default: // a clock stepped back refills from where it is now
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// errOverBudget is the cause of the error that ends a stream over its frame
// budget (never shown to the router; the message is).
var errOverBudget = errors.New("frame budget spent")

// inboundError turns a frame that does not decode into a protocol error,
// so the router learns why in a StreamError frame like any other (docs/routers.md).
// A frame over the handler's read limit keeps connect's RESOURCE_EXHAUSTED
// status: it was refused unread, and a peer that sends megabytes gets no
// more of our time.
func inboundError(err error) error {
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	var ce *connect.Error
	if errors.As(err, &ce) && !connect.IsWireError(err) && ce.Code() == connect.CodeInvalidArgument {
		return domain.Wrap(err, domain.CodeInvalidArgument, "router frame does not decode: %s", ce.Message())
	}
	return err
}

// relay applies the router's frames to its session until stop (nil),
// half-close (io.EOF), an invalid frame or over-budget stream (a
// *domain.Error) or a transport error, and returns which.
func (r *receiver) relay(sub Controls) error {
	for {
		f, err := r.next()
		if err != nil {
			return err
		}
		if end, err := apply(sub, f); end {
			return err
		}
	}
}

// apply applies one router frame to its session; end says the stream's
// reading ends, with err. Out of relay's line, so what it needs is not
// on the stack of every stream waiting for its next frame.
//
//go:noinline
func apply(sub Controls, f *pb.RouterFrame) (end bool, err error) {
	switch p := f.GetPayload().(type) {
	case *pb.RouterFrame_KeepAlive:
		_ = sub.KeepAlive() // an ended session shows on Ended
	case *pb.RouterFrame_UpdateConfig:
		if _, err := sub.Update(optionalInt(p.UpdateConfig.ReportIntervalMs), optionalInt(p.UpdateConfig.LeaseTtlMs)); isArgumentError(err) {
			return true, err
		}
	case *pb.RouterFrame_Register:
		reg := p.Register
		if _, err := sub.Reregister(reg.GetRouterId(), reg.GetReportIntervalMs(), reg.GetLeaseTtlMs()); isArgumentError(err) {
			return true, err
		}
	case *pb.RouterFrame_Stop:
		return true, nil
	default:
		return true, domain.Errorf(domain.CodeInvalidArgument, "router frame has no payload")
	}
	return false, nil
}

func optionalInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func isArgumentError(err error) bool { return domain.ErrorCode(err) == domain.CodeInvalidArgument }
