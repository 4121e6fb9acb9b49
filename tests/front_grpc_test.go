package tests

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim"
	schedulerpb "github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
)

// startGRPCEngine runs the simulated engine with SGLang's gRPC scheduler
// service, as an engine in gRPC mode (SMG's default connection mode).
func startGRPCEngine(t *testing.T) *enginesim.Main {
	t.Helper()
	c := enginesim.DefaultConfig()
	c.Listen, c.GRPCListen = "127.0.0.1:0", "127.0.0.1:0"
	c.Params.DPSize = 2
	e, err := enginesim.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// grpcConn is a stock grpc-go channel to addr.
func grpcConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestGRPCFrontAnswersGetLoadsAndPassesTheScheduler: at a gRPC worker's
// address, GetLoads is answered from the shared pull in SGLang's shape
// (read here by SMG's rules: Ok with loads non-empty, else no load), and
// the rest of the scheduler service — a Generate stream of tokens, the
// health check — reaches the engine unchanged.
func TestGRPCFrontAnswersGetLoadsAndPassesTheScheduler(t *testing.T) {
	t.Parallel()
	e := startGRPCEngine(t)
	c := testConfig()
	c.Source.Name, c.Source.EngineURL, c.Front.Listen = "sglang-grpc", e.GRPCAddr(), "127.0.0.1:0"
	m := startMain(t, c, nil)
	cc := grpcConn(t, m.FrontAddr())
	ctx := testCtx(t, 20*time.Second)

	// SMG's request: include core, disagg, queues and memory, no dp_rank
	// (crates/grpc_client/src/sglang_scheduler.rs in lightseekorg/smg).
	req := &schedulerpb.GetLoadsRequest{Include: []string{"core", "disagg", "queues", "memory"}}
	var loads schedulerpb.GetLoadsResponse
	eventually(t, ctx, "GetLoads through the front", func() bool { // UNAVAILABLE before the first fire
		err := cc.Invoke(ctx, schedulerconnect.SglangSchedulerGetLoadsProcedure, req, &loads)
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Fatalf("GetLoads through the front: %v", err)
		}
		return err == nil
	})
	// SMG's From<GetLoadsResponse> for WorkerLoadResponse keeps timestamp,
	// dp_rank_count and loads; an Ok with no loads reads as no load.
	if len(loads.GetLoads()) != 2 || loads.GetDpRankCount() != 2 || loads.GetTimestamp() == "" ||
		loads.GetLoads()[0].GetMaxTotalNumTokens() <= 0 || loads.GetLoads()[0].GetMaxRunningRequests() <= 0 {
		t.Fatalf("GetLoads as SMG reads it: %v", &loads)
	}

	// Generation passes through as a server stream, chunk by chunk.
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, schedulerconnect.SglangSchedulerGenerateProcedure)
	if err != nil {
		t.Fatal(err)
	}
	gen := &schedulerpb.GenerateRequest{RequestId: "front-1", Stream: true,
		Tokenized:      &schedulerpb.TokenizedInput{InputIds: []uint32{1, 2, 3, 4, 5, 6, 7, 8}},
		SamplingParams: &schedulerpb.SamplingParams{MaxNewTokens: proto.Uint32(6)}}
	if err := st.SendMsg(gen); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	chunks, complete := 0, false
	for {
		var r schedulerpb.GenerateResponse
		err := st.RecvMsg(&r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Generate through the front: %v", err)
		}
		if r.GetRequestId() != "front-1" {
			t.Fatalf("request id %q", r.GetRequestId())
		}
		if r.GetChunk() != nil {
			chunks++
		}
		complete = complete || r.GetComplete() != nil
	}
	if chunks == 0 || !complete {
		t.Fatalf("Generate: %d chunks, complete %t", chunks, complete)
	}
	var hc schedulerpb.HealthCheckResponse
	if err := cc.Invoke(ctx, schedulerconnect.SglangSchedulerHealthCheckProcedure, &schedulerpb.HealthCheckRequest{}, &hc); err != nil || !hc.GetHealthy() {
		t.Fatalf("HealthCheck through the front: %v %v", &hc, err)
	}
}

