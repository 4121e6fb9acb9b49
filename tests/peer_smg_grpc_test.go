package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
)

// SMG in its gRPC connection mode (grpc:// worker URLs; `smg launch` has no
// --connection-mode flag, `smg serve` does) needs a tokenizer: it sends the
// engine token ids, not text. SMG 1.13.0 loads it for each worker's model
// from the worker's own tokenizer_path (GetModelInfo), else model_path,
// else --tokenizer-path, else --model-path
// (lightseekorg/smg@785eb68eec5a83e687d7c7362ef12cc678c6eccc
// model_gateway/src/workflow/steps/local/submit_tokenizer_job.rs): a local
// directory is read, anything else fetched from the Hugging Face hub and,
// that failing, from the worker's GetTokenizer stream (which the simulated
// engine does not serve). With no hub to reach, a worker that names a hub
// model gets no tokenizer, and every /generate for that model answers 503
// tokenizer_not_ready; --model-path does not help, the worker's path comes
// first. So the engines serve a model at a local directory, as SGLang
// started with --model-path DIR reports DIR as its model, model_path and
// tokenizer_path, and the test writes a tokenizer of its own there.

// writeTokenizer writes a Hugging Face tokenizers file (tokenizer.json,
// WordLevel model, split on whitespace) to a new directory and returns
// the directory: "[UNK]" is 0, "hello" 1, and every other id below 2048
// is "tok<id>", so that any id the simulated engine generates decodes.
func writeTokenizer(t *testing.T) string {
	t.Helper()
	vocab := map[string]int{"[UNK]": 0, "hello": 1}
	for id := 2; id < 2048; id++ {
		vocab[fmt.Sprintf("tok%d", id)] = id
	}
	tok := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "normalizer": nil, "post_processor": nil, "decoder": nil,
		"added_tokens": []any{map[string]any{"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}},
		"pre_tokenizer": map[string]any{"type": "Whitespace"},
		"model":         map[string]any{"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
	}
	b, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "peer-model")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// engineCall is one gRPC call that reached an engine: its method and the
// caller's User-Agent.
type engineCall struct{ method, agent string }

// callTap sits between a reporter and its engine's gRPC port and writes
// down every call that passes, so that the test can tell who called the
// engine: the reporter's own pulls, or SMG's calls passed by the front.
type callTap struct {
	addr  string
	mu    sync.Mutex
	calls []engineCall
}

func startCallTap(t *testing.T, engine string) *callTap {
	t.Helper()
	tap := &callTap{}
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &h2c}
	t.Cleanup(tr.CloseIdleConnections)
	target := &url.URL{Scheme: "http", Host: engine}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     tr,
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Protocols: &h2c, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tap.mu.Lock()
		tap.calls = append(tap.calls, engineCall{method: r.URL.Path, agent: r.UserAgent()})
		tap.mu.Unlock()
		proxy.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })
	tap.addr = ln.Addr().String()
	return tap
}

// agents counts the calls of method by User-Agent.
func (c *callTap) agents(method string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, k := range c.calls {
		if k.method == method {
			out[k.agent]++
		}
	}
	return out
}

// grpcWorker is one gRPC worker in front mode: the simulated engine's
// scheduler service, the tap, and the reporter at the worker's address.
type grpcWorker struct {
	name   string
	engine *enginesim.Main
	tap    *callTap
	main   *app.Main
}

// startGRPCWorker boots engine-sim (serving the model at dir, with
// params edited by tune) and a reporter in front of its gRPC port; as in
// startPeerWorker every poll pulls anew and history is off, so that each
// report the reporter builds answers a poll.
func startGRPCWorker(t *testing.T, name, dir string, tune func(*enginesim.Config)) *grpcWorker {
	t.Helper()
	ec := enginesim.DefaultConfig()
	ec.Listen, ec.GRPCListen, ec.ServedModelName = "127.0.0.1:0", "127.0.0.1:0", dir
	if tune != nil {
		tune(&ec)
	}
	e, err := enginesim.New(ec)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	tap := startCallTap(t, e.GRPCAddr())
	c := testConfig()
	c.Source.Name, c.Source.EngineURL, c.Front.Listen = "sglang-grpc", tap.addr, "127.0.0.1:0"
	c.Poll.MaxAge = 50 * time.Millisecond
	c.History.Interval = 0
	return &grpcWorker{name: name, engine: e, tap: tap, main: startMain(t, c, nil)}
}

func (w *grpcWorker) url() string { return "grpc://" + w.main.FrontAddr() }

