package vllm

import (
	"context"
	"flag"
	"net/http"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/adapters/source/internal/httpfetch"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Name is the source's name, the --source value that selects it.
const Name = "vllm-metrics"

// DefaultMaxBodyBytes bounds a response body when Options.MaxBodyBytes is 0.
// A vLLM /metrics page with a few engines is tens of kilobytes, mostly
// histograms; 1 MiB leaves room for many engines while keeping a
// misbehaving server from making us buffer without limit.
const DefaultMaxBodyBytes = 1 << 20

// DefaultMaxRunningRequests stands in for vLLM's --max-num-seqs when
// Options.MaxRunningRequests is 0. It is vLLM's long-standing default;
// newer vLLM versions may pick a larger value on large GPUs, in which case a
// busy engine yields "num_running_reqs N exceeds max_running_requests 256"
// until the operator sets the real value.
const DefaultMaxRunningRequests = 256

// metricsPath is the endpoint, relative to the server's base URL.
const metricsPath = "/metrics"

// Options configure a Source.
type Options struct {
	// BaseURL is the vLLM server's address (the --engine-url flag), for
	// example http://127.0.0.1:8000. A path prefix is kept; the endpoint's
	// own URL (…/metrics) is accepted for the base URL it ends in.
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>" (the
	// --engine-api-key flag).
	APIKey string
	// Client is the HTTP client to use. When nil, the Source makes one
	// client of its own and reuses it, so connections are kept alive
	// between pulls. Each pull ends when its context ends.
	Client *http.Client
	// MaxBodyBytes bounds the response body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxRunningRequests is reported as every rank's max_running_requests,
	// because vLLM does not publish it: set it to the server's
	// --max-num-seqs (the --vllm-max-running-requests flag). 0 means
	// DefaultMaxRunningRequests.
	MaxRunningRequests int64
	// MaxTotalNumTokens is a rank's KV capacity in tokens (vLLM's
	// num_gpu_blocks × block_size), for ranks whose vllm:cache_config_info
	// does not give it (older vLLM, or before the cache is allocated). 0
	// leaves it unknown (the --vllm-max-total-num-tokens flag).
	MaxTotalNumTokens int64
	// Clock times scrapes for the throughput rate; nil means the system
	// clock.
	Clock ports.Clock
}

// Source scrapes a vLLM server's /metrics. It is safe for concurrent use.
type Source struct {
	fetch      *httpfetch.Fetcher
	maxRunning int64
	maxTokens  int64 // for ranks vLLM gives no capacity; 0: unknown
	now        func() time.Time

	mu   sync.Mutex
	prev map[int64]counters // previous scrape, by rank, for the rates
}

var _ ports.SnapshotSource = (*Source)(nil)

// New validates o and returns a Source. Problems are reported with code
// domain.CodeInvalidArgument and name the flag the operator has to fix.
func New(o Options) (*Source, error) {
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	f, err := httpfetch.New(httpfetch.Options{
		Name:    Name,
		BaseURL: o.BaseURL, URLFlag: "--engine-url", Example: "http://127.0.0.1:8000", Peer: "server",
		Path:   metricsPath,
		APIKey: o.APIKey, APIKeyFlag: "--engine-api-key",
		Client: o.Client, MaxBodyBytes: o.MaxBodyBytes,
		// The classic text format only: expfmt's text parser reads nothing
		// else, and prometheus_client would otherwise offer OpenMetrics.
		Accept: "text/plain;version=0.0.4;q=1,*/*;q=0.1",
	})
	if err != nil {
		return nil, err
	}
	if o.MaxRunningRequests < 0 {
		_ = f.Close()
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--vllm-max-running-requests %d: must not be negative (0: %d, vLLM's default --max-num-seqs)",
			o.MaxRunningRequests, DefaultMaxRunningRequests)
	}
	if o.MaxRunningRequests == 0 {
		o.MaxRunningRequests = DefaultMaxRunningRequests
	}
	if o.MaxTotalNumTokens < 0 {
		_ = f.Close()
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--vllm-max-total-num-tokens %d: must not be negative (0: unknown)", o.MaxTotalNumTokens)
	}
	s := &Source{fetch: f, maxRunning: o.MaxRunningRequests, maxTokens: o.MaxTotalNumTokens, now: time.Now}
	if o.Clock != nil {
		s.now = o.Clock.Now
	}
	return s, nil
}

// URL returns the URL pulls request, with any password redacted.
func (s *Source) URL() string { return s.fetch.URL() }

// String describes the source for logs; it never shows the API key.
func (s *Source) String() string { return s.fetch.String() }

// Close drops idle connections of the client the Source made itself; a
// caller-supplied Client is left alone.
func (s *Source) Close() error { return s.fetch.Close() }

// Pull scrapes the server once. It returns when ctx ends even if the server
// stalls mid-body.
func (s *Source) Pull(ctx context.Context) (domain.Snapshot, error) {
	body, err := s.fetch.Get(ctx)
	if err != nil {
		return domain.Snapshot{}, err
	}
	engines, err := parseMetrics(body)
	if err != nil {
		return domain.Snapshot{}, err
	}
	at := s.now()
	cur := make(map[int64]counters, len(engines))
	for _, e := range engines {
		cur[e.rank] = e.counters.stamped(at)
	}
	// Every parsed scrape becomes the baseline, even one the validator will
	// reject: counters are cumulative, so the next delta is right either
	// way. Pulls that overlap and finish out of order give one negative
	// delta, which reads as 0 rather than as a bogus rate.
	s.mu.Lock()
	prev := s.prev
	s.prev = cur
	s.mu.Unlock()
	ranks := make([]domain.RankLoad, len(engines))
	for i, e := range engines {
		if e.maxTokens == 0 {
			e.maxTokens = s.maxTokens // vLLM's own figure wins when it gives one
		}
		ranks[i] = e.rankLoad(s.maxRunning, prev[e.rank], cur[e.rank])
	}
	return domain.Snapshot{Ranks: ranks}, nil
}

// RegisterFlags declares the source's own flags on fs, into o, with o's
// values as defaults: --vllm-max-running-requests and
// --vllm-max-total-num-tokens. --engine-url and --engine-api-key are
// every engine source's and belong to the caller.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.Int64Var(&o.MaxRunningRequests, "vllm-max-running-requests", o.MaxRunningRequests,
		"vllm-metrics: the server's --max-num-seqs (vLLM does not publish it; 0: 256)")
	fs.Int64Var(&o.MaxTotalNumTokens, "vllm-max-total-num-tokens", o.MaxTotalNumTokens,
		"vllm-metrics: each engine's KV capacity in tokens, num_gpu_blocks × block_size (vLLM logs it at start as \"GPU KV cache size: N tokens\"), for engines whose vllm:cache_config_info does not give it (0: unknown, sent as max_total_num_tokens 0)")
}