// echoEngine is a gRPC engine that answers every method: it echoes the
// request's x-request-id as a header and a trailer, says what deadline it
// saw, streams back as many messages as the request asks, and waits for
// release (or the call's end) before the last when hold is set.
type echoEngine struct {
	addr     string
	release  chan struct{}
	canceled chan string
	started  chan struct{}
}

func startEchoEngine(t *testing.T) *echoEngine {
	t.Helper()
	e := &echoEngine{release: make(chan struct{}), canceled: make(chan string, 2000), started: make(chan struct{}, 2000)}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		md, _ := metadata.FromIncomingContext(stream.Context())
		var in wrapperspb.StringValue
		if err := stream.RecvMsg(&in); err != nil {
			return err
		}
		left := "none"
		if d, ok := stream.Context().Deadline(); ok {
			left = time.Until(d).Round(time.Second).String()
		}
		_ = stream.SetHeader(metadata.Pairs("x-echo-request-id", strings.Join(md.Get("x-request-id"), ","), "x-deadline", left))
		stream.SetTrailer(metadata.Pairs("x-trailer", "end of "+method))
		var n int
		hold := false
		switch {
		case strings.HasPrefix(in.GetValue(), "fail"):
			return status.Error(codes.ResourceExhausted, "the engine is busy")
		case strings.HasPrefix(in.GetValue(), "hold"):
			hold = true
			n = 2
		default:
			_, _ = fmt.Sscan(in.GetValue(), &n)
		}
		for i := range n {
			if hold && i == n-1 {
				e.started <- struct{}{}
				select {
				case <-e.release:
				case <-stream.Context().Done():
					e.canceled <- method
					return stream.Context().Err()
				}
			}
			if err := stream.SendMsg(wrapperspb.String(fmt.Sprintf("message %d of %s", i, method))); err != nil {
				return err
			}
		}
		return nil
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	e.addr = ln.Addr().String()
	return e
}

// TestGRPCFrontPassesCallsUnchanged: metadata, trailers, statuses,
// deadlines and cancellation cross the front, and a 256-message stream
// arrives whole and in order; 1 000 streams held at once all complete,
// and the front's goroutines go back down after them. It runs alone (no
// t.Parallel): the goroutines it counts are the whole process's.
func TestGRPCFrontPassesCallsUnchanged(t *testing.T) {
	e := startEchoEngine(t)
	c := testConfig()
	c.Front.Listen, c.Front.EngineURL = "127.0.0.1:0", "grpc://"+e.addr
	m := startMain(t, c, &countingEngine{ranks: 2})
	cc := grpcConn(t, m.FrontAddr())
	const method = "/sglang.grpc.scheduler.SglangScheduler/Generate"
	call := func(ctx context.Context, arg string) (grpc.ClientStream, error) {
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
		if err != nil {
			return nil, err
		}
		if err := st.SendMsg(wrapperspb.String(arg)); err != nil {
			return nil, err
		}
		return st, st.CloseSend()
	}

	t.Run("metadata, trailers, deadline, 256 messages", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), "x-request-id", "r-42"), 30*time.Second)
		defer cancel()
		st, err := call(ctx, "256")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 256 {
			var msg wrapperspb.StringValue
			if err := st.RecvMsg(&msg); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if want := fmt.Sprintf("message %d of %s", i, method); msg.GetValue() != want {
				t.Fatalf("message %d: %q, want %q", i, msg.GetValue(), want)
			}
		}
		if err := st.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
			t.Fatalf("end: %v", err)
		}
		h, _ := st.Header()
		if h.Get("x-echo-request-id")[0] != "r-42" || h.Get("x-deadline")[0] != "30s" {
			t.Errorf("headers %v: want the request id echoed and the client's 30 s deadline seen", h)
		}
		if tr := st.Trailer().Get("x-trailer"); len(tr) != 1 || tr[0] != "end of "+method {
			t.Errorf("trailer %v", st.Trailer())
		}
	})

	t.Run("a status passes", func(t *testing.T) {
		st, err := call(t.Context(), "fail")
		if err != nil {
			t.Fatal(err)
		}
		err = st.RecvMsg(new(wrapperspb.StringValue))
		if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != "the engine is busy" {
			t.Fatalf("engine's status through the front: %v", err)
		}
	})

	t.Run("a cancelled client cancels the engine's call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		st, err := call(ctx, "hold")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatal(err)
		}
		<-e.started
		cancel()
		select {
		case got := <-e.canceled:
			if got != method {
				t.Fatalf("cancelled %q", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the engine's call was not cancelled")
		}
	})

	t.Run("1 000 streams at once", func(t *testing.T) {
		before := runtime.NumGoroutine()
		const n = 1000
		ctx := testCtx(t, 60*time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				st, err := call(ctx, "hold")
				if err == nil {
					err = st.RecvMsg(new(wrapperspb.StringValue))
				}
				if err == nil {
					err = st.RecvMsg(new(wrapperspb.StringValue))
				}
				if err == nil {
					if err = st.RecvMsg(new(wrapperspb.StringValue)); errors.Is(err, io.EOF) {
						err = nil
					}
				}
				errs <- err
			})
		}
		for range n {
			select {
			case <-e.started:
			case <-ctx.Done():
				t.Fatal("not every stream reached the engine")
			}
		}
		close(e.release) // every stream was held open at once
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a held stream: %v", err)
			}
		}
		settled := testCtx(t, 10*time.Second)
		eventually(t, settled, fmt.Sprintf("goroutines back to %d+50 after the streams ended", before), func() bool {
			return runtime.NumGoroutine() <= before+50
		})
	})
}

