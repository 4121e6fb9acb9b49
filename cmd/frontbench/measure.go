package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// target is one way to reach the engine: direct, or through a proxy; over
// HTTP/1.1 (base and client) or gRPC (conn).
type target struct {
	name   string
	base   string // http://127.0.0.1:PORT
	proxy  *child // nil: the engine direct
	client *http.Client
	conn   *grpc.ClientConn
}

// usage is the proxy's CPU and memory now (zero for the engine direct).
func (t *target) usage() usage {
	if t.proxy == nil {
		return usage{}
	}
	return readUsage(t.proxy.pids())
}

// newClient is a keep-alive HTTP/1.1 client with room for conns idle
// connections, passing bodies as they are (no compression asked).
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute,
		DisableCompression: true, ResponseHeaderTimeout: 30 * time.Second,
	}}
}

// kind is what a round sends.
type kind int

const (
	kindPost   kind = iota // non-streaming POST /generate
	kindSSE                // POST /generate with "stream": true
	kindUnary              // a unary gRPC call
	kindStream             // a gRPC server stream
)

var requestBodies = map[kind][]byte{
	kindPost: []byte(`{"text":"Say something short.","sampling_params":{"max_new_tokens":16,"temperature":0}}`),
	kindSSE:  []byte(`{"text":"Say something long.","sampling_params":{"max_new_tokens":256,"temperature":0},"stream":true}`),
}

// tally is what one target did over all its rounds of one kind.
type tally struct {
	total    []time.Duration // whole response
	first    []time.Duration // to the first event (SSE)
	requests int
	errors   int
	firstErr error
	cpu      time.Duration // the proxy's, over these rounds only
	wall     time.Duration // the rounds' own time
}

// round sends clients × perClient requests of kind to t, each client one
// after the other, and adds what it saw and what the proxy spent to tl.
func round(ctx context.Context, t *target, k kind, clients, perClient, events int, tl *tally) {
	type result struct {
		total, first []time.Duration
		errors       int
		err          error
	}
	results := make([]result, clients)
	u0 := t.usage()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			r := &results[i]
			for range perClient {
				if ctx.Err() != nil {
					return
				}
				total, first, err := request(ctx, t, k, events)
				if err != nil {
					r.errors++
					if r.err == nil {
						r.err = err
					}
					continue
				}
				r.total = append(r.total, total)
				if k == kindSSE || k == kindStream {
					r.first = append(r.first, first)
				}
			}
		})
	}
	wg.Wait()
	tl.wall += time.Since(start)
	tl.cpu += t.usage().cpu - u0.cpu
	for _, r := range results {
		tl.total = append(tl.total, r.total...)
		tl.first = append(tl.first, r.first...)
		tl.requests += len(r.total) + r.errors
		tl.errors += r.errors
		if tl.firstErr == nil {
			tl.firstErr = r.err
		}
	}
}

// request sends one request and reads its answer to the end: the time to
// the last byte (a gRPC call's status) and, for SSE, to the first event (a
// gRPC stream's first message).
func request(ctx context.Context, t *target, k kind, events int) (total, first time.Duration, err error) {
	if k == kindUnary || k == kindStream {
		return grpcRequest(ctx, t.name, t.conn, k, events)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+pathGenerate, bytes.NewReader(requestBodies[k]))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, 0, fmt.Errorf("%s: %s", t.name, resp.Status)
	}
	if k == kindPost {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, 0, err
		}
		return time.Since(start), 0, nil
	}
	n, done, err := readSSE(bufio.NewReaderSize(resp.Body, 4096), func() { first = time.Since(start) })
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("%s: after %d events: %w", t.name, n, err)
	case !done || n != events:
		return 0, 0, fmt.Errorf("%s: %d events and [DONE] %v, want %d and [DONE]", t.name, n, done, events)
	}
	// To the end of the body, as a router reads it: the connection is
	// then kept for the next request.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, 0, fmt.Errorf("%s: after [DONE]: %w", t.name, err)
	}
	return time.Since(start), first, nil
}

// readSSE reads server-sent events up to "data: [DONE]": how many data
// events came before it, and whether it came. onFirst is called when the
// first event's line has been read. A stream cut short (a line without its
// end, or no [DONE]) is not an error: done says it.
func readSSE(r *bufio.Reader, onFirst func()) (events int, done bool, err error) {
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, io.EOF) {
			return events, false, nil
		}
		if err != nil {
			return events, false, err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue // a blank line ends an event; comments and other fields are not counted
		}
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			return events, true, nil
		}
		events++
		if events == 1 && onFirst != nil {
			onFirst()
		}
	}
}

// holdStep is the proxy's memory with this many streams open.
type holdStep struct {
	streams int
	rss     int64
}