// reports is how many reports the reporter has built, by status: with no
// session open, one per GetLoads its front answered.
func (w *grpcWorker) reports(t *testing.T) map[string]float64 {
	t.Helper()
	fams, err := scrapeFamilies("http://" + w.main.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return byLabel(fams["loadreporter_reports_total"], "status", nil)
}

// engineWaiting is the waiting requests of the engine's one rank, from its
// HTTP /v1/loads (not its gRPC service, whose calls the tap counts).
func engineWaiting(t *testing.T, e *enginesim.Main) int {
	t.Helper()
	resp, err := http.Get("http://" + e.Addr() + "/v1/loads?include=core")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Loads []struct {
			Waiting int `json:"num_waiting_reqs"`
		} `json:"loads"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Loads) != 1 {
		t.Fatalf("engine /v1/loads: %v %+v", err, body)
	}
	return body.Loads[0].Waiting
}

// loadEngine keeps n long requests in the engine (sent to its own HTTP
// API, as other traffic would be) until the test ends.
func loadEngine(t *testing.T, e *enginesim.Main, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); tr.CloseIdleConnections() })
	// 16 000 characters are 4 000 prompt tokens to the engine.
	body := fmt.Sprintf(`{"text":%q,"sampling_params":{"max_new_tokens":5000}}`, strings.Repeat("long", 4000))
	for range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.Addr()+"/generate", strings.NewReader(body))
			if err != nil {
				return
			}
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
}

// TestSMGOverGRPCRoutesOnTheFront: SMG 1.13.0 with two gRPC workers
// (grpc:// URLs), each a reporter whose front holds the worker's gRPC
// address before the simulated engine's scheduler service; B's engine runs
// 4 long requests and has the other 26 of 30 waiting. SMG's load monitor calls
// SglangScheduler/GetLoads on each worker every second; the front answers
// them from the reporter's pull (the engines see GetLoads only from the
// reporters, never from SMG) and passes the rest — health checks and the
// Generate streams — to the engine. power_of_two (overload protection off)
// scores B's waiting requests and sends the requests to A, and every
// one comes back 200 with the text SMG decoded from the engine's stream.
func TestSMGOverGRPCRoutesOnTheFront(t *testing.T) {
	t.Parallel()
	venv := needPeer(t, "smg")
	dir := writeTokenizer(t)
	a := startGRPCWorker(t, "A", dir, nil)
	b := startGRPCWorker(t, "B", dir, func(c *enginesim.Config) {
		c.Params.MaxRunningRequests, c.Params.MaxTotalNumTokens = 4, 40000
	})
	loadEngine(t, b.engine, 30)
	waitUntil(t, 10*time.Second, func() string { return fmt.Sprintf("B's engine: %d waiting", engineWaiting(t, b.engine)) },
		func() bool { return engineWaiting(t, b.engine) >= 20 })

	port, mport := freePort(t), freePort(t)
	base, metrics := fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	smg := startPeer(t, venv, "smg", append([]string{"launch", "--worker-urls", a.url(), b.url(),
		"--policy", "power_of_two", "--disable-worker-overload-protection", "--load-monitor-interval", "1",
		"--shutdown-grace-period-secs", "0", "--log-level", "debug"}, routerArgs(port, mport)...)...)
	ws := []*grpcWorker{a, b}
	whoseGRPC := func(label string) string {
		for _, w := range ws {
			if strings.TrimSuffix(label, "/") == w.url() {
				return w.name
			}
		}
		return label
	}
	smgGauge := func(name string) map[string]float64 {
		fams, err := scrapeFamilies(metrics)
		if err != nil {
			smg.alive(t)
			return nil
		}
		out := map[string]float64{}
		for label, v := range byLabel(fams[name], "worker", nil) {
			out[whoseGRPC(label)] += v
		}
		return out
	}
	// Registered, the tokenizer loaded, each worker polled twice and B's
	// load read from its front.
	waitUntil(t, 15*time.Second, func() string {
		return fmt.Sprintf("SMG loading the tokenizer and polling (smg_engine_load_polls_total %v, smg_engine_waiting_requests %v); output:\n%s",
			smgGauge("smg_engine_load_polls_total"), smgGauge("smg_engine_waiting_requests"), tail(smg.out.String(), 4000))
	}, func() bool {
		polls := smgGauge("smg_engine_load_polls_total")
		return strings.Contains(smg.out.String(), "Successfully loaded tokenizer") && polls["A"] >= 2 && polls["B"] >= 2 &&
			smgGauge("smg_engine_waiting_requests")["B"] >= 20
	})
	before := smgGauge("smg_worker_requests_total")

	const n = 20
	codes, texts := map[int]int{}, 0
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		stream := i%2 == 0
		body := fmt.Sprintf(`{"model":%q,"text":"hello","stream":%t,"sampling_params":{"max_new_tokens":4}}`, dir, stream)
		resp, err := client.Post(base+"/generate", "application/json", strings.NewReader(body))
		if err != nil {
			smg.alive(t)
			codes[0]++
			continue
		}
		codes[resp.StatusCode]++
		// The text is what SMG decoded with the test's tokenizer from the
		// engine's token ids: all 4 tokens, a stream as server-sent events.
		// How many events is SMG's timing, not the front's: chunks that
		// reach SMG together leave as one event, as on a busy machine.
		text, events := generatedText(resp, stream)
		if !strings.HasPrefix(text, "tok") || strings.Count(text, "tok") != 4 || (stream && events < 1) {
			t.Errorf("request %d (stream %t): HTTP %d, %d events, text %q", i, stream, resp.StatusCode, events, text)
			continue
		}
		texts++
	}
	after := smgGauge("smg_worker_requests_total")
	got := map[string]int{}
	for w, v := range after {
		if d := int(v - before[w]); d > 0 {
			got[w] = d
		}
	}
	t.Logf("SMG over gRPC: %s; HTTP %v; SMG believes waiting %v", fmtCounts(got), codes, smgGauge("smg_engine_waiting_requests"))
	if got["A"] < n*4/5 || codes[http.StatusOK] != n || texts != n {
		t.Errorf("SMG over gRPC: %s for %d requests, HTTP %v, %d with text; want at least %d to A, every one 200 with text",
			fmtCounts(got), n, codes, texts, n*4/5)
	}

	// What SMG believes each worker holds is what the fronts said.
	if w := smgGauge("smg_engine_waiting_requests"); w["A"] != 0 || w["B"] < 20 {
		t.Errorf("SMG's smg_engine_waiting_requests %v, want A 0 and B at least 20", w)
	}
	// SMG's own count of its load polls, per worker.
	polls := smgGauge("smg_engine_load_polls_total")
	// The engines saw GetLoads from the reporters' pulls only; what SMG
	// sent through the front otherwise (its health checks, the Generate
	// streams) reached them with SMG's User-Agent.
	for _, w := range ws {
		gets := w.tap.agents(schedulerconnect.SglangSchedulerGetLoadsProcedure)
		gens := w.tap.agents(schedulerconnect.SglangSchedulerGenerateProcedure)
		health := w.tap.agents(schedulerconnect.SglangSchedulerHealthCheckProcedure)
		t.Logf("engine %s: GetLoads by %v, Generate by %v, HealthCheck by %v; SMG polled the front %g times",
			w.name, gets, gens, health, polls[w.name])
		smgAgent, ok := soleKey(health)
		if !ok {
			t.Fatalf("engine %s: health checks by %v, want SMG's alone", w.name, health)
		}
		if gets[smgAgent] > 0 {
			t.Errorf("engine %s: %d GetLoads from %q, SMG's client: SMG's load poll passed the front", w.name, gets[smgAgent], smgAgent)
		}
		if len(gets) == 0 {
			t.Errorf("engine %s saw no GetLoads: the reporter never pulled", w.name)
		}
		if gens[smgAgent] != got[w.name] || len(gens) > 1 {
			t.Errorf("engine %s: Generate by %v; want SMG's %d alone", w.name, gens, got[w.name])
		}
	}
	// Every GetLoads SMG sent was answered by the front: with no session
	// open and each poll pulling anew, the reporter builds one report per
	// GetLoads, so it comes to at least as many reports as SMG counts
	// polls (its count and the reporter's may each lag a poll).
	for _, w := range ws {
		built := func() (n float64) {
			for _, v := range w.reports(t) {
				n += v
			}
			return n
		}
		waitUntil(t, 3*time.Second, func() string {
			return fmt.Sprintf("worker %s: the reporter built %g reports for SMG's %g polls; want one per poll", w.name, built(), polls[w.name])
		}, func() bool { return built() >= polls[w.name] })
	}
}

// soleKey is the one key of m, or false when m has none or several.
func soleKey(m map[string]int) (string, bool) {
	if len(m) != 1 {
		return "", false
	}
	for k := range m {
		return k, true
	}
	return "", false
}

// generatedText reads one SMG /generate answer: the text of the one JSON
// answer (a list of one object in gRPC mode), or of a stream's last event
// and how many events came before "data: [DONE]" (none when it did not
// come).
func generatedText(resp *http.Response, stream bool) (text string, events int) {
	defer resp.Body.Close()
	type out struct {
		Text string `json:"text"`
	}
	if !stream {
		var raw json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			return "", 0
		}
		var list []out
		if json.Unmarshal(raw, &list) == nil && len(list) == 1 {
			return list[0].Text, 1
		}
		var one out
		_ = json.Unmarshal(raw, &one)
		return one.Text, 1
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return text, events
		}
		var ev out
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return "", 0
		}
		text, events = ev.Text, events+1
	}
	return "", 0
}
