package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/tap"
)

// NativeOptions are the bounds of the native gRPC server, the same the
// port's HTTP server applies to its HTTP/2 connections.
type NativeOptions struct {
	// MaxStreamsPerConn bounds the streams one connection holds open.
	MaxStreamsPerConn int
	// MaxRecvMsgBytes bounds one message a peer sends.
	MaxRecvMsgBytes int
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
	// IdleTimeout closes a connection with no stream open that long.
	IdleTimeout time.Duration
	// PingAfter is how long a connection may be silent before a PING
	// checks that its peer is there; PingTimeout how long the answer may
	// take before the connection is closed (a pulled cable).
	PingAfter, PingTimeout time.Duration
	// Logger receives what the server logs.
	Logger *slog.Logger

	// withoutWriteStatus serves as on a grpc-go whose streams cannot end
	// themselves (tests of the fallback).
	withoutWriteStatus bool
}

func (o NativeOptions) check() error {
	switch {
	case o.MaxStreamsPerConn < 1 || o.MaxStreamsPerConn > math.MaxUint32:
		return fmt.Errorf("MaxStreamsPerConn %d: want 1 to %d", o.MaxStreamsPerConn, uint32(math.MaxUint32))
	case o.MaxRecvMsgBytes < 1:
		return fmt.Errorf("MaxRecvMsgBytes %d: want at least 1", o.MaxRecvMsgBytes)
	case o.MaxHeaderBytes < 1 || o.MaxHeaderBytes > math.MaxUint32:
		return fmt.Errorf("MaxHeaderBytes %d: want 1 to %d", o.MaxHeaderBytes, uint32(math.MaxUint32))
	case o.IdleTimeout <= 0 || o.PingAfter <= 0 || o.PingTimeout <= 0:
		return fmt.Errorf("IdleTimeout %s, PingAfter %s, PingTimeout %s: each must be positive", o.IdleTimeout, o.PingAfter, o.PingTimeout)
	}
	return nil
}

// NewNativeServer returns a grpc-go server that serves native gRPC
// connections through grpc-go's own HTTP/2 transport, every call through
// h, the handler the port's HTTP server serves: access checks, limits and
// bounds are the same on both ways in, and so is every service. A call is
// handed to h as an HTTP/2 request whose body and response are relayed to
// and from the gRPC stream; Monitor instead takes the stream itself (it
// finds it in the request's context), so its reports go out as their one
// shared encoding with no copy per router.
//
// Serve it on the connections whose first request is native gRPC,
// through PooledReads; TLS is the caller's (h sees no client certificate
// on this way in).
func NewNativeServer(h http.Handler, o NativeOptions) (*grpc.Server, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	b := &bridge{h: h, log: o.Logger, withoutWriteStatus: o.withoutWriteStatus}
	if b.log == nil {
		b.log = slog.Default()
	}
	// grpc-go's server takes each connection's write buffer from a pool
	// per flush by default (grpc.SharedWriteBuffer is deprecated for it),
	// so an idle router's connection holds none; TestNativeIdleConnectionHeap
	// checks that it stays so.
	return grpc.NewServer(
		grpc.ForceServerCodecV2(nativeCodec{}),
		grpc.UnknownServiceHandler(b.serve),
		grpc.InTapHandle(b.tap),
		grpc.MaxConcurrentStreams(uint32(o.MaxStreamsPerConn)),
		grpc.MaxRecvMsgSize(o.MaxRecvMsgBytes),
		grpc.MaxHeaderListSize(uint32(o.MaxHeaderBytes)),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: o.IdleTimeout, Time: o.PingAfter, Timeout: o.PingTimeout}),
		// net/http refuses no PING that is answered in turn; routers that
		// keep their connections alive every few seconds must not be sent
		// away with ENHANCE_YOUR_CALM (grpc-go's default wants five
		// minutes between pings).
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	), nil
}

// tap gives each stream a context of its own that the stream's call can
// cancel, until a stream shows it can end itself with a status
// (statusWriter, which the grpc-go in go.mod has): then the tap does
// nothing more, and a relayed call's read or write deadline ends its
// stream through the status instead (nativeCall.cancel), sparing every
// open stream a context and its cancel. A cancelled stream context is
// the fallback for a grpc-go whose streams cannot: it ends a relayed
// call's blocked read and its send waiting for a client that stopped
// reading.
func (b *bridge) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	if b.endsItself.Load() {
		return ctx, nil
	}
	inner, cancel := context.WithCancel(ctx)
	return context.WithValue(inner, streamControlKey{}, &streamControl{outer: ctx, cancel: cancel}), nil
}

type streamControlKey struct{}

// streamControl is what the tap kept of a stream. The context the call's
// handler sees is the one before it, which ends only when the stream does.
type streamControl struct {
	outer  context.Context
	cancel context.CancelFunc
}

func controlFrom(ctx context.Context) *streamControl {
	c, _ := ctx.Value(streamControlKey{}).(*streamControl)
	return c
}

// nativeCodec is the native server's one codec: messages are received as
// bytes (the bridge relays them, Monitor decodes its router frames with
// its own checks), and Monitor's frames are sent as their shared
// encoding.
type nativeCodec struct{}

func (nativeCodec) Name() string { return "proto" }

func (nativeCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case gatedFrame:
		return mem.BufferSlice{m.buf}, nil
	case rawMessage:
		return mem.BufferSlice{mem.SliceBuffer(m)}, nil
	}
	return nil, fmt.Errorf("native codec cannot send %T", v)
}

func (nativeCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *rawMessage:
		*m = data.Materialize()
		return nil
	}
	return fmt.Errorf("native codec cannot receive into %T", v)
}

// rawMessage is a message relayed as its encoding.
type rawMessage []byte

var _ encoding.CodecV2 = nativeCodec{}
