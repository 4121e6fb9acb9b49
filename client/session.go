package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// Stream error codes (docs/routers.md) the client tells apart.
const (
	codeReplaced          = "REPLACED"
	codeLeaseExpired      = "LEASE_EXPIRED"
	codeShuttingDown      = "SHUTTING_DOWN"
	codeResourceExhausted = "RESOURCE_EXHAUSTED"
	codeInvalidArgument   = "INVALID_ARGUMENT"
	codeInvalidFirstFrame = "INVALID_FIRST_FRAME"
)

// maxCodeBytes bounds a stream error's code as the client keeps it; the
// codes of the stream protocol (docs/routers.md) are a few words.
const maxCodeBytes = 64

// Reasons a stream ended besides a stream error code; they label the
// reconnects metric.
const (
	reasonEnded = "ended" // status OK without an error frame
	reasonIdle  = "idle"  // nothing arrived for a lease and two intervals
	reasonOther = "other" // a code this client does not know
)

// closeGrace bounds how long Close waits for the worker to end the stream
// after stop; it is a bound, not a behaviour, so it runs on real time.
const closeGrace = time.Second

// sendQueue bounds frames waiting for the sender; a full queue means the
// transport is stuck, and the idle watchdog ends that stream anyway.
const sendQueue = 16

// sessionEnd says how one stream ended.
type sessionEnd struct {
	reason    string       // metrics label
	cause     string       // for people
	permanent *StreamError // stop for good
	closed    bool         // Close asked
	healthy   bool         // at least one report was accepted
}

type received struct {
	f   *pb.WorkerFrame
	err error
}

// session is one Monitor stream's event loop; only the Worker's
// goroutine runs it, and it alone sends (through the sender goroutine).
type session struct {
	w         *Worker
	st        *loopState
	out       chan *pb.RouterFrame // nil frame: half-close
	idle      timer                // no frame for this long: give up
	keepAlive timer
	stale     timer
	renew     time.Duration // keep-alive period
	granted   time.Duration // lease granted by the ack
	// updatedLease is the lease of the latest update_config on this
	// stream (0: none), which the ack may not reflect.
	updatedLease time.Duration
	healthy      bool
}

