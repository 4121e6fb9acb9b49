package enginesim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/ports/porttest"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// Step costs of the test engine: round numbers so that a test can say
// when each step ends.
const (
	testOverhead   = 10 * time.Millisecond
	testPerSeq     = time.Millisecond
	testPerPrefill = 100 * time.Microsecond
)

// harness is an engine on a fake clock, served on 127.0.0.1.
type harness struct {
	t     *testing.T
	m     *Main
	clock *porttest.Clock
	url   string
	ctx   context.Context
}

func start(t *testing.T, edit func(*Config)) *harness {
	t.Helper()
	c := DefaultConfig()
	c.Listen = "127.0.0.1:0"
	c.Params.StepOverhead, c.Params.DecodePerSeq, c.Params.DecodePer1kKVTokens, c.Params.PrefillPerToken = testOverhead, testPerSeq, 0, testPerPrefill
	clock := porttest.NewClock(t0)
	c.Clock = clock
	c.Logger = slog.New(slog.DiscardHandler)
	if edit != nil {
		edit(&c)
	}
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	if err := m.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		cancel()
	})
	return &harness{t: t, m: m, clock: clock, url: "http://" + m.Addr(), ctx: ctx}
}

// settle waits until the driver has done everything due at the fake
// clock's time, and returns the engine's next event.
func (h *harness) settle() (time.Time, bool) {
	h.t.Helper()
	d := h.m.drv
	for {
		d.mu.Lock()
		at, ok := d.eng.NextEvent()
		now, advanced := h.clock.Now(), d.advanced
		d.mu.Unlock()
		if !ok || at.After(now) {
			return at, ok
		}
		select {
		case <-advanced:
		case <-h.ctx.Done():
			h.t.Fatalf("the driver never caught up with %v: %v", now.Sub(t0), h.ctx.Err())
		}
	}
}

// step moves the fake clock to the engine's next event and waits until
// the driver has dealt with it; it returns the new time.
func (h *harness) step() time.Time {
	h.t.Helper()
	at, ok := h.settle()
	if !ok {
		h.t.Fatal("step: the engine is idle")
	}
	h.clock.Advance(at.Sub(h.clock.Now()))
	h.settle()
	return at
}

// waitSubmitted waits until the engine holds n requests in flight.
func (h *harness) waitSubmitted(n int) {
	h.t.Helper()
	d := h.m.drv
	for {
		d.mu.Lock()
		got, advanced := len(d.flights), d.advanced
		d.mu.Unlock()
		if got >= n {
			h.settle()
			return
		}
		select {
		case <-advanced:
		case <-h.ctx.Done():
			h.t.Fatalf("%d of %d requests reached the engine", got, n)
		}
	}
}

// drive steps the engine until done is closed.
func (h *harness) drive(done <-chan struct{}) {
	h.t.Helper()
	d := h.m.drv
	for {
		select {
		case <-done:
			return
		default:
		}
		h.settle()
		// Idle, and the Advance to wait for is the next one after this look:
		// both read under one lock, so that a request arriving between them
		// (its Advance closing the channel read here) is not missed.
		d.mu.Lock()
		_, busy := d.eng.NextEvent()
		advanced := d.advanced
		d.mu.Unlock()
		if busy {
			h.step()
			continue
		}
		select {
		case <-done:
			return
		case <-advanced:
		case <-h.ctx.Done():
			h.t.Fatal("drive: gave up waiting")
		}
	}
}

// post sends body to path and returns the response (the caller closes
// its body).
func (h *harness) post(ctx context.Context, path string, body any) *http.Response {
	h.t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+path, bytes.NewReader(b))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// get fetches path and decodes its JSON into v; it returns the status.
func (h *harness) get(path string, v any) int {
	h.t.Helper()
	status, b := h.body(path)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			h.t.Fatalf("GET %s: %v in %.200s", path, err, b)
		}
	}
	return status
}

// body fetches path and returns its status and body as sent.
func (h *harness) body(path string) (int, []byte) {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(h.ctx, http.MethodGet, h.url+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, b
}

// events reads SSE "data:" lines one at a time.
type events struct {
	t *testing.T
	r *bufio.Reader
}

func newEvents(t *testing.T, body io.Reader) *events { return &events{t: t, r: bufio.NewReader(body)} }

// next returns the next event's data; it fails the test if the stream
// ends or the request's context does.
func (e *events) next() string {
	e.t.Helper()
	for {
		line, err := e.r.ReadString('\n')
		if err != nil {
			e.t.Fatalf("stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			return data
		}
		if line != "" {
			e.t.Fatalf("unexpected line %q", line)
		}
	}
}

// prefillTime and decodeTime are the test engine's step lengths.
func prefillTime(tokens int) time.Duration {
	return testOverhead + time.Duration(tokens)*testPerPrefill
}

func decodeTime(seqs int) time.Duration { return testOverhead + time.Duration(seqs)*testPerSeq }

// prompt is a text of n tokens at four characters a token.
func prompt(n int) string { return strings.Repeat("abcd", n) }
