package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// ErrClosed is returned by UpdateConfig once the Worker has stopped.
var ErrClosed = errors.New("client: worker closed")

// StreamError is a StreamError frame that ends a Worker for good: the
// worker refused the registration or a config (INVALID_ARGUMENT). Other
// codes only cause a reconnect.
type StreamError struct {
	// Addr is the worker's address as dialed.
	Addr string
	// Code and Message are the frame's (docs/routers.md).
	Code, Message string
}

// Error names the worker, the code and the worker's message.
func (e *StreamError) Error() string {
	return fmt.Sprintf("client: worker %s: %s: %s", e.Addr, e.Code, e.Message)
}

// Worker keeps one Monitor stream to one worker's loadreporter: it
// registers, renews the lease every renew_after_ms, checks each report
// (ValidateReport and the sequence) and publishes the latest View. When
// the stream ends (LEASE_EXPIRED, SHUTTING_DOWN, REPLACED, a transport
// error, no frame for a lease and two report intervals) it reconnects
// after a jittered exponential backoff and registers again under the same
// router_id; only INVALID_ARGUMENT stops it (see Err).
//
// REPLACED is not an error: usually the replaced stream is one this Worker
// already abandoned. If another router registered the same router_id, the
// two take turns; the backoff is not reset after REPLACED, so they do so
// about once per Backoff.Max (once per (1−Jitter)·Backoff.Max at most).
//
// All methods are safe for concurrent use; View never blocks or locks.
type Worker struct {
	addr    string
	opts    Options
	deps    deps
	rpc     loadmonitorv1connect.LoadMonitorServiceClient
	conns   *connSet // what Dial's own HTTP client dialed; nil with Options.HTTPClient
	metrics *metrics // nil without a Registerer
	// pending counts what the Fleet's router sent; nil outside a Fleet or
	// with accounting off.
	pending *pendingSet

	view       atomic.Pointer[View]
	subs       latest[*View]
	rejected   [numRejectReasons]atomic.Uint64
	reconnects atomic.Uint64

	updates   chan updateRequest
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}
	err       error // set before done is closed
}

// Dial starts watching the worker at addr ("host:port", dialed with TLS
// when Options.TLS is set, or a base URL with http:// or https://). It
// returns at once: the first View is
// Disconnected until the worker acknowledges the registration. Its error
// is only about opts. Close the Worker when done.
func Dial(addr string, opts Options) (*Worker, error) {
	return dial(addr, opts, deps{})
}

func dial(addr string, opts Options, d deps) (*Worker, error) {
	o, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(addr) == "" {
		return nil, errors.New("client: empty worker address")
	}
	if o.TLS != nil && strings.HasPrefix(addr, "http://") {
		// Dial's client would speak TLS to an http:// URL: every stream
		// fails (505) and is retried for ever.
		return nil, fmt.Errorf("client: worker address %s is http:// but Options.TLS is set: write https:// or host:port", addr)
	}
	d = d.withDefaults()
	if d.metrics == nil && o.Registerer != nil {
		if d.metrics, err = newMetrics(o.Registerer); err != nil {
			return nil, err
		}
	}
	w := &Worker{addr: addr, opts: o, deps: d, metrics: d.metrics,
		updates: make(chan updateRequest), closing: make(chan struct{}), done: make(chan struct{})}
	if d.countDispatches {
		w.pending = new(pendingSet)
	}
	hc := o.HTTPClient
	if hc == nil {
		w.conns = &connSet{open: map[*trackedConn]struct{}{}}
		hc = newHTTPClient(addr, o, w.conns)
	}
	// A worker's frame is a report of at most --max-dp-size ranks and a
	// last_error of 512 bytes: far below this. Anything larger is a
	// hostile or broken peer, refused before it is buffered.
	copts := []connect.ClientOption{connect.WithReadMaxBytes(MaxFrameBytes)}
	if o.Protocol == ProtocolGRPC {
		copts = append(copts, connect.WithGRPC())
	}
	w.rpc = loadmonitorv1connect.NewLoadMonitorServiceClient(hc, baseURL(addr, o), copts...)
	w.view.Store(&View{Addr: addr, State: Disconnected, Reason: "connecting", PublishedAt: d.clock.Now()})
	if w.metrics != nil {
		w.metrics.add(w)
	}
	go w.run()
	return w, nil
}

