package rpc

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// bridge serves every call of the native server through the port's
// handler.
type bridge struct {
	h   http.Handler
	log *slog.Logger

	// endsItself is set once a stream showed it can end itself
	// (statusWriter): the tap's fallback is then not needed.
	endsItself         atomic.Bool
	withoutWriteStatus bool
}

// serve hands one call to the port's handler as an HTTP/2 request and
// returns the status its response ended with.
func (b *bridge) serve(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "no method on the stream")
	}
	ctx := ss.Context()
	// grpc-go's transport stream (*transport.ServerStream in v1.85.0)
	// writes a status at once, from any goroutine, which ends the stream
	// and cancels its context. The method is exported on a type of
	// grpc-go's internal package, not a promised API: what it must do is
	// what TestNativeMonitorEndings and the bridge's deadline tests check,
	// and a grpc-go upgrade must pass them.
	sw, _ := grpc.ServerTransportStreamFromContext(ctx).(statusWriter)
	if b.withoutWriteStatus {
		sw = nil
	}
	var ctl *streamControl
	if sw != nil {
		if !b.endsItself.Load() { // a shared word: written once
			b.endsItself.Store(true)
		}
	} else {
		if ctl = controlFrom(ctx); ctl == nil { // nothing could bound it
			return status.Error(codes.Internal, "the stream can neither end itself nor be cancelled")
		}
		ctx = ctl.outer
	}
	call := &nativeCall{ss: ss, status: sw, ctl: ctl, log: b.log}
	ctx = context.WithValue(ctx, nativeCallKey{}, call)
	req := newBridgeRequest(ctx, call, method)
	w := &bridgeWriter{call: call}
	err := b.protect(method, func() { b.h.ServeHTTP(w, req) })
	if serve := call.serve; serve != nil && err == nil {
		// A stream the port's handler admitted and left to be served on
		// its gRPC stream (serveNative) is served here, past the chain:
		// every open Monitor stream waits a few frames down rather than
		// under every handler of the chain, stack the collector scans and
		// sizes the heap by.
		served := servedContext{Context: ctx, chain: call.chain}
		req, call.serve, call.chain = nil, nil, nil
		err = b.protect(method, func() {
			call.result = serve(served, &nativeStream{call: call, done: call.ss.Context().Done()})
		})
	}
	call.end()
	if err != nil {
		return err
	}
	native, cut := call.ending()
	switch {
	case native:
		return grpcStatus(call.result)
	case cut:
		// What the stream ended with; without a status writer, grpc-go
		// writes it now, unless the read or send that failed did.
		return errCallCancelled.Err()
	}
	return w.finish()
}

// protect runs serve (the port's handler, or the stream it left to the
// bridge) as net/http runs a handler, a panic ending the call (INTERNAL,
// logged with its stack) and not the process, and http.ErrAbortHandler
// ending it quietly.
func (b *bridge) protect(method string, serve func()) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		err = status.Error(codes.Internal, "the handler failed")
		if v == http.ErrAbortHandler {
			err = status.Error(codes.Aborted, "the handler aborted the call")
			return
		}
		buf := make([]byte, 16<<10)
		buf = buf[:runtime.Stack(buf, false)]
		b.log.Error("a handler panicked serving a native gRPC call", "method", method, "panic", fmt.Sprint(v), "stack", string(buf))
	}()
	serve()
	return nil
}

// newBridgeRequest is the HTTP/2 request the port's handler sees for a
// call: its metadata as headers, its messages as the body.
func newBridgeRequest(ctx context.Context, call *nativeCall, method string) *http.Request {
	ss := call.ss
	md, _ := metadata.FromIncomingContext(ss.Context())
	h := make(http.Header, len(md)+1)
	host := ""
	for k, vs := range md {
		switch {
		case k == ":authority":
			if len(vs) > 0 {
				host = vs[0]
			}
			continue
		case strings.HasPrefix(k, ":"), k == "grpc-accept-encoding":
			// grpc-go compresses what the client asked for; connect must
			// not compress it first.
			continue
		}
		key := http.CanonicalHeaderKey(k)
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") { // metadata holds binary values decoded
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			h.Add(key, v)
		}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/grpc")
	}
	h.Set("Te", "trailers")
	remote := ""
	if p, ok := peer.FromContext(ss.Context()); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: method}, RequestURI: method,
		Proto: "HTTP/2.0", ProtoMajor: 2, Header: h, Host: host, RemoteAddr: remote,
		ContentLength: -1, Body: &bridgeBody{call: call},
	}
	return r.WithContext(ctx)
}

