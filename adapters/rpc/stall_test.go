package rpc

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
)

// serveStalls serves h at /s/ behind Stalls with bound, mounted as the
// reporter mounts it.
func serveStalls(t *testing.T, bound time.Duration, h http.HandlerFunc) (*Stalls, string, *http.Client) {
	t.Helper()
	stalls := NewStalls(bound, slog.New(slog.DiscardHandler))
	url, client := serveH2C(t, func(...connect.HandlerOption) (string, http.Handler) {
		return stalls.Wrap("/s/", h)
	}, context.Background(), time.Second)
	return stalls, url, client
}

// TestStallsEndAStreamWhoseClientStoppedReading: a client that grants no
// window blocks the handler's first flush; within the bound the stream is
// reset, the handler's write fails and it returns.
func TestStallsEndAStreamWhoseClientStoppedReading(t *testing.T) {
	t.Parallel()
	returned := make(chan error, 1)
	stalls, url, _ := serveStalls(t, 100*time.Millisecond, func(w http.ResponseWriter, _ *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 1024)
		for {
			if _, err := w.Write(chunk); err != nil {
				returned <- err
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	frames := noWindowClient(t, url[len("http://"):], "/s/", nil)
	deadline := time.After(3 * time.Second)
	for reset := false; !reset; {
		select {
		case f := <-frames:
			reset = f.Type == http2.FrameRSTStream
		case <-deadline:
			t.Fatal("no RST_STREAM for a stream whose client grants no window")
		}
	}
	select {
	case err := <-returned:
		if err == nil {
			t.Fatal("the handler's write did not fail")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the handler is still blocked")
	}
	if n := stalls.Ended(); n != 1 {
		t.Fatalf("Ended %d, want 1", n)
	}
}

// TestStallsLeaveAReadingClientAlone: pauses between writes longer than
// the bound do not count; only a write that is blocked does. It runs alone
// (no t.Parallel): the client must read each write within the 100 ms bound.
func TestStallsLeaveAReadingClientAlone(t *testing.T) {
	stalls, url, client := serveStalls(t, 100*time.Millisecond, func(w http.ResponseWriter, _ *http.Request) {
		for range 4 {
			if _, err := w.Write([]byte("report\n")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(250 * time.Millisecond)
		}
	})
	resp, err := client.Get(url + "/s/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "report\nreport\nreport\nreport\n" {
		t.Fatalf("body %q, err %v: a client that reads lost its stream", body, err)
	}
	if n := stalls.Ended(); n != 0 {
		t.Fatalf("Ended %d, want 0", n)
	}
}
