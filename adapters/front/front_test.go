package front

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/internal/httpjson"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// startFront serves a front for engine on 127.0.0.1, HTTP/1.1 and h2c.
func startFront(t *testing.T, o Options) (*Front, string) {
	t.Helper()
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(f)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// deadURL is the URL of a loopback port nothing listens on: an engine
// that is down.
func deadURL(t *testing.T) string {
	t.Helper()
	return "http://" + sharedtest.RefusedAddr(t)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAnsweredRoutesAreAnsweredAndTheRestPassedUnchanged(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, uri, body, host string
		header                  http.Header
	}
	got := make(chan seen, 1)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, string(b), r.Host, r.Header.Clone()}
		w.Header().Set("X-Engine", "yes")
		w.Header().Set("Connection", "X-Engine-Hop")
		w.Header().Set("X-Engine-Hop", "dropped")
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprint(w, "from the engine")
	}))
	defer engine.Close()
	answered := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "answered "+r.URL.RawQuery) })
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL), Answered: []Route{{http.MethodGet, "/v1/loads", answered}}})

	resp, err := http.Get(addr + "/v1/loads?include=core,disagg")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "answered include=core,disagg" {
		t.Fatalf("answered route: %q", b)
	}
	select {
	case s := <-got:
		t.Fatalf("an answered route reached the engine: %v", s)
	default:
	}

	req, _ := http.NewRequest(http.MethodPost, addr+"/v1/chat/completions?x=1&y=%2F", strings.NewReader(`{"stream":false}`))
	req.Header.Set("Authorization", "Bearer engine-key")
	req.Header.Set("X-Request-Id", "r-1")
	req.Header.Set("Connection", "X-Client-Hop")
	req.Header.Set("X-Client-Hop", "dropped")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || string(b) != "from the engine" || resp.Header.Get("X-Engine") != "yes" {
		t.Fatalf("proxied answer: %d %q %v", resp.StatusCode, b, resp.Header)
	}
	if resp.Header.Get("X-Engine-Hop") != "" {
		t.Errorf("a hop-by-hop header of the engine's reached the client: %v", resp.Header)
	}
	s := <-got
	if s.method != http.MethodPost || s.uri != "/v1/chat/completions?x=1&y=%2F" || s.body != `{"stream":false}` {
		t.Fatalf("engine saw %s %s %q", s.method, s.uri, s.body)
	}
	if s.header.Get("Authorization") != "Bearer engine-key" || s.header.Get("X-Request-Id") != "r-1" {
		t.Errorf("end-to-end headers lost: %v", s.header)
	}
	if s.header.Get("X-Client-Hop") != "" {
		t.Errorf("a hop-by-hop header of the client's reached the engine: %v", s.header)
	}
	if s.header.Get("X-Forwarded-For") != "127.0.0.1" || s.header.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("X-Forwarded-*: %v", s.header)
	}
}

