package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loadreporter/loadreporter/client"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// A router watches its workers with one Fleet and asks it where to send
// each request. (It needs running workers, so it is compiled, not run.)
func Example() {
	fleet, err := client.NewFleet(client.Options{
		RouterID:       "router-1", // one per router process, stable across restarts
		ReportInterval: 200 * time.Millisecond,
		Lease:          10 * time.Second,
		Protocol:       client.ProtocolGRPC,
		BearerToken:    "", // the workers' --auth-token, if any
		Registerer:     prometheus.DefaultRegisterer,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer fleet.Close()
	for _, addr := range []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"} {
		if err := fleet.Add(addr); err != nil {
			log.Fatal(err)
		}
	}

	// Per request: pick a worker (and a rank, for DP-aware routing),
	// saying how large the request is, and say when it is done: until
	// then, or until the worker's next report counts it, the fleet counts
	// it against that worker.
	res := fleet.PickFor(client.Request{Tokens: 1200 + 512}, 1) // prompt + max new tokens
	if len(res.Picks) == 0 {
		log.Print("no workers")
		return
	}
	defer res.Dispatch.Done()
	if res.Degraded {
		log.Printf("routing without fresh load: %s", res.Reason)
	}
	p := res.Picks[0]
	fmt.Printf("send to %s, dp_rank %d (score %.3f, %d requests of ours pending)\n",
		p.Worker.Addr(), p.BestRank, p.Score, p.Pending.Requests)

	// Any time: read a worker's latest view, lock-free.
	v := fleet.Worker("10.0.0.1:8080").View()
	if state := v.StateAt(time.Now()); state != client.Fresh {
		fmt.Printf("%s: %s (%s)\n", v.Addr, state, v.Reason)
		return
	}
	for _, r := range v.Report.GetRanks() {
		fmt.Printf("rank %d: %d running, %d waiting, KV %.0f%%\n",
			r.GetDpRank(), r.GetNumRunningReqs(), r.GetNumWaitingReqs(), r.GetTokenUsage()*100)
	}
}

// A Worker's views can be followed as they change; a slow reader only
// ever misses intermediate views. (Compiled, not run.)
func ExampleWorker_Subscribe() {
	w, err := client.Dial("127.0.0.1:8080", client.Options{RouterID: "router-1"})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	views, stop := w.Subscribe()
	defer stop()
	for {
		select {
		case v, ok := <-views:
			if !ok { // the Worker stopped: Err says why (nil after Close)
				log.Print(w.Err())
				return
			}
			fmt.Printf("%s %s #%d\n", v.Addr, v.State, v.Report.GetSequenceId())
		case <-ctx.Done():
			return
		}
	}
}

// Score puts running, waiting and queued prefill work against capacity.
func ExampleScore() {
	report := &pb.LoadReport{Ranks: []*pb.RankLoad{
		{DpRank: 0, NumRunningReqs: 64, NumWaitingReqs: 0, MaxRunningRequests: 128, MaxTotalNumTokens: 100_000},
		{DpRank: 1, NumRunningReqs: 128, NumWaitingReqs: 32, MaxRunningRequests: 128,
			NumWaitingUncachedTokens: 25_000, MaxTotalNumTokens: 100_000},
	}}
	score, best := client.Score(report)
	// Rank 0: 64 requests, nothing queued; rank 1: 25 000 prompt tokens
	// queued behind 160 requests.
	fmt.Printf("rank 0 %.0f, rank 1 %.0f, worker %.0f, best rank %d\n",
		client.RankScore(report.Ranks[0]), client.RankScore(report.Ranks[1]), score, best)
	// Output: rank 0 64, rank 1 25160, worker 12612, best rank 0
}
