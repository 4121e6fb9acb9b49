package front

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/adapters/internal/httpjson"
	"github.com/loadreporter/loadreporter/domain"
)

const (
	// maxScrapeBytes bounds one /metrics body held in the cache.
	maxScrapeBytes = 32 << 20
	// scrapeTimeout bounds one scrape of the engine. An engine answers its
	// /metrics in milliseconds; one that does not is not waited on longer
	// than a scraper's own deadline would allow.
	scrapeTimeout = 5 * time.Second
	// failureHold is how long a failed scrape is served: an engine that
	// hangs would otherwise make every window's first scraper wait out a
	// whole scrapeTimeout again.
	failureHold = 2 * scrapeTimeout
	// maxAcceptKinds bounds the cache's entries: one per Accept header a
	// scraper sent (the text format, OpenMetrics, protobuf), so a client
	// inventing Accept values cannot grow it.
	maxAcceptKinds = 8
)

// scrapes is the /metrics cache: one entry per Accept header, each
// refreshed by at most one scrape of the engine per window, which every
// scraper arriving meanwhile shares.
type scrapes struct {
	url    string
	client *http.Client
	apiKey string
	maxAge time.Duration
	now    func() time.Time

	mu       sync.Mutex
	byAccept map[string]*scrape
}

// scrape is one answer of the engine's /metrics, or why there was none.
type scrape struct {
	done chan struct{} // closed once the fields below are set
	at   time.Time     // when the scrape ended

	status      int
	contentType string
	body        []byte
	err         error

	gzipOnce sync.Once
	gzipped  []byte
}

func newScrapes(o Options, tr http.RoundTripper) *scrapes {
	u := *o.Engine
	u.Path, u.RawPath, u.RawQuery = strings.TrimSuffix(u.Path, "/")+"/metrics", "", ""
	return &scrapes{url: u.String(), client: &http.Client{Transport: tr}, apiKey: o.APIKey, maxAge: o.MetricsMaxAge,
		now: o.Now, byAccept: map[string]*scrape{}}
}

// get returns the scrape for accept: the cached one when it is younger
// than the window, the one under way, or a new one. hit reports whether
// this call caused no scrape of its own.
func (s *scrapes) get(accept string) (sc *scrape, hit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.byAccept[accept]; !known && len(s.byAccept) >= maxAcceptKinds {
		s.evictStale()
		if len(s.byAccept) >= maxAcceptKinds {
			accept = ""
		}
	}
	if sc = s.byAccept[accept]; sc != nil {
		select {
		case <-sc.done:
			if s.fresh(sc) {
				return sc, true
			}
		default:
			return sc, true // under way: share it
		}
	}
	sc = &scrape{done: make(chan struct{})}
	s.byAccept[accept] = sc
	go s.fetch(sc, accept)
	return sc, false
}

// fresh reports whether a finished scrape still serves: a window for an
// answer, failureHold for a failure.
func (s *scrapes) fresh(sc *scrape) bool {
	hold := s.maxAge
	if sc.err != nil || sc.status >= http.StatusInternalServerError {
		hold = max(hold, failureHold)
	}
	return s.now().Sub(sc.at) < hold
}

// evictStale drops the finished scrapes that no longer serve, so that
// Accept values a client invented once do not keep their slots.
func (s *scrapes) evictStale() {
	for k, sc := range s.byAccept {
		select {
		case <-sc.done:
			if !s.fresh(sc) {
				delete(s.byAccept, k)
			}
		default:
		}
	}
}

// fetch scrapes the engine once, under its own deadline.
func (s *scrapes) fetch(sc *scrape, accept string) {
	defer close(sc.done)
	defer func() { sc.at = s.now() }()
	// Never a scraper's context: one that goes away must not fail the
	// others sharing this scrape.
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		sc.err = err
		return
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if s.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		sc.err = err
		return
	}
	defer resp.Body.Close()
	body, err := readBody(resp)
	if err != nil {
		sc.err = err
		return
	}
	sc.status, sc.contentType, sc.body = resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// readBody reads a whole /metrics answer, decoding gzip (the transport
// passes encodings through untouched), up to maxScrapeBytes.
func readBody(resp *http.Response) ([]byte, error) {
	r := io.Reader(resp.Body)
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("/metrics answer in gzip does not decode: %w", err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("/metrics answer in encoding %q, which the front does not decode", domain.Shorten(enc, 32))
	}
	body, err := io.ReadAll(io.LimitReader(r, maxScrapeBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	if len(body) > maxScrapeBytes {
		return nil, fmt.Errorf("/metrics answer over %d MiB", maxScrapeBytes>>20)
	}
	return body, nil
}

// serveMetrics answers GET /metrics from the cache.
func (f *Front) serveMetrics(w http.ResponseWriter, r *http.Request) {
	sc, hit := f.scrapes.get(r.Header.Get("Accept"))
	if f.opts.Observer.Scrape != nil {
		f.opts.Observer.Scrape(hit)
	}
	select {
	case <-sc.done:
	case <-r.Context().Done():
		return // the scraper went away; the scrape goes on for the others
	}
	if sc.err != nil {
		httpjson.WriteError(w, http.StatusBadGateway, "ENGINE_UNREACHABLE",
			fmt.Sprintf("engine %s: /metrics: %s", f.engine, domain.Shorten(domain.OneLine(sc.err.Error()), 300)))
		return
	}
	h := w.Header()
	if sc.contentType != "" {
		h.Set("Content-Type", sc.contentType)
	}
	h.Set("Age", strconv.Itoa(int(f.opts.Now().Sub(sc.at)/time.Second)))
	h.Set("Cache-Control", "max-age=0")
	h.Add("Vary", "Accept, Accept-Encoding")
	body := sc.body
	if acceptsGzip(r) && len(body) > 1<<10 {
		body = sc.gzip()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(sc.status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// gzip is the body compressed, once per scrape however many scrapers.
func (sc *scrape) gzip() []byte {
	sc.gzipOnce.Do(func() {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		_, _ = zw.Write(sc.body)
		_ = zw.Close()
		sc.gzipped = b.Bytes()
	})
	return sc.gzipped
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip
// (a q of 0 refuses it).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
