package sglanggrpc

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/loadreporter/loadreporter/adapters/source/internal/sourcetest"
	"github.com/loadreporter/loadreporter/domain"
	schedulerpb "github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testWait bounds every wait in these tests: a Pull that outlives it has
// ignored its context.
const testWait = 10 * time.Second

// call is what the fake engine saw of one GetLoads.
type call struct {
	include  []string
	auth     []string // values of the authorization metadata
	protocol string
}

// fakeEngine is the engine's side of GetLoads, scripted by each test. Both
// servers below run it, so each case runs against two gRPC stacks.
type fakeEngine struct {
	getLoads func(ctx context.Context) (*schedulerpb.GetLoadsResponse, error)

	conns atomic.Int32 // TCP connections accepted
	mu    sync.Mutex
	calls []call
}

// serve answers every call with resp.
func serve(resp *schedulerpb.GetLoadsResponse) *fakeEngine {
	return &fakeEngine{getLoads: func(context.Context) (*schedulerpb.GetLoadsResponse, error) { return resp, nil }}
}

// fail answers every call with a gRPC status.
func fail(code connect.Code, msg string) *fakeEngine {
	return &fakeEngine{getLoads: func(context.Context) (*schedulerpb.GetLoadsResponse, error) {
		return nil, connect.NewError(code, errors.New(msg))
	}}
}

func (f *fakeEngine) record(c call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeEngine) seen() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// countingListener counts accepted connections, to show pulls share one.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func listen(t *testing.T, f *fakeEngine) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return countingListener{Listener: ln, n: &f.conns}
}

// A gRPC server stack for the fake engine.
type server struct {
	name  string
	start func(t *testing.T, f *fakeEngine) (addr string)
}

var servers = []server{
	{"connect-h2c", startConnect},
	{"grpc-go", startGRPC},
}

// connectEngine adapts a fakeEngine to the generated Connect handler; the
// service's other calls answer Unimplemented.
type connectEngine struct {
	schedulerconnect.UnimplementedSglangSchedulerHandler
	f *fakeEngine
}

func (e connectEngine) GetLoads(ctx context.Context, req *connect.Request[schedulerpb.GetLoadsRequest]) (*connect.Response[schedulerpb.GetLoadsResponse], error) {
	e.f.record(call{include: req.Msg.GetInclude(), auth: req.Header().Values("Authorization"), protocol: req.Peer().Protocol})
	resp, err := e.f.getLoads(ctx)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// startConnect serves f with the generated Connect handler over net/http
// with plaintext HTTP/2, the way our own RPC adapter serves.
func startConnect(t *testing.T, f *fakeEngine) string {
	t.Helper()
	ln := listen(t, f)
	mux := http.NewServeMux()
	mux.Handle(schedulerconnect.NewSglangSchedulerHandler(connectEngine{f: f}))
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	sharedtest.Serve(t, &http.Server{Handler: mux, Protocols: p}, ln)
	return ln.Addr().String()
}

// startGRPC serves f with grpc-go, a stock gRPC server like the engine's,
// registered by hand from the service's names (we generate no grpc-go stubs).
func startGRPC(t *testing.T, f *fakeEngine) string {
	t.Helper()
	ln := listen(t, f)
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: schedulerconnect.SglangSchedulerName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "GetLoads",
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				req := new(schedulerpb.GetLoadsRequest)
				if err := dec(req); err != nil {
					return nil, err
				}
				md, _ := metadata.FromIncomingContext(ctx)
				f.record(call{include: req.GetInclude(), auth: md.Get("authorization"), protocol: connect.ProtocolGRPC})
				resp, err := f.getLoads(ctx)
				var cerr *connect.Error
				if errors.As(err, &cerr) {
					// connect's codes are gRPC's, number for number.
					return nil, status.Error(codes.Code(cerr.Code()), cerr.Message())
				}
				return resp, err
			},
		}},
	}, struct{}{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		waitClosed(t, served)
	})
	return ln.Addr().String()
}

