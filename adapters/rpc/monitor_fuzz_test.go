package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// protocolCodes are the codes a StreamError may carry (SPEC §2).
var protocolCodes = map[string]bool{
	domain.CodeInvalidFirstFrame: true, domain.CodeInvalidArgument: true, domain.CodeLeaseExpired: true,
	domain.CodeReplaced: true, domain.CodeResourceExhausted: true, domain.CodeShuttingDown: true,
}

// sessionEnds are the ways the core may end a fuzzed session.
var sessionEnds = []error{
	domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within the lease"),
	domain.Errorf(domain.CodeReplaced, "registered again"),
	domain.Errorf(domain.CodeShuttingDown, "shutting down"),
}

// FuzzMonitorFrames feeds the Monitor handler arbitrary sequences of
// router frames, as raw protobuf, over a real HTTP/2 connection and a
// registrar that behaves like the core, and checks the protocol's
// invariants: no panic; the stream always ends with status OK; a
// StreamError, if any, is the last frame and carries a protocol code; no
// report comes before the ack; the handler closes every session it
// started.
//
// frames is a sequence of chunks, each a length byte and that many bytes
// of one RouterFrame's encoding (what does not decode is part of the
// test). how picks the client protocol and how the core ends the session
// once the router half-closed.
func FuzzMonitorFrames(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed.how, seed.frames)
	}
	reg := &fuzzRegistrar{}
	// A small frame budget, so short inputs reach its end too.
	srv := serve(f, mustMonitor(f, reg, MonitorOptions{FrameBurst: 20, MaxFramesPerSecond: 10}).Handler)
	f.Fuzz(func(t *testing.T, how uint8, frames []byte) {
		p := clientProtocols[int(how)%len(clientProtocols)]
		end := sessionEnds[int(how)/len(clientProtocols)%len(sessionEnds)]
		ctx := testContext(t)
		closed := make(chan struct{})
		it := &fuzzIteration{end: end, closed: closed}
		reg.set(it)
		client := connect.NewClient[rawFrame, pb.WorkerFrame](srv.Client(),
			srv.URL+loadmonitorv1connect.LoadMonitorServiceMonitorProcedure, append([]connect.ClientOption{connect.WithCodec(rawCodec{})}, p.opts...)...)
		st := client.CallBidiStream(ctx)
		got := make(chan []*pb.WorkerFrame, 1)
		var last error
		go func() {
			var out []*pb.WorkerFrame
			for {
				f, err := st.Receive()
				if err != nil {
					last = err
					got <- out
					return
				}
				out = append(out, f)
			}
		}()
		for _, chunk := range splitFrames(frames) {
			if err := st.Send(&rawFrame{chunk}); err != nil {
				break // the handler ended the stream
			}
		}
		_ = st.CloseRequest()
		close(closed)
		var out []*pb.WorkerFrame
		select {
		case out = <-got:
		case <-ctx.Done():
			t.Fatalf("the stream never ended: %v", ctx.Err())
		}
		_ = st.CloseResponse()
		checkStream(t, out, last, it)
	})
}

// checkStream checks the invariants of one stream's frames and end.
func checkStream(t *testing.T, out []*pb.WorkerFrame, last error, it *fuzzIteration) {
	t.Helper()
	if !errors.Is(last, io.EOF) {
		t.Fatalf("the stream ended with %v, want status OK; frames %v", last, out)
	}
	acked := false
	for i, f := range out {
		switch p := f.GetPayload().(type) {
		case *pb.WorkerFrame_Registered:
			if acked {
				t.Fatalf("a second ack: %v", out)
			}
			acked = true
		case *pb.WorkerFrame_Report:
			if !acked {
				t.Fatalf("a report before the ack: %v", out)
			}
		case *pb.WorkerFrame_Error:
			if i != len(out)-1 {
				t.Fatalf("frames after the error: %v", out)
			}
			if !protocolCodes[p.Error.GetCode()] {
				t.Fatalf("error code %q is not the protocol's: %v", p.Error.GetCode(), out)
			}
		default:
			t.Fatalf("frame without payload: %v", out)
		}
	}
	if s := it.session(); s != nil && !s.isClosed() {
		t.Fatal("the handler returned without closing its session")
	}
}

// splitFrames cuts data into chunks, each a length byte and at most that
// many bytes.
func splitFrames(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < 64 {
		n := min(int(data[0]), len(data)-1)
		out = append(out, data[1:1+n])
		data = data[1+n:]
	}
	return out
}

// rawFrame is a RouterFrame's encoding, sent as is.
type rawFrame struct{ b []byte }

// rawCodec sends rawFrames and decodes WorkerFrames.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

// Marshal returns a copy: connect takes ownership of what a codec returns
// and recycles it through its buffer pool, so handing it a slice of the
// fuzz input let the response be read into the input while it was still
// being sent (the "gzip: invalid checksum" finding of 2026-11-30).
func (rawCodec) Marshal(m any) ([]byte, error)   { return bytes.Clone(m.(*rawFrame).b), nil }
func (rawCodec) Unmarshal(b []byte, m any) error { return proto.Unmarshal(b, m.(proto.Message)) }

