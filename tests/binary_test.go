package tests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// built is cmd/loadreporter, built once per run of the package by the
// first test that needs it; TestMain removes its folder.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// loadreporterBinary returns the path of the built binary.
func loadreporterBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary: skipped with -short")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "loadreporter-tests-"); built.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		built.bin = filepath.Join(built.dir, "loadreporter")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", built.bin, "../cmd/loadreporter").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// removeBuilt removes what loadreporterBinary built.
func removeBuilt() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// TestSIGTERMWithStuckStreamsExitsZero: the binary, sent SIGTERM while a
// stream that never registered and a registered router are open, ends the
// router's stream with SHUTTING_DOWN, drops the unregistered one without
// waiting for it, flushes its history and exits 0 well within the grace.
func TestSIGTERMWithStuckStreamsExitsZero(t *testing.T) {
	bin := loadreporterBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	const grace = 5 * time.Second
	cmd := exec.Command(bin, "serve", "--listen", addr, "--shutdown-grace", grace.String(), "--history-interval", "10ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	ctx := testCtx(t, 30*time.Second)
	waitReady(t, ctx, "http://"+addr+readinessPath, &stderr)

	stuck := openGRPC(t, ctx, addr) // opens, never registers
	_ = stuck
	r := openGRPC(t, ctx, addr)
	if err := r.Send(registerFrame("sigterm-router", 100, 5000)); err != nil {
		t.Fatal(err)
	}
	if f := recvFrame(t, r); f.GetRegistered() == nil {
		t.Fatalf("want the ack, got %v", f)
	}
	recvReport(t, r)
	time.Sleep(200 * time.Millisecond) // a few history records to flush

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if e := recvError(t, r); e.GetCode() != domain.CodeShuttingDown {
		t.Errorf("the router's stream ended with %q, want %s", e.GetCode(), domain.CodeShuttingDown)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", waitErr, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("serve still running %s after SIGTERM\n%s", time.Since(start), stderr.String())
	}
	took := time.Since(start)
	t.Logf("SIGTERM to exit 0: %s (grace %s)", took.Round(time.Millisecond), grace)
	if took > grace/2 {
		t.Errorf("shutdown took %s with a stuck stream (grace %s)", took, grace)
	}
	for _, bad := range []string{"not fully flushed", "did not stop", "still open"} {
		if strings.Contains(stderr.String(), bad) {
			t.Errorf("the log says %q:\n%s", bad, stderr.String())
		}
	}
}

// waitReady polls url until it answers 200.
func waitReady(t *testing.T, ctx context.Context, url string, stderr *bytes.Buffer) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered 200\n%s", url, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
