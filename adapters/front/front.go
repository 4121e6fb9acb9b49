package front

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/internal/httpjson"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/forwarded"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
	"github.com/loadreporter/loadreporter/internal/loglimit"
)

// Route is a request the front answers itself instead of passing it on:
// Method and Path exactly (a GET route also takes HEAD).
type Route struct {
	Method  string
	Path    string
	Handler http.Handler
}

// Observer hears about each request the front handles; its fields may be
// nil.
type Observer struct {
	// Proxied is one request passed to the engine: its route class (one
	// of Classes), the status the engine answered (502 when it did not,
	// 499 when the client went away first) and the time to the engine's
	// response headers.
	Proxied func(class string, status int, d time.Duration)
	// Scrape is one GET /metrics: hit when it was answered from the cache
	// (or shared a scrape already under way), not by a scrape of its own.
	Scrape func(hit bool)
	// Refused is one request the front answered 503 itself, past
	// MaxInFlight, without passing it on.
	Refused func(class string)
}

// Options configure a Front.
type Options struct {
	// Engine is where requests go: an http:// URL, spoken HTTP/1.1 over
	// pooled connections, or HTTP/2 without TLS when H2C is set (an
	// engine's gRPC server).
	Engine *url.URL
	H2C    bool
	// Answered are the routes answered here.
	Answered []Route
	// APIKey is the key the engine requires, if any. The answered routes
	// then require it as the engine would ("Authorization: Bearer <key>"),
	// and the /metrics scrape sends it.
	APIKey string
	// MetricsMaxAge is how long one scrape of the engine's /metrics serves
	// every scraper; 0 passes /metrics through like any other request.
	MetricsMaxAge time.Duration
	// ResponseHeaderTimeout bounds the wait for the engine's response
	// headers; 0, the default, waits as long as the client does (a
	// generation that does not stream answers when it is done).
	ResponseHeaderTimeout time.Duration
	// DialTimeout bounds a connection to the engine (default 5 s).
	DialTimeout time.Duration
	// MaxInFlight bounds the requests passed to the engine at once (each
	// holds a goroutine pair, buffers and an engine connection: tens of
	// KiB); one more is answered 503 at once. Default DefaultMaxInFlight.
	MaxInFlight int
	// Forwarded, when set, records every inference request passed on (a
	// POST of the generate class, or the gRPC scheduler's Generate) from
	// the moment it is passed to its answer, with the bytes of its body,
	// so that the reports can count what the engine has not published
	// yet (domain/forwarded).
	Forwarded *forwarded.Ledger
	// Transport replaces the pooled transport to the engine (tests).
	Transport http.RoundTripper
	Observer  Observer
	Logger    *slog.Logger
	// Now is the cache's clock and the time a request is recorded as
	// passed on (default time.Now): the wall clock the engine stamps its
	// snapshots with, the front and the engine sharing a host.
	Now func() time.Time
}

// Route classes, the label of proxied requests in metrics: a bounded set
// whatever paths clients send.
const (
	ClassGenerate = "generate"
	ClassHealth   = "health"
	ClassInfo     = "info"
	ClassGRPC     = "grpc"
	ClassOther    = "other"
)

// Classes lists every route class.
var Classes = []string{ClassGenerate, ClassHealth, ClassInfo, ClassGRPC, ClassOther}

// DefaultMaxInFlight is Options.MaxInFlight's default: far above what one
// engine serves at once, and a bound on what a flood of slow requests can
// hold (about 160 MiB at 40 KiB a request).
const DefaultMaxInFlight = 4096

// StatusClientClosed is the status counted for a proxied request whose
// client went away before the engine answered (nginx's 499).
const StatusClientClosed = 499

// Front is the handler of the worker's public address.
type Front struct {
	opts     Options
	inFlight atomic.Int64
	engine   string // the engine's address as operators wrote it, for errors
	proxy    *httputil.ReverseProxy
	scrapes  *scrapes // nil when /metrics is passed through
	errLines loglimit.Limiter
	errs     *connect.ErrorWriter
}

