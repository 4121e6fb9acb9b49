package cli

import (
	"bytes"
	"context"
	"errors"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/routerflags"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/workertest"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// lines hands a test each line Watch writes (it writes one a Write).
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}

func watchConfig(target string, problems lines) WatchConfig {
	return WatchConfig{Target: target, Problems: problems,
		Router: routerflags.Router{Interval: 250 * time.Millisecond, Lease: 10 * time.Second, RouterID: "watch-test"}}
}

// TestWatchSaysWhyItIsNotConnected: with nothing listening at --target,
// watch says so on its problems writer (stderr) within seconds, in the
// words of the --targets table, and keeps trying until interrupted.
func TestWatchSaysWhyItIsNotConnected(t *testing.T) {
	t.Parallel()
	target := sharedtest.RefusedAddr(t) // nothing listens there

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	problems := make(lines, 100)
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, watchConfig(target, problems), &out) }()
	select {
	case line := <-problems:
		if !strings.HasPrefix(line, target+": disconnected (no registered stream: ") || !strings.Contains(line, "connection refused") {
			t.Errorf("watch said %q", line)
		}
	case <-ctx.Done():
		t.Fatalf("watch said nothing in 5 s about %s, where nothing listens", target)
	}
	cancel()
	if err := <-done; err != nil || out.Len() != 0 {
		t.Fatalf("watch ended with %v, printed %q; want nil and no reports", err, out.String())
	}
}

// scriptedWorker refuses as a worker that wants a token does, then as one
// at --max-sessions, then grants and ends the stream after a report, then
// wants a token again, then grants for good: two of each refusal, so a
// repeated reason shows. Before a call that changes the reason it waits
// until watch has said the one before, so no reason can be missed because
// watch read only the latest view.
type scriptedWorker struct {
	said       lines
	calls, seq atomic.Uint64

	mu    sync.Mutex
	heard []string // what watch said, in order
}

// hear waits (within ctx) until watch has said n lines.
func (w *scriptedWorker) hear(ctx context.Context, n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.heard) < n {
		select {
		case line := <-w.said:
			w.heard = append(w.heard, line)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (w *scriptedWorker) Monitor(ctx context.Context, st *connect.BidiStream[pb.RouterFrame, pb.WorkerFrame]) error {
	n := w.calls.Add(1)
	// Calls 1, 3, 5 (its end) and 6 each bring a new reason; the next
	// call that brings another waits until it was said.
	if said := map[uint64]int{3: 1, 5: 2, 6: 3, 8: 4}[n]; said > 0 {
		if err := w.hear(ctx, said); err != nil {
			return err
		}
	}
	switch {
	case n <= 2, n == 6, n == 7:
		return connect.NewError(connect.CodeUnavailable, errors.New("the reporter is starting"))
	case n <= 4:
		if _, err := st.Receive(); err != nil {
			return err
		}
		refusal := &pb.StreamError{Code: "RESOURCE_EXHAUSTED", Message: "10 sessions are live, the limit is 10"}
		return st.Send(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Error{Error: refusal}})
	}
	if _, err := st.Receive(); err != nil {
		return err
	}
	ack := &pb.RegisterResponse{LeaseTtlMs: 10000, RenewAfterMs: 3000}
	if err := st.Send(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Registered{Registered: ack}}); err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	r := &pb.LoadReport{SourceInstanceId: "fake", SequenceId: w.seq.Add(1), ReportTimeUnixMs: now,
		Status: pb.ReportStatus_REPORT_STATUS_HEALTHY,
		Ranks:  []*pb.RankLoad{{DpRank: 0, SnapshotTimeUnixMs: now, MaxRunningRequests: 8}}}
	if err := st.Send(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: r}}); err != nil {
		return err
	}
	if n == 5 {
		return connect.NewError(connect.CodeUnavailable, errors.New("going away"))
	}
	<-ctx.Done() // watch has its reports and stops
	return nil
}

