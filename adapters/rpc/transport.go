package rpc

import (
	"context"
	"crypto/tls"
	"net/http"
	"sync"
	"time"
)

// WithTransportInfo gives the handlers behind it what connect does not
// pass on: the stream's http.ResponseController, so Monitor can bound a
// send to a router that stopped reading (a full HTTP/2 flow-control
// window otherwise holds the handler until the connection dies), and the
// request's TLS state, so Admin can log the client certificate's subject.
//
// Mount it around the handlers (or the whole mux). Without it everything
// still works, but nothing bounds Monitor's sends and Admin logs no
// certificate.
func WithTransportInfo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := &transport{tls: r.TLS, rc: http.NewResponseController(w)}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), transportKey{}, t)))
		afterResponse(r.Context(), t.detach)
	})
}

// detach: net/http forbids touching the stream once its handler returned.
func (t *transport) detach() {
	t.mu.Lock()
	t.rc = nil
	t.mu.Unlock()
}

// BoundWritesAtShutdown bounds, once shuttingDown ends, every write of
// every response still open behind it to timeout from then: a browser's
// Watch, an ORCA client or a page's event stream that stopped reading
// cannot hold the server's shutdown to the end of its grace, nor can a
// router's Monitor stream. Mount it inside WithTransportInfo, whose
// response controller it uses.
//
// The open responses are one shared set, watched by one context.AfterFunc:
// a request costs its entry in the set and no allocation, where an
// AfterFunc each would be held by every open stream. Mounted twice, the
// outer one bounds the request.
func BoundWritesAtShutdown(shuttingDown context.Context, timeout time.Duration, next http.Handler) http.Handler {
	b := &shutdownBound{timeout: timeout}
	context.AfterFunc(shuttingDown, b.shutDown)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := transportFrom(r.Context()); t != nil && b.add(t) {
			defer b.removeAfterResponse(r.Context(), t)
		}
		next.ServeHTTP(w, r)
	})
}

// removeAfterResponse takes t out of the set once its response is done
// (afterResponse); a closure only for a stream served past the chain.
func (b *shutdownBound) removeAfterResponse(ctx context.Context, t *transport) {
	if nativeCallFrom(ctx).outlivesHandler() {
		afterResponse(ctx, func() { b.remove(t) })
		return
	}
	b.remove(t)
}

// shutdownBound is the open responses of one BoundWritesAtShutdown, a
// list through their transports.
type shutdownBound struct {
	timeout time.Duration

	mu       sync.Mutex
	head     *transport
	shutting bool // shuttingDown has ended
}

// add puts t in the set, and bounds it at once once shutting down; it
// reports false, doing nothing, when t is in a set already.
func (b *shutdownBound) add(t *transport) bool {
	b.mu.Lock()
	if t.bound != nil {
		b.mu.Unlock()
		return false
	}
	t.bound, t.prev, t.next = b, nil, b.head
	if b.head != nil {
		b.head.prev = t
	}
	b.head = t
	shutting := b.shutting
	b.mu.Unlock()
	if shutting {
		t.setWriteDeadline(time.Now().Add(b.timeout))
	}
	return true
}

// remove takes t, whose handler returned, out of the set.
func (b *shutdownBound) remove(t *transport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		b.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.bound, t.prev, t.next = nil, nil, nil
}

// shutDown bounds every response open now; those added later are bounded
// as they come.
func (b *shutdownBound) shutDown() {
	b.mu.Lock()
	b.shutting = true
	var open []*transport
	for t := b.head; t != nil; t = t.next {
		open = append(open, t)
	}
	b.mu.Unlock()
	// Outside mu: a deadline talks to the connection's goroutine, and
	// handlers returning meanwhile must not wait for every other's. One
	// that returned since has no response controller left to bound.
	at := time.Now().Add(b.timeout)
	for _, t := range open {
		t.setWriteDeadline(at)
	}
}

type transportKey struct{}

// transport is what WithTransportInfo keeps of one request.
type transport struct {
	tls *tls.ConnectionState

	mu sync.Mutex
	rc *http.ResponseController // nil once the handler returned

	// bound is the BoundWritesAtShutdown whose set t is in, prev and next
	// its neighbours there; all three under bound.mu.
	bound      *shutdownBound
	prev, next *transport
}

// transportFrom returns the request's transport, or nil when
// WithTransportInfo is not mounted.
func transportFrom(ctx context.Context) *transport {
	t, _ := ctx.Value(transportKey{}).(*transport)
	return t
}

// setWriteDeadline bounds every write of the response from now on,
// including one in progress; it reports whether it could.
func (t *transport) setWriteDeadline(at time.Time) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rc != nil && t.rc.SetWriteDeadline(at) == nil
}

// canInterruptRead reports whether interruptRead works on this stream.
func (t *transport) canInterruptRead() bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rc != nil && t.rc.SetReadDeadline(time.Time{}) == nil
}

// interruptRead makes a read of the request body in progress, and every
// later one, fail at once; it reports whether it could. Monitor uses it to
// wake its handler, which reads the router's frames itself, when the
// session ended.
func (t *transport) interruptRead() bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// A deadline in the past closes the body at once (HTTP/2); the stream
	// can still be written.
	return t.rc != nil && t.rc.SetReadDeadline(time.Unix(1, 0)) == nil
}

// clientSubject is the subject of the client's verified certificate, or
// "" without mutual TLS.
func (t *transport) clientSubject() string {
	if t == nil || t.tls == nil || len(t.tls.PeerCertificates) == 0 {
		return ""
	}
	return t.tls.PeerCertificates[0].Subject.String()
}
