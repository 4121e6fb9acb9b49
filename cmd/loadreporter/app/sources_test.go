package app

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/loadreporter/loadreporter/adapters/clock"
	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/source/sglanggrpc"
	"github.com/loadreporter/loadreporter/adapters/source/sglanghttp"
	"github.com/loadreporter/loadreporter/adapters/source/sglangzmq"
	"github.com/loadreporter/loadreporter/adapters/source/sim"
	"github.com/loadreporter/loadreporter/adapters/source/vllm"
	"github.com/loadreporter/loadreporter/domain"
	schedulerpb "github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// engines stand up, for each row of sources, an engine in the state the
// contract asks for and return the SourceConfig that reads it. A row
// without an engine here fails TestSourceContract.
var engines = map[string]func(t *testing.T, e porttest.SourceEngine) SourceConfig{
	sim.Name: func(t *testing.T, e porttest.SourceEngine) SourceConfig {
		c := DefaultConfig().Source
		c.DPSize = 2
		c.Sim.Mode = map[porttest.EngineState]string{porttest.EngineHealthy: "normal", porttest.EngineDead: "error",
			porttest.EngineGarbage: "garbage", porttest.EngineHang: "hang"}[e.State]
		return c
	},
	sglanghttp.Name: func(t *testing.T, e porttest.SourceEngine) SourceConfig {
		return httpEngine(t, sglanghttp.Name, e, "/v1/loads", `{"loads": [
			{"dp_rank": 0, "num_running_reqs": 12, "num_waiting_reqs": 3, "num_used_tokens": 61234, "max_total_num_tokens": 220000, "max_running_requests": 256, "token_usage": 0.28},
			{"dp_rank": 1, "num_running_reqs": 9, "num_waiting_reqs": 0, "num_used_tokens": 40011, "max_total_num_tokens": 220000, "max_running_requests": 256, "token_usage": 0.18}]}`)
	},
	sglanggrpc.Name: grpcEngine,
	sglangzmq.Name:  zmqEngine,
	vllm.Name: func(t *testing.T, e porttest.SourceEngine) SourceConfig {
		return httpEngine(t, vllm.Name, e, "/metrics", `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 7.0
vllm:num_requests_running{engine="1",model_name="m"} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.3125
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.1875
`)
	},
}

// TestSourceContract runs ports/porttest's source contract over every
// row of sources, built as serve builds it (NewEngine), each row against
// an engine of its kind.
func TestSourceContract(t *testing.T) {
	t.Parallel()
	for _, row := range sources {
		stand, ok := engines[row.name]
		if !ok {
			t.Errorf("source %s has no engine for the contract: add one to engines", row.name)
			continue
		}
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			porttest.SnapshotSource(t, row.name, func(t *testing.T, e porttest.SourceEngine) ports.SnapshotSource {
				c := stand(t, e)
				c.Name = row.name
				engine, cleanup, err := NewEngine(c, givenEngine{}, clock.System{}, metrics.New(time.Now))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(cleanup)
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				if err := engine.Start(ctx); err != nil {
					t.Fatal(err)
				}
				if e.State == porttest.EngineHealthy || e.State == porttest.EngineGarbage {
					heard(t, engine.Source)
				}
				return engine.Source
			})
		})
	}
}

// heard waits, within porttest.SourceWait, until a source that listens
// in the background has heard its engine: until then its pulls fail with
// SOURCE_FAILED, having nothing to give. Sources that read when pulled
// have heard it at once.
func heard(t *testing.T, s ports.SnapshotSource) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), porttest.SourceWait)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := s.Pull(ctx)
		if domain.ErrorCode(err) != domain.CodeSourceFailed || !strings.Contains(err.Error(), "no load message received yet") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the source heard nothing from its engine within %s: %v", porttest.SourceWait, err)
		case <-tick.C:
		}
	}
}

