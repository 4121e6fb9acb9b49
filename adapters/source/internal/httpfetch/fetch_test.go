package httpfetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/source/internal/sourcetest"
	"github.com/loadreporter/loadreporter/domain"
)

// options are those of a source like sglang-http; tests change what they
// are about.
func options(baseURL string) Options {
	return Options{
		Name: "test-source", BaseURL: baseURL, URLFlag: "--engine-url", Example: "http://127.0.0.1:30000", Peer: "engine",
		Path: "/v1/loads", Query: "include=core", APIKeyFlag: "--engine-api-key", MaxBodyBytes: 256,
	}
}

func newFetcher(t *testing.T, o Options) *Fetcher {
	t.Helper()
	f, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func TestGet(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		chunk  bool // flush first, so there is no Content-Length
		accept string
	}{
		{name: "small", body: `{"loads":[]}`, accept: "application/json"},
		{name: "exactly the bound", body: strings.Repeat("x", 256)},
		{name: "exactly the bound, chunked", body: strings.Repeat("x", 256), chunk: true},
		{name: "empty", body: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []*http.Request
			base := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
				if tt.chunk {
					_ = http.NewResponseController(w).Flush()
				}
				_, _ = w.Write([]byte(tt.body))
			})
			o := options(base + "/prefix/")
			o.Accept = tt.accept
			f := newFetcher(t, o)
			body, err := sourcetest.Within(t, sourcetest.Wait, f.Get)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if string(body) != tt.body {
				t.Errorf("body %q, want %q", body, tt.body)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(got))
			}
			r := got[0]
			if r.Method != http.MethodGet || r.URL.String() != "/prefix/v1/loads?include=core" {
				t.Errorf("request %s %s, want GET /prefix/v1/loads?include=core", r.Method, r.URL)
			}
			if a := r.Header.Values("Accept"); strings.Join(a, "|") != tt.accept {
				t.Errorf("Accept = %q, want %q", a, tt.accept)
			}
		})
	}
}