// TestAnEventStreamPassesEventByEvent: the engine writes its next event
// only once the client has read the one before, so a proxy that buffered
// would hang the test (bounded by its context). So does any stream of
// unknown length (chunked), whatever its type.
func TestAnEventStreamPassesEventByEvent(t *testing.T) {
	t.Parallel()
	for _, contentType := range []string{"text/event-stream", "application/x-ndjson"} {
		t.Run(contentType, func(t *testing.T) {
			next := make(chan struct{})
			engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", contentType)
				for i := range 5 {
					fmt.Fprintf(w, "data: {\"token\": %d}\n\n", i)
					w.(http.Flusher).Flush()
					select {
					case <-next:
					case <-r.Context().Done():
						return
					}
				}
				fmt.Fprint(w, "data: [DONE]\n\n")
			}))
			defer engine.Close()
			_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL)})
			req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, addr+"/generate", strings.NewReader(`{"stream":true}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			var events []string
			for sc.Scan() {
				if line := sc.Text(); line != "" {
					events = append(events, line)
					if line != "data: [DONE]" {
						next <- struct{}{}
					}
				}
			}
			if len(events) != 6 || events[5] != "data: [DONE]" {
				t.Fatalf("events %q (scan: %v)", events, sc.Err())
			}
		})
	}
}

// TestRequestBodiesStreamAndAHundredMegabytesPass: the engine answers after
// the first chunk, before the client writes the second, so a proxy that
// buffered the body would hang; then 100 MB pass intact.
func TestRequestBodiesStreamAndAHundredMegabytesPass(t *testing.T) {
	t.Parallel()
	firstChunk := make(chan struct{})
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			buf := make([]byte, 5)
			if _, err := io.ReadFull(r.Body, buf); err != nil {
				t.Errorf("engine read: %v", err)
				return
			}
			close(firstChunk)
			rest, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s+%s", buf, rest)
			return
		}
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	}))
	defer engine.Close()
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL)})

	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("first"))
		select {
		case <-firstChunk:
			_, _ = pw.Write([]byte("second"))
			_ = pw.Close()
		case <-time.After(10 * time.Second):
			_ = pw.CloseWithError(fmt.Errorf("the engine never saw the first chunk: the body was buffered"))
		}
	}()
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, addr+"/stream", pr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "first+second" {
		t.Fatalf("streamed body: %q", b)
	}

	const size = 100 << 20
	src := io.LimitReader(zeroes{}, size)
	want := sha256.New()
	_, _ = io.Copy(want, io.LimitReader(zeroes{}, size))
	req, _ = http.NewRequestWithContext(testCtx(t), http.MethodPost, addr+"/generate", src)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != fmt.Sprintf("%d %x", size, want.Sum(nil)) {
		t.Fatalf("100 MB body: engine saw %q", b)
	}
}

type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i)
	}
	return len(p), nil
}

// TestAClientThatGoesAwayCancelsTheEngineRequest.
func TestAClientThatGoesAwayCancelsTheEngineRequest(t *testing.T) {
	t.Parallel()
	started, canceled := make(chan struct{}), make(chan struct{})
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		close(canceled)
	}))
	defer engine.Close()
	var mu sync.Mutex
	var codes []int
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL), Observer: Observer{Proxied: func(_ string, code int, _ time.Duration) {
		mu.Lock()
		codes = append(codes, code)
		mu.Unlock()
	}}})
	ctx, cancel := context.WithCancel(testCtx(t))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, addr+"/generate", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	cancel()
	resp.Body.Close()
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine's request was not cancelled when the client went away")
	}
}

func TestAnEngineThatIsDownGets502NamingItWhileAnsweredRoutesAnswer(t *testing.T) {
	t.Parallel()
	dead := deadURL(t)
	var proxied atomic.Int64
	answered := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"code":"UNREACHABLE"}}`)
	})
	_, addr := startFront(t, Options{Engine: mustURL(t, dead), Answered: []Route{{http.MethodGet, "/get_load", answered}},
		Observer: Observer{Proxied: func(class string, code int, _ time.Duration) {
			if class == ClassGenerate && code == http.StatusBadGateway {
				proxied.Add(1)
			}
		}}})
	resp, err := http.Post(addr+"/v1/completions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	var body httpjson.ErrorBody
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Content-Type") != "application/json" ||
		body.Error.Code != "ENGINE_UNREACHABLE" || !strings.Contains(body.Error.Message, dead) {
		t.Fatalf("engine down: %d %v %+v", resp.StatusCode, err, body)
	}
	if proxied.Load() != 1 {
		t.Errorf("the 502 was counted %d times under generate", proxied.Load())
	}
	resp, err = http.Get(addr + "/get_load")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("answered route with the engine down: %d", resp.StatusCode)
	}
	// A gRPC caller reads a gRPC status, not an HTML or JSON page.
	req, _ := http.NewRequest(http.MethodPost, addr+"/sglang.grpc.scheduler.SglangScheduler/Generate", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/grpc")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if gs := resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status"); gs != "14" ||
		!strings.Contains(resp.Header.Get("Grpc-Message")+resp.Trailer.Get("Grpc-Message"), "did not answer") {
		t.Fatalf("gRPC with the engine down: grpc-status %q message %q", gs, resp.Header.Get("Grpc-Message")+resp.Trailer.Get("Grpc-Message"))
	}
}