func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	// t.Context() is already done in cleanups.
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Errorf("server did not stop within %s", testWait)
	}
}

func newSource(t *testing.T, o Options) *Source {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pull runs one Pull under a ctx deadline of d and fails the test if Pull
// does not return within testWait.
func pull(t *testing.T, s *Source, d time.Duration) (domain.Snapshot, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return pullCtx(ctx, t, s)
}

func pullCtx(ctx context.Context, t *testing.T, s *Source) (domain.Snapshot, error) {
	t.Helper()
	type result struct {
		snap domain.Snapshot
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		snap, err := s.Pull(ctx)
		ch <- result{snap, err}
	}()
	wait, stop := context.WithTimeout(t.Context(), testWait)
	defer stop()
	select {
	case r := <-ch:
		return r.snap, r.err
	case <-wait.Done():
		t.Fatalf("Pull did not return within %s", testWait)
		return domain.Snapshot{}, nil
	}
}

// twoRanks is a core GetLoads answer with every field set to a distinct
// value; rank 1 sits at the int32 limits.
func twoRanks() *schedulerpb.GetLoadsResponse {
	return &schedulerpb.GetLoadsResponse{Loads: []*schedulerpb.SchedulerLoad{
		{
			DpRank: 1, NumRunningReqs: 2147483000, NumWaitingReqs: 2147483001, NumTotalReqs: math.MaxInt32,
			NumUsedTokens: 2147483002, MaxTotalNumTokens: math.MaxInt32, MaxRunningRequests: math.MaxInt32,
			NumWaitingUncachedTokens: 2147483003,
			TokenUsage:               0.9999, GenThroughput: 1e9, CacheHitRate: 1, Utilization: 0.0001,
		},
		{
			DpRank: 0, NumRunningReqs: 12, NumWaitingReqs: 3, NumTotalReqs: 15,
			NumUsedTokens: 61234, MaxTotalNumTokens: 220000, MaxRunningRequests: 256,
			NumWaitingUncachedTokens: 4096,
			TokenUsage:               0.2783, GenThroughput: 1834.27, CacheHitRate: 0.4127, Utilization: 0.6012,
		},
	}}
}

// twoRanksWant is twoRanks as RankLoads: every value widened unchanged,
// num_total_reqs dropped, num_total_tokens and the snapshot time zero.
func twoRanksWant() []domain.RankLoad {
	return []domain.RankLoad{
		{
			DPRank: 1, NumRunningReqs: 2147483000, NumWaitingReqs: 2147483001,
			NumUsedTokens: 2147483002, MaxTotalNumTokens: math.MaxInt32, MaxRunningRequests: math.MaxInt32,
			NumWaitingUncachedTokens: 2147483003,
			TokenUsage:               0.9999, GenThroughput: 1e9, CacheHitRate: 1, Utilization: 0.0001,
		},
		{
			DPRank: 0, NumRunningReqs: 12, NumWaitingReqs: 3,
			NumUsedTokens: 61234, MaxTotalNumTokens: 220000, MaxRunningRequests: 256,
			NumWaitingUncachedTokens: 4096,
			TokenUsage:               0.2783, GenThroughput: 1834.27, CacheHitRate: 0.4127, Utilization: 0.6012,
		},
	}
}

func TestPull(t *testing.T) {
	want := twoRanksWant()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			f := serve(twoRanks())
			addr := srv.start(t, f)
			s := newSource(t, Options{Target: addr})
			snap, err := pull(t, s, testWait)
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if len(snap.Ranks) != len(want) {
				t.Fatalf("got %d ranks, want %d: %+v", len(snap.Ranks), len(want), snap.Ranks)
			}
			for i := range want {
				// Struct equality covers every field, including the two
				// this wire does not carry (NumTotalTokens, SnapshotTime),
				// which must stay zero.
				if snap.Ranks[i] != want[i] {
					t.Errorf("rank %d:\n got %+v\nwant %+v", want[i].DPRank, snap.Ranks[i], want[i])
				}
			}
			if err := domain.ValidateSnapshot(snap, domain.RankRange(2)); err != nil {
				t.Errorf("served snapshot does not validate: %v", err)
			}
			calls := f.seen()
			if len(calls) != 1 {
				t.Fatalf("engine saw %d calls, want 1", len(calls))
			}
			c := calls[0]
			if strings.Join(c.include, ",") != "core" || len(c.include) != 1 {
				t.Errorf("include = %q, want [\"core\"]", c.include)
			}
			if c.protocol != connect.ProtocolGRPC {
				t.Errorf("engine saw protocol %q, want %q", c.protocol, connect.ProtocolGRPC)
			}
			if len(c.auth) != 0 {
				t.Errorf("authorization sent without an API key: %q", c.auth)
			}
		})
	}
}