// TestWatchSaysEachNewReasonOnce: each reason watch is not connected is
// said once however often a retry meets it, before the first grant and
// after one; the reports still go to out.
func TestWatchSaysEachNewReasonOnce(t *testing.T) {
	t.Parallel()
	worker := &scriptedWorker{said: make(lines, 100)}
	addr := workertest.Serve(t, worker)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := watchConfig(addr, worker.said)
	c.Count = 2
	var out bytes.Buffer
	if err := Watch(ctx, c, &out); err != nil {
		t.Fatal(err)
	}
	close(worker.said)
	worker.mu.Lock()
	said := worker.heard
	worker.mu.Unlock()
	for line := range worker.said {
		said = append(said, line)
	}
	want := []string{"unavailable: the reporter is starting", "RESOURCE_EXHAUSTED: 10 sessions are live", "unavailable: going away", "unavailable: the reporter is starting"}
	if len(said) != len(want) {
		t.Fatalf("watch said\n%s\nwant one line for each of %q", strings.Join(said, ""), want)
	}
	for i, line := range said {
		if !strings.HasPrefix(line, c.Target+": disconnected (no registered stream: ") || !strings.Contains(line, want[i]) {
			t.Errorf("line %d: %q; want the reason %q", i+1, line, want[i])
		}
	}
	if strings.Count(out.String(), "registered as ") != 2 || strings.Count(out.String(), " HEALTHY 1 ranks") != 2 {
		t.Errorf("reports:\n%s", out.String())
	}
}

// TestWatchStopsOnAWrongToken: a refused token cannot get better by
// retrying; watch ends naming --auth-token.
func TestWatchStopsOnAWrongToken(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle(loadmonitorv1connect.NewLoadMonitorServiceHandler(refusingMonitor{}))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := Watch(ctx, watchConfig(srv.Listener.Addr().String(), make(lines, 100)), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--auth-token") || !strings.Contains(err.Error(), "missing or wrong bearer token") {
		t.Fatalf("watch with a wrong token: %v", err)
	}
}

type refusingMonitor struct {
	loadmonitorv1connect.UnimplementedLoadMonitorServiceHandler
}

func (refusingMonitor) Monitor(context.Context, *connect.BidiStream[pb.RouterFrame, pb.WorkerFrame]) error {
	return connect.NewError(connect.CodeUnauthenticated, errors.New("missing or wrong bearer token"))
}

// TestWatchHintsAtTLSOnOneSide: a plaintext watch of a TLS port says to
// add --tls, and a --tls watch of a plaintext port to drop it, never the
// other way round. An attempt may end before the answer is read (a TLS
// server closes once it reads a plaintext record, and the client's write
// meets a broken pipe): that reason has no hint, and a later attempt's
// does.
func TestWatchHintsAtTLSOnOneSide(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tls         bool
		want, wrong string
	}{{false, "add --tls)", "drop --tls"}, {true, "(a plaintext port? drop --tls)", "add --tls"}} {
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		if tc.tls {
			srv.Start()
		} else {
			srv.StartTLS()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		problems := make(lines, 100)
		c := watchConfig(srv.Listener.Addr().String(), problems)
		c.Router.TLS, c.Router.Insecure = tc.tls, true
		go func() { _ = Watch(ctx, c, io.Discard) }()
		var said []string
	hint:
		for {
			select {
			case line := <-problems:
				said = append(said, line)
				if strings.Contains(line, tc.wrong) {
					t.Errorf("--tls %t: %q, the wrong hint", tc.tls, line)
				}
				if strings.Contains(line, tc.want) {
					break hint
				}
			case <-ctx.Done():
				t.Errorf("--tls %t: said %q, never the hint %q", tc.tls, said, tc.want)
				break hint
			}
		}
		cancel()
		srv.Close()
	}
}

// TestWatchOfAnHTTPServerSaysSo: --target naming an HTTP/1.1 server (the
// front, or an engine) says so instead of suggesting TLS.
func TestWatchOfAnHTTPServerSaysSo(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	problems := make(lines, 100)
	go func() { _ = Watch(ctx, watchConfig(srv.Listener.Addr().String(), problems), io.Discard) }()
	select {
	case line := <-problems:
		if !strings.Contains(line, "an HTTP/1.1 server answers there") && !strings.Contains(line, "add --tls") {
			t.Errorf("watch of an HTTP/1.1 server: %q", line)
		}
		if strings.Contains(line, "looked like an HTTP/1.1 header") && !strings.Contains(line, "an HTTP/1.1 server answers there") {
			t.Errorf("HTTP/2 saw the HTTP/1.1 answer, yet: %q", line)
		}
	case <-ctx.Done():
		t.Fatal("nothing said")
	}
}