func TestAnsweredRoutesRequireTheEnginesKeyWhenItHasOne(t *testing.T) {
	t.Parallel()
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer engine.Close()
	answered := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "loads") })
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL), APIKey: "k3y", Answered: []Route{{http.MethodGet, "/v1/loads", answered}}})
	for auth, want := range map[string]int{"": 401, "Bearer nope": 401, "k3y": 401, "Bearer k3y": 200} {
		req, _ := http.NewRequest(http.MethodGet, addr+"/v1/loads", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Authorization %q: %d %q, want %d", auth, resp.StatusCode, b, want)
		}
		if want == 401 && strings.TrimSpace(string(b)) != `{"error":"Unauthorized"}` {
			t.Errorf("refusal %q is not the engine's", b)
		}
	}
}

// fakeNow is a clock the test moves.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeNow) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestMetricsAreScrapedOncePerWindowHoweverManyScrapers(t *testing.T) {
	t.Parallel()
	var scrapes atomic.Int64
	release := make(chan struct{})
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		n := scrapes.Add(1)
		if r.Header.Get("Authorization") != "Bearer k" {
			t.Errorf("scrape without the engine's key: %v", r.Header)
		}
		<-release
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# scrape %d for %s\n%s", n, r.Header.Get("Accept"), strings.Repeat("sglang:num_running_reqs 1\n", 100))
	}))
	defer engine.Close()
	clock := &fakeNow{t: time.Unix(1000, 0)}
	var hits, misses atomic.Int64
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL), APIKey: "k", MetricsMaxAge: time.Second, Now: clock.Now,
		Observer: Observer{Scrape: func(hit bool) {
			if hit {
				hits.Add(1)
			} else {
				misses.Add(1)
			}
		}}})
	scrape := func(accept string, gz bool) (string, *http.Response) {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, addr+"/metrics", nil)
		req.Header.Set("Accept", accept)
		tr := &http.Transport{DisableCompression: true}
		defer tr.CloseIdleConnections()
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Error(err)
			return "", nil
		}
		defer resp.Body.Close()
		r := io.Reader(resp.Body)
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Error(err)
				return "", resp
			}
			r = zr
		}
		b, _ := io.ReadAll(r)
		return string(b), resp
	}
	// Twenty scrapers at once, while the first scrape is under way.
	var wg sync.WaitGroup
	bodies := make([]string, 20)
	for i := range bodies {
		wg.Go(func() { bodies[i], _ = scrape("text/plain", i%2 == 0) })
	}
	// Until every scraper has asked.
	asked := time.NewTicker(time.Millisecond)
	defer asked.Stop()
	deadline := time.After(10 * time.Second)
	for hits.Load()+misses.Load() < 20 {
		select {
		case <-asked.C:
		case <-deadline:
			t.Fatalf("%d of 20 scrapers asked", hits.Load()+misses.Load())
		}
	}
	close(release)
	wg.Wait()
	if scrapes.Load() != 1 {
		t.Fatalf("20 scrapers in one window: %d engine scrapes, want 1", scrapes.Load())
	}
	for i, b := range bodies {
		if !strings.HasPrefix(b, "# scrape 1 for text/plain\n") {
			t.Fatalf("scraper %d got %.60q", i, b)
		}
	}
	if misses.Load() != 1 || hits.Load() != 19 {
		t.Errorf("hits %d misses %d, want 19 and 1", hits.Load(), misses.Load())
	}
	clock.Add(999 * time.Millisecond)
	if b, resp := scrape("text/plain", false); !strings.HasPrefix(b, "# scrape 1 ") || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4" {
		t.Fatalf("within the window: %.40q %v", b, resp.Header)
	}
	// Another exposition format is a scrape of its own.
	if b, _ := scrape("application/openmetrics-text", false); !strings.HasPrefix(b, "# scrape 2 for application/openmetrics-text") {
		t.Fatalf("OpenMetrics scraper: %.60q", b)
	}
	clock.Add(time.Millisecond)
	if b, _ := scrape("text/plain", false); !strings.HasPrefix(b, "# scrape 3 ") {
		t.Fatalf("after the window: %.40q", b)
	}
	if scrapes.Load() != 3 {
		t.Fatalf("engine scrapes %d, want 3", scrapes.Load())
	}
}