type nativeCallKey struct{}

// nativeCall is one call of the native server while the port's handler
// serves it.
type nativeCall struct {
	ss grpc.ServerStream
	// status ends the stream (nil: grpc-go's stream cannot, and ctl's
	// cancel is the fallback).
	status statusWriter
	ctl    *streamControl
	log    *slog.Logger

	// native is set when a handler served the call on its stream itself
	// (Monitor), result then being what it returned.
	native bool
	result error
	// serve is what the handler left the bridge to serve on the stream
	// once the port's handler returned (serveNative), and atEnd what the
	// handlers it passed left to do when the call ends (afterResponse),
	// in the order to do it. Both belong to the call's goroutine.
	serve func(context.Context, *nativeStream) error
	chain context.Context // the request's context where serveNative was called
	atEnd []func()

	mu                    sync.Mutex
	readTimer, writeTimer *time.Timer
	writeExpired          chan struct{} // closed when the write deadline passed; made when first asked for
	expired               bool
	onExpire              func()
	bodyDone              bool // the body returned io.EOF: no read left to bound
	done                  bool // the handler returned: timers do nothing
	// A relayed call's read or send in progress, and whether its read or
	// write deadline has passed (cutOff): the stream then ends (cancel),
	// at once if one is in progress, else at the next; from then on both
	// reads and sends fail, as on a cancelled stream context.
	reading, sending bool
	cutOff           bool
	cut              bool // cancel ended the stream: its status is CANCELLED
}

// errCallCancelled is how a relayed call's stream ends once a deadline
// cut it, what a cancelled stream context ends it with.
var errCallCancelled = status.New(codes.Canceled, context.Canceled.Error())

// cancel ends a relayed call's stream as a cancelled stream context
// would: with CANCELLED, failing its read and send in progress and every
// later one.
func (c *nativeCall) cancel() {
	c.mu.Lock()
	c.cut = true
	c.mu.Unlock()
	if c.status != nil {
		// It fails only when the stream is ending anyway (a closing
		// connection, an oversized trailer grpc-go resets).
		_ = c.status.WriteStatus(errCallCancelled)
		return
	}
	c.ctl.cancel()
}

// begin marks a relayed call's read or send (busy: c.reading or
// c.sending, under mu) in progress. Past the read or the write deadline
// it fails and ends the stream instead, as a cancelled stream context
// would fail either.
func (c *nativeCall) begin(busy *bool) error {
	c.mu.Lock()
	expired := c.cutOff
	*busy = !expired
	c.mu.Unlock()
	if expired {
		c.cancel()
		return errCallCancelled.Err()
	}
	return nil
}

// endRead is a read begun (begin) returning err.
func (c *nativeCall) endRead(err error) {
	c.mu.Lock()
	c.reading = false
	if errors.Is(err, io.EOF) {
		c.bodyDone = true
	}
	c.mu.Unlock()
}

// endSend is a send begun (begin) returning.
func (c *nativeCall) endSend() {
	c.mu.Lock()
	c.sending = false
	c.mu.Unlock()
}

func (c *nativeCall) isNative() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.native
}

// ending reports, once the handler returned, whether it served the call
// on the stream itself and whether a deadline ended the stream.
func (c *nativeCall) ending() (native, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.native, c.cut
}

func nativeCallFrom(ctx context.Context) *nativeCall {
	c, _ := ctx.Value(nativeCallKey{}).(*nativeCall)
	return c
}

// serveNative has the call served with f on its gRPC stream, once the
// port's handler returned: the handler calling it, with its request's
// context, returns at once, and the handlers it passed finish what they
// do after it through afterResponse. f is given a servedContext.
func (c *nativeCall) serveNative(ctx context.Context, f func(context.Context, *nativeStream) error) {
	c.mu.Lock()
	c.native = true
	c.mu.Unlock()
	// Frames go out as their one shared encoding, never compressed by
	// grpc-go: its compressed copy is one the gate cannot follow, so a
	// router that stopped reading could pin grpc-go's whole queue and
	// block the pump. A router may compress what it sends; the reports it
	// reads come as they are (grpc-encoding identity), which gRPC allows.
	if err := grpc.SetSendCompressor(c.ss.Context(), encoding.Identity); err != nil {
		c.log.Warn("a native Monitor stream may compress its reports: their frames are then not held to one", "err", err)
	}
	c.serve, c.chain = f, ctx
}