// httpEngine serves body at path while healthy; dead, it is an address
// nothing listens on; garbage, it answers what is not load; hung, it never
// answers. It checks the API key the source sends.
func httpEngine(t *testing.T, name string, e porttest.SourceEngine, path, body string) SourceConfig {
	t.Helper()
	c := DefaultConfig().Source
	c.EngineAPIKey = e.APIKey
	if e.State == porttest.EngineDead {
		c.EngineURL = "http://" + deadAddr(t)
		return c
	}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path || r.Header.Get("Authorization") != "Bearer "+e.APIKey {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		switch e.State {
		case porttest.EngineGarbage:
			fmt.Fprint(w, "{\"loads\": [not load at all")
		case porttest.EngineHang:
			select {
			case <-r.Context().Done():
			case <-done:
			}
		default:
			fmt.Fprint(w, body)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // before Close waits for the hung handler
	c.EngineURL = srv.URL
	return c
}

// deadAddr is a 127.0.0.1 address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// scheduler is SGLang's scheduler service in one engine state.
type scheduler struct {
	schedulerconnect.UnimplementedSglangSchedulerHandler
	e    porttest.SourceEngine
	done <-chan struct{}
}

func (s scheduler) GetLoads(ctx context.Context, req *connect.Request[schedulerpb.GetLoadsRequest]) (*connect.Response[schedulerpb.GetLoadsResponse], error) {
	if req.Header().Get("Authorization") != "Bearer "+s.e.APIKey {
		return nil, connect.NewError(connect.CodeUnauthenticated, nil)
	}
	if s.e.State == porttest.EngineHang {
		select {
		case <-ctx.Done():
		case <-s.done:
		}
		return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	loads := make([]*schedulerpb.SchedulerLoad, 2)
	for i := range loads {
		loads[i] = &schedulerpb.SchedulerLoad{DpRank: int32(i), NumRunningReqs: 3, NumWaitingReqs: 1, NumUsedTokens: 5000,
			MaxTotalNumTokens: 200000, MaxRunningRequests: 128, TokenUsage: 0.025}
		if s.e.State == porttest.EngineGarbage {
			loads[i].NumUsedTokens = 900000 // more than the rank holds
		}
	}
	return connect.NewResponse(&schedulerpb.GetLoadsResponse{Loads: loads}), nil
}

// grpcEngine serves the scheduler over plaintext HTTP/2, as SGLang's gRPC
// server listens; dead, it is an address nothing listens on.
func grpcEngine(t *testing.T, e porttest.SourceEngine) SourceConfig {
	t.Helper()
	c := DefaultConfig().Source
	c.EngineAPIKey = e.APIKey
	if e.State == porttest.EngineDead {
		c.EngineURL = deadAddr(t)
		return c
	}
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle(schedulerconnect.NewSglangSchedulerHandler(scheduler{e: e, done: done}))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	c.EngineURL = srv.Listener.Addr().String()
	return c
}

// zmqEngine stands in for two SGLang schedulers publishing LoadStat on
// consecutive ports (--zmq-endpoint with --dp-size 2): healthy, each
// publishes its rank's load every few milliseconds; garbage, a body that
// is not msgpack; hung, they are bound and silent; dead, nothing is
// bound.
func zmqEngine(t *testing.T, e porttest.SourceEngine) SourceConfig {
	t.Helper()
	base := sharedtest.ConsecutivePorts(t, 2)
	c := DefaultConfig().Source
	c.DPSize = 2
	c.ZMQ.Endpoint = fmt.Sprintf("tcp://127.0.0.1:%d", base)
	c.ZMQ.MaxRunningRequests = 64
	c.ZMQ.DetailInterval = 0
	if e.State == porttest.EngineDead {
		return c
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	var pubs []zmq4.Socket
	for r := range 2 {
		pub := zmq4.NewPub(ctx)
		if err := pub.Listen(fmt.Sprintf("tcp://127.0.0.1:%d", base+r)); err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, pub)
	}
	go func() {
		defer close(done)
		defer func() {
			for _, p := range pubs {
				_ = p.Close()
			}
		}()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for seq := uint64(1); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if e.State == porttest.EngineHang {
				continue
			}
			for r, p := range pubs {
				body, _ := msgpack.Marshal([]any{"LoadStat", 12, 3, 41250, 200000, r})
				if e.State == porttest.EngineGarbage {
					body = []byte("not msgpack")
				}
				_ = p.Send(zmq4.NewMsgFrom([]byte("load"), binary.BigEndian.AppendUint64(nil, seq), body))
			}
		}
	}()
	return c
}
