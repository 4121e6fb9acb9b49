package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// nativeBridge serves h on the native server and returns a grpc-go
// client connection to it.
func nativeBridge(t *testing.T, h http.Handler) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(startNative(t, WithTransportInfo(h)), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestNativeBridgeUnary: a unary call through the native server reaches
// the port's handler with its metadata as headers, its peer and its
// deadline, and the handler's headers and trailers reach the client.
func TestNativeBridgeUnary(t *testing.T) {
	t.Parallel()
	type seen struct {
		token, peer string
		deadline    bool
	}
	got := make(chan seen, 1)
	mux := http.NewServeMux()
	mux.Handle("/test.Echo/Unary", connect.NewUnaryHandler("/test.Echo/Unary",
		func(ctx context.Context, req *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
			_, ok := ctx.Deadline()
			got <- seen{req.Header().Get("Authorization"), req.Peer().Addr, ok}
			res := connect.NewResponse(&emptypb.Empty{})
			res.Header().Set("X-Answer", "42")
			res.Trailer().Set("X-Trailer", "done")
			return res, nil
		}))
	cc := nativeBridge(t, mux)
	ctx, cancel := context.WithTimeout(testContext(t), 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer secret")
	var header, trailer metadata.MD
	if err := cc.Invoke(ctx, "/test.Echo/Unary", &emptypb.Empty{}, &emptypb.Empty{}, grpc.Header(&header), grpc.Trailer(&trailer)); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.token != "Bearer secret" || !strings.HasPrefix(s.peer, "127.0.0.1:") || !s.deadline {
		t.Errorf("the handler saw authorization %q, peer %q, a deadline %v; want the client's token, 127.0.0.1 and a deadline", s.token, s.peer, s.deadline)
	}
	if h, tr := header.Get("x-answer"), trailer.Get("x-trailer"); len(h) != 1 || h[0] != "42" || len(tr) != 1 || tr[0] != "done" {
		t.Errorf("header x-answer %q, trailer x-trailer %q; want 42 and done", h, tr)
	}
}

// TestNativeBridgeErrors: a handler's error keeps its code, message and
// details; a plain-text refusal (what an HTTP middleware writes) becomes
// the code its HTTP status stands for; a path nothing serves is
// UNIMPLEMENTED.
func TestNativeBridgeErrors(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("/test.Echo/Fail", connect.NewUnaryHandler("/test.Echo/Fail",
		func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
			err := connect.NewError(connect.CodeFailedPrecondition, errors.New("not now: 50% done"))
			d, _ := connect.NewErrorDetail(durationpb.New(3 * time.Second))
			err.AddDetail(d)
			return nil, err
		}))
	mux.HandleFunc("/test.Echo/Refused", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "this host is not served", http.StatusForbidden)
	})
	cc := nativeBridge(t, mux)
	ctx := testContext(t)

	err := cc.Invoke(ctx, "/test.Echo/Fail", &emptypb.Empty{}, &emptypb.Empty{})
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || st.Message() != "not now: 50% done" {
		t.Errorf("Fail: %v, want FAILED_PRECONDITION \"not now: 50%% done\"", err)
	}
	if details := st.Details(); len(details) != 1 || details[0].(*durationpb.Duration).AsDuration() != 3*time.Second {
		t.Errorf("Fail: details %v, want one duration of 3s", details)
	}

	err = cc.Invoke(ctx, "/test.Echo/Refused", &emptypb.Empty{}, &emptypb.Empty{})
	if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "this host is not served") {
		t.Errorf("Refused: %v, want PERMISSION_DENIED with the handler's text", err)
	}
	err = cc.Invoke(ctx, "/test.Echo/Nope", &emptypb.Empty{}, &emptypb.Empty{})
	if st := status.Convert(err); st.Code() != codes.Unimplemented {
		t.Errorf("Nope: %v, want UNIMPLEMENTED", err)
	}
}

// TestNativeBridgeStreams: connect's health service answers grpc-go's
// health client through the native server, unary and streaming, and a
// client that cancels its stream ends the handler's.
func TestNativeBridgeStreams(t *testing.T) {
	t.Parallel()
	eachNativeWay(t, func(t *testing.T) {
		t.Parallel()
		checker := grpchealth.NewStaticChecker("test.Echo")
		mux := http.NewServeMux()
		mux.Handle(grpchealth.NewHandler(checker))
		cc := nativeBridge(t, mux)
		health := healthpb.NewHealthClient(cc)
		ctx := testContext(t)
		res, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "test.Echo"})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check: %v, %v; want SERVING", res, err)
		}
		if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
			t.Errorf("Check(nope): %v, want NOT_FOUND", err)
		}
		watchCtx, cancel := context.WithCancel(ctx)
		watch, err := health.Watch(watchCtx, &healthpb.HealthCheckRequest{Service: "test.Echo"})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := watch.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Watch: %v, %v; want SERVING", res, err)
		}
		cancel()
		if _, err := watch.Recv(); status.Code(err) != codes.Canceled {
			t.Errorf("Watch after cancel: %v, want CANCELED", err)
		}
		// goleak (TestMain) checks the handler's goroutine ended with it.
	})
}

