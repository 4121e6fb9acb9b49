package tests

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
	"github.com/loadreporter/loadreporter/ports"
)

// waitingTests is how many tests of this package run at once unless
// -test.parallel says otherwise. Go's default, GOMAXPROCS, suits tests
// that compute; these mostly wait — on fire grids, engines, routers,
// browsers — and use half a core between them on two cores. Tests that
// time a cadence or count the process's goroutines do not call
// t.Parallel, so they run alone before the others.
const waitingTests = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(waitingTests, runtime.GOMAXPROCS(0))))
	}
	goleak.VerifyTestMain(cleanupAfter{m},
		// net/http keeps idle client connections' readers until they close.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		// zmq4's PUB socket (the stand-in engine's, never the reporter's)
		// does not stop its writer on Close.
		goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"),
	)
}

// cleanupAfter removes what the package's tests left for each other (the
// built binary) once they all ran.
type cleanupAfter struct{ m *testing.M }

func (c cleanupAfter) Run() int {
	defer removeBuilt()
	return c.m.Run()
}

// countingEngine is an instant engine of n ranks that counts its pulls.
type countingEngine struct {
	ranks int
	pulls atomic.Int64
	fail  atomic.Bool
}

func (e *countingEngine) Pull(ctx context.Context) (domain.Snapshot, error) {
	n := e.pulls.Add(1)
	if e.fail.Load() {
		return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "engine answered HTTP 500")
	}
	s := domain.Snapshot{}
	for i := range e.ranks {
		s.Ranks = append(s.Ranks, domain.RankLoad{
			DPRank: int64(i), SnapshotTime: time.Now(), NumRunningReqs: n % 100, NumWaitingReqs: 1,
			NumUsedTokens: 1000, MaxTotalNumTokens: 4000, MaxRunningRequests: 256, TokenUsage: 0.25,
		})
	}
	return s, nil
}

var _ ports.SnapshotSource = (*countingEngine)(nil)

// testConfig is the default config on an ephemeral port, quiet logs.
func testConfig() app.Config {
	c := app.DefaultConfig()
	c.Server.Listen = "127.0.0.1:0"
	c.Logs.LogLevel = "error"
	c.Server.ShutdownGrace = 5 * time.Second
	return c
}

// startMain boots the service around source; it is closed at cleanup.
func startMain(t testing.TB, c app.Config, source ports.SnapshotSource) *app.Main {
	t.Helper()
	var m *app.Main
	var err error
	if source == nil {
		m, err = app.InitializeMain(c)
	} else {
		m, err = app.InitializeMainWithEngine(c, app.Engine{Source: source})
	}
	if err != nil {
		t.Fatal(err)
	}
	sharedtest.Start(t, m)
	return m
}

// router is one Monitor stream, whatever the client library.
type router interface {
	Send(*pb.RouterFrame) error
	Recv() (*pb.WorkerFrame, error)
	CloseSend() error
}

// dialer opens Monitor streams to addr with one kind of client.
type dialer struct {
	name string
	open func(t testing.TB, ctx context.Context, addr string) router
}

// dialers are the clients every Monitor rule is checked with: a stock
// grpc-go client, and connect clients speaking gRPC, gRPC-Web and Connect
// (binary and JSON).
var dialers = []dialer{
	{"grpc-go", openGRPC},
	{"connect-grpc", connectDialer(connect.WithGRPC())},
	{"connect-grpcweb", connectDialer(connect.WithGRPCWeb())},
	{"connect", connectDialer()},
	{"connect-json", connectDialer(connect.WithProtoJSON())},
}

func openGRPC(t testing.TB, ctx context.Context, addr string) router {
	t.Helper()
	return openGRPCWith(t, ctx, addr)
}

// openGRPCWith is openGRPC with more dial options (small windows).
func openGRPCWith(t testing.TB, ctx context.Context, addr string, opts ...grpc.DialOption) router {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
		loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
	if err != nil {
		t.Fatal(err)
	}
	return grpcRouter{st}
}

type grpcRouter struct{ st grpc.ClientStream }

func (g grpcRouter) Send(f *pb.RouterFrame) error { return g.st.SendMsg(f) }
func (g grpcRouter) CloseSend() error             { return g.st.CloseSend() }
func (g grpcRouter) Recv() (*pb.WorkerFrame, error) {
	f := new(pb.WorkerFrame)
	return f, g.st.RecvMsg(f)
}

// h2cClient is an HTTP client that speaks HTTP/2 without TLS.
func h2cClient(t testing.TB) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func connectDialer(opts ...connect.ClientOption) func(testing.TB, context.Context, string) router {
	return func(t testing.TB, ctx context.Context, addr string) router {
		t.Helper()
		c := loadmonitorv1connect.NewLoadMonitorServiceClient(h2cClient(t), "http://"+addr, opts...)
		return connectRouter{c.Monitor(ctx)}
	}
}