// session opens one stream and runs it until it ends.
func (w *Worker) session(st *loopState) sessionEnd {
	ctx, cancel := context.WithCancel(context.Background())
	stream := w.rpc.Monitor(ctx)
	if w.opts.BearerToken != "" {
		stream.RequestHeader().Set("Authorization", "Bearer "+w.opts.BearerToken)
	}
	s := &session{w: w, st: st, out: make(chan *pb.RouterFrame, sendQueue)}
	st.grant = Grant{} // until this stream's ack
	frames, recvDone, sendDone := make(chan received), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			f, err := stream.Receive()
			select {
			case frames <- received{f, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(sendDone)
		sendFrames(ctx, stream, s.out)
	}()
	defer func() {
		cancel()
		<-sendDone
		<-recvDone
		_ = stream.CloseResponse()
		stopTimer(s.idle)
		stopTimer(s.keepAlive)
		stopTimer(s.stale)
	}()
	s.send(&pb.RouterFrame{Payload: &pb.RouterFrame_Register{Register: &pb.RegisterRequest{
		RouterId: w.opts.RouterID, ReportIntervalMs: st.interval.Milliseconds(), LeaseTtlMs: st.lease.Milliseconds()}}})
	s.resetIdle()
	return s.loop(frames)
}

// sendFrames sends queued frames in order until a nil frame, a failed
// send (which shows on the receive side) or the end of ctx, and then
// half-closes the stream. The half-close matters even on a cancelled
// stream: net/http's HTTP/2 transport notices the cancellation only once
// it has stopped reading the request body, and until then a Receive on a
// silent stream would block for ever.
func sendFrames(ctx context.Context, stream interface {
	Send(*pb.RouterFrame) error
	CloseRequest() error
}, out <-chan *pb.RouterFrame) {
	defer func() { _ = stream.CloseRequest() }()
	for {
		select {
		case f := <-out:
			if f == nil || stream.Send(f) != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

func (s *session) loop(frames <-chan received) sessionEnd {
	w := s.w
	for {
		select {
		case r := <-frames:
			if r.err != nil {
				return s.ended(r.err)
			}
			if end, over := s.onFrame(r.f); over {
				return end
			}
		case <-timerC(s.keepAlive):
			s.send(&pb.RouterFrame{Payload: &pb.RouterFrame_KeepAlive{KeepAlive: &pb.KeepAlive{}}})
			s.keepAlive = w.deps.clock.NewTimer(s.renew)
		case <-timerC(s.stale):
			s.stale = nil
			w.publish(s.st)
			s.armStale()
		case <-s.idle.C():
			return sessionEnd{reason: reasonIdle, cause: fmt.Sprintf("no frame for %v", s.idleTimeout()), healthy: s.healthy}
		case u := <-w.updates:
			s.update(u)
		case <-w.closing:
			s.stop(frames)
			return sessionEnd{closed: true}
		}
	}
}

// onFrame handles one frame; over says the stream has ended.
func (s *session) onFrame(f *pb.WorkerFrame) (end sessionEnd, over bool) {
	w, st := s.w, s.st
	s.resetIdle()
	switch p := f.GetPayload().(type) {
	case *pb.WorkerFrame_Registered:
		ack := p.Registered
		s.granted = grantedLease(ack.GetLeaseTtlMs(), st.lease)
		renewAfter := keepAlivePeriod(msDuration(ack.GetRenewAfterMs()), s.granted)
		if s.granted != msDuration(ack.GetLeaseTtlMs()) || renewAfter != msDuration(ack.GetRenewAfterMs()) {
			w.opts.Logger.Warn("worker granted a lease or keep-alive period out of bounds; using bounded values",
				"worker", w.addr, "lease_ttl_ms", ack.GetLeaseTtlMs(), "renew_after_ms", ack.GetRenewAfterMs(),
				"lease", s.granted, "keep_alive", renewAfter)
		}
		st.grant = Grant{Interval: st.interval, Lease: s.granted, RenewAfter: renewAfter}
		s.renew = w.deps.renewAfter(renewAfter)
		stopTimer(s.keepAlive)
		s.keepAlive = w.deps.clock.NewTimer(firstKeepAlive(s.renew, w.deps.rand()))
		if s.updatedLease > 0 { // an update raced the ack
			s.shortenRenew()
			st.grant.updateLease(s.updatedLease)
		}
		st.connected = true
		s.resetIdle()
		// The view may show the last stream's report as Fresh again: it
		// must turn Stale on time even if this stream brings no report.
		s.armStale()
		w.publish(st)
	case *pb.WorkerFrame_Report:
		if w.accept(st, p.Report) {
			s.healthy = true
			s.armStale()
			w.publish(st)
		}
	case *pb.WorkerFrame_Error:
		return s.streamError(p.Error), true
	}
	return sessionEnd{}, false
}

// streamError turns the worker's last frame into how the stream ended.
func (s *session) streamError(e *pb.StreamError) sessionEnd {
	// The code and message are the worker's words: bounded as a report's
	// last_error is, since they end in the view's reason and the logs.
	code, msg := shorten(e.GetCode(), maxCodeBytes), shorten(e.GetMessage(), MaxLastErrorBytes)
	end := sessionEnd{reason: code, cause: code + ": " + msg, healthy: s.healthy}
	switch e.GetCode() {
	case codeInvalidArgument:
		end.permanent = &StreamError{Addr: s.w.addr, Code: code, Message: msg}
	case codeReplaced, codeLeaseExpired, codeShuttingDown, codeResourceExhausted,
		// Our first frame is always register: a worker that says otherwise
		// did not get it in time (an older worker's first-frame timeout on
		// a lossy network). Another stream may well get it through.
		codeInvalidFirstFrame:
	default:
		end.reason = reasonOther
	}
	return end
}

// ended is how a stream that ended without an error frame ended.
func (s *session) ended(err error) sessionEnd {
	if errors.Is(err, io.EOF) {
		return sessionEnd{reason: reasonEnded, cause: "the worker ended the stream", healthy: s.healthy}
	}
	// A transport error may carry the peer's words (a grpc-message).
	return sessionEnd{reason: connect.CodeOf(err).String(), cause: shorten(err.Error(), MaxLastErrorBytes), healthy: s.healthy}
}

// send queues f for the sender; it never blocks (see sendQueue).
func (s *session) send(f *pb.RouterFrame) {
	select {
	case s.out <- f:
	default:
	}
}

// update applies a config change now and for later registrations. The
// frame goes out even before the ack: the worker reads it after the
// register it follows.
func (s *session) update(u updateRequest) {
	w, st := s.w, s.st
	s.send(st.apply(u))
	st.grant.Interval = st.interval
	if u.lease > 0 {
		s.updatedLease = u.lease
		if s.renew > 0 {
			s.shortenRenew()
		}
		s.granted = min(s.granted, u.lease)
		st.grant.updateLease(u.lease)
	}
	s.armStale()
	w.publish(st)
	u.reply <- nil // after publish: UpdateConfig returns with the view showing it
}

// firstKeepAlive is when the first keep-alive after a registration goes: at
// a random point (u uniform in [0, 1)) of the second half of the period.
// Routers that registered together, as a fleet does after a worker restarts,
// then do not renew together every period for the rest of their sessions.
func firstKeepAlive(period time.Duration, u float64) time.Duration {
	return period/2 + time.Duration(u*float64(period-period/2))
}

// The bounds on what a worker's acknowledgement may make the client do.
const (
	// maxDuration bounds every lease and interval the client asks for or
	// takes from a worker (the worker's own largest bound is 24h too), so
	// that no sum of them overflows.
	maxDuration = 24 * time.Hour
	// minKeepAlive is the shortest keep-alive period whatever the worker
	// says: at most 10 keep-alives a second per stream.
	minKeepAlive = 100 * time.Millisecond
)

// msDuration is ms milliseconds, as a worker sends durations, clamped into
// [0, maxDuration] before it is multiplied, so it cannot overflow.
func msDuration(ms int64) time.Duration {
	return time.Duration(min(max(ms, 0), maxDuration.Milliseconds())) * time.Millisecond
}

// grantedLease is the lease of an acknowledgement: its lease_ttl_ms clamped
// to maxDuration, or the lease asked when it grants none (0 or less, which
// no worker grants: its smallest lease is positive).
func grantedLease(ms int64, asked time.Duration) time.Duration {
	if ms <= 0 {
		return asked
	}
	return msDuration(ms)
}

// keepAlivePeriod is renew (the worker's renew_after_ms, or a third of an
// updated lease) bounded by the lease: at most half of it, so a keep-alive
// arrives within the lease with room for the network, and at least a tenth
// of it and minKeepAlive, so a worker answering renew_after_ms 0 gets
// keep-alives every 100 ms, not every millisecond. The floor wins a
// conflict: a lease shorter than 200 ms cannot be kept by a router, and
// expires (the Worker reconnects after its backoff).
func keepAlivePeriod(renew, lease time.Duration) time.Duration {
	return max(min(renew, lease/2), lease/10, minKeepAlive)
}

// shortenRenew fits the keep-alive period to a lease update. The worker
// acknowledges no update, but whatever it grants is at least the smaller
// of the request and its previous grant (both are clamped into the same
// bounds), so a third of that, when shorter, is always in time.
func (s *session) shortenRenew() {
	r := s.w.deps.renewAfter(keepAlivePeriod(s.updatedLease/3, s.updatedLease))
	if r >= s.renew {
		return
	}
	s.renew = r
	stopTimer(s.keepAlive)
	s.keepAlive = s.w.deps.clock.NewTimer(r)
}

// updateLease records a lease update the worker will not acknowledge,
// with the keep-alive period shortenRenew moves to.
func (g *Grant) updateLease(lease time.Duration) {
	g.Lease, g.LeaseUnconfirmed = lease, true
	g.RenewAfter = min(g.RenewAfter, keepAlivePeriod(lease/3, lease))
}

// stop ends the stream politely: stop, half-close, and wait (bounded)
// for the worker to end it.
func (s *session) stop(frames <-chan received) {
	s.send(&pb.RouterFrame{Payload: &pb.RouterFrame_Stop{Stop: &pb.StopRequest{}}})
	s.send(nil)
	grace := time.NewTimer(closeGrace)
	defer grace.Stop()
	for {
		select {
		case r := <-frames:
			if r.err != nil {
				return
			}
		case <-grace.C:
			return
		}
	}
}

// armStale arms the timer that republishes the view when it turns Stale.
func (s *session) armStale() {
	stopTimer(s.stale)
	s.stale = nil
	if s.st.report == nil {
		return
	}
	f := s.w.freshness(s.st)
	if d := s.st.receivedAt.Add(f.staleAfter).Sub(s.w.deps.clock.Now()); d >= 0 {
		s.stale = s.w.deps.clock.NewTimer(d + time.Nanosecond) // Stale is strictly after
	}
}

// idleTimeout is how long a stream may stay silent: a lease (granted, or
// asked before the ack, at least 1s to cover the first pull's budget) and
// two report intervals. Reports, even UNREACHABLE ones, come every
// interval, so silence that long means the path is broken.
func (s *session) idleTimeout() time.Duration {
	lease := s.st.lease
	if s.granted > 0 {
		lease = s.granted
	}
	return max(lease, time.Second) + 2*s.st.interval
}

func (s *session) resetIdle() {
	stopTimer(s.idle)
	s.idle = s.w.deps.clock.NewTimer(s.idleTimeout())
}