// servedContext is the context of a stream served past the port's
// handler: the stream's own, its values and its end, with the values the
// port's handlers added to the request's (its transport, say). What ends
// a handler's context once it returned, a middleware's deferred cancel,
// does not end the stream.
type servedContext struct {
	context.Context // the stream's
	chain           context.Context
}

// Value is the stream's own value for key, else the handlers'. The
// context package finds a context's end among its values: asked the
// stream's first, it finds the stream's, and a context made from c
// (context.AfterFunc, WithCancel) waits on it as on any of its own,
// with no goroutine.
func (c servedContext) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.chain.Value(key)
}

// afterResponse runs f once the response to the request of ctx is done:
// at once, or, when the handler left the call to be served on its gRPC
// stream past the port's handler (serveNative), when that ends. A
// handler of the chain calls it where its handler returned, in place of
// what it does after the response.
func afterResponse(ctx context.Context, f func()) {
	if c := nativeCallFrom(ctx); c.outlivesHandler() {
		c.atEnd = append(c.atEnd, f)
		return
	}
	f()
}

// outlivesHandler reports whether c (nil: no native call) is to be served
// on its stream once the port's handler returned.
func (c *nativeCall) outlivesHandler() bool { return c != nil && c.serve != nil }

// end is the call's end: what the port's handlers left for it, innermost
// first, as their own returns would have run it; then no timer acts.
func (c *nativeCall) end() {
	for i := len(c.atEnd) - 1; i >= 0; i-- {
		c.atEnd[i]()
	}
	c.atEnd = nil
	c.stopTimers()
}

// statusWriter is what grpc-go's transport stream offers to end a stream
// before its handler returns.
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// setReadDeadline bounds the reads of a relayed call: past t, a read or
// send in progress and every later one fail, and the stream ends (a send
// may wait for a client that stopped reading as well as sending); a zero
// t clears a deadline not passed yet.
func (c *nativeCall) setReadDeadline(t time.Time) {
	c.mu.Lock()
	if c.readTimer != nil {
		c.readTimer.Stop()
		c.readTimer = nil
	}
	if c.done || c.bodyDone || t.IsZero() {
		c.mu.Unlock()
		return // all read: a deadline now would only cut the replies
	}
	if d := time.Until(t); d > 0 {
		c.readTimer = time.AfterFunc(d, c.expireRead)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.expireRead()
}

func (c *nativeCall) expireRead() {
	c.mu.Lock()
	if c.done || c.bodyDone || c.cutOff {
		c.mu.Unlock()
		return
	}
	c.cutOff = true
	busy := c.reading || c.sending
	c.mu.Unlock()
	if busy {
		// A send in progress may wait for a client that stopped reading
		// as well as sending: past the read deadline, the stream ends.
		c.cancel()
	}
}

// setWriteDeadline bounds the sends of the call: past t, a send waiting
// for a client that stopped reading fails; a zero t clears it. A relayed
// call's send waits in grpc-go, for room in its queue, and only the
// stream's end stops that wait: past the deadline, the stream ends, at
// once if a send is in progress, else at the next send, for good.
// Monitor's waits in Send, which watches writeExpired, and a new deadline
// lets it send again.
func (c *nativeCall) setWriteDeadline(t time.Time) {
	c.mu.Lock()
	if c.writeTimer != nil {
		c.writeTimer.Stop()
		c.writeTimer = nil
	}
	if c.expired {
		c.writeExpired, c.expired = nil, false
	}
	switch {
	case c.done || t.IsZero():
	case time.Until(t) > 0:
		c.writeTimer = time.AfterFunc(time.Until(t), c.expireWrite)
	default:
		c.mu.Unlock()
		c.expireWrite()
		return
	}
	c.mu.Unlock()
}

func (c *nativeCall) expireWrite() {
	c.mu.Lock()
	if c.done || c.expired {
		c.mu.Unlock()
		return
	}
	c.expired = true
	if c.writeExpired != nil {
		close(c.writeExpired)
	}
	f := c.onExpire
	// Monitor's sends never wait in grpc-go (one frame in flight, whose
	// wait Send watches), and its stream ends itself with its own status.
	cut := !c.native && !c.cutOff && (c.sending || c.reading)
	if !c.native {
		c.cutOff = true
	}
	c.mu.Unlock()
	if f != nil {
		go f() // the pump ends a stream whose frame is still in flight
	}
	if cut {
		c.cancel()
	}
}

// writeDeadline is closed once the write deadline has passed.
func (c *nativeCall) writeDeadline() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writeExpired == nil {
		if c.expired {
			return closedChan
		}
		c.writeExpired = make(chan struct{})
	}
	return c.writeExpired
}

