package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// TestServeWatchAndInterrupt runs the binary's own entry point: serve with
// the embedded defaults, watch it as a router, then interrupt serve (as
// SIGINT does) and expect a clean exit within the grace period.
func TestServeWatchAndInterrupt(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	serveCtx, interrupt := context.WithCancel(context.Background())
	served := make(chan error, 1)
	var serveErr sharedtest.LockedBuffer
	go func() {
		served <- run(serveCtx, []string{"serve", "--listen", addr, "--log-level", "warn"}, nil, &bytes.Buffer{}, &serveErr)
	}()
	defer interrupt()

	var out sharedtest.LockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var werr error
	for ctx.Err() == nil { // serve may still be binding its port
		if werr = run(ctx, []string{"watch", "--target", addr, "--interval", "100ms", "--count", "2"}, nil, &out, &bytes.Buffer{}); werr == nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if werr != nil {
		t.Fatalf("watch: %v", werr)
	}
	text := out.String()
	if strings.Count(text, "HEALTHY 4 ranks") != 2 || !strings.Contains(text, "rank 3 ") || !strings.Contains(text, "registered as") {
		t.Fatalf("watch printed:\n%s", text)
	}

	interrupt()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop after the interrupt")
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"frobnicate"}, nil, &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "frobnicate") || !strings.Contains(stderr.String(), "Commands:") {
		t.Fatalf("err = %v, stderr %q", err, stderr.String())
	}
}
