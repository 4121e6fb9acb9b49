package sglangzmq

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/source/internal/sourcetest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// serverInfo is a /server_info body shaped like SGLang's: the server
// arguments at the top level, the kv_events block (kvEvents, raw JSON, or
// "" for none).
func serverInfoBody(kvEvents string) string {
	b := `{"model_path":"Qwen/Qwen3-8B","dp_size":2,"tp_size":2,"enable_dp_attention":true,"version":"0.5.6"`
	if kvEvents != "" {
		b += `,"kv_events":` + kvEvents
	}
	return b + `,"internal_states":[{"last_gen_throughput":12.5}]}`
}

func kvEventsBlock(base, dpSize int) string {
	return fmt.Sprintf(`{"publisher":"zmq","endpoint_host":"*","endpoint_port_base":%d,"topic":"kv","block_size":64,`+
		`"dp_size":%d,"load_endpoint_port_base":%d,"load_topic":"load"}`, base-dpSize, dpSize, base)
}

func TestDiscovery(t *testing.T) {
	p := newPublishers(t, 2)
	var mu sync.Mutex
	var got []*http.Request
	url := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		if r.URL.Path != "/server_info" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(serverInfoBody(kvEventsBlock(p.base, 2))))
	})
	o := testOptions(p, 0, porttest.NewClock(t0))
	o.Endpoint, o.EngineURL, o.APIKey = "", url, "s3cret"
	s := start(t, o)
	eventually(t, "discovery", func() bool { return strings.Contains(s.String(), "tcp://") })
	if want := fmt.Sprintf("sglang-zmq tcp://127.0.0.1:%d..%d", p.base, p.base+1); s.String() != want {
		t.Errorf("String() = %q, want %q", s.String(), want)
	}
	b := body(t, 1, 0, 10, 100, nil)
	p.warm(s, 0, b)
	p.warm(s, 1, b)
	ranks := mustPull(t, s)
	if len(ranks) != 2 || ranks[0].DPRank != 0 || ranks[1].DPRank != 1 {
		t.Errorf("ranks %+v", ranks)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("engine saw %d requests, want 1", len(got))
	}
	if r := got[0]; r.Method != http.MethodGet || r.Header.Get("Authorization") != "Bearer s3cret" {
		t.Errorf("request %s %s with Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
	}
}

// TestDiscoveryRetry: until the engine answers, Pull says why; the next
// attempt comes DiscoveryRetry later on the Source's clock.
func TestDiscoveryRetry(t *testing.T) {
	p := newPublishers(t, 1)
	var mu sync.Mutex
	ready := false
	url := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !ready {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(serverInfoBody(kvEventsBlock(p.base, 1))))
	})
	clk := porttest.NewClock(t0)
	o := testOptions(p, 0, clk)
	o.Endpoint, o.EngineURL = "", url
	s := start(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), sourcetest.Wait)
	defer cancel()
	if err := clk.WaitPending(ctx, 1); err != nil { // the retry, after one failure
		t.Fatal(err)
	}
	_, err := pull(t, s)
	msg := sourcetest.Failure(t, nil, err, domain.CodeSourceFailed, false)
	if want := "finding the load sockets: GET " + url + "/server_info: HTTP 503 Service Unavailable: warming up"; msg != want {
		t.Errorf("error %q\nwant  %q", msg, want)
	}
	mu.Lock()
	ready = true
	mu.Unlock()
	clk.Advance(DefaultDiscoveryRetry)
	eventually(t, "discovery", func() bool { return strings.Contains(s.String(), "tcp://") })
	p.warm(s, 0, body(t, 1, 0, 10, 100, nil))
	mustPull(t, s)
}

func TestDiscoveryErrors(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		dpSize    int
		maxDPSize int
		want      string // after "finding the load sockets: GET {url}/server_info: "
	}{
		// Each rank is a socket and a goroutine: 800 advertised opened 800.
		{"dp size past --max-dp-size", serverInfoBody(kvEventsBlock(5559, 800)), 0, 4,
			"the engine advertises dp_size 800, more than --max-dp-size 4 (a socket per rank)"},
		{"dp size past what a report holds", serverInfoBody(kvEventsBlock(1024, 5000)), 0, 0,
			"the engine advertises dp_size 5000, more than --max-dp-size 4096 (a socket per rank)"},
		{"no kv_events block", serverInfoBody(""), 0, 0,
			"the engine advertises no load sockets (no kv_events.load_endpoint_port_base): start SGLang with --load-publish-endpoint, or give --zmq-endpoint"},
		{"no load port in the block", serverInfoBody(`{"endpoint_port_base":5557,"topic":"kv","dp_size":2}`), 0, 0,
			"the engine advertises no load sockets (no kv_events.load_endpoint_port_base): start SGLang with --load-publish-endpoint, or give --zmq-endpoint"},
		{"dp size differs from --dp-size", serverInfoBody(kvEventsBlock(5559, 2)), 4, 0,
			"the engine advertises dp_size 2, but --dp-size is 4"},
		{"ports beyond 65535", serverInfoBody(kvEventsBlock(65535, 2)), 0, 0,
			"kv_events: ports 65535..65536 do not fit in 1..65535"},
		{"zero dp size", serverInfoBody(`{"load_endpoint_port_base":5559,"dp_size":0}`), 0, 0,
			"kv_events: dp_size 0, want ≥ 1"},
		{"not JSON", "<html>SGLang</html>", 0, 0,
			"body is not the JSON object SGLang serves: invalid character '<' looking for beginning of value"},
		{"port as a string", serverInfoBody(`{"load_endpoint_port_base":"5559"}`), 0, 0,
			"body is not the JSON object SGLang serves: json: cannot unmarshal string into Go struct field .kv_events.load_endpoint_port_base of type int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(tt.body)) })
			clk := porttest.NewClock(t0)
			s := start(t, Options{EngineURL: url, DPSize: tt.dpSize, MaxDPSize: tt.maxDPSize, Clock: clk})
			ctx, cancel := context.WithTimeout(context.Background(), sourcetest.Wait)
			defer cancel()
			if err := clk.WaitPending(ctx, 1); err != nil { // failed once, waiting to retry
				t.Fatal(err)
			}
			_, err := pull(t, s)
			msg := sourcetest.Failure(t, nil, err, domain.CodeSourceFailed, false)
			if want := "finding the load sockets: GET " + url + "/server_info: " + tt.want; msg != want {
				t.Errorf("error %q\nwant  %q", msg, want)
			}
		})
	}
}