// writeExpiredNow reports whether the write deadline has passed.
func (c *nativeCall) writeExpiredNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expired
}

func (c *nativeCall) stopTimers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	for _, t := range []*time.Timer{c.readTimer, c.writeTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// nativeStream is a Monitor stream on the native server.
//
// It holds one frame in grpc-go at a time, as net/http holds one in the
// stream's write: the pump takes the next report from the session's
// outbox only once grpc-go has written the frame in flight (and Send
// waits for it, within the write deadline, when a drain sends),
// so a router that stops reading holds one frame in the server, never
// grpc-go's whole queue of 64 KiB a stream (which at 10 000 stuck routers
// would pin hundreds of megabytes and hand a slow router reports seconds
// old), and the outbox keeps only the latest report meanwhile. grpc-go
// tells when it is done with a buffer by giving it back to its pool: the
// gate. A send returns once the frame is queued, so a router that reads
// costs no wait: its last frame is long written when the next report
// comes.
type nativeStream struct {
	call *nativeCall
	gate sendGate
	done <-chan struct{} // the stream's context's, read once: its chain of values is deep
}

// sendGate is the mem.BufferPool of one stream's frames: Put is grpc-go
// done with the frame in flight (written, or dropped with the stream).
// Only the stream's writer, one goroutine at a time, sends; Put comes
// from grpc-go's writing goroutine.
type sendGate struct {
	slice    []byte // the frame in flight; nil once written, so no stream pins a frame
	inflight atomic.Bool
	// signal is a signal after each Put, for ready; made by the first
	// send that waits (the pump's never do).
	signal  atomic.Pointer[chan struct{}]
	written atomic.Uint64 // Puts so far
	hook    atomic.Pointer[func()]
}

func (g *sendGate) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

func (g *sendGate) Put(b *[]byte) {
	*b = nil // &g.slice: written before the gate opens, after which the writer may fill it
	g.written.Add(1)
	g.inflight.Store(false)
	if p := g.signal.Load(); p != nil {
		select {
		case *p <- struct{}{}:
		default:
		}
	}
	if f := g.hook.Load(); f != nil {
		(*f)()
	}
}

// gatedFrame is a frame's shared encoding behind its stream's gate.
type gatedFrame struct{ buf mem.Buffer }

// Receive reads one router frame; one that does not decode is connect's
// INVALID_ARGUMENT, as on the connect way in.
func (s *nativeStream) Receive() (*pb.RouterFrame, error) {
	var raw rawMessage
	if err := s.call.ss.RecvMsg(&raw); err != nil {
		return nil, err
	}
	f := &pb.RouterFrame{}
	if err := unmarshalBinary(raw, f); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unmarshal into %T: %w", f, err))
	}
	return f, nil
}

// ready waits until the frame in flight, if any, is written, within the
// write deadline.
func (s *nativeStream) ready() error {
	for s.gate.inflight.Load() {
		signal := s.gate.signal.Load()
		if signal == nil {
			ch := make(chan struct{}, 1)
			s.gate.signal.CompareAndSwap(nil, &ch)
			signal = s.gate.signal.Load()
			if !s.gate.inflight.Load() {
				break // written before Put could find the signal
			}
		}
		select {
		case <-*signal: // perhaps an earlier frame's: look again
		case <-s.call.writeDeadline():
			return errWriteDeadline
		case <-s.done:
			return status.FromContextError(context.Cause(s.call.ss.Context())).Err()
		}
	}
	return nil
}

var errWriteDeadline = status.Error(codes.DeadlineExceeded, "the router took no frame within the write deadline")

func (s *nativeStream) inFlight() bool { return s.gate.inflight.Load() }

func (s *nativeStream) writtenCount() uint64 { return s.gate.written.Load() }

func (s *nativeStream) expired() bool { return s.call.writeExpiredNow() }

// onWritten makes written run after each frame is written, and expired
// when the write deadline passes.
func (s *nativeStream) onWritten(written, expired func()) {
	s.gate.hook.Store(&written)
	s.call.mu.Lock()
	s.call.onExpire = expired
	s.call.mu.Unlock()
}