// holdResult is one proxy holding n long-lived streams.
type holdResult struct {
	before     int64      // RSS before the first stream
	steps      []holdStep // as they open
	held       int64      // RSS after holding all of them
	heldFor    time.Duration
	closed     int64 // RSS once every stream is gone
	opened     int   // streams that got their first event
	alive      int   // streams that got an event in the last two intervals of the hold
	errors     int
	firstErr   error
	engineLeft int64 // streams the engine still served after the clients went
}

// hold opens n long-lived SSE streams through t in the given steps,
// sampling the proxy's memory at each, holds them for d, and closes them.
func hold(ctx context.Context, t *target, e *engine, steps []int, d time.Duration) holdResult {
	var res holdResult
	n := steps[len(steps)-1]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One connection per stream, as an HTTP/1.1 client has it, closed
	// with the stream.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true,
		ResponseHeaderTimeout: 30 * time.Second}}
	last := make([]atomic.Int64, n) // unix nanoseconds of each stream's latest event
	var wg sync.WaitGroup
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.errors++
		if res.firstErr == nil {
			res.firstErr = err
		}
	}
	res.before = t.usage().rss
	opening := make(chan struct{}, 32) // streams being opened at once
	next := 0
	for _, upTo := range steps {
		var opened sync.WaitGroup
		for ; next < upTo && ctx.Err() == nil; next++ {
			opening <- struct{}{}
			opened.Add(1)
			at := &last[next]
			wg.Go(func() {
				err := holdStream(ctx, t, client, at, func() { <-opening; opened.Done() })
				if err != nil && ctx.Err() == nil {
					fail(err)
				}
			})
		}
		opened.Wait()
		res.steps = append(res.steps, holdStep{upTo, t.usage().rss})
	}
	for i := range last {
		if last[i].Load() != 0 {
			res.opened++
		}
	}
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	res.heldFor = time.Since(start)
	res.held = t.usage().rss
	recent := time.Now().Add(-2 * e.holdEvery).UnixNano()
	for i := range last {
		if last[i].Load() >= recent {
			res.alive++
		}
	}
	cancel()
	wg.Wait()
	client.CloseIdleConnections()
	// The proxy has let go once the engine serves none of them.
	deadline := time.Now().Add(5 * time.Second)
	for e.held.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	res.engineLeft = e.held.Load()
	res.closed = t.usage().rss
	return res
}

// holdStream opens one held stream and reads it until ctx ends, noting the
// time of each event in last; opened is called once, when the first event
// came or the stream failed.
func holdStream(ctx context.Context, t *target, client *http.Client, last *atomic.Int64, opened func()) error {
	var once sync.Once
	defer once.Do(opened)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+pathGenerate,
		bytes.NewReader([]byte(`{"text":"Hold on.","stream":true,"hold":true}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: held stream: %s", t.name, resp.Status)
	}
	r := bufio.NewReaderSize(resp.Body, 512)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if bytes.HasPrefix(line, []byte("data:")) {
			last.Store(time.Now().UnixNano())
			once.Do(opened)
		}
	}
}

// scrapeResult is the scrapers' span against the front's /metrics.
type scrapeResult struct {
	served, failed int
	firstErr       error
	engineHits     int64 // the engine's /metrics hits over the same span
	span           time.Duration
	latency        []time.Duration
}

// scrape runs scrapers, each GETting base/metrics every every for span,
// as Prometheus does (gzip accepted), and counts the engine's own scrapes
// meanwhile.
func scrape(ctx context.Context, base string, e *engine, scrapers int, every, span time.Duration) scrapeResult {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: scrapers, MaxIdleConnsPerHost: scrapers, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()
	type one struct {
		served, failed int
		err            error
		latency        []time.Duration
	}
	all := make([]one, scrapers)
	hits0 := e.metricsHits.Load()
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(span))
	defer cancel()
	var wg sync.WaitGroup
	for i := range all {
		wg.Go(func() {
			s := &all[i]
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				t0 := time.Now()
				err := get(ctx, client, base+pathMetrics)
				switch {
				case ctx.Err() != nil:
					return // cut by the span's end: not counted
				case err != nil:
					s.failed++
					if s.err == nil {
						s.err = err
					}
				default:
					s.served++
					s.latency = append(s.latency, time.Since(t0))
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
	res := scrapeResult{span: time.Since(start), engineHits: e.metricsHits.Load() - hits0}
	for _, s := range all {
		res.served += s.served
		res.failed += s.failed
		res.latency = append(res.latency, s.latency...)
		if res.firstErr == nil {
			res.firstErr = s.err
		}
	}
	return res
}

// get GETs url and reads the body to its end; anything but 200 fails.
func get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
