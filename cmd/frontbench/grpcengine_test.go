package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// startTestGRPCEngine serves the gRPC stand-in with messages per stream
// and returns a channel to it.
func startTestGRPCEngine(t *testing.T, messages int) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newGRPCEngine(messages).server()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	cc, err := dialGRPC(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func grpcTestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The unary call comes back echoed and the stream brings its messages and
// OK: what a round counts as a call answered in full.
func TestGRPCEngineEchoesAndStreams(t *testing.T) {
	t.Parallel()
	cc := startTestGRPCEngine(t, 7)
	ctx := grpcTestCtx(t)
	if _, _, err := grpcRequest(ctx, "direct", cc, kindUnary, 7); err != nil {
		t.Errorf("unary: %v", err)
	}
	total, first, err := grpcRequest(ctx, "direct", cc, kindStream, 7)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if first <= 0 || first > total {
		t.Errorf("first message at %v, whole stream %v: want 0 < first ≤ total", first, total)
	}
	var out wrapperspb.BytesValue
	in := wrapperspb.Bytes([]byte("echo me"))
	if err := cc.Invoke(ctx, methodUnary, in, &out); err != nil || string(out.GetValue()) != "echo me" {
		t.Errorf("unary echo: %q, %v", out.GetValue(), err)
	}
}

// A stream with fewer or more messages than asked is a failure, not a
// sample.
func TestGRPCRequestRefusesAStreamOfTheWrongLength(t *testing.T) {
	t.Parallel()
	cc := startTestGRPCEngine(t, 5)
	ctx := grpcTestCtx(t)
	for _, want := range []int{4, 6} {
		_, _, err := grpcRequest(ctx, "front", cc, kindStream, want)
		if err == nil || !strings.Contains(err.Error(), "5 messages and OK, want") {
			t.Errorf("5 messages when %d were expected: %v", want, err)
		}
	}
}

// GetLoads, or any method but the two, is not the engine's: the front
// answers GetLoads itself, so a call reaching the engine would measure the
// wrong thing.
func TestGRPCEngineRefusesOtherMethods(t *testing.T) {
	t.Parallel()
	cc := startTestGRPCEngine(t, 3)
	var out wrapperspb.BytesValue
	err := cc.Invoke(grpcTestCtx(t), "/sglang.grpc.scheduler.SglangScheduler/GetLoads", grpcPrompt, &out)
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("GetLoads at the engine: %v, want UNIMPLEMENTED", err)
	}
}