// New checks the options and returns the front.
func New(o Options) (*Front, error) {
	if o.Engine == nil || o.Engine.Host == "" {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "front: the engine's URL is required (http://HOST:PORT)")
	}
	if o.Engine.Scheme != "http" && o.Engine.Scheme != "https" {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "front: engine URL %q: want http:// or https://", o.Engine.Redacted())
	}
	for _, d := range []struct {
		option string
		v      time.Duration
	}{{"metrics-max-age", o.MetricsMaxAge}, {"response-header-timeout", o.ResponseHeaderTimeout}, {"dial-timeout", o.DialTimeout}} {
		if d.v < 0 {
			return nil, domain.InvalidOption(d.option, "%s: must not be negative (0: its default)", d.v)
		}
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.MaxInFlight < 0 {
		return nil, domain.InvalidOption("max-in-flight", "%d: must not be negative (0: %d)", o.MaxInFlight, DefaultMaxInFlight)
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	for _, r := range o.Answered {
		if r.Handler == nil || r.Method == "" || !strings.HasPrefix(r.Path, "/") {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "front: answered route %s %q needs a method, a path and a handler", r.Method, r.Path)
		}
	}
	tr := o.Transport
	if tr == nil {
		tr = newTransport(o)
	}
	f := &Front{opts: o, engine: o.Engine.Redacted(), errLines: loglimit.Limiter{Every: 10 * time.Second},
		errs: connect.NewErrorWriter()}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(o.Engine)
			// Appended to, as proxies do, so an ingress's chain reaches the
			// engine (the proxy removes the inbound one before Rewrite).
			if xff := pr.In.Header.Values("X-Forwarded-For"); len(xff) > 0 {
				pr.Out.Header["X-Forwarded-For"] = xff
			}
			pr.SetXForwarded()
		},
		Transport: observed{next: tr, f: f},
		// A streamed answer reaches the client write by write: the proxy
		// flushes every write of a text/event-stream and of a body of
		// unknown length (chunked, or HTTP/2 without Content-Length: every
		// gRPC call), so a token stream is read event by event and a gRPC
		// stream message by message. An answer with a Content-Length is
		// written as the server's buffers fill and whole at its end: a
		// flush on every write (-1) cost a timer goroutine per request and
		// a write of the headers alone, a fifth of the front's CPU per
		// non-streaming request.
		FlushInterval: 0,
		ErrorHandler:  f.proxyError,
		// The proxy's own lines (a body copy cut short), held back with
		// the front's other error lines.
		ErrorLog:   log.New(loglimit.NewWriter(o.Logger, &f.errLines, o.Now, "front: proxy", "engine", f.engine), "", 0),
		BufferPool: &copyBuffers{},
	}
	if o.MetricsMaxAge > 0 {
		f.scrapes = newScrapes(o, tr)
	}
	return f, nil
}

// newTransport is the pooled connection set to the engine. Compression is
// left to the client and the engine (the proxy passes bytes unchanged).
func newTransport(o Options) *http.Transport {
	t := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   o.DialTimeout,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		DisableCompression:    true,
	}
	if o.H2C {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t.Protocols = &p
		t.HTTP2 = &http.HTTP2Config{
			SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second,
			// What the engine may send ahead of a client that reads slowly
			// or not at all: HTTP/2's defaults (4 MiB a stream, 1 GiB a
			// connection) let a few such clients fill the front's memory.
			MaxReceiveBufferPerStream:     256 << 10,
			MaxReceiveBufferPerConnection: 4 << 20,
		}
	}
	return t
}

