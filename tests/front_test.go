package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
)

// standInEngine answers what polling routers send to a worker URL, in
// SGLang's shapes, and counts each path it was asked.
type standInEngine struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
	// down makes every answer a dropped connection.
	down atomic.Bool
	// staleMs, when positive, stamps every rank of /v1/loads that many
	// milliseconds in the past (SGLang's per-rank timestamp, seconds).
	staleMs atomic.Int64
}

func newStandInEngine(t *testing.T) *standInEngine {
	t.Helper()
	loads, err := os.ReadFile("testdata/sglang-v1-loads-core.json")
	if err != nil {
		t.Fatal(err)
	}
	e := &standInEngine{hits: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.hits[r.URL.Path]++
		e.mu.Unlock()
		if e.down.Load() {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = c.Close()
			}
			return
		}
		switch r.URL.Path {
		case "/v1/loads":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(stamped(t, loads, e.staleMs.Load()))
		case "/health":
			w.WriteHeader(http.StatusOK)
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"stand-in","object":"model","owned_by":"sglang"}]}`)
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			fmt.Fprint(w, "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{engine_type=\"unified\"} 3\n")
		case "/generate":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: {\"text\":\"t%d\"}\n\n", i)
				w.(http.Flusher).Flush()
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// stamped is body with every rank stamped staleMs ago, or body itself.
func stamped(t *testing.T, body []byte, staleMs int64) []byte {
	if staleMs <= 0 {
		return body
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Error(err)
		return body
	}
	at := float64(time.Now().UnixMilli()-staleMs) / 1e3
	for _, l := range env["loads"].([]any) {
		l.(map[string]any)["timestamp"] = at
	}
	out, _ := json.Marshal(env)
	return out
}

func (e *standInEngine) count(path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hits[path]
}

// startFrontMain boots the reporter in front of e: sglang-http reading e,
// the front on its own port passing to e.
func startFrontMain(t *testing.T, e *standInEngine, configure func(*app.Config)) *app.Main {
	t.Helper()
	c := testConfig()
	c.Source.Name, c.Source.EngineURL = "sglang-http", e.srv.URL
	c.Front.Listen = "127.0.0.1:0"
	if configure != nil {
		configure(&c)
	}
	return startMain(t, c, nil)
}

// TestFrontPassesTheEngineAndAnswersTheLoads: at the worker's address the
// engine's API passes unchanged (health, discovery, a token stream), the
// pollers' /v1/loads is answered from the shared pull however many poll,
// and the engine's /metrics is scraped once per window however many
// scrapers.
func TestFrontPassesTheEngineAndAnswersTheLoads(t *testing.T) {
	t.Parallel()
	e := newStandInEngine(t)
	m := startFrontMain(t, e, func(c *app.Config) { c.Poll.MaxAge = time.Hour })
	base := "http://" + m.FrontAddr()

	for path, want := range map[string]string{"/health": "", "/v1/models": `"id":"stand-in"`} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Fatalf("GET %s through the front: %d %q", path, resp.StatusCode, b)
		}
	}
	resp, err := http.Post(base+"/generate", "application/json", strings.NewReader(`{"text":"hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() != "" {
			events = append(events, sc.Text())
		}
	}
	resp.Body.Close()
	if len(events) != 4 || events[3] != "data: [DONE]" || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("token stream through the front: %q %v", events, resp.Header)
	}

	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			loads := smgPoll(t, base+"/v1/loads?include=core,disagg,queues,memory")
			if len(loads) != 2 {
				t.Errorf("poll through the front: %d ranks", len(loads))
			}
		})
		wg.Go(func() {
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), "sglang:num_running_reqs") {
				t.Errorf("engine metrics through the front: %q", b)
			}
		})
	}
	wg.Wait()
	if n := e.count("/v1/loads"); n > 2 {
		t.Errorf("20 polls read the engine's /v1/loads %d times, want at most one fire's pull (and its retry)", n)
	}
	if n := e.count("/metrics"); n != 1 {
		t.Errorf("20 scrapes in one window reached the engine %d times, want 1", n)
	}
	// The reporter's own surfaces stay on its own port.
	resp, err = http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `loadreporter_front_metrics_scrapes_total{answered="cache"} 19`) ||
		!strings.Contains(string(b), `loadreporter_front_proxied_requests_total{class="generate",code="200"} 1`) {
		t.Errorf("the reporter's metrics do not count the front's work:\n%s", grepLines(string(b), "loadreporter_front_"))
	}
}

