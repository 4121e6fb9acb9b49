package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// manyRegistrar hands every register a fresh session of its own and
// sends it on registered.
type manyRegistrar struct {
	registered chan *fakeSession
}

func (r *manyRegistrar) Register(routerID string, _, _ int64) (RouterSession, session.Config, error) {
	s := newFakeSession(routerID)
	r.registered <- s
	return s, testConfig, nil
}

func (r *manyRegistrar) ShuttingDown() context.Context { return context.Background() }

// grpcRouter is a router on a stock grpc-go client stream.
type grpcRouter struct {
	t  *testing.T
	st grpc.ClientStream
}

var monitorDesc = &grpc.StreamDesc{StreamName: "Monitor", ClientStreams: true, ServerStreams: true}

// openGRPC opens a Monitor stream on cc with grpc-go's own client.
func openGRPC(t *testing.T, ctx context.Context, cc *grpc.ClientConn) *grpcRouter {
	t.Helper()
	st, err := cc.NewStream(ctx, monitorDesc, loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
	if err != nil {
		t.Fatal(err)
	}
	return &grpcRouter{t: t, st: st}
}

func (r *grpcRouter) send(f *pb.RouterFrame) {
	r.t.Helper()
	if err := r.st.SendMsg(f); err != nil && !errors.Is(err, io.EOF) {
		r.t.Fatalf("send %v: %v", f, err)
	}
}

func (r *grpcRouter) recv() *pb.WorkerFrame {
	r.t.Helper()
	f := &pb.WorkerFrame{}
	if err := r.st.RecvMsg(f); err != nil {
		r.t.Fatalf("receive: %v", err)
	}
	return f
}

// endsWith checks the next frame is a StreamError with code and the
// stream then ends with status OK.
func (r *grpcRouter) endsWith(code string) {
	r.t.Helper()
	if e := r.recv().GetError(); e.GetCode() != code {
		r.t.Fatalf("got error frame %v, want code %s", e, code)
	}
	r.endsOK()
}

// endsOK checks the stream ends with status OK and no further frame.
func (r *grpcRouter) endsOK() {
	r.t.Helper()
	f := &pb.WorkerFrame{}
	if err := r.st.RecvMsg(f); !errors.Is(err, io.EOF) {
		r.t.Fatalf("got %v (%v), want the stream to end with status OK", f, err)
	}
}

// endsWithStatus checks the stream ends with code and no further frame.
func (r *grpcRouter) endsWithStatus(code codes.Code) {
	r.t.Helper()
	f := &pb.WorkerFrame{}
	if err := r.st.RecvMsg(f); status.Code(err) != code {
		r.t.Fatalf("got %v (%v), want the stream to end with status %s", f, err, code)
	}
}

// waitSession waits for the next session reg starts.
func waitSession(t *testing.T, ctx context.Context, reg *manyRegistrar) *fakeSession {
	t.Helper()
	select {
	case s := <-reg.registered:
		return s
	case <-ctx.Done():
		t.Fatalf("waiting for a register: %v", ctx.Err())
		return nil
	}
}

// waitCall waits for the session's next call and checks it is want.
func waitCall(t *testing.T, ctx context.Context, s *fakeSession, want string) {
	t.Helper()
	select {
	case got := <-s.calls:
		if got != want {
			t.Fatalf("%s: call %q, want %q", s.id, got, want)
		}
	case <-ctx.Done():
		t.Fatalf("%s: waiting for %q: %v", s.id, want, ctx.Err())
	}
}

// waitClosedSession waits until the handler closed s.
func waitClosedSession(t *testing.T, ctx context.Context, s *fakeSession) {
	t.Helper()
	select {
	case <-s.closed:
	case <-ctx.Done():
		t.Fatalf("%s: the handler never closed the session: %v", s.id, ctx.Err())
	}
}

// TestNativeMonitorStreamHoldsOneGoroutine: on the native server too, a
// registered router between reports costs its stream one goroutine,
// grpc-go's handler goroutine, which reads the router's frames itself: no
// second one reads them. It runs alone (no t.Parallel): it counts the
// process's goroutines.
func TestNativeMonitorStreamHoldsOneGoroutine(t *testing.T) {
	const n = 50
	ctx := testContext(t)
	reg := &manyRegistrar{registered: make(chan *fakeSession, n)}
	mux := http.NewServeMux()
	mux.Handle(mustMonitor(t, reg, MonitorOptions{}).Handler())
	cc := nativeBridge(t, mux)
	// The connection's own goroutines, on both sides, belong to the
	// baseline: one stream opens it, and ends.
	warm := openGRPC(t, ctx, cc)
	warm.send(registerFrame("warm", 100, 3000))
	if warm.recv().GetRegistered() == nil {
		t.Fatal("the first frame is not the registered ack")
	}
	warm.send(stopFrame)
	warm.endsOK()
	waitClosedSession(t, ctx, waitSession(t, ctx, reg))
	baseMonitor, baseAll := settle(t, ctx, func(m, _ int) bool { return m == 0 })

	routers := make([]*grpcRouter, n)
	sessions := make([]*fakeSession, n)
	for i := range n {
		routers[i] = openGRPC(t, ctx, cc)
		routers[i].send(registerFrame(fmt.Sprintf("r%d", i), 100, 3000))
		if routers[i].recv().GetRegistered() == nil {
			t.Fatalf("r%d: the first frame is not the registered ack", i)
		}
		sessions[i] = waitSession(t, ctx, reg)
	}
	for i, s := range sessions {
		rep := sampleReport()
		rep.SequenceID = uint64(i)
		s.reports <- rep
		s.wake()
	}
	for i, r := range routers {
		if got := r.recv().GetReport(); got.GetSequenceId() != uint64(i) {
			t.Fatalf("r%d: got report %v, want sequence_id %d", i, got, i)
		}
		r.send(keepAliveFrame) // read by the stream's one goroutine
		waitCall(t, ctx, sessions[i], "keep_alive")
	}
	// In all, each stream may hold the server's handler goroutine and the
	// one grpc-go's client keeps for each stream it opens (grpc-go v1.85.0
	// stream.go, newClientStreamWithParams); what earlier tests left
	// winding down only lowers the count.
	ok := func(m, a int) bool { return m-baseMonitor == n && a-baseAll <= 2*n }
	if monitor, all := settle(t, ctx, ok); !ok(monitor, all) {
		t.Fatalf("%d registered native streams hold %d goroutines running Monitor's code and %d in all, want %d and at most %d (one a stream on the server)",
			n, monitor-baseMonitor, all-baseAll, n, 2*n)
	}

	for _, s := range sessions {
		s.end(domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within the lease"))
	}
	for i, r := range routers {
		r.endsWith(domain.CodeLeaseExpired)
		waitClosedSession(t, ctx, sessions[i])
	}
}

// settle waits, within ctx, until the goroutines running Monitor's code
// and those of the whole process satisfy done, unchanged over a few looks
// (a report's writer or a timer's goroutine comes and goes); it returns
// the counts then, or the last ones seen within half of ctx's time left
// (the rest is the test's, whose streams then still live).
func settle(t *testing.T, ctx context.Context, done func(monitor, all int) bool) (int, int) {
	t.Helper()
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	calm, lastM, lastA := 0, -1, -1
	for {
		m, a := monitorGoroutines(), runtime.NumGoroutine()
		if done(m, a) && m == lastM && a == lastA {
			if calm++; calm == 5 {
				return m, a
			}
		} else {
			calm = 0
		}
		lastM, lastA = m, a
		select {
		case <-ctx.Done():
			return m, a
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// TestNativeMonitorEndings: a stock grpc-go router on the native server,
// whose handler is blocked reading its frames, sees every ending as on
// net/http: the session's end or a bad frame as a StreamError then status
// OK, stop as status OK, the router's cancel with its status. A
// middleware's context, which ends as the middleware returns once the
// stream is admitted (the stream is served past the port's handler),
// ends nothing. Each time the handler returns and closes the session.
func TestNativeMonitorEndings(t *testing.T) {
	t.Parallel()
	eachNativeWay(t, func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			end  func(r *grpcRouter, sess *fakeSession, cancelRouter context.CancelFunc)
			want func(r *grpcRouter)
		}{
			{"lease expired", func(_ *grpcRouter, s *fakeSession, _ context.CancelFunc) {
				s.end(domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within the lease"))
			}, func(r *grpcRouter) { r.endsWith(domain.CodeLeaseExpired) }},
			{"replaced", func(_ *grpcRouter, s *fakeSession, _ context.CancelFunc) {
				s.end(domain.Errorf(domain.CodeReplaced, "r1 registered on another stream"))
			}, func(r *grpcRouter) { r.endsWith(domain.CodeReplaced) }},
			{"shutting down", func(_ *grpcRouter, s *fakeSession, _ context.CancelFunc) {
				s.end(domain.Errorf(domain.CodeShuttingDown, "the reporter is shutting down"))
			}, func(r *grpcRouter) { r.endsWith(domain.CodeShuttingDown) }},
			{"half-closed, then the lease", func(r *grpcRouter, s *fakeSession, _ context.CancelFunc) {
				if err := r.st.CloseSend(); err != nil {
					r.t.Fatal(err)
				}
				rep := sampleReport() // the session lives on
				s.reports <- rep
				s.wake()
				if got := r.recv().GetReport(); got.GetSequenceId() != rep.SequenceID {
					r.t.Fatalf("after half-close got %v, want the report", got)
				}
				s.end(domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within the lease"))
			}, func(r *grpcRouter) { r.endsWith(domain.CodeLeaseExpired) }},
			{"stop", func(r *grpcRouter, _ *fakeSession, _ context.CancelFunc) { r.send(stopFrame) },
				func(r *grpcRouter) { r.endsOK() }},
			{"a frame with no payload", func(r *grpcRouter, _ *fakeSession, _ context.CancelFunc) { r.send(emptyFrame) },
				func(r *grpcRouter) { r.endsWith(domain.CodeInvalidArgument) }},
			{"the router cancels", func(_ *grpcRouter, _ *fakeSession, cancelRouter context.CancelFunc) { cancelRouter() },
				func(r *grpcRouter) { r.endsWithStatus(codes.Canceled) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := testContext(t)
				reg := &fakeRegistrar{sess: newFakeSession("r1"), calls: make(chan string, 16)}
				mux := http.NewServeMux()
				mux.Handle(mustMonitor(t, reg, MonitorOptions{}).Handler())
				// A middleware whose context ends as it returns, as most
				// do (a deferred cancel): on the native way it returns
				// once the stream is admitted, and the stream lives on.
				handlerCtxs := make(chan context.Context, 1)
				cc := nativeBridge(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					hctx, cancel := context.WithCancel(r.Context())
					defer cancel()
					handlerCtxs <- hctx
					mux.ServeHTTP(w, r.WithContext(hctx))
				}))
				routerCtx, cancelRouter := context.WithCancel(ctx)
				defer cancelRouter()
				r := openGRPC(t, routerCtx, cc)
				r.send(registerFrame("r1", 100, 3000))
				if r.recv().GetRegistered() == nil {
					t.Fatal("the first frame is not the registered ack")
				}
				var handlerCtx context.Context
				select {
				case handlerCtx = <-handlerCtxs:
				case <-ctx.Done():
					t.Fatal("the handler never started")
				}
				rep := sampleReport()
				reg.sess.reports <- rep
				reg.sess.wake()
				if got := r.recv().GetReport(); got.GetSequenceId() != rep.SequenceID {
					t.Fatalf("got %v, want the report", got)
				}
				r.send(keepAliveFrame) // the handler reads: it waits in its next read
				waitCall(t, ctx, reg.sess, "keep_alive")

				if handlerCtx.Err() == nil {
					t.Error("the middleware has not returned: the stream is served under the port's handler chain")
				}

				tc.end(r, reg.sess, cancelRouter)
				tc.want(r)
				waitClosedSession(t, ctx, reg.sess)
			})
		}
	})
}