// ServeHTTP answers the answered routes and /metrics, and passes the rest.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, rt := range f.opts.Answered {
		if r.URL.Path == rt.Path && (r.Method == rt.Method || rt.Method == http.MethodGet && r.Method == http.MethodHead) {
			if !f.admitted(r) {
				// The engine's own refusal, in its shape.
				if isGRPC(r) && f.errs.IsSupported(r) {
					_ = f.errs.Write(w, r, connect.NewError(connect.CodeUnauthenticated, errors.New("missing or wrong bearer token (the engine's API key)")))
					return
				}
				httpjson.Write(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
				return
			}
			rt.Handler.ServeHTTP(w, r)
			return
		}
	}
	if f.scrapes != nil && r.URL.Path == "/metrics" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		f.serveMetrics(w, r)
		return
	}
	if n := f.inFlight.Add(1); n > int64(f.opts.MaxInFlight) {
		f.inFlight.Add(-1)
		f.refuse(w, r, n)
		return
	}
	defer f.inFlight.Add(-1)
	var fr *forwarded.Request
	if per := bytesPerToken(r); per > 0 && f.opts.Forwarded != nil {
		fr = f.opts.Forwarded.Add(f.opts.Now(), per, r.ContentLength)
		defer fr.Done()
	}
	if r.ProtoMajor == 1 {
		// HTTP/1's server otherwise reads what is left of the request body
		// before it writes the response: a stream the engine starts before
		// the body is all sent waits for the client's last byte, and the
		// body's copy to the engine fails once the response has begun,
		// which drops the engine's connection mid-stream (golang/go#40747).
		_ = http.NewResponseController(w).EnableFullDuplex()
		// Closed before the handler returns, so the transport's copy
		// cannot read the connection while the server reads the next
		// request on it (golang/go#68560).
		defer r.Body.Close()
	}
	if r.Body != nil && r.Body != http.NoBody {
		// What breaks reading the client's body is the client's, not the
		// engine's: proxyError tells them apart by it. Through the context,
		// as the proxy hands the error handler its own copy of the request,
		// its body wrapped again.
		b := watchBody(r, fr)
		if fr != nil && r.ContentLength <= 0 {
			// A body of unknown length is counted as it passes; once whole,
			// a report between two pulls can weigh the whole prompt.
			b.atEOF = f.opts.Forwarded.Notify
		}
		r = r.WithContext(context.WithValue(r.Context(), clientBodyKey{}, b))
	}
	f.proxy.ServeHTTP(w, r)
}

// clientBodyKey carries a request's clientBody to proxyError.
type clientBodyKey struct{}

// clientBody is a request body that keeps the first error reading it
// gave, but for its end, and counts its bytes into the request's record
// when it has one.
type clientBody struct {
	io.ReadCloser
	fwd   *forwarded.Request
	atEOF func() // called once, at the body's end (nil: nothing)
	mu    sync.Mutex
	err   error
}

// watchBody puts a clientBody in place of r's body and returns it.
func watchBody(r *http.Request, fwd *forwarded.Request) *clientBody {
	b := &clientBody{ReadCloser: r.Body, fwd: fwd}
	r.Body = b
	return b
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.fwd.Sent(n)
	if err == io.EOF && b.atEOF != nil {
		b.atEOF()
		b.atEOF = nil
	}
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// broken is the error reading the body gave, if any.
func (b *clientBody) broken() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// refuse answers a request over MaxInFlight: 503 (RESOURCE_EXHAUSTED for
// gRPC), to be retried on another worker. n is the count in flight with
// this request, as ServeHTTP's admission saw it.
func (f *Front) refuse(w http.ResponseWriter, r *http.Request, n int64) {
	class := ClassOf(r)
	if f.opts.Observer.Refused != nil {
		f.opts.Observer.Refused(class)
	}
	msg := fmt.Sprintf("%d requests are in flight through the front with this one, the limit is %d", n, f.opts.MaxInFlight)
	if ok, suppressed := f.errLines.Allow(f.opts.Now()); ok {
		f.opts.Logger.Warn("front: a request refused: too many in flight", "limit", f.opts.MaxInFlight, "class", class, "suppressed", suppressed)
	}
	if isGRPC(r) && f.errs.IsSupported(r) {
		_ = f.errs.Write(w, r, connect.NewError(connect.CodeResourceExhausted, errors.New(msg)))
		return
	}
	w.Header().Set("Retry-After", "1")
	httpjson.WriteError(w, http.StatusServiceUnavailable, "RESOURCE_EXHAUSTED", msg)
}

// admitted reports whether r carries the engine's key, when there is one.
func (f *Front) admitted(r *http.Request) bool {
	if f.opts.APIKey == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(f.opts.APIKey)) == 1
}

// ClassOf is the route class of a request, for metrics.
func ClassOf(r *http.Request) string {
	if isGRPC(r) {
		return ClassGRPC
	}
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/health"):
		return ClassHealth
	case p == "/generate" || strings.HasPrefix(p, "/v1/") && p != "/v1/models" ||
		p == "/encode" || p == "/classify" || p == "/v1/rerank":
		return ClassGenerate
	case p == "/v1/models" || p == "/server_info" || p == "/get_server_info" || p == "/get_model_info" ||
		p == "/model_info" || p == "/version":
		return ClassInfo
	}
	return ClassOther
}

// Body sizes per prompt token, by the request's encoding: about four
// characters a token in JSON text (BPE vocabularies on English), and
// about three bytes a token id in a protobuf's packed varints.
const (
	bytesPerTokenJSON     = 4
	bytesPerTokenProtobuf = 3
)

