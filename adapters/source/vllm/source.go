package vllm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

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
	// example http://127.0.0.1:8000. A path prefix is kept.
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
	// --max-num-seqs. 0 means DefaultMaxRunningRequests.
	MaxRunningRequests int64
	// Clock times scrapes for the throughput rate; nil means the system
	// clock.
	Clock ports.Clock
}

// Source scrapes a vLLM server's /metrics. It is safe for concurrent use.
type Source struct {
	url        string // full request URL
	shownURL   string // url with any password redacted, for messages
	auth       string // Authorization header value, or ""
	client     *http.Client
	ownClient  bool
	maxBody    int64
	maxRunning int64
	now        func() time.Time

	mu   sync.Mutex
	prev map[int64]counters // previous scrape, by rank, for the rates
}

var _ ports.SnapshotSource = (*Source)(nil)

// New validates o and returns a Source. Problems are reported with code
// domain.CodeInvalidArgument and name the flag the operator has to fix.
func New(o Options) (*Source, error) {
	u, err := parseBaseURL(o.BaseURL)
	if err != nil {
		return nil, err
	}
	if strings.IndexFunc(o.APIKey, unicode.IsControl) >= 0 {
		// net/http would refuse the header on every pull; say it once, here.
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-api-key contains a control character")
	}
	if o.MaxBodyBytes < 0 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "vllm-metrics max body bytes must be > 0, got %d", o.MaxBodyBytes)
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxRunningRequests < 0 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "vllm-metrics max running requests (vLLM's --max-num-seqs) must be > 0, got %d", o.MaxRunningRequests)
	}
	if o.MaxRunningRequests == 0 {
		o.MaxRunningRequests = DefaultMaxRunningRequests
	}
	u.Path = strings.TrimRight(u.Path, "/") + metricsPath
	u.RawPath = ""
	s := &Source{
		url: u.String(), shownURL: u.Redacted(), client: o.Client,
		maxBody: o.MaxBodyBytes, maxRunning: o.MaxRunningRequests, now: time.Now,
	}
	if o.Clock != nil {
		s.now = o.Clock.Now
	}
	if o.APIKey != "" {
		s.auth = "Bearer " + o.APIKey
	}
	if s.client == nil {
		// Our own pool rather than http.DefaultClient's, so Close can drop
		// idle connections without touching anyone else's.
		s.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		s.ownClient = true
	}
	return s, nil
}

func parseBaseURL(raw string) (*url.URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-url is required for the vllm-metrics source (for example http://127.0.0.1:8000)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: %v", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: scheme must be http or https", u.Redacted())
	case u.Host == "":
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: no host", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery:
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: give the server's base URL without a query; %s is added", u.Redacted(), metricsPath)
	case u.Fragment != "":
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: must not have a #fragment", u.Redacted())
	}
	return u, nil
}

// URL returns the URL pulls request, with any password redacted.
func (s *Source) URL() string { return s.shownURL }

// String describes the source for logs; it never shows the API key.
func (s *Source) String() string { return "vllm-metrics " + s.shownURL }

// Close drops idle connections of the client the Source made itself; a
// caller-supplied Client is left alone.
func (s *Source) Close() error {
	if s.ownClient {
		s.client.CloseIdleConnections()
	}
	return nil
}

// Pull scrapes the server once. It returns when ctx ends even if the server
// stalls mid-body.
func (s *Source) Pull(ctx context.Context) (domain.Snapshot, error) {
	body, err := s.fetch(ctx)
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
		ranks[i] = e.rankLoad(s.maxRunning, prev[e.rank], cur[e.rank])
	}
	return domain.Snapshot{Ranks: ranks}, nil
}

// fetch returns the body of one successful (2xx) response, bounded by
// s.maxBody.
func (s *Source) fetch(ctx context.Context) ([]byte, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, domain.Errorf(domain.CodeSourceFailed, "GET %s: %s", s.shownURL, oneLine(err.Error()))
	}
	// The classic text format only: expfmt's text parser reads nothing else,
	// and prometheus_client would otherwise offer OpenMetrics.
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	if s.auth != "" {
		req.Header.Set("Authorization", s.auth)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, s.transportError(ctx, start, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet := readSnippet(resp.Body)
		msg := fmt.Sprintf("GET %s: HTTP %s", s.shownURL, statusText(resp))
		if snippet != "" {
			msg += ": " + snippet
		}
		return nil, domain.Errorf(domain.CodeSourceFailed, "%s", msg)
	}
	if resp.ContentLength > s.maxBody {
		return nil, domain.Errorf(domain.CodeSourceFailed, "GET %s: response body exceeds %d bytes (Content-Length %d)", s.shownURL, s.maxBody, resp.ContentLength)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBody+1))
	if err != nil {
		return nil, s.transportError(ctx, start, err)
	}
	if int64(len(body)) > s.maxBody {
		return nil, domain.Errorf(domain.CodeSourceFailed, "GET %s: response body exceeds %d bytes", s.shownURL, s.maxBody)
	}
	return body, nil
}

// transportError names a failed request or body read. When ctx has ended,
// the cause is the deadline, whatever net/http wrapped it in; the returned
// error then also matches context.DeadlineExceeded or context.Canceled so the
// fire loop can classify it as a timeout.
func (s *Source) transportError(ctx context.Context, start time.Time, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		var msg string
		if errors.Is(cerr, context.DeadlineExceeded) {
			msg = fmt.Sprintf("GET %s: timed out after %s", s.shownURL, time.Since(start).Round(time.Millisecond))
		} else {
			msg = fmt.Sprintf("GET %s: pull canceled", s.shownURL)
		}
		return &ctxError{err: domain.Errorf(domain.CodePullTimeout, "%s", msg), cause: cerr}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // its text repeats the URL, quoted
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return domain.Errorf(domain.CodeSourceFailed, "GET %s: response body cut short: %v", s.shownURL, err)
	}
	return domain.Errorf(domain.CodeSourceFailed, "GET %s: %s", s.shownURL, oneLine(err.Error()))
}

// ctxError is a *domain.Error (for its one-line message) that also unwraps
// to the context's error (for errors.Is).
type ctxError struct {
	err   *domain.Error
	cause error
}

func (e *ctxError) Error() string   { return e.err.Error() }
func (e *ctxError) Unwrap() []error { return []error{e.err, e.cause} }

func statusText(resp *http.Response) string {
	if resp.Status != "" {
		return oneLine(resp.Status)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
}

// snippetBytes bounds what an error body contributes to last_error.
const snippetBytes = 200

// readSnippet returns the start of an error body on one line. It reads at
// most one byte more than it shows, so a huge or endless error body costs
// nothing; a read error just shortens the snippet.
func readSnippet(r io.Reader) string {
	buf, _ := io.ReadAll(io.LimitReader(r, snippetBytes+1))
	cut := len(buf) > snippetBytes
	if cut {
		buf = buf[:snippetBytes]
	}
	s := oneLine(string(buf))
	if cut && s != "" {
		s += "…"
	}
	return s
}

// oneLine folds whitespace and control characters so that a message read
// from the network stays on one line of last_error and of the logs.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}