type connectRouter struct {
	st *connect.BidiStreamForClient[pb.RouterFrame, pb.WorkerFrame]
}

func (c connectRouter) Send(f *pb.RouterFrame) error   { return c.st.Send(f) }
func (c connectRouter) Recv() (*pb.WorkerFrame, error) { return c.st.Receive() }
func (c connectRouter) CloseSend() error               { return c.st.CloseRequest() }

func registerFrame(id string, intervalMs, leaseMs int64) *pb.RouterFrame {
	return &pb.RouterFrame{Payload: &pb.RouterFrame_Register{Register: &pb.RegisterRequest{
		RouterId: id, ReportIntervalMs: intervalMs, LeaseTtlMs: leaseMs}}}
}

var (
	keepAliveFrame = &pb.RouterFrame{Payload: &pb.RouterFrame_KeepAlive{KeepAlive: &pb.KeepAlive{}}}
	stopFrame      = &pb.RouterFrame{Payload: &pb.RouterFrame_Stop{Stop: &pb.StopRequest{}}}
)

func updateFrame(intervalMs, leaseMs *int64) *pb.RouterFrame {
	return &pb.RouterFrame{Payload: &pb.RouterFrame_UpdateConfig{UpdateConfig: &pb.UpdateConfigRequest{
		ReportIntervalMs: intervalMs, LeaseTtlMs: leaseMs}}}
}

// eventually calls cond every 20 ms until it returns true, failing the
// test when ctx ends first: the wait for a condition that nothing
// signals (a counter on /metrics, a line in a log, a page's rows).
func eventually(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	eventuallyEvery(t, ctx, 20*time.Millisecond, what, cond)
}

// eventuallyEvery is eventually calling cond every d, for a cond that
// costs the service something (a page over the history database).
func eventuallyEvery(t testing.TB, ctx context.Context, d time.Duration, what string, cond func() bool) {
	t.Helper()
	sharedtest.Eventually(t, ctx, d, what, cond)
}

// metricSum is the sum of every series of the metric family name on the
// Prometheus exposition at url (0 when it has none).
func metricSum(t testing.TB, url, name string) float64 {
	t.Helper()
	fams, err := scrapeFamilies(url)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, v := range byLabel(fams[name], "", nil) {
		sum += v
	}
	return sum
}

// waitLoads polls GET /v1/loads at addr until it answers code: until the
// latest report says what the engine does now (a report pulled before a
// change is served while it is younger than --poll-max-age).
func waitLoads(t testing.TB, addr string, code int) {
	t.Helper()
	eventually(t, testCtx(t, 10*time.Second), fmt.Sprintf("GET /v1/loads to answer %d", code), func() bool {
		resp, err := http.Get("http://" + addr + "/v1/loads")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == code
	})
}

// testCtx bounds every wait of a test.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// recvFrame receives one frame, failing the test on a stream error.
func recvFrame(t testing.TB, r router) *pb.WorkerFrame {
	t.Helper()
	f, err := r.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return f
}

func recvReport(t testing.TB, r router) *pb.LoadReport {
	t.Helper()
	f := recvFrame(t, r)
	if f.GetReport() == nil {
		t.Fatalf("want a report, got %v", f)
	}
	return f.GetReport()
}

// recvError receives frames until a StreamError and returns its code; the
// stream must then end with status OK.
func recvError(t *testing.T, r router) *pb.StreamError {
	t.Helper()
	for {
		f := recvFrame(t, r)
		if e := f.GetError(); e != nil {
			expectCleanEnd(t, r)
			return e
		}
	}
}

// expectCleanEnd asserts the stream ends with status OK (io.EOF).
func expectCleanEnd(t *testing.T, r router) {
	t.Helper()
	for {
		f, err := r.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("stream ended with %v, want status OK", err)
		}
		if f.GetReport() == nil {
			t.Fatalf("unexpected frame before the end: %v", f)
		}
	}
}

// checkServe reads args as `loadreporter serve` does and builds the
// service without starting it, as the binary does before it serves: a
// setting the flags accept but its constructor refuses fails here.
func checkServe(args ...string) error {
	c, err := app.ParseServe(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		return err
	}
	c.Logs.LogLevel = "error"
	m, err := app.InitializeMain(c)
	if err != nil {
		return err
	}
	return m.Close()
}

// appInit builds and starts a Main without registering its Close at
// cleanup (tests of shutdown close it themselves).
func appInit(c app.Config, source ports.SnapshotSource) (*app.Main, error) {
	m, err := app.InitializeMainWithEngine(c, app.Engine{Source: source})
	if err != nil {
		return nil, err
	}
	return m, m.Start()
}
