package sglanghttp

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/source/internal/sourcetest"
	"github.com/loadreporter/loadreporter/domain"
)

// serveBody answers every request like SGLang: 200, JSON.
func serveBody(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

func newSource(t *testing.T, o Options) *Source {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pull runs one Pull under a ctx deadline of d (0 means sourcetest.Wait)
// and fails the test if Pull does not return within sourcetest.Wait.
func pull(t *testing.T, s *Source, d time.Duration) (domain.Snapshot, error) {
	t.Helper()
	return sourcetest.Within(t, d, s.Pull)
}

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPullFixtures(t *testing.T) {
	unix := func(sec int64, nsec int64) time.Time { return time.Unix(sec, nsec) }
	tests := []struct {
		fixture string
		want    []domain.RankLoad
	}{
		{
			fixture: "sglang-v1-loads-core.json",
			want: []domain.RankLoad{
				{
					DPRank: 0, NumRunningReqs: 12, NumWaitingReqs: 3, NumWaitingUncachedTokens: 4096,
					NumUsedTokens: 61234, NumTotalTokens: 65330, MaxTotalNumTokens: 220000, MaxRunningRequests: 256,
					TokenUsage: 0.2783, GenThroughput: 1834.27, CacheHitRate: 0.4127, Utilization: 0.6012,
				},
				{
					DPRank: 1, NumRunningReqs: 9, NumWaitingReqs: 0, NumWaitingUncachedTokens: 0,
					NumUsedTokens: 40011, NumTotalTokens: 40011, MaxTotalNumTokens: 220000, MaxRunningRequests: 256,
					TokenUsage: 0.1819, GenThroughput: 1502.9, CacheHitRate: 0.3988, Utilization: 0.5521,
				},
			},
		},
		{
			fixture: "sglang-v1-loads-all.json",
			want: []domain.RankLoad{{
				DPRank: 0, NumRunningReqs: 12, NumWaitingReqs: 3, NumWaitingUncachedTokens: 4096,
				NumUsedTokens: 61234, NumTotalTokens: 65330, MaxTotalNumTokens: 220000, MaxRunningRequests: 256,
				TokenUsage: 0.2783, GenThroughput: 1834.27, CacheHitRate: 0.4127, Utilization: 0.6012,
			}},
		},
		{
			fixture: "sglang-v1-loads-legacy.json",
			want: []domain.RankLoad{
				{
					DPRank: 0, SnapshotTime: unix(1772100942, 498700000),
					NumRunningReqs: 4, NumWaitingReqs: 1, NumUsedTokens: 18000,
					MaxTotalNumTokens: 180000, MaxRunningRequests: 128,
					TokenUsage: 0.1, GenThroughput: 640.5, CacheHitRate: 0.25, Utilization: 0.31,
				},
				{
					DPRank: 1, SnapshotTime: unix(1772100942, 499100000),
					NumRunningReqs: 2, NumWaitingReqs: 0, NumUsedTokens: 9000,
					MaxTotalNumTokens: 180000, MaxRunningRequests: 128,
					TokenUsage: 0.05, GenThroughput: 330.0, CacheHitRate: 0.2, Utilization: 0.18,
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			body := readFixture(t, tt.fixture)
			var mu sync.Mutex
			var got []*http.Request
			url := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
				serveBody(body)(w, r)
			})
			s := newSource(t, Options{BaseURL: url, APIKey: "s3cret-key"})
			snap, err := pull(t, s, sourcetest.Wait)
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if len(snap.Ranks) != len(tt.want) {
				t.Fatalf("got %d ranks, want %d: %+v", len(snap.Ranks), len(tt.want), snap.Ranks)
			}
			for i, want := range tt.want {
				assertRank(t, snap.Ranks[i], want)
			}
			if err := domain.ValidateSnapshot(snap, domain.RankRange(len(tt.want))); err != nil {
				t.Errorf("fixture does not validate: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("engine saw %d requests, want 1", len(got))
			}
			r := got[0]
			if r.Method != http.MethodGet || r.URL.Path != "/v1/loads" || r.URL.RawQuery != "include=core" {
				t.Errorf("request %s %s, want GET /v1/loads?include=core", r.Method, r.URL)
			}
			if a, k := r.Header.Get("Accept"), r.Header.Get("Authorization"); a != "application/json" || k != "Bearer s3cret-key" {
				t.Errorf("Accept %q Authorization %q, want application/json and the bearer key", a, k)
			}
		})
	}
}

// assertRank compares every field; the snapshot time to the microsecond,
// since a float of seconds carries no more.
func assertRank(t *testing.T, got, want domain.RankLoad) {
	t.Helper()
	gt, wt := got.SnapshotTime, want.SnapshotTime
	if d := gt.Sub(wt); gt.IsZero() != wt.IsZero() || d > time.Microsecond || d < -time.Microsecond {
		t.Errorf("rank %d: SnapshotTime %v, want %v", want.DPRank, gt, wt)
	}
	got.SnapshotTime, want.SnapshotTime = time.Time{}, time.Time{}
	if got != want {
		t.Errorf("rank %d:\n got %+v\nwant %+v", want.DPRank, got, want)
	}
}

func TestPullNumberForms(t *testing.T) {
	// Python engines may send integral floats for integer fields and plain
	// integers for ratios; both are fine.
	body := `{"loads":[{"dp_rank":1.0,"num_running_reqs":12.0,"num_waiting_reqs":1e1,
		"num_waiting_uncached_tokens":-0,"num_used_tokens":2.5e3,"num_total_tokens":null,
		"max_total_num_tokens":9223372036854775807.0,"max_running_requests":256,
		"token_usage":1,"gen_throughput":0,"cache_hit_rate":5e-1,"utilization":null,
		"timestamp":0}]}`
	url := sourcetest.Serve(t, serveBody(body))
	snap, err := pull(t, newSource(t, Options{BaseURL: url}), sourcetest.Wait)
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	want := domain.RankLoad{
		DPRank: 1, NumRunningReqs: 12, NumWaitingReqs: 10, NumUsedTokens: 2500,
		MaxTotalNumTokens: 9223372036854775807, MaxRunningRequests: 256,
		TokenUsage: 1, CacheHitRate: 0.5,
	}
	if len(snap.Ranks) != 1 {
		t.Fatalf("got %d ranks, want 1", len(snap.Ranks))
	}
	assertRank(t, snap.Ranks[0], want)
}

func TestPullErrors(t *testing.T) {
	core := readFixture(t, "sglang-v1-loads-core.json")
	big := `{"loads":[` + strings.Repeat(" ", 2<<20) + `]}`
	// rankBody is one rank with a field replaced by raw JSON text.
	rankBody := func(key, raw string) string {
		return `{"loads":[{"dp_rank":0,"num_running_reqs":1,"num_waiting_reqs":0,"max_running_requests":8,"max_total_num_tokens":100},` +
			`{"dp_rank":2,"num_running_reqs":1,"num_waiting_reqs":0,"max_running_requests":8,"max_total_num_tokens":100,"` + key + `":` + raw + `}]}`
	}
	tests := []struct {
		name     string
		handler  func(done <-chan struct{}) http.HandlerFunc
		deadline time.Duration // 0 means sourcetest.Wait
		// want are substrings of the error message; "{url}" is the request URL.
		want     []string
		wantCode string
		timeout  bool
	}{
		// Transport failures are httpfetch's to test; the 500, the default
		// size bound and the hang only check that they surface through Pull.
		{
			name: "500 with JSON error body",
			handler: func(<-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusInternalServerError)
					_, _ = w.Write([]byte("{\"error\":\n  \"scheduler crashed\"}\n"))
				}
			},
			want:     []string{`GET {url}: HTTP 500 Internal Server Error: {"error": "scheduler crashed"}`},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "not JSON",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody("<html><body>SGLang</body></html>") },
			want:     []string{"body is not valid JSON: invalid character '<' looking for beginning of value"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "empty body",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody("") },
			want:     []string{"empty response body"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "truncated JSON",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(core[:len(core)/2]) },
			want:     []string{"truncated JSON body: unexpected EOF"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name: "over the default size limit",
			handler: func(<-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Length", strconv.Itoa(len(big)))
					serveBody(big)(w, r)
				}
			},
			want:     []string{"GET {url}: response body exceeds 1048576 bytes (Content-Length " + strconv.Itoa(len(big)) + ")"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "float where an integer belongs",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("num_waiting_reqs", "3.5")) },
			want:     []string{"rank 2: num_waiting_reqs is a float (3.5), want an integer"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "tiny fraction where an integer belongs",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("num_used_tokens", "1e-400")) },
			want:     []string{"rank 2: num_used_tokens is a float (1e-400), want an integer"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name: "integer beyond int64",
			handler: func(<-chan struct{}) http.HandlerFunc {
				return serveBody(rankBody("num_total_tokens", "9223372036854775808"))
			},
			want:     []string{"rank 2: num_total_tokens 9223372036854775808 is outside the int64 range"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "float beyond int64",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("max_total_num_tokens", "1e30")) },
			want:     []string{"rank 2: max_total_num_tokens 1e30 is outside the int64 range"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "ratio beyond float64",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("gen_throughput", "1e999")) },
			want:     []string{"rank 2: gen_throughput 1e999 is outside the float64 range"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "string where an integer belongs",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("max_running_requests", `"256"`)) },
			want:     []string{`rank 2: max_running_requests is a string ("256"), want an integer`},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "object where a ratio belongs",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("utilization", `{"gpu":0.5}`)) },
			want:     []string{"rank 2: utilization is an object, want a number"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "NaN",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("token_usage", "NaN")) },
			want:     []string{"body is not valid JSON: token_usage is NaN at offset", "(JSON has no NaN or Infinity)"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "-Infinity",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("cache_hit_rate", "-Infinity")) },
			want:     []string{"body is not valid JSON: cache_hit_rate is -Infinity at offset"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "Infinity",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("gen_throughput", "Infinity")) },
			want:     []string{"body is not valid JSON: gen_throughput is Infinity at offset"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "fractional dp_rank",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(`{"loads":[{"dp_rank":0.5}]}`) },
			want:     []string{"loads[0]: dp_rank is a float (0.5), want an integer"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			// A proxy's stub or a renamed schema is not an idle rank.
			name: "no running or waiting count",
			handler: func(<-chan struct{}) http.HandlerFunc {
				return serveBody(`{"loads":[{"dp_rank":0,"running_reqs":250,"waiting_reqs":40}]}`)
			},
			want:     []string{"rank 0: num_running_reqs is missing"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name: "null waiting count",
			handler: func(<-chan struct{}) http.HandlerFunc {
				return serveBody(`{"loads":[{"dp_rank":0,"num_running_reqs":3,"num_waiting_reqs":null}]}`)
			},
			want:     []string{"rank 0: num_waiting_reqs is missing"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name: "missing dp_rank",
			handler: func(<-chan struct{}) http.HandlerFunc {
				return serveBody(`{"loads":[{"dp_rank":0,"num_running_reqs":1,"num_waiting_reqs":0},{"num_running_reqs":1}]}`)
			},
			want:     []string{"loads[1] has no dp_rank"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "timestamp in milliseconds",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(rankBody("timestamp", "1772100942498")) },
			want:     []string{"rank 2: timestamp 1772100942498 is too large for seconds since the epoch"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "empty loads",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(`{"version":"0.5.6","loads":[]}`) },
			want:     []string{`response has an empty "loads" list`},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "no loads",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(`{"version":"0.5.6"}`) },
			want:     []string{`response has no "loads" list`},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "loads is not a list",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(`{"loads":{"0":{}}}`) },
			want:     []string{`"loads" is an object, want a list`},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "rank is not an object",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(`{"loads":[7]}`) },
			want:     []string{"loads[0] is a number, want an object"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "top level is a list",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(`[{"dp_rank":0}]`) },
			want:     []string{`body is a JSON list, want an object with a "loads" list`},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "trailing data",
			handler:  func(<-chan struct{}) http.HandlerFunc { return serveBody(core + "garbage") },
			want:     []string{"body is not valid JSON: data after the top-level value"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "hang",
			handler:  sourcetest.Hang,
			deadline: 100 * time.Millisecond,
			want:     []string{"GET {url}: timed out after"},
			wantCode: domain.CodePullTimeout,
			timeout:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSource(t, Options{BaseURL: sourcetest.ServeBlocking(t, tt.handler)})
			snap, err := pull(t, s, tt.deadline)
			msg := sourcetest.Failure(t, snap, err, tt.wantCode, tt.timeout)
			sourcetest.Mentions(t, msg, tt.want, "{url}", s.URL())
		})
	}
}