// TestPullFullEngineAnswer serves what SGLang sends when asked for more
// than core: the envelope fields and optional per-rank sections our subset
// of the proto leaves out travel as unknown fields and must not disturb the
// fields we read.
func TestPullFullEngineAnswer(t *testing.T) {
	resp := twoRanks()
	var env []byte
	env = protowire.AppendTag(env, 1, protowire.BytesType) // timestamp
	env = protowire.AppendString(env, "2026-03-02T10:15:42.498700+00:00")
	env = protowire.AppendTag(env, 2, protowire.BytesType) // version
	env = protowire.AppendString(env, "0.5.9")
	env = protowire.AppendTag(env, 3, protowire.VarintType) // dp_rank_count
	env = protowire.AppendVarint(env, 2)
	var agg []byte
	agg = protowire.AppendTag(agg, 1, protowire.VarintType) // total_running_reqs
	agg = protowire.AppendVarint(agg, 2147483012)
	env = protowire.AppendTag(env, 5, protowire.BytesType) // aggregate
	env = protowire.AppendBytes(env, agg)
	resp.ProtoReflect().SetUnknown(env)
	for _, l := range resp.Loads {
		var mem []byte
		mem = protowire.AppendTag(mem, 1, protowire.Fixed64Type) // weight_gb
		mem = protowire.AppendFixed64(mem, math.Float64bits(14.2))
		var queues []byte
		queues = protowire.AppendTag(queues, 2, protowire.VarintType) // grammar
		queues = protowire.AppendVarint(queues, 7)
		var sections []byte
		sections = protowire.AppendTag(sections, 12, protowire.BytesType) // memory
		sections = protowire.AppendBytes(sections, mem)
		sections = protowire.AppendTag(sections, 16, protowire.BytesType) // queues
		sections = protowire.AppendBytes(sections, queues)
		l.ProtoReflect().SetUnknown(sections)
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			s := newSource(t, Options{Target: srv.start(t, serve(resp))})
			snap, err := pull(t, s, testWait)
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if len(snap.Ranks) != 2 {
				t.Fatalf("got %d ranks, want 2", len(snap.Ranks))
			}
			for i, want := range twoRanksWant() {
				if snap.Ranks[i] != want {
					t.Errorf("rank %d:\n got %+v\nwant %+v", want.DPRank, snap.Ranks[i], want)
				}
			}
		})
	}
}

