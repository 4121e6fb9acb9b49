package tests

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// zmqEngine stands in for an SGLang engine started with
// --load-publish-endpoint: one PUB socket per rank on consecutive ports
// publishing LoadStat every period (the engine sends changes at once and
// unchanged values about once a second; here every message carries a new
// value), GET /server_info naming the sockets, and GET /v1/loads (the
// detail pull) answering after loadsDelay, the scheduler round trip an
// HTTP pull pays.
type zmqEngine struct {
	base       int
	ranks      int
	loadsDelay time.Duration
	// value is the load every rank publishes as num_waiting_reqs (a count
	// with no capacity to exceed); set[v] is when the engine first held v.
	value atomic.Int64
	mu    sync.Mutex
	set   map[int64]time.Time
	http  *httptest.Server
}

func newZMQEngine(t testing.TB, ranks int, period, loadsDelay time.Duration) *zmqEngine {
	t.Helper()
	e := &zmqEngine{ranks: ranks, loadsDelay: loadsDelay, set: map[int64]time.Time{}}
	e.base = sharedtest.ConsecutivePorts(t, ranks)
	socks := make([]zmq4.Socket, ranks)
	for r := range socks {
		socks[r] = zmq4.NewPub(context.Background())
		if err := socks[r].Listen(fmt.Sprintf("tcp://127.0.0.1:%d", e.base+r)); err != nil {
			t.Fatal(err)
		}
	}
	e.bump()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.publish(ctx, socks, period)
	}()
	e.http = httptest.NewServer(http.HandlerFunc(e.serveHTTP))
	t.Cleanup(func() {
		cancel()
		<-done
		for _, s := range socks {
			_ = s.Close()
		}
		e.http.Close()
	})
	return e
}

// bump moves the engine to a new load value and notes when.
func (e *zmqEngine) bump() int64 {
	v := e.value.Add(1)
	e.mu.Lock()
	e.set[v] = time.Now()
	e.mu.Unlock()
	return v
}

// since is how long ago the engine first held v.
func (e *zmqEngine) since(v int64, now time.Time) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.set[v]
	return now.Sub(at), ok
}

func (e *zmqEngine) publish(ctx context.Context, socks []zmq4.Socket, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		v := e.bump()
		seq++
		for r, s := range socks {
			body, _ := msgpack.Marshal([]any{"LoadStat", 3, v, 1000, 220000, r})
			_ = s.Send(zmq4.NewMsgFrom([]byte("load"), binary.BigEndian.AppendUint64(nil, seq), body))
		}
	}
}

func (e *zmqEngine) serveHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/server_info":
		_ = json.NewEncoder(w).Encode(map[string]any{"dp_size": e.ranks, "kv_events": map[string]any{
			"load_endpoint_port_base": e.base, "load_topic": "load", "dp_size": e.ranks}})
	case "/v1/loads":
		// The scheduler round trip: the request reaches the scheduler, which
		// reads its load, and the answer travels back.
		time.Sleep(e.loadsDelay / 2)
		v := e.value.Load()
		time.Sleep(e.loadsDelay / 2)
		loads := make([]map[string]any, e.ranks)
		for i := range loads {
			loads[i] = map[string]any{"dp_rank": i, "num_running_reqs": 3, "num_waiting_reqs": v,
				"num_waiting_uncached_tokens": 64, "num_used_tokens": 1000, "num_total_tokens": 1000,
				"max_total_num_tokens": 220000, "max_running_requests": 256, "token_usage": 0.0045,
				"gen_throughput": 1834.27, "cache_hit_rate": 0.41, "utilization": 0.6}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"timestamp": time.Now().UTC(), "version": "stand-in", "loads": loads})
	default:
		http.NotFound(w, r)
	}
}

// TestSGLangZMQEndToEnd: with --source sglang-zmq and only --engine-url,
// the reporter finds the engine's load sockets through /server_info, and a
// router receives HEALTHY reports whose counts come from the pushed
// LoadStat and whose throughput and cache-hit rate come from the detail
// pull; SMG's probe reads them too.
func TestSGLangZMQEndToEnd(t *testing.T) {
	t.Parallel()
	engine := newZMQEngine(t, 2, 20*time.Millisecond, 0)
	c := testConfig()
	c.Source.Name, c.Source.EngineURL = "sglang-zmq", engine.http.URL
	c.Source.ZMQ.DetailInterval = 50 * time.Millisecond
	m := startMain(t, c, nil)
	ctx := testCtx(t, 15*time.Second)
	r := openGRPC(t, ctx, m.Addr())
	if err := r.Send(registerFrame("zmq-router", 100, 10000)); err != nil {
		t.Fatal(err)
	}
	recvFrame(t, r) // registered
	for {
		rep := recvReport(t, r)
		if rep.GetStatus().String() != "REPORT_STATUS_HEALTHY" || len(rep.GetRanks()) != 2 || rep.GetRanks()[0].GetGenThroughput() == 0 {
			continue // before every socket spoke, or before the first detail pull
		}
		for i, rk := range rep.GetRanks() {
			if rk.GetDpRank() != int32(i) || rk.GetNumRunningReqs() != 3 || rk.GetNumUsedTokens() != 1000 ||
				rk.GetMaxTotalNumTokens() != 220000 || rk.GetGenThroughput() != 1834.27 || rk.GetCacheHitRate() != 0.41 {
				t.Fatalf("rank %d: %v", i, rk)
			}
			if _, ok := engine.since(rk.GetNumWaitingReqs(), time.Now()); !ok {
				t.Fatalf("rank %d: num_waiting_reqs %d was never published", i, rk.GetNumWaitingReqs())
			}
		}
		break
	}
	_ = r.Send(stopFrame)
	expectCleanEnd(t, r)
	for _, l := range smgPoll(t, "http://"+m.Addr()+smgProbes[0]) {
		if l["max_total_num_tokens"].(json.Number).String() != "220000" {
			t.Fatalf("SMG reads %v", l)
		}
	}
}