// TestPullThenValidate covers the whole path for values that parse but
// break the snapshot invariants: the source passes them on and
// domain.ValidateSnapshot names rank and field.
func TestPullThenValidate(t *testing.T) {
	rank := func(dp, running, maxRunning, used, maxTokens, waiting string) string {
		return `{"dp_rank":` + dp + `,"num_running_reqs":` + running + `,"max_running_requests":` + maxRunning +
			`,"num_used_tokens":` + used + `,"max_total_num_tokens":` + maxTokens + `,"num_waiting_reqs":` + waiting +
			`,"token_usage":0.5,"gen_throughput":10.0,"cache_hit_rate":0.1,"utilization":0.2}`
	}
	ok0 := rank("0", "1", "8", "10", "100", "0")
	tests := []struct {
		name string
		body string
		want string
	}{
		{"negative counter", `{"loads":[` + ok0 + `,` + rank("1", "1", "8", "10", "100", "-3") + `]}`, "rank 1: num_waiting_reqs is negative (-3)"},
		{"used over max", `{"loads":[` + rank("0", "1", "8", "300", "200", "0") + `,` + rank("1", "1", "8", "10", "100", "0") + `]}`, "rank 0: num_used_tokens 300 exceeds max_total_num_tokens 200"},
		{"running over max", `{"loads":[` + ok0 + `,` + rank("1", "9", "8", "10", "100", "0") + `]}`, "rank 1: num_running_reqs 9 exceeds max_running_requests 8"},
		{"max missing", `{"loads":[` + ok0 + `,{"dp_rank":1,"num_running_reqs":0,"num_waiting_reqs":0,"num_used_tokens":5}]}`, "rank 1: num_used_tokens 5 exceeds max_total_num_tokens 0"},
		{"duplicate rank", `{"loads":[` + ok0 + `,` + ok0 + `]}`, "rank 0 appears more than once"},
		{"missing rank", `{"loads":[` + ok0 + `]}`, "rank set changed: missing [1]"},
		{"extra rank", `{"loads":[` + ok0 + `,` + rank("1", "1", "8", "10", "100", "0") + `,` + rank("2", "1", "8", "10", "100", "0") + `]}`, "rank set changed: unexpected [2]"},
		{"rank beyond int32", `{"loads":[` + ok0 + `,` + rank("4294967296", "1", "8", "10", "100", "0") + `]}`, "dp_rank 4294967296 is outside 0..2147483647"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := sourcetest.Serve(t, serveBody(tt.body))
			snap, err := pull(t, newSource(t, Options{BaseURL: url}), sourcetest.Wait)
			sourcetest.Rejected(t, snap, err, tt.want)
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string // the whole message; "" means valid
		wantURL string
	}{
		{name: "plain", opts: Options{BaseURL: "http://127.0.0.1:30000"}, wantURL: "http://127.0.0.1:30000/v1/loads?include=core"},
		{name: "trailing slash", opts: Options{BaseURL: "http://127.0.0.1:30000/"}, wantURL: "http://127.0.0.1:30000/v1/loads?include=core"},
		{name: "path prefix", opts: Options{BaseURL: "https://gw.example/engines/a/"}, wantURL: "https://gw.example/engines/a/v1/loads?include=core"},
		{name: "password redacted", opts: Options{BaseURL: "http://u:pw@127.0.0.1:30000"}, wantURL: "http://u:xxxxx@127.0.0.1:30000/v1/loads?include=core"},
		// The rest of the URL checks are httpfetch's; these messages carry
		// this source's words.
		{name: "empty", opts: Options{}, wantErr: "--engine-url is required for the sglang-http source (for example http://127.0.0.1:30000)"},
		{name: "endpoint URL", opts: Options{BaseURL: "http://127.0.0.1:30000/v1/loads?include=core"}, wantURL: "http://127.0.0.1:30000/v1/loads?include=core"},
		{name: "endpoint URL without its query", opts: Options{BaseURL: "http://127.0.0.1:30000/v1/loads"}, wantURL: "http://127.0.0.1:30000/v1/loads?include=core"},
		{name: "no scheme", opts: Options{BaseURL: "127.0.0.1:30000"}, wantErr: `--engine-url "127.0.0.1:30000": add the scheme, e.g. http://127.0.0.1:30000`},
		{name: "query", opts: Options{BaseURL: "http://127.0.0.1:30000/?include=core"},
			wantErr: `--engine-url "http://127.0.0.1:30000/?include=core": give the engine's base URL without a query; /v1/loads?include=core is added`},
		{name: "key with newline", opts: Options{BaseURL: "http://127.0.0.1:30000", APIKey: "a\nb"}, wantErr: "--engine-api-key contains a control character"},
		{name: "negative body bound", opts: Options{BaseURL: "http://127.0.0.1:30000", MaxBodyBytes: -1}, wantErr: "sglang-http max body bytes must be > 0, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantErr != "" {
				_, err := New(tt.opts)
				sourcetest.Invalid(t, err, tt.wantErr)
				return
			}
			if s := newSource(t, tt.opts); s.URL() != tt.wantURL {
				t.Errorf("URL() = %s, want %s", s.URL(), tt.wantURL)
			}
		})
	}
}
