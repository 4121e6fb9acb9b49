package tests

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkReceiptAge measures how old the load a router receives is: the
// time from the engine first holding a value to a router receiving it, at
// 100 ms, for sglang-http (pulled once per fire) and sglang-zmq (pushed by
// the engine, read from the cache at each fire), against the same stand-in
// engine: a new value every 7 ms (not a divisor of 100 ms, so the fire's
// phase against the engine's moves), and /v1/loads answering after a
// scheduler round trip, reading its load halfway: 4 ms for an idle
// scheduler, 40 ms for a busy one. Run it with
//
//	go test ./tests -run '^$' -bench ReceiptAge -benchtime 1x
//
// and read the rows side by side (age-p50-ms, age-p99-ms).
func BenchmarkReceiptAge(b *testing.B) {
	for _, tc := range []struct {
		source string
		rtt    time.Duration
	}{
		{"sglang-http", 4 * time.Millisecond},
		{"sglang-http", 40 * time.Millisecond},
		{"sglang-zmq", 4 * time.Millisecond},
		{"sglang-zmq", 40 * time.Millisecond},
	} {
		b.Run(fmt.Sprintf("%s/rtt=%s", tc.source, tc.rtt), func(b *testing.B) {
			engine := newZMQEngine(b, 2, 7*time.Millisecond, tc.rtt)
			c := testConfig()
			c.Source.Name, c.Source.EngineURL = tc.source, engine.http.URL
			c.Source.ZMQ.DetailInterval = time.Second
			c.History.Interval = 0
			m := startMain(b, c, nil)
			var ages []time.Duration
			for range b.N {
				ages = append(ages, receiptAges(b, engine, m.Addr(), 100)...)
			}
			slices.Sort(ages)
			b.ReportMetric(ms(ages[len(ages)/2]), "age-p50-ms")
			b.ReportMetric(ms(ages[len(ages)*99/100]), "age-p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// receiptAges registers one router at 100 ms and returns, for n HEALTHY
// reports, how long before receipt the engine first held the load it
// carries.
func receiptAges(b *testing.B, engine *zmqEngine, addr string, n int) []time.Duration {
	ctx := testCtx(b, time.Duration(n)*time.Second)
	r := openGRPC(b, ctx, addr)
	if err := r.Send(registerFrame(fmt.Sprintf("age-%d", time.Now().UnixNano()), 100, 60000)); err != nil {
		b.Fatal(err)
	}
	recvFrame(b, r) // registered
	var ages []time.Duration
	for len(ages) < n {
		rep := recvReport(b, r)
		now := time.Now()
		if len(rep.GetRanks()) == 0 {
			if len(ages) > 0 {
				b.Fatalf("%s: %s", rep.GetStatus(), rep.GetLastError())
			}
			continue // before the sockets were found
		}
		if age, ok := engine.since(rep.GetRanks()[0].GetNumWaitingReqs(), now); ok {
			ages = append(ages, age)
		}
	}
	_ = r.Send(stopFrame)
	return ages
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
