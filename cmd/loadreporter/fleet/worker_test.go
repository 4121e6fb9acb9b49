package fleet

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/workertest"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// reportingWorker is a worker of our own (serveWorker) that acknowledges
// every registration and sends a report every 10 ms, of ranks ranks and
// with worker as its metadata: the reports a test needs large (to fill a
// reader's window at once) or hostile (megabytes of model name), which a
// real worker does not send.
type reportingWorker struct {
	ranks  int
	worker *pb.Worker
	// lastError, when set, is every report's last_error (with a STALE
	// status, which a report may carry with its ranks).
	lastError string
}

// serveWorker serves g on h2c at a loopback address until the test ends:
// it grants a lease of 30 s and reports every 10 ms.
func serveWorker(t *testing.T, g *reportingWorker) string {
	t.Helper()
	w := &workertest.Reporting{Grant: &pb.RegisterResponse{LeaseTtlMs: 30_000, RenewAfterMs: 10_000},
		Every: 10 * time.Millisecond, Report: g.report}
	return workertest.Serve(t, w, connect.WithReadMaxBytes(1<<20))
}

// report is g's report seq, stamped now.
func (g *reportingWorker) report(seq uint64) *pb.LoadReport {
	now := time.Now().UnixMilli()
	r := &pb.LoadReport{SourceInstanceId: "fake", SequenceId: seq, ReportTimeUnixMs: now, Worker: g.worker,
		Status: pb.ReportStatus_REPORT_STATUS_HEALTHY}
	if g.lastError != "" {
		r.Status, r.LastError = pb.ReportStatus_REPORT_STATUS_STALE, proto.String(g.lastError)
	}
	for k := range g.ranks {
		r.Ranks = append(r.Ranks, &pb.RankLoad{DpRank: int32(k), SnapshotTimeUnixMs: now, NumRunningReqs: 3,
			MaxRunningRequests: 64, NumUsedTokens: 1000, MaxTotalNumTokens: 4000, TokenUsage: 0.25, GenThroughput: 100})
	}
	return r
}

// startMain runs the fleet view over targets with flags, on a loopback
// port, logging to logs (nil: nowhere), until the test ends.
func startMain(t *testing.T, targets []string, logs io.Writer, flags ...string) *Main {
	t.Helper()
	c, err := Parse(append([]string{"--targets", strings.Join(targets, ","), "--listen", "127.0.0.1:0", "--interval", "20ms"}, flags...),
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if logs == nil {
		logs = io.Discard
	}
	c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	sharedtest.Start(t, m)
	return m
}

// testCtx is a context the test's waits end with.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 10 ms until it holds, failing the test when
// ctx ends first.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	sharedtest.Eventually(t, ctx, 10*time.Millisecond, what, cond)
}

// waitFresh waits until every worker of m is Fresh.
func waitFresh(t *testing.T, ctx context.Context, m *Main) {
	t.Helper()
	eventually(t, ctx, "every worker fresh", func() bool {
		for _, v := range m.fleet.Views() {
			if v.StateAt(time.Now()) != client.Fresh {
				return false
			}
		}
		return true
	})
}
