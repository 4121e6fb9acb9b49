package sglanggrpc

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
	schedulerpb "github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
	"github.com/loadreporter/loadreporter/ports"
)

// Name is the source's name, the --source value that selects it.
const Name = "sglang-grpc"

// DefaultMaxMessageBytes bounds a GetLoads response when
// Options.MaxMessageBytes is 0. A core SchedulerLoad is under a hundred
// bytes, so 1 MiB leaves room for thousands of ranks while keeping a
// misbehaving engine from making us buffer without limit.
const DefaultMaxMessageBytes = 1 << 20

// Options configure a Source.
type Options struct {
	// Target is the engine's gRPC address (the --engine-url flag):
	// host:port, grpc://host:port or http://host:port. The connection is
	// plaintext HTTP/2, as SGLang's gRPC server listens.
	Target string
	// APIKey, when set, is sent as the metadata "authorization: Bearer
	// <APIKey>" (the --engine-api-key flag).
	APIKey string
	// Client carries the calls. It must speak HTTP/2 without TLS (an
	// http.Transport whose Protocols has only UnencryptedHTTP2 set). When
	// nil, the Source makes such a client of its own and reuses it, so all
	// pulls share one connection to the engine. Each pull ends when its
	// context ends.
	Client *http.Client
	// MaxMessageBytes bounds a GetLoads response; 0 means
	// DefaultMaxMessageBytes.
	MaxMessageBytes int64
}

// Source calls SGLang's SglangScheduler/GetLoads with include ["core"]. It
// is safe for concurrent use; it keeps no state between pulls besides the
// connection to the engine.
type Source struct {
	target     string // host:port, for messages
	auth       string // authorization metadata value, or ""
	client     schedulerconnect.SglangSchedulerClient
	httpClient *http.Client
	ownClient  bool
}

var _ ports.SnapshotSource = (*Source)(nil)

// New validates o and returns a Source. Problems are reported with code
// domain.CodeInvalidArgument and name the flag the operator has to fix. New
// does not connect: the first pull does.
func New(o Options) (*Source, error) {
	target, err := parseTarget(o.Target)
	if err != nil {
		return nil, err
	}
	for _, c := range []byte(o.APIKey) {
		// gRPC metadata values are printable ASCII; anything else would
		// make every pull fail, so say it once, here.
		if c < 0x20 || c == 0x7f {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-api-key contains a control character")
		}
		if c > 0x7e {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-api-key must be printable ASCII to travel as gRPC metadata")
		}
	}
	if o.MaxMessageBytes < 0 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "sglang-grpc max message bytes must be > 0, got %d", o.MaxMessageBytes)
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	// connect takes an int; beyond 2 GiB the bound means nothing anyway.
	o.MaxMessageBytes = min(o.MaxMessageBytes, math.MaxInt32)
	s := &Source{target: target, httpClient: o.Client}
	if o.APIKey != "" {
		s.auth = "Bearer " + o.APIKey
	}
	if s.httpClient == nil {
		s.httpClient = &http.Client{Transport: newTransport()}
		s.ownClient = true
	}
	s.client = schedulerconnect.NewSglangSchedulerClient(s.httpClient, "http://"+target,
		connect.WithGRPC(),
		connect.WithReadMaxBytes(int(o.MaxMessageBytes)),
	)
	return s, nil
}

// newTransport returns a transport that speaks only HTTP/2 with prior
// knowledge over plain TCP (h2c), which is what a gRPC server without TLS
// expects. Keep-alive pings drop a connection to an engine that vanished
// without closing it, so the next pull dials afresh instead of waiting on a
// dead socket until its deadline.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // an HTTP proxy cannot carry h2c with prior knowledge
	t.Protocols = new(http.Protocols)
	t.Protocols.SetUnencryptedHTTP2(true)
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 15 * time.Second, PingTimeout: 5 * time.Second}
	return t
}

// parseTarget accepts host:port, grpc://host:port and http://host:port and
// returns host:port.
func parseTarget(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url is required for the sglang-grpc source (for example grpc://127.0.0.1:30001 or 127.0.0.1:30001)")
	}
	hostport := raw
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err
			}
			return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: %v", raw, err)
		}
		switch {
		case u.Scheme == "https" || u.Scheme == "grpcs":
			return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: TLS is not supported by the sglang-grpc source; SGLang's gRPC server is plaintext: use grpc://host:port", u.Redacted())
		case u.Scheme != "grpc" && u.Scheme != "http":
			return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: scheme must be grpc or http (or give host:port)", u.Redacted())
		case u.User != nil:
			return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: must not carry user info; use --engine-api-key", u.Redacted())
		case u.Path != "" && u.Path != "/":
			return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: must not have a path; the gRPC method path is fixed", u.Redacted())
		case u.RawQuery != "" || u.ForceQuery:
			return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: must not have a query", u.Redacted())
		case u.Fragment != "":
			return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: must not have a #fragment", u.Redacted())
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: want host:port or grpc://host:port (the engine's gRPC port)", raw)
	}
	if host == "" {
		return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: no host", raw)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: port %q is not a number in 1..65535", raw, port)
	}
	return net.JoinHostPort(host, port), nil
}

// Target returns the engine's address as host:port.
func (s *Source) Target() string { return s.target }