func TestGetBearerToken(t *testing.T) {
	tests := []struct {
		name   string
		apiKey string
		want   []string
	}{
		{"set", "s3cret-key", []string{"Bearer s3cret-key"}},
		{"unset", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			base := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = r.Header.Values("Authorization")
				mu.Unlock()
			})
			o := options(base)
			o.APIKey = tt.apiKey
			f := newFetcher(t, o)
			if _, err := sourcetest.Within(t, sourcetest.Wait, f.Get); err != nil {
				t.Fatalf("Get: %v", err)
			}
			if strings.Contains(f.String(), "s3cret") || strings.Contains(f.URL(), "s3cret") {
				t.Errorf("String() or URL() shows the API key: %s", f)
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("Authorization = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestGetUsesGivenClient: a caller's client carries every request, and
// Close leaves its connections alone.
func TestGetUsesGivenClient(t *testing.T) {
	base := sourcetest.Serve(t, func(http.ResponseWriter, *http.Request) {})
	rt := &countingTransport{next: http.DefaultTransport}
	o := options(base)
	o.Client = &http.Client{Transport: rt}
	f := newFetcher(t, o)
	for range 3 {
		if _, err := sourcetest.Within(t, sourcetest.Wait, f.Get); err != nil {
			t.Fatalf("Get: %v", err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.requests != 3 || rt.closes != 0 {
		t.Errorf("given client carried %d requests and was closed %d times, want 3 and 0", rt.requests, rt.closes)
	}
}

type countingTransport struct {
	next     http.RoundTripper
	mu       sync.Mutex
	requests int
	closes   int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.requests++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// CloseIdleConnections is what http.Client.CloseIdleConnections calls.
func (c *countingTransport) CloseIdleConnections() {
	c.mu.Lock()
	c.closes++
	c.mu.Unlock()
}

// TestOwnClientKeepsAlive: without a given client, requests share one
// connection, and Close drops it.
func TestOwnClientKeepsAlive(t *testing.T) {
	var mu sync.Mutex
	opened := 0
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			mu.Lock()
			opened++
			mu.Unlock()
		case http.StateClosed:
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f := newFetcher(t, options(srv.URL))
	for range 3 {
		if _, err := sourcetest.Within(t, sourcetest.Wait, f.Get); err != nil {
			t.Fatalf("Get: %v", err)
		}
	}
	mu.Lock()
	n := opened
	mu.Unlock()
	if n != 1 {
		t.Errorf("3 requests opened %d connections, want 1", n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(t.Context(), sourcetest.Wait)
	defer stop()
	select {
	case <-closed:
	case <-wait.Done():
		t.Fatal("Close left the idle connection open")
	}
}

// closedPortURL returns a base URL on 127.0.0.1 where nothing listens.
func closedPortURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// raw answers with bytes written straight to the connection, then hangs up.
func raw(response string) func(<-chan struct{}) http.HandlerFunc {
	return func(<-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			_, _ = buf.WriteString(response)
			_ = buf.Flush()
		}
	}
}

// status answers with code and body.
func status(code int, body string) func(<-chan struct{}) http.HandlerFunc {
	return func(<-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			_, _ = w.Write([]byte(body))
		}
	}
}

func TestGetErrors(t *testing.T) {
	body := strings.Repeat("0123456789", 100)
	tests := []struct {
		name     string
		handler  func(done <-chan struct{}) http.HandlerFunc
		baseURL  func(t *testing.T) string // instead of a handler
		deadline time.Duration             // 0 means sourcetest.Wait
		// want is the whole message, or with prefix its start; "{url}"
		// is the request URL.
		want     string
		prefix   bool
		also     string // a further substring, when want is a prefix
		wantCode string
		timeout  bool
	}{
		{
			name:     "connection refused",
			baseURL:  closedPortURL,
			want:     "GET {url}: dial tcp ",
			prefix:   true,
			also:     "connection refused",
			wantCode: domain.CodeSourceFailed,
		},
		{
			// Not asked for, not undone by net/http: a garbled body.
			name: "an encoding the reporter does not decode",
			handler: func(<-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Encoding", "br")
					_, _ = w.Write([]byte{0x1b, 0x03, 0x00})
				}
			},
			want:     `GET {url}: the engine answered with Content-Encoding "br", which the reporter does not decode (it accepts gzip or none)`,
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "404",
			handler:  func(<-chan struct{}) http.HandlerFunc { return http.NotFound },
			want:     "GET {url}: HTTP 404 Not Found: 404 page not found",
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "500 with a JSON body over lines",
			handler:  status(http.StatusInternalServerError, "{\"error\":\n  \"scheduler crashed\"}\n"),
			want:     `GET {url}: HTTP 500 Internal Server Error: {"error": "scheduler crashed"}`,
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "500 with a text body over lines",
			handler:  status(http.StatusInternalServerError, "Internal Server Error\n\nengine core died\n"),
			want:     "GET {url}: HTTP 500 Internal Server Error: Internal Server Error engine core died",
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "500 with a blank body",
			handler:  status(http.StatusInternalServerError, " \n\t "),
			want:     "GET {url}: HTTP 500 Internal Server Error",
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "500 with invalid UTF-8 and a NUL",
			handler:  status(http.StatusInternalServerError, "a\xff\xfeb\x00c"),
			want:     "GET {url}: HTTP 500 Internal Server Error: a\uFFFDb c",
			wantCode: domain.CodeSourceFailed,
		},
		{
			name: "503 with a long HTML body",
			handler: status(http.StatusServiceUnavailable,
				"<html>\n<body>\n"+strings.Repeat("overloaded ", 1000)+"</body></html>"),
			// The first 200 bytes, folded, then an ellipsis.
			want:     "GET {url}: HTTP 503 Service Unavailable: <html> <body> " + strings.Repeat("overloaded ", 16) + "overloaded…",
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "status without a reason phrase",
			handler:  status(599, ""),
			want:     "GET {url}: HTTP 599 status code 599",
			wantCode: domain.CodeSourceFailed,
		},
		{
			name: "over the bound by Content-Length",
			handler: func(<-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
					_, _ = w.Write([]byte(body))
				}
			},
			want:     "GET {url}: response body exceeds 256 bytes (Content-Length 1000)",
			wantCode: domain.CodeSourceFailed,
		},
		{
			name: "over the bound, chunked",
			handler: func(<-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					// Flushing first makes the response chunked: no
					// Content-Length to judge by, only the bytes.
					_, _ = w.Write([]byte(body[:100]))
					_ = http.NewResponseController(w).Flush()
					_, _ = w.Write([]byte(body[100:]))
				}
			},
			want:     "GET {url}: response body exceeds 256 bytes",
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "connection closed mid-body",
			handler:  raw("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"), // 3 bytes of 100
			want:     "GET {url}: response body cut short: unexpected EOF",
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "not HTTP",
			handler:  raw("NOT HTTP\r\n\r\n"),
			want:     `GET {url}: net/http: HTTP/1.x transport connection broken: malformed HTTP status code "HTTP"`,
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "hang",
			handler:  sourcetest.Hang,
			deadline: 100 * time.Millisecond,
			want:     "GET {url}: timed out after ",
			prefix:   true,
			wantCode: domain.CodePullTimeout,
			timeout:  true,
		},
		{
			name: "slow body",
			handler: func(done <-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					// Headers and a start at once, then a byte now and then:
					// the body would take seconds to finish.
					rc := http.NewResponseController(w)
					_, _ = w.Write([]byte(body[:20]))
					_ = rc.Flush()
					tick := time.NewTicker(10 * time.Millisecond)
					defer tick.Stop()
					for i := 20; i < 250; i++ {
						select {
						case <-r.Context().Done():
							return
						case <-done:
							return
						case <-tick.C:
						}
						_, _ = w.Write([]byte{body[i]})
						_ = rc.Flush()
					}
				}
			},
			deadline: 200 * time.Millisecond,
			want:     "GET {url}: timed out after ",
			prefix:   true,
			wantCode: domain.CodePullTimeout,
			timeout:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var base string
			if tt.baseURL != nil {
				base = tt.baseURL(t)
			} else {
				base = sourcetest.ServeBlocking(t, tt.handler)
			}
			f := newFetcher(t, options(base))
			body, err := sourcetest.Within(t, tt.deadline, f.Get)
			msg := sourcetest.Failure(t, string(body), err, tt.wantCode, tt.timeout)
			want := strings.ReplaceAll(tt.want, "{url}", f.URL())
			if tt.prefix && !strings.HasPrefix(msg, want) || !tt.prefix && msg != want {
				t.Errorf("error %q\nwant %q", msg, want)
			}
			if !strings.Contains(msg, tt.also) {
				t.Errorf("error %q\ndoes not contain %q", msg, tt.also)
			}
		})
	}
}

// TestGetCanceled: a pull whose context is canceled (not timed out) says so,
// and matches context.Canceled.
func TestGetCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base := sourcetest.ServeBlocking(t, func(done <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			cancel() // the request has arrived: give up on it
			sourcetest.Hang(done)(w, r)
		}
	})
	f := newFetcher(t, options(base))
	body, err := sourcetest.Within(t, sourcetest.Wait, func(context.Context) ([]byte, error) { return f.Get(ctx) })
	want := "GET " + f.URL() + ": pull canceled"
	if msg := sourcetest.Failure(t, string(body), err, domain.CodePullTimeout, false); msg != want {
		t.Errorf("error %q, want %q", msg, want)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not match context.Canceled", err)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		change  func(o *Options)
		wantErr string // the whole message; "" means valid
		wantURL string
	}{
		{name: "plain", change: func(o *Options) { o.BaseURL = "http://127.0.0.1:30000" },
			wantURL: "http://127.0.0.1:30000/v1/loads?include=core"},
		{name: "trailing slashes", change: func(o *Options) { o.BaseURL = "https://gw.example/engines/a//" },
			wantURL: "https://gw.example/engines/a/v1/loads?include=core"},
		{name: "no query", change: func(o *Options) { o.BaseURL, o.Path, o.Query = "http://127.0.0.1:8000/vllm", "/metrics", "" },
			wantURL: "http://127.0.0.1:8000/vllm/metrics"},
		{name: "password redacted", change: func(o *Options) { o.BaseURL = "http://u:pw@127.0.0.1:30000" },
			wantURL: "http://u:xxxxx@127.0.0.1:30000/v1/loads?include=core"},
		{name: "empty", change: func(o *Options) { o.BaseURL = "" },
			wantErr: "--engine-url is required for the test-source source (for example http://127.0.0.1:30000)"},
		{name: "blank", change: func(o *Options) { o.BaseURL = " \t" },
			wantErr: "--engine-url is required for the test-source source (for example http://127.0.0.1:30000)"},
		{name: "endpoint URL", change: func(o *Options) { o.BaseURL = "http://127.0.0.1:30000/v1/loads" },
			wantURL: "http://127.0.0.1:30000/v1/loads?include=core"},
		{name: "endpoint URL with its query", change: func(o *Options) { o.BaseURL = "http://u:pw@h:1/v1/loads?include=core" },
			wantURL: "http://u:xxxxx@h:1/v1/loads?include=core"},
		{name: "endpoint URL with another query", change: func(o *Options) { o.BaseURL = "http://h:1/gw/v1/loads/?include=all" },
			wantURL: "http://h:1/gw/v1/loads?include=core"},
		{name: "metrics URL", change: func(o *Options) { o.BaseURL, o.Path, o.Query = "http://127.0.0.1:8000/metrics", "/metrics", "" },
			wantURL: "http://127.0.0.1:8000/metrics"},
		{name: "metrics URL behind a prefix", change: func(o *Options) { o.BaseURL, o.Path, o.Query = "http://h:8000/vllm/metrics/", "/metrics", "" },
			wantURL: "http://h:8000/vllm/metrics"},
		{name: "a path that merely ends alike", change: func(o *Options) { o.BaseURL, o.Path, o.Query = "http://h:8000/vllm-metrics", "/metrics", "" },
			wantURL: "http://h:8000/vllm-metrics/metrics"},
		{name: "no scheme", change: func(o *Options) { o.BaseURL = "127.0.0.1:30000" },
			wantErr: `--engine-url "127.0.0.1:30000": add the scheme, e.g. http://127.0.0.1:30000`},
		{name: "no scheme, a name", change: func(o *Options) { o.BaseURL = "localhost:30000" },
			wantErr: `--engine-url "localhost:30000": add the scheme, e.g. http://localhost:30000`},
		{name: "no scheme, a password", change: func(o *Options) { o.BaseURL = "u:pw@h:1/v1" },
			wantErr: `--engine-url "u:xxxxx@h:1/v1": add the scheme, e.g. http://u:xxxxx@h:1/v1`},
		{name: "bad escape", change: func(o *Options) { o.BaseURL = "%zz" },
			wantErr: `--engine-url "%zz": invalid URL escape "%zz"`},
		{name: "bad scheme", change: func(o *Options) { o.BaseURL = "ftp://u:pw@h" },
			wantErr: `--engine-url "ftp://u:xxxxx@h": scheme must be http or https`},
		{name: "no host", change: func(o *Options) { o.BaseURL = "http:///v1" },
			wantErr: `--engine-url "http:///v1": no host`},
		{name: "query", change: func(o *Options) { o.BaseURL = "http://u:pw@h:1/v1?include=core" },
			wantErr: `--engine-url "http://u:xxxxx@h:1/v1?include=core": give the engine's base URL without a query; /v1/loads?include=core is added`},
		{name: "endpoint URL with a fragment", change: func(o *Options) { o.BaseURL = "http://h/v1/loads#x" },
			wantErr: `--engine-url "http://h/v1/loads#x": must not have a #fragment`},
		{name: "empty query", change: func(o *Options) { o.BaseURL, o.Peer, o.Path, o.Query = "http://h/?", "server", "/metrics", "" },
			wantErr: `--engine-url "http://h/?": give the server's base URL without a query; /metrics is added`},
		{name: "fragment", change: func(o *Options) { o.BaseURL = "http://h#x" },
			wantErr: `--engine-url "http://h#x": must not have a #fragment`},
		{name: "key with newline", change: func(o *Options) { o.APIKey = "a\nb" },
			wantErr: "--engine-api-key contains a control character"},
		{name: "key with DEL", change: func(o *Options) { o.APIKey = "a\x7fb" },
			wantErr: "--engine-api-key contains a control character"},
		{name: "zero body bound", change: func(o *Options) { o.MaxBodyBytes = 0 },
			wantErr: "test-source max body bytes must be > 0, got 0"},
		{name: "negative body bound", change: func(o *Options) { o.MaxBodyBytes = -1 },
			wantErr: "test-source max body bytes must be > 0, got -1"},
		{name: "URL named before key and bound", change: func(o *Options) { o.BaseURL, o.APIKey, o.MaxBodyBytes = "http://h#x", "a\nb", -1 },
			wantErr: `--engine-url "http://h#x": must not have a #fragment`},
		{name: "key named before bound", change: func(o *Options) { o.APIKey, o.MaxBodyBytes = "a\nb", -1 },
			wantErr: "--engine-api-key contains a control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options("http://127.0.0.1:30000")
			tt.change(&o)
			if tt.wantErr != "" {
				_, err := New(o)
				sourcetest.Invalid(t, err, tt.wantErr)
				return
			}
			f := newFetcher(t, o)
			if f.URL() != tt.wantURL || f.String() != "test-source "+tt.wantURL {
				t.Errorf("URL() = %s, String() = %s, want %s", f.URL(), f, tt.wantURL)
			}
		})
	}
}

// TestGetDoesNotFollowRedirects: an engine URL that answers with a redirect
// is an error naming where it points; the request is not followed, so the
// API key never reaches the other port net/http would send it to (it
// keeps the header for any port of the same host), with the given client
// as with its own.
func TestGetDoesNotFollowRedirects(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []string
	other := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"loads":[]}`))
	})
	base := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+"/anything", http.StatusFound)
	})
	for _, client := range []*http.Client{nil, {}} {
		o := options(base)
		o.APIKey, o.Client = "s3cret-key", client
		f := newFetcher(t, o)
		_, err := sourcetest.Within(t, sourcetest.Wait, f.Get)
		if msg := domain.ErrorMessage(err); domain.ErrorCode(err) != domain.CodeSourceFailed ||
			!strings.Contains(msg, "HTTP 302 Found to "+other+"/anything: redirects are not followed") {
			t.Errorf("own client %v: %v, want SOURCE_FAILED naming the redirect", client == nil, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) != 0 {
		t.Errorf("the redirect was followed: %q", elsewhere)
	}
}