// fuzzRegistrar starts sessions for the current iteration, refusing what
// the core refuses that a fuzzer finds quickly (a blank router_id).
type fuzzRegistrar struct {
	mu sync.Mutex
	it *fuzzIteration
}

func (r *fuzzRegistrar) set(it *fuzzIteration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.it = it
}

func (r *fuzzRegistrar) ShuttingDown() context.Context { return context.Background() }

func (r *fuzzRegistrar) Register(routerID string, intervalMs, leaseMs int64) (RouterSession, session.Config, error) {
	if err := fuzzValidate(intervalMs, leaseMs); err != nil || routerID == "" {
		return nil, session.Config{}, cmpErr(err, domain.Errorf(domain.CodeInvalidArgument, "router_id is blank"))
	}
	r.mu.Lock()
	it := r.it
	r.mu.Unlock()
	s := &fuzzSession{id: routerID, it: it, reports: make(chan *domain.Report, 1)}
	s.reports <- sampleReport() // ready at once: it must still wait for the ack
	it.started(s)
	return s, testConfig, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func fuzzValidate(intervalMs, leaseMs int64) error {
	if intervalMs < 10 || intervalMs > 60000 || leaseMs <= 0 {
		return domain.Errorf(domain.CodeInvalidArgument, "report_interval_ms %d, lease_ttl_ms %d", intervalMs, leaseMs)
	}
	return nil
}

// fuzzIteration is one fuzzed stream: the session it started, and how the
// core ends it once the router half-closed.
type fuzzIteration struct {
	end    error
	closed <-chan struct{} // closed once the router half-closed

	mu   sync.Mutex
	sess *fuzzSession
}

func (it *fuzzIteration) started(s *fuzzSession) {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.sess = s
}

func (it *fuzzIteration) session() *fuzzSession {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.sess
}

// fuzzSession behaves like a core session: it ends with its iteration's
// end once the router half-closed, and refuses what the core refuses.
type fuzzSession struct {
	id      string
	it      *fuzzIteration
	reports chan *domain.Report

	mu     sync.Mutex
	closed bool
}

func (s *fuzzSession) RouterID() string               { return s.id }
func (s *fuzzSession) Reports() <-chan *domain.Report { return s.reports }
func (s *fuzzSession) KeepAlive() error               { return nil }

// Notify calls f once the session ended; its one report is there from the
// start.
func (s *fuzzSession) Notify(f func()) {
	go func() {
		<-s.it.closed
		f()
	}()
}

// Done ends the session once the router half-closed (the core would end
// it some time later: LEASE_EXPIRED, REPLACED, SHUTTING_DOWN).
func (s *fuzzSession) Done() <-chan struct{} { return s.it.closed }

func (s *fuzzSession) Take() *domain.Report { return takeFrom(s.reports) }
func (s *fuzzSession) Ended() bool          { return isClosed(s.it.closed) }

func (s *fuzzSession) Err() error {
	select {
	case <-s.it.closed:
		return s.it.end
	default:
		return nil
	}
}

func (s *fuzzSession) Update(intervalMs, leaseMs *int64) (session.Config, error) {
	i, l := int64(100), int64(3000)
	if intervalMs != nil {
		i = *intervalMs
	}
	if leaseMs != nil {
		l = *leaseMs
	}
	return testConfig, fuzzValidate(i, l)
}

func (s *fuzzSession) Reregister(routerID string, intervalMs, leaseMs int64) (session.Config, error) {
	if routerID != s.id {
		return session.Config{}, domain.Errorf(domain.CodeInvalidArgument, "router_id %q differs from %q", routerID, s.id)
	}
	return testConfig, fuzzValidate(intervalMs, leaseMs)
}

func (s *fuzzSession) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
}

func (s *fuzzSession) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

type fuzzSeed struct {
	how    uint8
	frames []byte
}

// fuzzSeeds are the protocol's paths: an honest router, each way to end a
// stream, and frames that do not decode.
func fuzzSeeds() []fuzzSeed {
	reg := registerFrame("r1", 100, 3000)
	seq := func(frames ...any) []byte {
		var out []byte
		for _, f := range frames {
			b, ok := f.([]byte)
			if !ok {
				b, _ = proto.Marshal(f.(*pb.RouterFrame))
			}
			out = append(append(out, byte(len(b))), b...)
		}
		return out
	}
	many := []any{reg}
	for range 30 {
		many = append(many, keepAliveFrame)
	}
	return []fuzzSeed{
		{0, nil},
		{0, seq(reg, keepAliveFrame, stopFrame)},
		{1, seq(reg, updateFrame(int64p(200), nil), keepAliveFrame)},
		{2, seq(reg, registerFrame("r1", 200, 5000), stopFrame)},
		{3, seq(reg, registerFrame("r2", 100, 3000))},
		{4, seq(reg, updateFrame(int64p(1), nil))},
		{5, seq(reg, emptyFrame)},
		{6, seq(keepAliveFrame, reg)},
		{7, seq(emptyFrame)},
		{8, seq(registerFrame("", 100, 3000))},
		{9, seq([]byte{0xff, 0xff, 0xff})},
		{10, seq(reg, []byte{0x0a, 0x05, 0x01})},
		{11, seq(many...)},
		{1, seq(reg)},
	}
}