// String describes the source for logs; it never shows the API key.
func (s *Source) String() string { return Name + " " + s.target }

// Close drops idle connections of the client the Source made itself; a
// caller-supplied Client is left alone.
func (s *Source) Close() error {
	if s.ownClient {
		s.httpClient.CloseIdleConnections()
	}
	return nil
}

// Pull calls GetLoads once. It returns when ctx ends even if the engine
// never answers.
func (s *Source) Pull(ctx context.Context) (domain.Snapshot, error) {
	start := time.Now()
	req := connect.NewRequest(&schedulerpb.GetLoadsRequest{Include: []string{"core"}})
	if s.auth != "" {
		req.Header().Set("Authorization", s.auth)
	}
	resp, err := s.client.GetLoads(ctx, req)
	if err != nil {
		return domain.Snapshot{}, s.callError(ctx, start, err)
	}
	loads := resp.Msg.GetLoads()
	if len(loads) == 0 {
		return domain.Snapshot{}, domain.Errorf(domain.CodeInvalidSnapshot, "GetLoads %s: response has an empty loads list: the engine reported no ranks", s.target)
	}
	ranks := make([]domain.RankLoad, len(loads))
	for i, l := range loads {
		ranks[i] = rankLoad(l)
	}
	return domain.Snapshot{Ranks: ranks}, nil
}

// rankLoad widens the wire's int32 counters to int64, which is exact: a
// negative value stays negative, for domain.ValidateSnapshot to reject with
// rank and field. num_total_tokens and the snapshot time are not on this
// wire and stay zero; num_total_reqs has no RankLoad field.
func rankLoad(l *schedulerpb.SchedulerLoad) domain.RankLoad {
	return domain.RankLoad{
		DPRank:                   int64(l.GetDpRank()),
		NumRunningReqs:           int64(l.GetNumRunningReqs()),
		NumWaitingReqs:           int64(l.GetNumWaitingReqs()),
		NumWaitingUncachedTokens: int64(l.GetNumWaitingUncachedTokens()),
		NumUsedTokens:            int64(l.GetNumUsedTokens()),
		MaxTotalNumTokens:        int64(l.GetMaxTotalNumTokens()),
		MaxRunningRequests:       int64(l.GetMaxRunningRequests()),
		TokenUsage:               l.GetTokenUsage(),
		GenThroughput:            l.GetGenThroughput(),
		CacheHitRate:             l.GetCacheHitRate(),
		Utilization:              l.GetUtilization(),
	}
}

// callError names a failed call in one line: the gRPC status code and its
// message, or the transport's cause. When ctx has ended, or the call failed
// with deadline_exceeded, the pull timed out; the error then also matches
// context.DeadlineExceeded (or context.Canceled) so the fire loop can
// classify it as a timeout.
func (s *Source) callError(ctx context.Context, start time.Time, err error) error {
	code := connect.CodeOf(err)
	if cerr := ctx.Err(); cerr != nil {
		return domain.PullEnded("GetLoads "+s.target, cerr, time.Since(start))
	}
	detail := errorDetail(err)
	if code == connect.CodeCanceled && !connect.IsWireError(err) {
		// connect says canceled for some broken connections (an HTTP/2
		// stream reset, a broken pipe); ctx is alive, so the engine's end
		// went away and "canceled" would read as if we had given up.
		code = connect.CodeUnavailable
	}
	if code == connect.CodeDeadlineExceeded {
		// The engine enforced the deadline we sent it (grpc-timeout), a
		// moment before our own timer fired, or gave up on one of its own.
		return domain.Wrap(context.DeadlineExceeded, domain.CodePullTimeout, "GetLoads %s: timed out after %s (%s: %s)",
			s.target, time.Since(start).Round(time.Millisecond), code, detail)
	}
	hint := ""
	if strings.Contains(detail, "HTTP/1.1 header") || strings.Contains(detail, "frame too large") {
		// An HTTP/1.1 server read our HTTP/2 preface and answered 400.
		hint = " (an HTTP/1.1 server answers there, not gRPC: --engine-url must be the scheduler's gRPC port; SGLang's HTTP server is read with --source sglang-http)"
	}
	return domain.Errorf(domain.CodeSourceFailed, "GetLoads %s: %s: %s%s", s.target, code, detail, hint)
}

// errorDetail is what follows the status code in a message: the engine's
// own status message, or for a transport failure its innermost cause
// ("connection refused"), without the request URL net/http wraps it in.
func errorDetail(err error) string {
	if connect.IsWireError(err) {
		var cerr *connect.Error
		if errors.As(err, &cerr) {
			if m := domain.Shorten(cerr.Message(), 200); m != "" {
				return m
			}
			return "(no message)"
		}
	}
	inner := err
	var cerr *connect.Error
	if errors.As(err, &cerr) && cerr.Unwrap() != nil {
		inner = cerr.Unwrap()
	}
	var uerr *url.Error
	if errors.As(inner, &uerr) {
		inner = uerr.Err
	}
	var operr *net.OpError
	if errors.As(inner, &operr) && operr.Err != nil {
		inner = operr.Err
		var serr *os.SyscallError
		if errors.As(inner, &serr) {
			inner = serr.Err
		}
	}
	if m := domain.Shorten(inner.Error(), 200); m != "" {
		return m
	}
	return "(no message)"
}