func TestPullBearerToken(t *testing.T) {
	tests := []struct {
		name   string
		apiKey string
		want   []string
	}{
		{"set", "s3cret-key", []string{"Bearer s3cret-key"}},
		{"unset", "", nil},
	}
	for _, srv := range servers {
		for _, tt := range tests {
			t.Run(srv.name+"/"+tt.name, func(t *testing.T) {
				f := serve(twoRanks())
				s := newSource(t, Options{Target: srv.start(t, f), APIKey: tt.apiKey})
				if _, err := pull(t, s, testWait); err != nil {
					t.Fatalf("Pull: %v", err)
				}
				if strings.Contains(s.String(), "s3cret") {
					t.Errorf("String() shows the API key: %s", s)
				}
				calls := f.seen()
				if len(calls) != 1 {
					t.Fatalf("engine saw %d calls, want 1", len(calls))
				}
				if got := calls[0].auth; strings.Join(got, "|") != strings.Join(tt.want, "|") {
					t.Errorf("authorization = %q, want %q", got, tt.want)
				}
			})
		}
	}
}

func TestPullReusesOneConnection(t *testing.T) {
	const pulls = 10
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			f := serve(twoRanks())
			s := newSource(t, Options{Target: srv.start(t, f)})
			for range pulls {
				if _, err := pull(t, s, testWait); err != nil {
					t.Fatalf("Pull: %v", err)
				}
			}
			if n := len(f.seen()); n != pulls {
				t.Errorf("engine saw %d calls, want %d", n, pulls)
			}
			// One connection, or two when net/http loses a race of its own:
			// the first connection is pooled by the dialing goroutine after
			// it is handed to the first call, so a second call that starts
			// at once may dial again. Later calls find one in the pool.
			if n := f.conns.Load(); n > 2 {
				t.Errorf("%d pulls opened %d connections, want them to share one", pulls, n)
			}
		})
	}
}

func TestPullUsesGivenClient(t *testing.T) {
	addr := startConnect(t, serve(twoRanks()))
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h2c.CloseIdleConnections)
	rt := &countingTransport{next: h2c}
	s := newSource(t, Options{Target: addr, Client: &http.Client{Transport: rt}})
	for range 3 {
		if _, err := pull(t, s, testWait); err != nil {
			t.Fatalf("Pull: %v", err)
		}
	}
	if n := rt.count(); n != 3 {
		t.Errorf("given client carried %d requests, want 3", n)
	}
}

type countingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// closedPort returns an address on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// checkError asserts a one-line error with the given code whose message
// contains each of want ("{target}" stands for the engine's address).
func checkError(t *testing.T, err error, target, wantCode string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("Pull succeeded, want an error")
	}
	msg := domain.ErrorMessage(err)
	t.Logf("last_error: %s", msg)
	sourcetest.Mentions(t, msg, want, "{target}", target)
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	if code := domain.ErrorCode(err); code != wantCode {
		t.Errorf("code %s, want %s (%v)", code, wantCode, err)
	}
}

func TestPullConnectionRefused(t *testing.T) {
	addr := closedPort(t)
	s := newSource(t, Options{Target: "grpc://" + addr})
	_, err := pull(t, s, testWait)
	checkError(t, err, addr, domain.CodeSourceFailed, "GetLoads {target}: unavailable: connection refused")
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a refused connection reads as a timeout: %v", err)
	}
}

func TestPullNotAGRPCServer(t *testing.T) {
	// An HTTP/1-only server, as when --engine-url names the engine's HTTP
	// port instead of its gRPC port.
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	s := newSource(t, Options{Target: "http://" + addr})
	_, err := pull(t, s, testWait)
	// net/http's wording varies with timing ("frame too large", "client
	// conn could not be established"); the status code does not.
	checkError(t, err, addr, domain.CodeSourceFailed, "GetLoads {target}: unavailable: ")
	// When HTTP/2 saw the HTTP/1.1 answer (most pulls; the rest never got
	// that far), the message says what the operator got wrong.
	for range 5 {
		if msg := domain.ErrorMessage(err); strings.Contains(msg, "frame too large") {
			if !strings.Contains(msg, "an HTTP/1.1 server answers there") || !strings.Contains(msg, "--source sglang-http") {
				t.Fatalf("no hint in %q", msg)
			}
			return
		}
		_, err = pull(t, s, testWait)
	}
	t.Fatalf("five pulls from an HTTP/1.1 server and none read its answer: %v", err)
}