// TestGRPCFrontWithTheEngineDown: a call passed to a dead engine is
// UNAVAILABLE naming it; GetLoads keeps answering, UNAVAILABLE with the
// report's UNREACHABLE reason.
func TestGRPCFrontWithTheEngineDown(t *testing.T) {
	t.Parallel()
	dead := sharedtest.RefusedAddr(t)
	c := testConfig()
	c.Source.Name, c.Source.EngineURL, c.Front.Listen = "sglang-grpc", dead, "127.0.0.1:0"
	m := startMain(t, c, nil)
	cc := grpcConn(t, m.FrontAddr())
	ctx := testCtx(t, 10*time.Second)
	var hc schedulerpb.HealthCheckResponse
	err := cc.Invoke(ctx, schedulerconnect.SglangSchedulerHealthCheckProcedure, &schedulerpb.HealthCheckRequest{}, &hc)
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "engine http://"+dead+" did not answer") {
		t.Fatalf("a call to a dead engine: %v", err)
	}
	var loads schedulerpb.GetLoadsResponse
	err = cc.Invoke(ctx, schedulerconnect.SglangSchedulerGetLoadsProcedure, &schedulerpb.GetLoadsRequest{Include: []string{"core"}}, &loads)
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "UNREACHABLE") {
		t.Fatalf("GetLoads with the engine down: %v", err)
	}
}

// TestTheFrontOverTLS: with --front-tls the worker's address speaks TLS,
// HTTP/1.1 and HTTP/2 (gRPC over TLS too), with the reporter's
// certificate, while the engine behind stays plaintext.
func TestTheFrontOverTLS(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	e := newStandInEngine(t)
	c := testConfig()
	c.Source.Name, c.Source.EngineURL, c.Front.Listen, c.Front.TLS = "sglang-http", e.srv.URL, "127.0.0.1:0", true
	c.Security.TLSCert, c.Security.TLSKey = pki.certFile, pki.keyFile
	m := startMain(t, c, nil)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Get("https://" + m.FrontAddr() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || !strings.Contains(string(b), "stand-in") {
		t.Fatalf("over TLS: HTTP/%d %d %q", resp.ProtoMajor, resp.StatusCode, b)
	}
	// A plaintext client is not served on a TLS front.
	if resp, err := http.Get("http://" + m.FrontAddr() + "/v1/models"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plaintext on a TLS front: %d", resp.StatusCode)
		}
	}
	if err := checkServe("--front-listen", ":30000", "--engine-url", "http://127.0.0.1:1", "--source", "sglang-http", "--front-tls"); err == nil ||
		!strings.Contains(err.Error(), "--front-tls needs --tls-cert") {
		t.Fatalf("--front-tls without a certificate: %v", err)
	}
}