// TestDiscoveryHostAndTopic: the sockets' host is the engine URL's (the
// block's wildcard bind host is not dialled), the engine's topic is used,
// and a dp_size only at the top level (the server arguments) is read there.
func TestDiscoveryHostAndTopic(t *testing.T) {
	url := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"dp_size":3,"kv_events":{"endpoint_host":"0.0.0.0","load_endpoint_port_base":6000,"load_topic":"lo"}}`))
	})
	d, err := newDiscoverer(config{Options: Options{EngineURL: url}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.fetch.Close() })
	eps, err := sourcetest.Within(t, 0, d.discover)
	if err != nil {
		t.Fatal(err)
	}
	if want := (endpoints{host: "127.0.0.1", base: 6000, size: 3, topic: "lo"}); eps != want {
		t.Errorf("got %+v, want %+v", eps, want)
	}
	v6 := endpoints{host: "::1", base: 6000, size: 2}
	if got := v6.endpoint(1); got != "tcp://[::1]:6001" {
		t.Errorf("IPv6 endpoint %q", got)
	}
}

// TestDiscoveryNotAnswered: the first request hangs; Pull says so instead
// of waiting for it.
func TestDiscoveryNotAnswered(t *testing.T) {
	url := sourcetest.ServeBlocking(t, sourcetest.Hang)
	s := start(t, Options{EngineURL: url, Clock: porttest.NewClock(t0)})
	_, err := pull(t, s)
	msg := sourcetest.Failure(t, nil, err, domain.CodeSourceFailed, false)
	if want := "finding the load sockets: GET " + url + "/server_info has not answered yet"; msg != want {
		t.Errorf("error %q\nwant  %q", msg, want)
	}
	if !strings.HasPrefix(s.String(), "sglang-zmq via "+url) {
		t.Errorf("String() = %q", s.String())
	}
}

func TestNewErrors(t *testing.T) {
	detail := &fakeDetail{}
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"nothing", Options{},
			"the sglang-zmq source needs --zmq-endpoint (for example tcp://127.0.0.1:5558 with --dp-size) or --engine-url to find the sockets through /server_info"},
		{"endpoint without dp size", Options{Endpoint: "tcp://127.0.0.1:5558"},
			"--zmq-endpoint needs --dp-size (one socket per rank)"},
		{"negative dp size", Options{Endpoint: "tcp://127.0.0.1:5558", DPSize: -1}, "--dp-size must be ≥ 0, got -1"},
		{"ipc endpoint", Options{Endpoint: "ipc:///tmp/load", DPSize: 1},
			`--zmq-endpoint "ipc:///tmp/load": only tcp:// endpoints can be subscribed to, one port per rank (want tcp://HOST:PORT, for example tcp://127.0.0.1:5558)`},
		{"wildcard host", Options{Endpoint: "tcp://*:5558", DPSize: 1},
			`--zmq-endpoint "tcp://*:5558": give the engine's address, not a wildcard (want tcp://HOST:PORT, for example tcp://127.0.0.1:5558)`},
		{"no port", Options{Endpoint: "tcp://127.0.0.1", DPSize: 1},
			`--zmq-endpoint "tcp://127.0.0.1": address 127.0.0.1: missing port in address (want tcp://HOST:PORT, for example tcp://127.0.0.1:5558)`},
		{"port 0", Options{Endpoint: "tcp://127.0.0.1:0", DPSize: 1},
			`--zmq-endpoint "tcp://127.0.0.1:0": port "0" is not in 1..65535 (want tcp://HOST:PORT, for example tcp://127.0.0.1:5558)`},
		{"ranks beyond the last port", Options{Endpoint: "tcp://127.0.0.1:65534", DPSize: 4},
			`--zmq-endpoint "tcp://127.0.0.1:65534": ports 65534..65537 do not fit in 1..65535`},
		{"bad engine URL", Options{EngineURL: "127.0.0.1:30000"},
			`--engine-url "127.0.0.1:30000": add the scheme, e.g. http://127.0.0.1:30000`},
		{"negative detail interval", Options{Endpoint: "tcp://h:1", DPSize: 1, DetailInterval: -time.Second},
			"--detail-interval must be ≥ 0, got -1s"},
		{"detail interval without a detail source", Options{Endpoint: "tcp://h:1", DPSize: 1, DetailInterval: time.Second},
			"--detail-interval 1s needs a detail source"},
		{"negative interval", Options{Endpoint: "tcp://h:1", DPSize: 1, Detail: detail, ResubscribeAfter: -1},
			"sglang-zmq intervals must be ≥ 0"},
		{"negative max running", Options{Endpoint: "tcp://h:1", DPSize: 1, MaxRunningRequests: -1},
			"--zmq-max-running-requests -1: must not be negative (0: unknown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.o)
			if err == nil {
				_ = s.Close()
			}
			sourcetest.Invalid(t, err, tt.want)
		})
	}
}