func TestMetricsOfADeadEngineAreA502CachedForTheWindow(t *testing.T) {
	t.Parallel()
	dead := deadURL(t)
	var misses atomic.Int64
	_, addr := startFront(t, Options{Engine: mustURL(t, dead), MetricsMaxAge: time.Hour,
		Observer: Observer{Scrape: func(hit bool) {
			if !hit {
				misses.Add(1)
			}
		}}})
	for range 3 {
		resp, err := http.Get(addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), dead) {
			t.Fatalf("dead engine's /metrics: %d %q", resp.StatusCode, b)
		}
	}
	if misses.Load() != 1 {
		t.Fatalf("a dead engine was dialled %d times in one window", misses.Load())
	}
}

// TestUpgradesPassThrough: a connection upgrade (a WebSocket handshake)
// is passed to the engine and the bytes then flow both ways.
func TestUpgradesPassThrough(t *testing.T) {
	t.Parallel()
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		fmt.Fprint(brw, "echo: "+line)
		_ = brw.Flush()
	}))
	defer engine.Close()
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL)})
	conn, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	fmt.Fprint(conn, "hello\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo: hello\n" {
		t.Fatalf("after the upgrade: %q %v", line, err)
	}
}

// TestClientsMaySpeakH2C: a client speaking HTTP/2 without TLS (prior
// knowledge) is proxied to an HTTP/1.1 engine.
func TestClientsMaySpeakH2C(t *testing.T) {
	t.Parallel()
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "engine saw HTTP/%d", r.ProtoMajor)
	}))
	defer engine.Close()
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL)})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || string(b) != "engine saw HTTP/1" {
		t.Fatalf("h2c client: HTTP/%d %q", resp.ProtoMajor, b)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]Options{
		"no engine":        {},
		"ftp engine":       {Engine: &url.URL{Scheme: "ftp", Host: "h"}},
		"negative max age": {Engine: &url.URL{Scheme: "http", Host: "h"}, MetricsMaxAge: -1},
		"route without a handler": {Engine: &url.URL{Scheme: "http", Host: "h"},
			Answered: []Route{{Method: http.MethodGet, Path: "/v1/loads"}}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestClassOf(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/generate": ClassGenerate, "/v1/chat/completions": ClassGenerate, "/v1/completions": ClassGenerate,
		"/health": ClassHealth, "/health_generate": ClassHealth, "/v1/models": ClassInfo, "/server_info": ClassInfo,
		"/get_model_info": ClassInfo, "/flush_cache": ClassOther, "/random/" + strings.Repeat("x", 100): ClassOther,
	} {
		if got := ClassOf(httptest.NewRequest(http.MethodPost, path, nil)); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/sglang.grpc.scheduler.SglangScheduler/Generate", nil)
	r.Header.Set("Content-Type", "application/grpc+proto")
	if ClassOf(r) != ClassGRPC {
		t.Error("a gRPC call is not classed grpc")
	}
}

// TestAStreamIsNotCutWhileItsRequestBodyIsStillOpen: an engine that
// answers before it has read the whole request body (a stream that starts
// at once) keeps streaming through the front. Without full duplex, the
// front's HTTP/1.1 server closes the request body once the response
// starts, the copy of that body to the engine fails, and the transport
// drops the engine's connection mid-stream (golang/go#40747).
func TestAStreamIsNotCutWhileItsRequestBodyIsStillOpen(t *testing.T) {
	t.Parallel()
	next, stop := make(chan struct{}), make(chan struct{})
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			case <-stop:
				return
			}
		}
		rest, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "data: body %q\n\n", rest)
	}))
	defer engine.Close()
	defer close(stop) // before Close, which waits for the handler
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL)})
	pr, pw := io.Pipe()
	ctx := testCtx(t)
	context.AfterFunc(ctx, func() { _ = pw.CloseWithError(ctx.Err()) }) // a client stuck writing gives up too
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, addr+"/generate", pr)
	go func() { _, _ = pw.Write([]byte("{")) }()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var events []string
	for len(events) < 4 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream was cut after %q: %v", events, err)
		}
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		events = append(events, line)
		switch len(events) {
		case 1, 2:
			next <- struct{}{}
		case 3:
			_, _ = pw.Write([]byte(`"stream":true}`))
			_ = pw.Close()
			next <- struct{}{}
		}
	}
	if events[3] != `data: body "\"stream\":true}"` && events[3] != `data: body "{\"stream\":true}"` {
		t.Fatalf("events %q", events)
	}
}