// TestNativeBridgeBoundsARequestBody: a read deadline set through the
// response controller, as the port sets one on every request body, cuts
// a client that opens a stream and never sends, and the handler returns.
func TestNativeBridgeBoundsARequestBody(t *testing.T) {
	t.Parallel()
	eachNativeWay(t, func(t *testing.T) {
		t.Parallel()
		returned := make(chan error, 1)
		mux := http.NewServeMux()
		mux.Handle("/test.Echo/Collect", connect.NewClientStreamHandler("/test.Echo/Collect",
			func(_ context.Context, st *connect.ClientStream[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
				for st.Receive() {
				}
				returned <- st.Err()
				return connect.NewResponse(&emptypb.Empty{}), nil
			}))
		bounded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
				t.Errorf("SetReadDeadline: %v", err)
			}
			mux.ServeHTTP(w, r)
		})
		cc := nativeBridge(t, bounded)
		ctx := testContext(t)
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/test.Echo/Collect")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-returned:
			if err == nil {
				t.Error("the handler's read ended without an error; want the deadline's")
			}
		case <-ctx.Done():
			t.Fatal("the handler still reads a body nobody sends, past its deadline")
		}
		if err := st.RecvMsg(&emptypb.Empty{}); status.Code(err) != codes.Canceled || status.Convert(err).Message() != "context canceled" {
			t.Errorf("the client's stream: %v, want it ended with CANCELLED \"context canceled\"", err)
		}
	})
}

// TestNativeBridgeBoundsASend: a deadline set through the response
// controller cuts a send to a client that stopped reading, and the
// handler returns; the client, once it reads what was sent, sees the
// stream end with CANCELLED. The write deadline (Stalls', the shutdown's)
// does for a call whose client finished sending; the read deadline alone
// does for a two-way call whose client stopped sending too (reflection's,
// asking for large descriptors), though its handler waits in a send, not
// a read.
func TestNativeBridgeBoundsASend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		deadline func(*http.ResponseController, time.Time) error
		twoWay   bool
	}{
		{"write deadline", (*http.ResponseController).SetWriteDeadline, false},
		{"read deadline", (*http.ResponseController).SetReadDeadline, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eachNativeWay(t, func(t *testing.T) {
				t.Parallel()
				returned := make(chan error, 1)
				flood := func(send func(*wrapperspb.BytesValue) error) error {
					chunk := &wrapperspb.BytesValue{Value: make([]byte, 16<<10)}
					for {
						if err := send(chunk); err != nil {
							returned <- err
							return err
						}
					}
				}
				mux := http.NewServeMux()
				mux.Handle("/test.Echo/Flood", connect.NewServerStreamHandler("/test.Echo/Flood",
					func(_ context.Context, _ *connect.Request[emptypb.Empty], st *connect.ServerStream[wrapperspb.BytesValue]) error {
						return flood(st.Send)
					}))
				mux.Handle("/test.Echo/Chat", connect.NewBidiStreamHandler("/test.Echo/Chat",
					func(_ context.Context, st *connect.BidiStream[emptypb.Empty, wrapperspb.BytesValue]) error {
						if _, err := st.Receive(); err != nil {
							returned <- err
							return err
						}
						return flood(st.Send)
					}))
				bounded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if err := c.deadline(http.NewResponseController(w), time.Now().Add(100*time.Millisecond)); err != nil {
						t.Errorf("%s: %v", c.name, err)
					}
					mux.ServeHTTP(w, r)
				})
				cc := nativeBridge(t, bounded)
				ctx := testContext(t)
				desc, method := &grpc.StreamDesc{ServerStreams: true}, "/test.Echo/Flood"
				if c.twoWay {
					desc, method = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Echo/Chat"
				}
				st, err := cc.NewStream(ctx, desc, method)
				if err != nil {
					t.Fatal(err)
				}
				if err := st.SendMsg(&emptypb.Empty{}); err != nil {
					t.Fatal(err)
				}
				if !c.twoWay {
					if err := st.CloseSend(); err != nil {
						t.Fatal(err)
					}
				}
				select {
				case err := <-returned:
					if err == nil {
						t.Errorf("the handler's send ended without an error; want the %s's", c.name)
					}
				case <-ctx.Done():
					t.Fatalf("the handler still sends to a client that reads nothing, past its %s", c.name)
				}
				for {
					err := st.RecvMsg(&wrapperspb.BytesValue{})
					if err == nil {
						continue
					}
					if status.Code(err) != codes.Canceled || status.Convert(err).Message() != "context canceled" {
						t.Errorf("the client's stream: %v, want it ended with CANCELLED \"context canceled\"", err)
					}
					break
				}
			})
		})
	}
}