// Send queues f's shared encoding on the stream, once the frame before it
// is written.
func (s *nativeStream) Send(f *outFrame) error {
	if err := s.ready(); err != nil {
		return err
	}
	b, err := f.Binary()
	if err != nil {
		return err
	}
	if mem.IsBelowBufferPoolingThreshold(cap(b)) {
		// grpc-go gives back only buffers over its pooling threshold; the
		// fan-out's encodings have the room, this copy is for any other.
		b = append(make([]byte, 0, 2<<10+len(b)), b...)
	}
	// Never compressed (serveNative): grpc-go sends this very buffer and
	// gives it back once written.
	s.gate.slice = b
	s.gate.inflight.Store(true) // before the send: grpc-go may write it before SendMsg returns
	if err := s.call.ss.SendMsg(gatedFrame{mem.NewBuffer(&s.gate.slice, &s.gate)}); err != nil {
		s.gate.inflight.Store(false)
		return err
	}
	return nil
}

// canEnd: without a status writer, nothing but the stream's end wakes a
// read, and Monitor reads in a goroutine of its own.
func (s *nativeStream) canEnd() bool { return s.call.status != nil }

func (s *nativeStream) ownsDone(done <-chan struct{}) bool { return done == s.done }

// endWith ends the stream with err's status, as the handler's return
// would: grpc-go queues the trailers behind the frames already sent (its
// writer keeps a stream's frames in order), marks the stream done and
// cancels its context, which fails the handler's read in progress. The
// status that read's failure would write (grpc-go's serverStream.RecvMsg
// writes one for any error but io.EOF), and the one grpc-go writes when
// the handler returns, are then no-ops: the stream is done (grpc-go
// v1.85.0 internal/transport/http2_server.go, writeStatus).
func (s *nativeStream) endWith(err error) {
	// It fails only when the connection is closing, or the trailers are
	// over the peer's header list limit (grpc-go then resets the stream):
	// either way the stream ends and the read with it.
	_ = s.call.status.WriteStatus(status.Convert(grpcStatus(err)))
}

func (s *nativeStream) peerAddr() string {
	if p, ok := peer.FromContext(s.call.ss.Context()); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// bridgeBody is a call's messages as a gRPC request body: each one
// enveloped as on the wire.
type bridgeBody struct {
	call *nativeCall
	buf  []byte
	err  error
}

func (b *bridgeBody) Read(p []byte) (int, error) {
	for len(b.buf) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		if err := b.call.begin(&b.call.reading); err != nil {
			b.err = err
			continue
		}
		var raw rawMessage
		err := b.call.ss.RecvMsg(&raw)
		b.call.endRead(err)
		if err != nil {
			b.err = err
			continue
		}
		b.buf = binary.BigEndian.AppendUint32(append(b.buf[:0], 0), uint32(len(raw)))
		b.buf = append(b.buf, raw...)
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

func (b *bridgeBody) Close() error { return nil }

// bridgeWriter is a call's response as the port's handler writes it:
// each enveloped message is sent on the stream, the trailers become its
// status. What is not a gRPC response (a plain-text refusal) becomes the
// status its HTTP code stands for.
type bridgeWriter struct {
	call        *nativeCall
	header      http.Header
	code        int
	wroteHeader bool
	headerSent  bool
	pending     []byte // an envelope not complete yet
	plain       bytes.Buffer
}

// Header is made when first asked for: Monitor's native streams never do.
func (w *bridgeWriter) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *bridgeWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader, w.code = true, code
}

func (w *bridgeWriter) isGRPC() bool {
	ok := w.code == http.StatusOK || w.code == 0 // 0: nothing written, trailers only
	return ok && strings.HasPrefix(w.header.Get("Content-Type"), "application/grpc")
}

func (w *bridgeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if !w.isGRPC() {
		if room := 512 - w.plain.Len(); room > 0 {
			w.plain.Write(p[:min(len(p), room)])
		}
		return len(p), nil
	}
	if !w.headerSent {
		w.headerSent = true
		if err := w.call.ss.SetHeader(metadataOf(w.header)); err != nil {
			return 0, err
		}
	}
	w.pending = append(w.pending, p...)
	for len(w.pending) >= 5 {
		n := int(binary.BigEndian.Uint32(w.pending[1:5]))
		if len(w.pending) < 5+n {
			break
		}
		if w.pending[0] != 0 {
			return 0, status.Errorf(codes.Internal, "the handler sent a message with flags %#x", w.pending[0])
		}
		// The stream's queue keeps the slice until it is written, and the
		// handler reuses what it wrote.
		msg := append(rawMessage(nil), w.pending[5:5+n]...)
		w.pending = w.pending[5+n:]
		if err := w.call.send(msg); err != nil {
			return 0, err
		}
	}
	if len(w.pending) == 0 {
		w.pending = nil
	}
	return len(p), nil
}

// Flush: every message is on the stream's queue once Write returns, and
// grpc-go writes it out.
func (w *bridgeWriter) Flush() {}

// send sends a relayed call's message, within its write deadline.
func (c *nativeCall) send(msg rawMessage) error {
	if err := c.begin(&c.sending); err != nil {
		return err
	}
	defer c.endSend()
	return c.ss.SendMsg(msg)
}

// SetReadDeadline and SetWriteDeadline are what http.ResponseController
// reaches, so the port's bounds (WithTransportInfo, Stalls, the shutdown)
// work on this way in as on net/http's.
//
// A stream Monitor serves itself has no read deadline: grpc-go ends a
// stream whose read fails with that failure's status at once, and
// Monitor's last frame must be followed by status OK. Monitor instead
// wakes its read by ending the stream with the status it returns
// (nativeStream.endWith).
func (w *bridgeWriter) SetReadDeadline(t time.Time) error {
	if w.call.isNative() {
		return http.ErrNotSupported
	}
	w.call.setReadDeadline(t)
	return nil
}

func (w *bridgeWriter) SetWriteDeadline(t time.Time) error {
	w.call.setWriteDeadline(t)
	return nil
}

// EnableFullDuplex: an HTTP/2 stream always is.
func (w *bridgeWriter) EnableFullDuplex() error { return nil }

// finish ends the call with the status the response carries.
func (w *bridgeWriter) finish() error {
	if !w.isGRPC() {
		code := w.code
		if code == 0 {
			code = http.StatusOK
		}
		msg := strings.TrimSpace(w.plain.String())
		if msg == "" {
			msg = http.StatusText(code)
		}
		return status.Error(httpCodeToGRPC(code), fmt.Sprintf("HTTP %d: %s", code, msg))
	}
	if len(w.pending) > 0 {
		return status.Errorf(codes.Internal, "the response ended inside a message")
	}
	trailer := http.Header{}
	for k, vs := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			trailer[http.CanonicalHeaderKey(name)] = vs
		}
	}
	if trailer.Get("Grpc-Status") == "" && w.header.Get("Grpc-Status") != "" {
		trailer = w.header // trailers-only, in the headers
	} else if !w.headerSent {
		if err := w.call.ss.SetHeader(metadataOf(w.header)); err != nil {
			return err
		}
	}
	w.call.ss.SetTrailer(metadataOf(trailer))
	return statusOf(trailer)
}

