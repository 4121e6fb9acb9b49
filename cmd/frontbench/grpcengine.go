package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Methods of the stand-in engine's gRPC server, named as SGLang's scheduler
// service names a unary call and its generation stream. GetLoads is not
// among them: the front answers it itself, so it would never reach the
// engine.
const (
	methodUnary  = "/sglang.grpc.scheduler.SglangScheduler/GetModelInfo"
	methodStream = "/sglang.grpc.scheduler.SglangScheduler/Generate"
)

// grpcEngine is the stand-in engine's gRPC server: any method is answered
// with protobuf's well-known BytesValue, so that no proto of the bench's
// own is needed. The unary method echoes its request; the stream method
// answers one request with messages small messages (a chunk of a few token
// ids each) and an OK status; every other method is UNIMPLEMENTED.
type grpcEngine struct {
	messages int
	chunk    *wrapperspb.BytesValue
}

func newGRPCEngine(messages int) *grpcEngine {
	return &grpcEngine{messages: messages, chunk: wrapperspb.Bytes(bytes.Repeat([]byte{0x2a}, 32))}
}

// server is a grpc-go server answering every method through handle.
func (e *grpcEngine) server() *grpc.Server {
	return grpc.NewServer(grpc.UnknownServiceHandler(e.handle))
}

func (e *grpcEngine) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	var in wrapperspb.BytesValue
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	switch method {
	case methodUnary:
		return stream.SendMsg(&in)
	case methodStream:
		for range e.messages {
			if err := stream.SendMsg(e.chunk); err != nil {
				return err
			}
		}
		return nil
	}
	return status.Errorf(codes.Unimplemented, "frontbench's engine answers %s and %s, not %s", methodUnary, methodStream, method)
}

// dialGRPC is a stock grpc-go channel to addr (HTTP/2 without TLS), as a
// router in gRPC mode holds one to each worker.
func dialGRPC(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// grpcPrompt is the request of both calls: a small prompt's bytes.
var grpcPrompt = wrapperspb.Bytes([]byte(`{"text":"Say something.","sampling_params":{"max_new_tokens":256}}`))

// grpcRequest makes one call of kind over cc and reads its answer to the
// status: the time to it and, for the stream, to the first message. The
// unary answer must be the request echoed, the stream messages messages
// and an OK status.
func grpcRequest(ctx context.Context, name string, cc *grpc.ClientConn, k kind, messages int) (total, first time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	if k == kindUnary {
		var out wrapperspb.BytesValue
		if err := cc.Invoke(ctx, methodUnary, grpcPrompt, &out); err != nil {
			return 0, 0, fmt.Errorf("%s: unary: %w", name, err)
		}
		if !bytes.Equal(out.GetValue(), grpcPrompt.GetValue()) {
			return 0, 0, fmt.Errorf("%s: unary: %d bytes back, want the %d sent", name, len(out.GetValue()), len(grpcPrompt.GetValue()))
		}
		return time.Since(start), 0, nil
	}
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, methodStream)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: stream: %w", name, err)
	}
	if err := st.SendMsg(grpcPrompt); err != nil {
		return 0, 0, fmt.Errorf("%s: stream: send: %w", name, err)
	}
	if err := st.CloseSend(); err != nil {
		return 0, 0, fmt.Errorf("%s: stream: close send: %w", name, err)
	}
	n := 0
	for {
		var m wrapperspb.BytesValue
		err := st.RecvMsg(&m)
		if errors.Is(err, io.EOF) { // the status, OK
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s: stream: after %d messages: %w", name, n, err)
		}
		n++
		if n == 1 {
			first = time.Since(start)
		}
	}
	if n != messages {
		return 0, 0, fmt.Errorf("%s: stream: %d messages and OK, want %d", name, n, messages)
	}
	return time.Since(start), first, nil
}