// TestNativeBridgeSurvivesAPanic: a handler that panics ends its call
// with INTERNAL, as net/http would reset its stream, and the server goes
// on serving; one that aborts (http.ErrAbortHandler) ends it quietly.
func TestNativeBridgeSurvivesAPanic(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/test.Echo/Panic", func(http.ResponseWriter, *http.Request) { panic("a bug") })
	mux.HandleFunc("/test.Echo/Abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	checker := grpchealth.NewStaticChecker("test.Echo")
	mux.Handle(grpchealth.NewHandler(checker))
	cc := nativeBridge(t, mux)
	ctx := testContext(t)
	if err := cc.Invoke(ctx, "/test.Echo/Panic", &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.Internal {
		t.Errorf("Panic: %v, want INTERNAL", err)
	}
	if err := cc.Invoke(ctx, "/test.Echo/Abort", &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.Aborted {
		t.Errorf("Abort: %v, want ABORTED", err)
	}
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "test.Echo"}); err != nil {
		t.Errorf("the server after the panics: %v", err)
	}
}

// TestNativeBridgeReadPastItsDeadlineFails: once a relayed call's read
// deadline has passed, its next read fails, although a message waits
// (it was read before the deadline came, as grpc-go's reader took it off
// the connection), and the call ends with CANCELLED.
func TestNativeBridgeReadPastItsDeadlineFails(t *testing.T) {
	t.Parallel()
	eachNativeWay(t, func(t *testing.T) {
		t.Parallel()
		const calls = 16
		pinged := make(chan struct{}, calls)
		reads := make(chan error, calls)
		mux := http.NewServeMux()
		mux.Handle("/test.Echo/Ping", connect.NewUnaryHandler("/test.Echo/Ping",
			func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
				pinged <- struct{}{}
				return connect.NewResponse(&emptypb.Empty{}), nil
			}))
		mux.HandleFunc("/test.Echo/Collect", func(w http.ResponseWriter, r *http.Request) {
			first := make([]byte, 5) // an empty message's envelope
			if _, err := io.ReadFull(r.Body, first); err != nil {
				reads <- fmt.Errorf("the first message: %w", err)
				return
			}
			<-pinged // the second is in grpc-go's buffer
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(-time.Second))
			_, err := io.ReadFull(r.Body, first)
			if err == nil {
				err = errReadNotCut
			} else {
				err = nil
			}
			reads <- err
		})
		cc := nativeBridge(t, mux)
		ctx := testContext(t)
		for range calls {
			st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/test.Echo/Collect")
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := st.SendMsg(&emptypb.Empty{}); err != nil {
					t.Fatal(err)
				}
			}
			// The same connection: grpc-go's server has read the second
			// message once it reads this call.
			if err := cc.Invoke(ctx, "/test.Echo/Ping", &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-reads:
				if err != nil {
					t.Fatal(err)
				}
			case <-ctx.Done():
				t.Fatal("the handler never read")
			}
			if err := st.RecvMsg(&emptypb.Empty{}); status.Code(err) != codes.Canceled {
				t.Fatalf("the client's stream: %v, want CANCELLED", err)
			}
		}
	})
}

var errReadNotCut = errors.New("a read past its deadline returned a message")

// TestNativeBridgeSendPastItsDeadlineFails: once a relayed call's write
// deadline has passed, its next send fails, although the stream has room
// for it, and the call ends with CANCELLED.
func TestNativeBridgeSendPastItsDeadlineFails(t *testing.T) {
	t.Parallel()
	eachNativeWay(t, func(t *testing.T) {
		t.Parallel()
		sent := make(chan error, 1)
		late := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(-time.Second))
			w.Header().Set("Content-Type", "application/grpc")
			_, err := w.Write([]byte{0, 0, 0, 0, 0}) // an empty message
			sent <- err
			if err == nil {
				w.Header().Set("Grpc-Status", "0")
			}
		})
		cc := nativeBridge(t, late)
		ctx := testContext(t)
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/test.Echo/Late")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&emptypb.Empty{}); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-sent:
			if err == nil {
				t.Error("a send past its write deadline succeeded")
			}
		case <-ctx.Done():
			t.Fatal("the handler never sent")
		}
		for {
			err := st.RecvMsg(&emptypb.Empty{})
			if err == nil {
				continue
			}
			if status.Code(err) != codes.Canceled {
				t.Errorf("the client's stream: %v, want CANCELLED", err)
			}
			break
		}
	})
}