// newHTTPClient is an HTTP/2-only client that pings a connection from
// which nothing arrived for half a lease and drops it when the ping goes
// unanswered, so a silently cut network is noticed within about a lease.
// It speaks TLS with o.TLS, or the system roots for an https:// address.
func newHTTPClient(addr string, o Options, conns *connSet) *http.Client {
	var p http.Protocols
	ping := max(o.Lease/2, 100*time.Millisecond)
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Protocols: &p,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return conns.dial(ctx, d, network, addr)
		},
		HTTP2: &http.HTTP2Config{SendPingTimeout: ping, PingTimeout: ping},
	}
	switch {
	case o.TLS != nil:
		p.SetHTTP2(true)
		tr.TLSClientConfig = o.TLS.Clone()
	case strings.HasPrefix(addr, "https://"):
		p.SetHTTP2(true)
	default:
		p.SetUnencryptedHTTP2(true)
	}
	return &http.Client{Transport: tr}
}

func baseURL(addr string, o Options) string {
	if strings.Contains(addr, "://") {
		return addr
	}
	if o.TLS != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// Addr is the worker's address as dialed.
func (w *Worker) Addr() string { return w.addr }

// View is the latest view; it never blocks. Use View().StateAt(now) to
// account for time since it was published.
func (w *Worker) View() *View { return w.view.Load() }

// Subscribe returns a channel that holds the latest view not yet read:
// the current one at once, then each change (a report, a state change).
// A slow reader misses intermediate views, never the latest, and never
// delays the Worker. The channel is closed when the Worker stops or
// cancel is called.
func (w *Worker) Subscribe() (views <-chan *View, cancel func()) {
	return w.subs.add(func() (*View, bool) { v := w.View(); return v, v != nil })
}

// Done is closed when the Worker has stopped: Close, or a permanent error
// (see Err). Close must still be called.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Err is the *StreamError that stopped the Worker, or nil (still running,
// or closed by Close).
func (w *Worker) Err() error {
	select {
	case <-w.done:
		return w.err
	default:
		return nil
	}
}

// Reconnects counts the streams opened after the first.
func (w *Worker) Reconnects() uint64 { return w.reconnects.Load() }

// Rejected counts the reports not accepted, by reason (every reason is
// present, most at 0).
func (w *Worker) Rejected() map[RejectReason]uint64 {
	m := make(map[RejectReason]uint64, numRejectReasons)
	for _, r := range rejectReasons {
		m[r] = w.rejected[rejectIndex[r]].Load()
	}
	return m
}

var rejectIndex = func() map[RejectReason]int {
	m := make(map[RejectReason]int)
	for i, r := range rejectReasons {
		m[r] = i
	}
	return m
}()

type updateRequest struct {
	interval, lease time.Duration
	reply           chan error
}

// UpdateConfig asks for a new report interval and/or lease (zero: keep).
// A live stream gets an update_config at once; every later registration
// asks for the new values. On a registered stream it returns once View
// (its Granted included) shows the update; before the worker's ack it
// returns at once, and the ack shows it. The worker answers an out-of-range
// value with INVALID_ARGUMENT, which stops the Worker (see Err). A value
// past 24h is asked as 24h.
func (w *Worker) UpdateConfig(ctx context.Context, interval, lease time.Duration) error {
	if interval < 0 || lease < 0 || (interval > 0 && interval < time.Millisecond) || (lease > 0 && lease < time.Millisecond) {
		return fmt.Errorf("client: UpdateConfig(%v, %v): want whole milliseconds ≥ 1ms, or 0 to keep", interval, lease)
	}
	u := updateRequest{interval: min(interval, maxDuration).Truncate(time.Millisecond), lease: min(lease, maxDuration).Truncate(time.Millisecond),
		reply: make(chan error, 1)}
	select {
	case w.updates <- u:
	case <-w.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-u.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close sends stop on the live stream, waits (briefly) for the worker to
// end it, and releases the Worker's resources. It is idempotent.
func (w *Worker) Close() error {
	w.closeOnce.Do(func() {
		close(w.closing)
		<-w.done
		if w.metrics != nil {
			w.metrics.remove(w)
		}
		if w.conns != nil {
			// Every connection, not only the idle ones: a dial still in
			// progress when the stream was cancelled ends as a connection
			// nothing uses, and nothing would close it.
			w.conns.closeAll()
		}
	})
	return nil
}

// loopState is what the Worker's goroutine alone owns across streams.
type loopState struct {
	interval, lease time.Duration // what registrations ask for
	seq             sequencer
	report          *pb.LoadReport
	receivedAt      time.Time
	connected       bool
	grant           Grant  // of the registered stream; meaningless unless connected
	cause           string // why the last stream ended
}

// run keeps a stream open until Close or a permanent error.
func (w *Worker) run() {
	st := &loopState{interval: w.opts.ReportInterval, lease: w.opts.Lease}
	defer func() {
		st.connected = false
		w.publish(st)
		w.subs.close()
		close(w.done)
	}()
	for attempt := 0; ; attempt++ {
		end := w.session(st)
		st.connected, st.cause = false, end.cause
		switch {
		case end.closed:
			st.cause = "closed"
			return
		case end.permanent != nil:
			w.err = end.permanent
			w.opts.Logger.Error("load monitor stream refused for good", "worker", w.addr, "err", end.permanent)
			return
		}
		w.publish(st)
		if end.healthy && end.reason != codeReplaced {
			attempt = 0
		}
		wait := w.opts.Backoff.delay(attempt, w.deps.rand())
		w.opts.Logger.Info("load monitor stream ended; reconnecting", "worker", w.addr,
			"reason", end.reason, "cause", end.cause, "backoff", wait)
		if !w.wait(st, wait) {
			st.cause = "closed"
			return
		}
		w.reconnects.Add(1)
		if w.metrics != nil {
			w.metrics.reconnected(w.addr, end.reason)
		}
	}
}

// wait sleeps d on the injected clock, taking config updates meanwhile;
// false means Close was called.
func (w *Worker) wait(st *loopState, d time.Duration) bool {
	t := w.deps.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			return true
		case u := <-w.updates:
			st.apply(u)
			u.reply <- nil
		case <-w.closing:
			return false
		}
	}
}

// apply records an update for later registrations and returns its frame.
func (st *loopState) apply(u updateRequest) *pb.RouterFrame {
	req := &pb.UpdateConfigRequest{}
	if u.interval > 0 {
		st.interval = u.interval
		req.ReportIntervalMs = new(u.interval.Milliseconds())
	}
	if u.lease > 0 {
		st.lease = u.lease
		req.LeaseTtlMs = new(u.lease.Milliseconds())
	}
	return &pb.RouterFrame{Payload: &pb.RouterFrame_UpdateConfig{UpdateConfig: req}}
}

// freshness are the rules for the current config.
func (w *Worker) freshness(st *loopState) freshness {
	// Saturated: a huge StaleAfterIntervals must not wrap to negative,
	// which would make every view Stale.
	n := time.Duration(min(int64(w.opts.StaleAfterIntervals), math.MaxInt64/int64(st.interval)))
	return freshness{staleAfter: n * st.interval, maxSnapshotAge: w.opts.MaxSnapshotAge}
}

// publish makes a new View from st and hands it to readers.
func (w *Worker) publish(st *loopState) {
	now := w.deps.clock.Now()
	f := w.freshness(st)
	state, reason := judge(st.connected, st.report, st.receivedAt, now, f)
	if state == Disconnected && st.cause != "" {
		reason += ": " + st.cause
	}
	v := &View{Addr: w.addr, State: state, Reason: reason, Report: st.report, ReceivedAt: st.receivedAt,
		PublishedAt: now}
	if st.connected {
		v.Granted = st.grant
	}
	if st.report != nil {
		v.StaleAt = st.receivedAt.Add(f.staleAfter)
	}
	w.view.Store(v)
	if w.pending != nil {
		// After the view, so that a pick in between counts a dispatch
		// twice rather than not at all; before the signals, so that
		// whoever a signal wakes reads the count of this report. The
		// ledger takes each report once however often it is published.
		w.pending.observe(st.report, st.receivedAt)
	}
	w.subs.publish(v)
	if w.deps.published != nil {
		w.deps.published()
	}
}

// accept checks r; an accepted r becomes st's report.
func (w *Worker) accept(st *loopState, r *pb.LoadReport) bool {
	err := ValidateReport(r)
	if err == nil {
		err = st.seq.accept(r)
	}
	var re *ReportError
	if errors.As(err, &re) {
		w.rejected[rejectIndex[re.Reason]].Add(1)
		if w.metrics != nil {
			w.metrics.rejectedReport(w.addr, re.Reason)
		}
		w.opts.Logger.Warn("load report rejected", "worker", w.addr, "reason", re.Reason, "detail", re.Message)
		return false
	}
	boundStrings(r)
	st.report, st.receivedAt = r, w.deps.clock.Now()
	return true
}

// MaxLastErrorBytes bounds a report's last_error as the client keeps it
// (a loadreporter worker sends at most 512 bytes): a longer one is cut,
// ending in "…", so that a worker cannot fill a router's logs and pages
// with megabytes of reason. The report is still accepted.
const MaxLastErrorBytes = 512

// MaxMetadataBytes bounds each of the report's worker_addr, model and zone
// as the client keeps them: a longer one is cut, ending in "…", and the
// report kept. They are labels for people (a fleet page, a log line), and
// a hostile worker's 3 MB model name would otherwise be kept by every
// router and re-sent by the fleet to every page.
const MaxMetadataBytes = 512

// boundStrings cuts r's free-text fields to their bounds, in place: r was
// just decoded for this Worker and nobody else holds it yet.
func boundStrings(r *pb.LoadReport) {
	if e := r.GetLastError(); len(e) > MaxLastErrorBytes {
		r.LastError = proto.String(shorten(e, MaxLastErrorBytes))
	}
	m := r.GetWorker()
	if m == nil {
		return
	}
	m.WorkerAddr = shorten(m.GetWorkerAddr(), MaxMetadataBytes)
	if v := m.GetModel(); len(v) > MaxMetadataBytes {
		m.Model = proto.String(shorten(v, MaxMetadataBytes))
	}
	if v := m.GetZone(); len(v) > MaxMetadataBytes {
		m.Zone = proto.String(shorten(v, MaxMetadataBytes))
	}
}

// shorten is s when it fits in n bytes, else s cut on a rune boundary to
// n bytes, "…" included.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// connSet is every connection a Worker's own HTTP client has open, so that
// Close ends them all, and a dial that completes after Close too.
type connSet struct {
	mu     sync.Mutex
	closed bool
	open   map[*trackedConn]struct{}
}

func (s *connSet) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil, ErrClosed
	}
	tc := &trackedConn{Conn: c, set: s}
	s.open[tc] = struct{}{}
	return tc, nil
}

// closeAll closes every open connection and every later one.
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	open := s.open
	s.open = nil
	s.mu.Unlock()
	for c := range open {
		_ = c.Conn.Close()
	}
}

// trackedConn leaves its set when closed.
type trackedConn struct {
	net.Conn
	set *connSet
}

func (c *trackedConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.open, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}