func TestPullErrors(t *testing.T) {
	tests := []struct {
		name     string
		engine   func(done <-chan struct{}) *fakeEngine
		opts     Options
		deadline time.Duration
		want     []string
		wantCode string
		timeout  bool
	}{
		{
			name: "unimplemented",
			engine: func(<-chan struct{}) *fakeEngine {
				return fail(connect.CodeUnimplemented, "method GetLoads not implemented")
			},
			want:     []string{"GetLoads {target}: unimplemented: method GetLoads not implemented"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name: "internal with a traceback",
			engine: func(<-chan struct{}) *fakeEngine {
				return fail(connect.CodeInternal, "scheduler crashed\nTraceback (most recent call last):\n  File \"x.py\"")
			},
			want:     []string{`GetLoads {target}: internal: scheduler crashed Traceback (most recent call last): File "x.py"`},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "unauthenticated",
			engine:   func(<-chan struct{}) *fakeEngine { return fail(connect.CodeUnauthenticated, "invalid API key") },
			want:     []string{"GetLoads {target}: unauthenticated: invalid API key"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name: "long message",
			engine: func(<-chan struct{}) *fakeEngine {
				return fail(connect.CodeUnavailable, strings.Repeat("overloaded ", 100))
			},
			want:     []string{"GetLoads {target}: unavailable: overloaded overloaded", "…"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "empty loads",
			engine:   func(<-chan struct{}) *fakeEngine { return serve(&schedulerpb.GetLoadsResponse{}) },
			want:     []string{"GetLoads {target}: response has an empty loads list"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "response over the message bound",
			engine:   func(<-chan struct{}) *fakeEngine { return serve(twoRanks()) },
			opts:     Options{MaxMessageBytes: 32},
			want:     []string{"GetLoads {target}: resource_exhausted: ", "32"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name: "hang",
			engine: func(done <-chan struct{}) *fakeEngine {
				// A stuck engine: it ignores the call's deadline and
				// cancellation alike, and answers only when the test ends.
				return &fakeEngine{getLoads: func(context.Context) (*schedulerpb.GetLoadsResponse, error) {
					<-done
					return nil, connect.NewError(connect.CodeAborted, errors.New("test over"))
				}}
			},
			deadline: 100 * time.Millisecond,
			want:     []string{"GetLoads {target}: timed out after"},
			wantCode: domain.CodePullTimeout,
			timeout:  true,
		},
		{
			name: "engine gives up on its own deadline",
			engine: func(<-chan struct{}) *fakeEngine {
				return fail(connect.CodeDeadlineExceeded, "scheduler did not answer within 5s")
			},
			want:     []string{"GetLoads {target}: timed out after", "(deadline_exceeded: scheduler did not answer within 5s)"},
			wantCode: domain.CodePullTimeout,
			timeout:  true,
		},
	}
	for _, srv := range servers {
		for _, tt := range tests {
			t.Run(srv.name+"/"+tt.name, func(t *testing.T) {
				// Blocking engines wait on done, closed before the
				// server's cleanup stops it.
				done := make(chan struct{})
				addr := srv.start(t, tt.engine(done))
				t.Cleanup(func() { close(done) })
				o := tt.opts
				o.Target = addr
				s := newSource(t, o)
				deadline := tt.deadline
				if deadline == 0 {
					deadline = testWait
				}
				snap, err := pull(t, s, deadline)
				if err == nil {
					t.Fatalf("Pull succeeded with %+v, want an error", snap)
				}
				checkError(t, err, addr, tt.wantCode, tt.want...)
				if isTimeout := errors.Is(err, context.DeadlineExceeded); isTimeout != tt.timeout {
					t.Errorf("errors.Is(err, DeadlineExceeded) = %v, want %v", isTimeout, tt.timeout)
				}
			})
		}
	}
}

func TestPullCanceled(t *testing.T) {
	addr := startConnect(t, serve(twoRanks()))
	s := newSource(t, Options{Target: addr})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := pullCtx(ctx, t, s)
	checkError(t, err, addr, domain.CodePullTimeout, "GetLoads {target}: pull canceled")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(err, Canceled) = false for %v", err)
	}
}

// TestPullThenValidate covers the whole path for values the wire carries
// but the snapshot invariants forbid: the source passes them on unchanged
// and domain.ValidateSnapshot names rank and field.
func TestPullThenValidate(t *testing.T) {
	ok := func(rank int32) *schedulerpb.SchedulerLoad {
		return &schedulerpb.SchedulerLoad{
			DpRank: rank, NumRunningReqs: 1, MaxRunningRequests: 8, NumUsedTokens: 10, MaxTotalNumTokens: 100,
			TokenUsage: 0.1, GenThroughput: 10, CacheHitRate: 0.5, Utilization: 0.2,
		}
	}
	with := func(rank int32, edit func(*schedulerpb.SchedulerLoad)) *schedulerpb.SchedulerLoad {
		l := ok(rank)
		edit(l)
		return l
	}
	tests := []struct {
		name  string
		loads []*schedulerpb.SchedulerLoad
		want  string
	}{
		{"negative counter", []*schedulerpb.SchedulerLoad{ok(0), with(1, func(l *schedulerpb.SchedulerLoad) { l.NumWaitingReqs = -3 })},
			"rank 1: num_waiting_reqs is negative (-3)"},
		{"most negative int32", []*schedulerpb.SchedulerLoad{ok(0), with(1, func(l *schedulerpb.SchedulerLoad) { l.NumWaitingUncachedTokens = math.MinInt32 })},
			"rank 1: num_waiting_uncached_tokens is negative (-2147483648)"},
		{"negative max", []*schedulerpb.SchedulerLoad{with(0, func(l *schedulerpb.SchedulerLoad) { l.MaxTotalNumTokens = -1 }), ok(1)},
			"rank 0: max_total_num_tokens is negative (-1)"},
		{"used over max", []*schedulerpb.SchedulerLoad{with(0, func(l *schedulerpb.SchedulerLoad) { l.NumUsedTokens = 300; l.MaxTotalNumTokens = 200 }), ok(1)},
			"rank 0: num_used_tokens 300 exceeds max_total_num_tokens 200"},
		{"running over max", []*schedulerpb.SchedulerLoad{ok(0), with(1, func(l *schedulerpb.SchedulerLoad) { l.NumRunningReqs = 9 })},
			"rank 1: num_running_reqs 9 exceeds max_running_requests 8"},
		{"NaN", []*schedulerpb.SchedulerLoad{ok(0), with(1, func(l *schedulerpb.SchedulerLoad) { l.TokenUsage = math.NaN() })},
			"rank 1: token_usage is not finite (NaN)"},
		{"+Inf", []*schedulerpb.SchedulerLoad{with(0, func(l *schedulerpb.SchedulerLoad) { l.GenThroughput = math.Inf(1) }), ok(1)},
			"rank 0: gen_throughput is not finite (+Inf)"},
		{"-Inf", []*schedulerpb.SchedulerLoad{ok(0), with(1, func(l *schedulerpb.SchedulerLoad) { l.CacheHitRate = math.Inf(-1) })},
			"rank 1: cache_hit_rate is not finite (-Inf)"},
		{"negative rank", []*schedulerpb.SchedulerLoad{ok(0), ok(-1)},
			"dp_rank -1 is outside 0..2147483647"},
		{"duplicate rank", []*schedulerpb.SchedulerLoad{ok(0), ok(0)},
			"rank 0 appears more than once"},
		{"missing rank", []*schedulerpb.SchedulerLoad{ok(0)},
			"rank set changed: missing [1]"},
		{"extra rank", []*schedulerpb.SchedulerLoad{ok(0), ok(1), ok(2)},
			"rank set changed: unexpected [2]"},
	}
	for _, srv := range servers {
		for _, tt := range tests {
			t.Run(srv.name+"/"+tt.name, func(t *testing.T) {
				addr := srv.start(t, serve(&schedulerpb.GetLoadsResponse{Loads: tt.loads}))
				snap, err := pull(t, newSource(t, Options{Target: addr}), testWait)
				if err == nil && len(snap.Ranks) != len(tt.loads) {
					t.Fatalf("got %d ranks, want %d", len(snap.Ranks), len(tt.loads))
				}
				sourcetest.Rejected(t, snap, err, tt.want)
			})
		}
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		wantErr    string // "" means valid
		wantTarget string
	}{
		{name: "host:port", opts: Options{Target: "127.0.0.1:30001"}, wantTarget: "127.0.0.1:30001"},
		{name: "grpc URL", opts: Options{Target: "grpc://127.0.0.1:30001"}, wantTarget: "127.0.0.1:30001"},
		{name: "http URL with slash", opts: Options{Target: "http://engine.local:30001/"}, wantTarget: "engine.local:30001"},
		{name: "IPv6", opts: Options{Target: "grpc://[::1]:30001"}, wantTarget: "[::1]:30001"},
		{name: "spaces", opts: Options{Target: " localhost:30001 "}, wantTarget: "localhost:30001"},
		{name: "empty", opts: Options{}, wantErr: "--engine-url is required for the sglang-grpc source"},
		{name: "no port", opts: Options{Target: "127.0.0.1"}, wantErr: "want host:port or grpc://host:port"},
		{name: "URL without port", opts: Options{Target: "grpc://127.0.0.1"}, wantErr: "want host:port"},
		{name: "bad port", opts: Options{Target: "127.0.0.1:http"}, wantErr: `port "http" is not a number in 1..65535`},
		{name: "port zero", opts: Options{Target: "grpc://127.0.0.1:0"}, wantErr: `port "0"`},
		{name: "no host", opts: Options{Target: ":30001"}, wantErr: "no host"},
		{name: "TLS", opts: Options{Target: "https://127.0.0.1:30001"}, wantErr: "TLS is not supported"},
		{name: "grpcs", opts: Options{Target: "grpcs://127.0.0.1:30001"}, wantErr: "TLS is not supported"},
		{name: "other scheme", opts: Options{Target: "unix://tmp/sock"}, wantErr: "scheme must be grpc or http"},
		{name: "path", opts: Options{Target: "http://127.0.0.1:30001/v1"}, wantErr: "must not have a path"},
		{name: "query", opts: Options{Target: "grpc://127.0.0.1:30001?x=1"}, wantErr: "must not have a query"},
		{name: "fragment", opts: Options{Target: "grpc://127.0.0.1:30001#x"}, wantErr: "fragment"},
		{name: "user info", opts: Options{Target: "grpc://u:pw@127.0.0.1:30001"}, wantErr: "must not carry user info"},
		{name: "key with newline", opts: Options{Target: "127.0.0.1:30001", APIKey: "a\nb"}, wantErr: "--engine-api-key contains a control character"},
		{name: "key not ASCII", opts: Options{Target: "127.0.0.1:30001", APIKey: "clé"}, wantErr: "--engine-api-key must be printable ASCII"},
		{name: "negative message bound", opts: Options{Target: "127.0.0.1:30001", MaxMessageBytes: -1}, wantErr: "max message bytes must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				t.Cleanup(func() { _ = s.Close() })
				if s.Target() != tt.wantTarget {
					t.Errorf("Target() = %s, want %s", s.Target(), tt.wantTarget)
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v", tt.opts)
			}
			if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(domain.ErrorMessage(err), tt.wantErr) {
				t.Errorf("New error %v, want INVALID_ARGUMENT containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