// inferencePaths are the HTTP requests Options.Forwarded records: those
// that put a prompt in the engine's queue (SGLang's native and OpenAI
// routes, vLLM's the same).
var inferencePaths = map[string]bool{
	"/generate": true, "/v1/completions": true, "/v1/chat/completions": true, "/v1/responses": true,
	"/v1/embeddings": true, "/encode": true, "/classify": true, "/v1/classify": true,
	"/v1/rerank": true, "/rerank": true, "/v1/score": true, "/score": true,
}

// bytesPerToken is how many bytes of r's body make a prompt token, for the
// inference requests Options.Forwarded records; 0 for every other request.
func bytesPerToken(r *http.Request) int {
	switch {
	case r.Method != http.MethodPost:
		return 0
	case isGRPC(r):
		if r.URL.Path == schedulerconnect.SglangSchedulerGenerateProcedure {
			return bytesPerTokenProtobuf
		}
		return 0
	case inferencePaths[r.URL.Path]:
		return bytesPerTokenJSON
	}
	return 0
}

// isGRPC reports whether r is a gRPC or gRPC-Web call.
func isGRPC(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

// proxyError answers a request the engine did not answer: 502 with a JSON
// body naming the engine, or UNAVAILABLE for a gRPC caller. A client that
// went away first gets nothing.
func (f *Front) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	class := ClassOf(r)
	if r.Context().Err() != nil {
		f.observe(class, StatusClientClosed, 0)
		return
	}
	if b, ok := r.Context().Value(clientBodyKey{}).(*clientBody); ok {
		if bodyErr := b.broken(); bodyErr != nil {
			f.clientBodyBroke(w, r, class, bodyErr)
			return
		}
	}
	f.observe(class, http.StatusBadGateway, 0)
	msg := fmt.Sprintf("engine %s did not answer: %s", f.engine, domain.Shorten(domain.OneLine(err.Error()), 300))
	if ok, suppressed := f.errLines.Allow(f.opts.Now()); ok {
		f.opts.Logger.Warn("front: the engine did not answer a proxied request", "engine", f.engine, "class", class,
			"err", err, "suppressed", suppressed)
	}
	if isGRPC(r) && f.errs.IsSupported(r) {
		_ = f.errs.Write(w, r, connect.NewError(connect.CodeUnavailable, errors.New(msg)))
		return
	}
	httpjson.WriteError(w, http.StatusBadGateway, "ENGINE_UNREACHABLE", msg)
}

// clientBodyBroke answers a request whose body could not be read: 400
// (INVALID_ARGUMENT for gRPC), counted as such.
func (f *Front) clientBodyBroke(w http.ResponseWriter, r *http.Request, class string, err error) {
	f.observe(class, http.StatusBadRequest, 0)
	msg := "the request body could not be read: " + domain.Shorten(domain.OneLine(err.Error()), 300)
	if ok, suppressed := f.errLines.Allow(f.opts.Now()); ok {
		f.opts.Logger.Warn("front: a client's request body broke off", "class", class, "err", err, "suppressed", suppressed)
	}
	if isGRPC(r) && f.errs.IsSupported(r) {
		_ = f.errs.Write(w, r, connect.NewError(connect.CodeInvalidArgument, errors.New(msg)))
		return
	}
	httpjson.WriteError(w, http.StatusBadRequest, "BAD_REQUEST_BODY", msg)
}

func (f *Front) observe(class string, status int, d time.Duration) {
	if f.opts.Observer.Proxied != nil {
		f.opts.Observer.Proxied(class, status, d)
	}
}

// observed counts every request the engine answered, with the time to its
// response headers.
type observed struct {
	next http.RoundTripper
	f    *Front
}

func (o observed) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := o.next.RoundTrip(r)
	if err == nil {
		o.f.observe(ClassOf(r), resp.StatusCode, time.Since(start))
	}
	return resp, err
}

// copyBuffers lends the proxy its response-copy buffers: without it each
// response allocates 32 KiB, garbage per request and held for a stream's
// whole life. 16 KiB holds any event of a token stream.
type copyBuffers struct{ pool sync.Pool }

func (b *copyBuffers) Get() []byte {
	if p, ok := b.pool.Get().(*[]byte); ok {
		return *p
	}
	return make([]byte, 16<<10)
}

func (b *copyBuffers) Put(buf []byte) { b.pool.Put(&buf) }