// TestFrontWithTheEngineDown: proxied requests get 502 naming the engine,
// while /v1/loads keeps answering, UNREACHABLE.
func TestFrontWithTheEngineDown(t *testing.T) {
	t.Parallel()
	e := newStandInEngine(t)
	m := startFrontMain(t, e, func(c *app.Config) { c.Poll.MaxAge = 10 * time.Millisecond })
	e.down.Store(true)
	base := "http://" + m.FrontAddr()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusBadGateway || !strings.Contains(body.Error.Message, e.srv.URL) {
		t.Fatalf("proxied with the engine down: %d %+v %v", resp.StatusCode, body, err)
	}
	// A report pulled before the engine went down is served while younger
	// than --poll-max-age; the first poll after that pulls, and fails.
	var loads struct {
		Error struct{ Code, Message string }
	}
	eventually(t, testCtx(t, 10*time.Second), "/v1/loads to say the engine is down", func() bool {
		resp, err := http.Get(base + "/v1/loads")
		if err != nil {
			t.Fatal(err)
		}
		loads.Error.Code = ""
		err = json.NewDecoder(resp.Body).Decode(&loads)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK && (resp.StatusCode != http.StatusServiceUnavailable || loads.Error.Code != "UNREACHABLE") {
			t.Fatalf("/v1/loads with the engine down: %d %+v %v", resp.StatusCode, loads, err)
		}
		return resp.StatusCode == http.StatusServiceUnavailable
	})
}

func TestFrontFlagsAreChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--front-listen", "0.0.0.0:30000"}, "--front-listen needs --front-engine-url or --engine-url"},
		{[]string{"--front-listen", "30000", "--front-engine-url", "http://127.0.0.1:30001"}, "--front-listen \"30000\": want HOST:PORT"},
		{[]string{"--front-listen", "127.0.0.1:8080"}, "must differ from --listen"},
		{[]string{"--front-engine-url", "http://127.0.0.1:30001"}, "--front-engine-url needs --front-listen"},
		{[]string{"--front-listen", ":30000", "--front-engine-url", "127.0.0.1:30001"}, "want http://HOST:PORT"},
		{[]string{"--front-listen", ":30000", "--front-engine-url", "http://127.0.0.1:30001/v1"}, "without a path"},
		{[]string{"--front-listen", ":30000", "--front-engine-url", "http://127.0.0.1:30001", "--front-response-header-timeout", "-1s"}, "must not be negative"},
		{[]string{"--front-push-on-forward", "10ms"}, "--front-push-on-forward 10ms needs --front-listen and --front-count-forwarded"},
		{[]string{"--front-listen", ":30000", "--front-engine-url", "http://127.0.0.1:30001", "--front-count-forwarded=false", "--front-push-on-forward", "10ms"}, "needs --front-listen and --front-count-forwarded"},
		{[]string{"--front-listen", ":30000", "--front-engine-url", "http://127.0.0.1:30001", "--front-push-on-forward", "10us"}, "--front-push-on-forward"},
		{[]string{"--front-listen", ":30000", "--front-engine-url", "http://127.0.0.1:30001", "--front-push-on-forward", "-1s"}, "--front-push-on-forward -1s: must not be negative"},
	} {
		if err := checkServe(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{
		{"--front-listen", ":30000", "--front-engine-url", "http://127.0.0.1:30001"},
		{"--front-listen", ":30000", "--front-engine-url", "grpc://127.0.0.1:30001"},
		{"--front-listen", ":30000", "--source", "sglang-http", "--engine-url", "http://127.0.0.1:30001"},
		{"--front-listen", ":30000", "--source", "sglang-grpc", "--engine-url", "127.0.0.1:30001"},
		{"--front-listen", ":30000", "--front-engine-url", "http://127.0.0.1:30001", "--front-push-on-forward", "10ms"},
	} {
		if err := checkServe(args...); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestTheProxiedPathNeverWaitsForAPull: while the engine's load endpoint
// hangs (a pull and the polls waiting on it are stuck), requests passed
// to the engine are answered.
func TestTheProxiedPathNeverWaitsForAPull(t *testing.T) {
	t.Parallel()
	e := newStandInEngine(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	pulling := make(chan struct{}) // closed by the first pull
	var once sync.Once
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/loads" {
			once.Do(func() { close(pulling) })
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		e.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hang.Close)
	c := testConfig()
	c.Source.Name, c.Source.EngineURL, c.Front.Listen = "sglang-http", hang.URL, "127.0.0.1:0"
	c.Fire.PullBudget = time.Minute
	m := startMain(t, c, nil)
	base := "http://" + m.FrontAddr()
	polled := make(chan int, 1)
	go func() {
		resp, err := http.Get(base + "/v1/loads")
		if err != nil {
			polled <- 0
			return
		}
		resp.Body.Close()
		polled <- resp.StatusCode
	}()
	ctx := testCtx(t, 5*time.Second)
	select {
	case <-pulling:
	case <-ctx.Done():
		t.Fatal("no pull reached the engine")
	}
	for _, path := range []string{"/health", "/v1/models"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s while a pull hangs: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s while a pull hangs: %d", path, resp.StatusCode)
		}
	}
	select {
	case code := <-polled:
		t.Fatalf("the poll was answered (%d) while its pull hangs", code)
	default:
	}
}

// TestTheFrontDrainsBeforeItCloses: once the reporter stops, the front
// keeps taking requests for --front-drain while its load endpoints say
// "shutting down" (a full worker to /get_load, never a refused
// connection, which sglang-router reads as load −1); then its port closes.
func TestTheFrontDrainsBeforeItCloses(t *testing.T) {
	t.Parallel()
	e := newStandInEngine(t)
	c := testConfig()
	c.Source.Name, c.Source.EngineURL, c.Front.Listen = "sglang-http", e.srv.URL, "127.0.0.1:0"
	c.Front.Drain = time.Second
	m, err := app.InitializeMain(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.FrontAddr()
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	ctx := testCtx(t, 5*time.Second)
	for {
		load := sglangRouterLoad(t, base)
		if load == -1 {
			t.Fatal("sglang-router read load -1 (a failed poll) while the front drains")
		}
		resp, err := http.Get(base + "/get_load")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "SHUTTING_DOWN") {
			if load < math.MaxInt32 {
				t.Fatalf("shutting down, yet load %d", load)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the front never said it was shutting down: %s", b)
		}
	}
	if resp, err := http.Get(base + "/health"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a request passed to the engine while the front drains: %v %v", resp, err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Fatal("the front still serves after Close")
	}
}

// TestARequestInFlightHasTheWholeGrace: a generation under way when the
// reporter stops finishes within --shutdown-grace, past the front's drain
// and the reporter's own streams' share.
func TestARequestInFlightHasTheWholeGrace(t *testing.T) {
	t.Parallel()
	e := newStandInEngine(t)
	started := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			e.srv.Config.Handler.ServeHTTP(w, r)
			return
		}
		close(started)
		select {
		case <-time.After(3500 * time.Millisecond): // past 3/5 of the grace
			fmt.Fprint(w, "done")
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	c := testConfig()
	c.Source.Name, c.Source.EngineURL, c.Front.Listen = "sglang-http", slow.URL, "127.0.0.1:0"
	c.Front.Drain = 500 * time.Millisecond
	m, err := app.InitializeMain(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		resp, err := http.Post("http://"+m.FrontAddr()+"/slow", "application/json", strings.NewReader("{}"))
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-started
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if body := <-got; body != "done" {
		t.Fatalf("a request in flight at stop got %q, want the engine's answer", body)
	}
}
