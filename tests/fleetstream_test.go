package tests

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
)

// TestFleetStream: loadreporter.v1.FleetService/WatchFleet, over Connect
// on HTTP/1.1 (what the page speaks) and gRPC on unencrypted HTTP/2,
// sends the whole fleet first, then only views that changed: each worker
// it names again has a new report or a new state, never the view it sent
// last. The worker put into error mode comes as unreachable with the
// reason, and the others stay fresh. Closing the fleet command ends the
// stream.
func TestFleetStream(t *testing.T) {
	t.Parallel()
	_, addrs := startWorkers(t, 3)
	sorted := slices.Clone(addrs)
	sort.Strings(sorted)
	for _, tc := range []struct {
		name string
		opts []connect.ClientOption
		http *http.Client
	}{
		{"connect over HTTP/1.1", nil, &http.Client{}},
		{"grpc over h2c", []connect.ClientOption{connect.WithGRPC()}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, addrs)
			ctx := testCtx(t, 20*time.Second)
			hc := tc.http
			if hc == nil {
				hc = h2cClient(t)
			}
			fc := loadreporterv1connect.NewFleetServiceClient(hc, "http://"+f.Addr(), tc.opts...)
			st, err := fc.WatchFleet(ctx, connect.NewRequest(&lrv1.WatchFleetRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if !st.Receive() {
				t.Fatalf("no first message: %v", st.Err())
			}
			first := st.Msg()
			if !slices.Equal(first.GetTargets(), sorted) || len(first.GetWorkers()) != 3 {
				t.Fatalf("first message: %v", first)
			}
			type shown struct {
				seq   uint64
				state lrv1.FleetWorkerState
			}
			last := map[string]shown{}
			for _, w := range first.GetWorkers() {
				last[w.GetTarget()] = shown{w.GetReport().GetSequenceId(), w.GetState()}
			}
			// until every worker has been seen fresh, then addrs[1] unreachable
			errorMode, messages := false, 0
			for st.Receive() {
				msg := st.Msg()
				messages++
				if !slices.Equal(msg.GetTargets(), sorted) {
					t.Fatalf("targets %v", msg.GetTargets())
				}
				for _, w := range msg.GetWorkers() {
					now := shown{w.GetReport().GetSequenceId(), w.GetState()}
					if now == last[w.GetTarget()] {
						t.Fatalf("message %d resends %s's view unchanged (%+v)", messages, w.GetTarget(), now)
					}
					last[w.GetTarget()] = now
				}
				allFresh := true
				for _, a := range addrs {
					allFresh = allFresh && last[a].state == lrv1.FleetWorkerState_FLEET_WORKER_STATE_FRESH
				}
				if !errorMode && allFresh && msg.GetFreshWorkers() == 3 {
					setSimMode(t, addrs[1], "error")
					errorMode = true
				}
				if errorMode && last[addrs[1]].state == lrv1.FleetWorkerState_FLEET_WORKER_STATE_UNREACHABLE {
					w := workerIn(msg, addrs[1])
					if w.GetReport().GetStatus().String() != "REPORT_STATUS_UNREACHABLE" || len(w.GetReport().GetRanks()) != 0 ||
						!strings.Contains(w.GetReason(), "UNREACHABLE") || msg.GetFreshWorkers() != 2 {
						t.Fatalf("the error worker: %v (fresh %d)", w, msg.GetFreshWorkers())
					}
					break
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if !errorMode || last[addrs[1]].state != lrv1.FleetWorkerState_FLEET_WORKER_STATE_UNREACHABLE {
				t.Fatalf("stream ended before %s turned unreachable: %+v", addrs[1], last)
			}
			t.Logf("%d messages after the first", messages)
			setSimMode(t, addrs[1], "normal")

			closed := make(chan error, 1)
			go func() { closed <- f.Close() }()
			for st.Receive() { // drain until the fleet command ends the stream
			}
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("fleet close with a stream open: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("the fleet command did not close with a stream open")
			}
		})
	}
}

// workerIn is target's entry in msg, or nil.
func workerIn(msg *lrv1.WatchFleetResponse, target string) *lrv1.FleetWorker {
	for _, w := range msg.GetWorkers() {
		if w.GetTarget() == target {
			return w
		}
	}
	return nil
}
