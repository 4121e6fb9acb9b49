package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
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
	t.Parallel()
	bin := loadreporterBinary(t)
	const grace = 5 * time.Second
	ctx := testCtx(t, 30*time.Second)
	srv := serveBinary(t, ctx, bin, "--shutdown-grace", grace.String(), "--history-interval", "10ms")
	addr := srv.addr

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
	metrics := "http://" + addr + "/metrics"
	eventually(t, ctx, "a few history records to flush", func() bool {
		return metricSum(t, metrics, "loadreporter_history_written_total") >= 3
	})

	start := time.Now()
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if e := recvError(t, r); e.GetCode() != domain.CodeShuttingDown {
		t.Errorf("the router's stream ended with %q, want %s", e.GetCode(), domain.CodeShuttingDown)
	}
	select {
	case <-srv.exited:
		if srv.err != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", srv.err, srv.stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("serve still running %s after SIGTERM\n%s", time.Since(start), srv.stderr.String())
	}
	took := time.Since(start)
	t.Logf("SIGTERM to exit 0: %s (grace %s)", took.Round(time.Millisecond), grace)
	if took > grace/2 {
		t.Errorf("shutdown took %s with a stuck stream (grace %s)", took, grace)
	}
	for _, bad := range []string{"not fully flushed", "did not stop", "still open"} {
		if strings.Contains(srv.stderr.String(), bad) {
			t.Errorf("the log says %q:\n%s", bad, srv.stderr.String())
		}
	}
}

// served is a `loadreporter serve` process the test started.
type served struct {
	cmd    *exec.Cmd
	addr   string // where it says it serves
	stderr *sharedtest.LockedBuffer
	exited chan struct{} // closed once it exited; err is Wait's
	err    error
}

// servingAddr finds the address in the line serve logs once it listens.
var servingAddr = regexp.MustCompile(`msg="loadreporter serving" addr=(\S+)`)

// serveBinary starts `bin serve --listen 127.0.0.1:0 args…` (logging at
// info, where it says its address), waits until
// it says where it serves and answers its readiness probe, and kills it at
// cleanup unless the test ended it first.
func serveBinary(t *testing.T, ctx context.Context, bin string, args ...string) *served {
	t.Helper()
	s := &served{stderr: &sharedtest.LockedBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-level", "info"}, args...)...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { // runs last, once serve has exited
		if t.Failed() {
			t.Logf("serve's log:\n%s", s.stderr.String())
		}
	})
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
	eventually(t, ctx, "serve to say where it serves", func() bool {
		select {
		case <-s.exited:
			t.Fatalf("serve exited: %v\n%s", s.err, s.stderr.String())
		default:
		}
		if m := servingAddr.FindStringSubmatch(s.stderr.String()); m != nil {
			s.addr = m[1]
		}
		return s.addr != ""
	})
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	eventually(t, ctx, s.addr+readinessPath+" to answer 200", func() bool {
		resp, err := client.Get("http://" + s.addr + readinessPath)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}