// metadataOf is h as metadata, without what gRPC's transport writes
// itself (the status among it).
func metadataOf(h http.Header) metadata.MD {
	md := metadata.MD{}
	for k, vs := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		key := strings.ToLower(k)
		switch key {
		case "content-type", "content-length", "date", "trailer", "te", "grpc-encoding", "grpc-accept-encoding",
			"grpc-status", "grpc-message", "grpc-status-details-bin":
			continue
		}
		for _, v := range vs {
			if strings.HasSuffix(key, "-bin") {
				b, err := decodeBinaryHeader(v)
				if err != nil {
					continue
				}
				v = string(b)
			}
			md.Append(key, v)
		}
	}
	return md
}

// statusOf is the status trailer carries.
func statusOf(trailer http.Header) error {
	code, err := strconv.Atoi(trailer.Get("Grpc-Status"))
	if err != nil {
		return status.Errorf(codes.Internal, "the response carries no valid grpc-status (%q)", trailer.Get("Grpc-Status"))
	}
	if code == 0 {
		return nil
	}
	msg := trailer.Get("Grpc-Message")
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	if bin := trailer.Get("Grpc-Status-Details-Bin"); bin != "" {
		if b, err := decodeBinaryHeader(bin); err == nil {
			var st spb.Status
			if proto.Unmarshal(b, &st) == nil && st.GetCode() == int32(code) {
				return status.ErrorProto(&st)
			}
		}
	}
	return status.Error(codes.Code(code), msg)
}

func decodeBinaryHeader(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// httpCodeToGRPC maps an HTTP status to the gRPC code gRPC's HTTP mapping
// gives it.
func httpCodeToGRPC(code int) codes.Code {
	switch code {
	case http.StatusBadRequest:
		return codes.Internal
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}

// grpcStatus is err, what a handler serving on the stream itself
// returned, as the call's status.
func grpcStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return status.Error(codes.Code(ce.Code()), ce.Message())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unknown, err.Error())
}