// TestAKeptAliveConnectionSurvivesAFailedProxy: a request whose body the
// transport never read (the engine refused the connection) leaves the
// client's connection usable for its next request.
func TestAKeptAliveConnectionSurvivesAFailedProxy(t *testing.T) {
	t.Parallel()
	dead := deadURL(t)
	_, addr := startFront(t, Options{Engine: mustURL(t, dead)})
	conn, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for i := range 3 {
		body := strings.Repeat("x", 64<<10)
		fmt.Fprintf(conn, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on the kept-alive connection: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
}

// writeCounter counts the writes on the connections a listener accepts.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countedConn{c, &l.writes}, nil
}

type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestAnAnswerWithAContentLengthIsWrittenOnce: a non-streaming answer
// reaches the client's connection in one write, headers and body
// together; an event stream still goes event by event
// (TestAnEventStreamPassesEventByEvent). Flushing every write cost each
// request a header-only write and a timer goroutine that made it.
func TestAnAnswerWithAContentLengthIsWrittenOnce(t *testing.T) {
	t.Parallel()
	answer := `{"text":"sixteen tokens","meta_info":{"completion_tokens":16}}`
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
		_, _ = io.WriteString(w, answer)
	}))
	defer engine.Close()
	f, err := New(Options{Engine: mustURL(t, engine.URL)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(f)
	counter := &writeCounter{Listener: srv.Listener}
	srv.Listener = counter
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	const requests = 50
	for i := range requests {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, srv.URL+"/generate", strings.NewReader(`{"text":"hi"}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != answer || resp.ContentLength != int64(len(answer)) {
			t.Fatalf("request %d: %q, Content-Length %d", i, b, resp.ContentLength)
		}
	}
	if got := counter.writes.Load(); got != requests {
		t.Errorf("%d writes to the client for %d answers, want one each", got, requests)
	}
}

// TestRequestsInFlightAreBounded: one request past MaxInFlight is a 503
// at once, not one more goroutine pair and engine connection; a slot
// frees when a request ends.
func TestRequestsInFlightAreBounded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer engine.Close()
	defer close(release)
	var refused atomic.Int64
	f, addr := startFront(t, Options{Engine: mustURL(t, engine.URL), MaxInFlight: 2, Observer: Observer{Refused: func(string) {
		refused.Add(1)
	}}})
	ctx := testCtx(t)
	for range 2 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, addr+"/generate", strings.NewReader("{}"))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	for f.inFlight.Load() < 2 {
		if ctx.Err() != nil {
			t.Fatal("the two requests never reached the engine")
		}
		time.Sleep(time.Millisecond) // until both are with the engine
	}
	resp, err := http.Post(addr+"/generate", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	var body httpjson.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || body.Error.Code != "RESOURCE_EXHAUSTED" || resp.Header.Get("Retry-After") == "" || refused.Load() != 1 {
		t.Fatalf("past the bound: %d %+v, counted %d", resp.StatusCode, body, refused.Load())
	}
	// The count in flight, not the limit twice.
	if want := "3 requests are in flight through the front with this one, the limit is 2"; body.Error.Message != want {
		t.Fatalf("message %q, want %q", body.Error.Message, want)
	}
}

// TestForwardedForIsAppendedTo: an ingress's X-Forwarded-For reaches the
// engine with the client's address after it.
func TestForwardedForIsAppendedTo(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Forwarded-For")
	}))
	defer engine.Close()
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL)})
	req, _ := http.NewRequest(http.MethodGet, addr+"/v1/models", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if xff := <-got; xff != "203.0.113.7, 127.0.0.1" {
		t.Fatalf("X-Forwarded-For at the engine: %q", xff)
	}
}

// TestAGRPCEngineCannotFillTheFrontForAClientThatDoesNotRead: over h2c the
// front takes at most its receive buffer from the engine ahead of a client
// that reads nothing (HTTP/2's defaults would take 4 MiB a stream).
func TestAGRPCEngineCannotFillTheFrontForAClientThatDoesNotRead(t *testing.T) {
	t.Parallel()
	var written atomic.Int64
	engine := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		chunk := make([]byte, 16<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			written.Add(int64(len(chunk)))
		}
	}))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	engine.Config.Protocols = &p
	engine.Start()
	defer engine.Close()
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL), H2C: true})
	var cp http.Protocols
	cp.SetUnencryptedHTTP2(true)
	client := &http.Transport{Protocols: &cp, HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10}}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, addr+"/sglang.grpc.scheduler.SglangScheduler/Generate", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/grpc")
	resp, err := (&http.Client{Transport: client}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // read nothing
	last, steady := int64(-1), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Since(steady) < 300*time.Millisecond; {
		if n := written.Load(); n != last {
			last, steady = n, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine kept writing: %d bytes", written.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if last > 1<<20 {
		t.Fatalf("the engine wrote %d KiB ahead of a client that reads nothing, want at most the front's buffer and the client's window (~ 320 KiB)", last>>10)
	}
}

// TestAFailedScrapeIsHeldLongerThanAWindow: an engine whose /metrics
// fails is not scraped again each window, but after failureHold.
func TestAFailedScrapeIsHeldLongerThanAWindow(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "scheduler stuck", http.StatusInternalServerError)
	}))
	defer engine.Close()
	clock := &fakeNow{t: time.Unix(1000, 0)}
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL), MetricsMaxAge: time.Second, Now: clock.Now})
	scrape := func() {
		resp, err := http.Get(addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	scrape()
	clock.Add(2 * time.Second) // two windows, within failureHold
	scrape()
	if hits.Load() != 1 {
		t.Fatalf("a failing /metrics was scraped %d times within failureHold", hits.Load())
	}
	clock.Add(failureHold)
	scrape()
	if hits.Load() != 2 {
		t.Fatalf("after failureHold: %d scrapes, want 2", hits.Load())
	}
}

// TestInventedAcceptValuesGiveTheirSlotsBack: once the cache holds
// maxAcceptKinds formats and they age out, a new format gets a slot of its
// own instead of the engine's default.
func TestInventedAcceptValuesGiveTheirSlotsBack(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 64)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Accept")
	}))
	defer engine.Close()
	clock := &fakeNow{t: time.Unix(1000, 0)}
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL), MetricsMaxAge: time.Second, Now: clock.Now})
	scrape := func(accept string) {
		req, _ := http.NewRequest(http.MethodGet, addr+"/metrics", nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for i := range maxAcceptKinds {
		scrape(fmt.Sprintf("invented/%d", i))
		<-seen
	}
	clock.Add(2 * time.Second) // every slot stale
	scrape("application/openmetrics-text")
	if got := <-seen; got != "application/openmetrics-text" {
		t.Fatalf("the engine was asked for %q, want the scraper's own format", got)
	}
}

// TestABrokenRequestBodyIsTheClientsFault: a client whose body breaks off
// in a way HTTP forbids (a malformed chunk) is answered 400 naming its
// body, and counted as such, not as an engine that did not answer.
func TestABrokenRequestBodyIsTheClientsFault(t *testing.T) {
	t.Parallel()
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "{}")
	}))
	t.Cleanup(engine.Close)
	codes := make(chan int, 4)
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL),
		Observer: Observer{Proxied: func(class string, code int, _ time.Duration) { codes <- code }}})
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// "zz" is no chunk size.
	fmt.Fprint(c, "POST /generate HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\nzz\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	var body httpjson.ErrorBody
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusBadRequest || body.Error.Code != "BAD_REQUEST_BODY" ||
		!strings.Contains(body.Error.Message, "request body") {
		t.Fatalf("a malformed chunk: %d %+v %v", resp.StatusCode, body, err)
	}
	select {
	case code := <-codes:
		if code != http.StatusBadRequest {
			t.Errorf("counted as %d, want 400 (the client's)", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("the refused request was not counted")
	}
}
