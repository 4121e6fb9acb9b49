package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// TestSGLangLoadStatPublisherFeedsTheZMQSource: SGLang's own LoadStat
// publisher (sglang.srt.managers.scheduler_components.load_publisher from
// the published wheel, run by tests/peers/loadstat_publisher.py) publishes
// two ranks' loads, and `serve --source sglang-zmq --zmq-endpoint …
// --dp-size 2` reports them, in both shapes SGLang has sent:
//
//   - 0.5.19: ["LoadStat", num_running_reqs, num_waiting_reqs, num_tokens,
//     max_total_num_tokens, attn_dp_rank], six values; what it lacks
//     (max_running_requests) comes from --zmq-max-running-requests, and
//     num_total_tokens and num_waiting_uncached_tokens stay 0;
//   - 0.5.20 and later (0.5.23 here): five more, num_waiting_uncached_tokens,
//     num_total_tokens, max_running_requests and two cumulative prefill
//     counters, eleven values; the first three are reported.
//
// Shapes as in the wheels' load_publisher.py (class LoadStat; num_tokens is
// the snapshot's num_used_tokens, publish_load_stat).
func TestSGLangLoadStatPublisherFeedsTheZMQSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version string
		values  int // LoadStat's wire length, the tag included
		extra   []string
	}{
		{"0.5.19", 6, []string{"--zmq-max-running-requests", "128"}},
		{"0.5.23", 11, nil},
	} {
		t.Run(tc.version, func(t *testing.T) {
			venv := needPeer(t, "sglang-"+tc.version)
			base := sharedtest.ConsecutivePorts(t, 2)
			pub := startPeer(t, venv, "python", "peers/loadstat_publisher.py", strconv.Itoa(base), "2")
			ready := strings.Fields(pub.line(t, "ready ", 20*time.Second))
			if len(ready) != 3 || ready[1] != tc.version || len(strings.Split(ready[2], ","))+1 != tc.values {
				t.Fatalf("publisher says %q; want SGLang %s, whose LoadStat has %d values", ready, tc.version, tc.values)
			}
			// Each rank's snapshot, as the scheduler's LoadSnapshot holds it.
			snaps := []map[string]int64{
				{"rank": 0, "num_running_reqs": 7, "num_waiting_reqs": 3, "num_used_tokens": 41000, "max_total_num_tokens": 200000,
					"num_waiting_uncached_tokens": 2048, "num_total_tokens": 43048, "max_running_requests": 64},
				{"rank": 1, "num_running_reqs": 2, "num_waiting_reqs": 0, "num_used_tokens": 9000, "max_total_num_tokens": 200000,
					"num_waiting_uncached_tokens": 0, "num_total_tokens": 9000, "max_running_requests": 64},
			}
			for _, s := range snaps {
				b, _ := json.Marshal(s)
				if _, err := io.WriteString(pub.stdin, string(b)+"\n"); err != nil {
					t.Fatal(err)
				}
			}

			args := append([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--source", "sglang-zmq",
				"--zmq-endpoint", fmt.Sprintf("tcp://127.0.0.1:%d", base), "--dp-size", "2", "--history-interval", "0"}, tc.extra...)
			c, err := app.ParseServe(args, func(string) string { return "" }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			c.Server.ShutdownGrace = 5 * time.Second
			m := startMain(t, c, nil)
			r := openGRPC(t, testCtx(t, 20*time.Second), m.Addr())
			sendOK(t, r, registerFrame("loadstat-"+tc.version, 100, 10000))
			recvFrame(t, r) // registered
			var rep *pb.LoadReport
			for rep = recvReport(t, r); rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY; rep = recvReport(t, r) {
				// UNREACHABLE until both sockets have spoken (SGLang re-sends an
				// unchanged stat once a second)
			}
			if len(rep.GetRanks()) != 2 {
				t.Fatalf("report has %d ranks: %v", len(rep.GetRanks()), rep)
			}
			for i, rk := range rep.GetRanks() {
				s := snaps[i]
				want := &pb.RankLoad{
					DpRank: int32(i), NumRunningReqs: s["num_running_reqs"], NumWaitingReqs: s["num_waiting_reqs"],
					NumUsedTokens: s["num_used_tokens"], MaxTotalNumTokens: s["max_total_num_tokens"],
					TokenUsage: float64(s["num_used_tokens"]) / float64(s["max_total_num_tokens"]), MaxRunningRequests: 128,
				}
				if tc.values == 11 {
					want.NumWaitingUncachedTokens = s["num_waiting_uncached_tokens"]
					want.NumTotalTokens = s["num_total_tokens"]
					want.MaxRunningRequests = s["max_running_requests"]
				}
				got := &pb.RankLoad{
					DpRank: rk.GetDpRank(), NumRunningReqs: rk.GetNumRunningReqs(), NumWaitingReqs: rk.GetNumWaitingReqs(),
					NumUsedTokens: rk.GetNumUsedTokens(), MaxTotalNumTokens: rk.GetMaxTotalNumTokens(), TokenUsage: rk.GetTokenUsage(),
					MaxRunningRequests: rk.GetMaxRunningRequests(), NumWaitingUncachedTokens: rk.GetNumWaitingUncachedTokens(),
					NumTotalTokens: rk.GetNumTotalTokens(),
				}
				if !proto.Equal(got, want) {
					t.Errorf("rank %d:\n got %v\nwant %v", i, got, want)
				}
			}
			sendOK(t, r, stopFrame)
			expectCleanEnd(t, r)
		})
	}
}
