package rpc

import (
	"errors"
	"io"

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

// receiver is a stream's one reader, in a goroutine of its own from the
// stream's start, so the handler can wait for the first frame with a
// deadline and a shutdown signal. Each frame spends from the stream's
// budget here, before anything else sees it: a flood costs the flooding
// stream's own goroutine and nothing more.
type receiver struct {
	st     *stream
	budget *rate.Limiter
	opts   *MonitorOptions

	first chan inbound       // capacity 1: the first frame or error
	sess  chan RouterSession // capacity 1: the session, once registered
	quit  chan struct{}      // closed when the handler returns
	ended chan error         // capacity 1: the last word after registration
}

func (m *Monitor) newReceiver(st *stream) *receiver {
	return &receiver{
		st: st, opts: &m.opts,
		budget: rate.NewLimiter(rate.Limit(m.opts.MaxFramesPerSecond), m.opts.FrameBurst),
		first:  make(chan inbound, 1), sess: make(chan RouterSession, 1),
		quit: make(chan struct{}), ended: make(chan error, 1),
	}
}

// run reads the first frame, then, once the handler registered the
// router, relays the rest to the session.
func (r *receiver) run() {
	f, err := r.next()
	r.first <- inbound{f, err}
	if err != nil {
		return
	}
	select {
	case sub := <-r.sess:
		r.relay(sub)
	case <-r.quit:
	}
}

// next reads one frame and charges it to the stream's budget. Its errors:
// io.EOF (half-close), a *domain.Error the router should see (a frame that
// does not decode or is too large, a budget overrun), or the transport's.
func (r *receiver) next() (*pb.RouterFrame, error) {
	f, err := r.st.Receive()
	if err != nil {
		return nil, inboundError(err)
	}
	if !r.budget.AllowN(r.opts.Clock.Now(), 1) {
		return nil, domain.Wrap(errOverBudget, domain.CodeResourceExhausted,
			"more than %d router frames at once or %g a second on one stream; a keep_alive every renew_after_ms is enough",
			r.opts.FrameBurst, r.opts.MaxFramesPerSecond)
	}
	return f, nil
}

// errOverBudget is the cause of the error that ends a stream over its frame
// budget (never shown to the router; the message is).
var errOverBudget = errors.New("frame budget spent")

// inboundError turns a frame that does not decode into a protocol error,
// so the router learns why in a StreamError frame like any other (SPEC §2).
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

// relay applies the router's frames to its session until stop, half-close,
// an invalid frame or a transport error, and reports all but half-close on
// ended.
func (r *receiver) relay(sub RouterSession) {
	for {
		f, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				// Half-closed: the router can no longer renew, but the
				// session lives until its lease runs out (grpcurl with a
				// here-document works this way).
				return
			}
			r.ended <- err
			return
		}
		switch p := f.GetPayload().(type) {
		case *pb.RouterFrame_KeepAlive:
			_ = sub.KeepAlive() // an ended session shows on Done
		case *pb.RouterFrame_UpdateConfig:
			if _, err := sub.Update(optionalInt(p.UpdateConfig.ReportIntervalMs), optionalInt(p.UpdateConfig.LeaseTtlMs)); isArgumentError(err) {
				r.ended <- err
				return
			}
		case *pb.RouterFrame_Register:
			reg := p.Register
			if _, err := sub.Reregister(reg.GetRouterId(), reg.GetReportIntervalMs(), reg.GetLeaseTtlMs()); isArgumentError(err) {
				r.ended <- err
				return
			}
		case *pb.RouterFrame_Stop:
			r.ended <- nil
			return
		default:
			r.ended <- domain.Errorf(domain.CodeInvalidArgument, "router frame has no payload")
			return
		}
	}
}

func optionalInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func isArgumentError(err error) bool { return domain.ErrorCode(err) == domain.CodeInvalidArgument }
