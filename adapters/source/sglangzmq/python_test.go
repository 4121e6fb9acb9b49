package sglangzmq

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/source/internal/sourcetest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// peersVenv is the venv tests/peers/setup.sh makes from
// tests/peers/clients.txt (pinned pyzmq and msgpack), seen from this
// package; `make test` makes it.
const peersVenv = "../../../.venv-peers/clients"

// needPython returns the venv's interpreter, or skips the test when it
// cannot import zmq and msgpack; under CI=true it fails instead, unless
// setup.sh found the cause outside the project (PyPI or the network
// unreachable, no wheel for this machine, no Python), which it writes in
// .venv-peers/clients.failed.
func needPython(t *testing.T) string {
	t.Helper()
	python := filepath.Join(peersVenv, "bin", "python")
	out, err := exec.Command(python, "-c", "import zmq, msgpack").CombinedOutput()
	if err == nil {
		return python
	}
	why := fmt.Sprintf("%s cannot import zmq and msgpack (%v: %s)", python, err, domain.Shorten(string(out), 300))
	failed, _ := os.ReadFile(peersVenv + ".failed")
	if cause, reason, ok := strings.Cut(strings.TrimSpace(string(failed)), " "); ok {
		why = "tests/peers/setup.sh could not install .venv-peers/clients: " + reason
		if cause == "outside" {
			t.Skip(why)
		}
	}
	const how = "run `bash tests/peers/setup.sh` (`make test` does) to test against a libzmq publisher"
	if os.Getenv("CI") == "true" {
		t.Fatalf("the libzmq publisher test must run under CI=true, but %s: %s", why, how)
	}
	t.Skipf("%s: %s", why, how)
	return ""
}

// pyPublisher is testdata/publisher.py running.
type pyPublisher struct {
	cmd  *exec.Cmd
	out  *readyWriter
	once sync.Once
}

// startPython starts publisher.py on ports base..base+dpSize-1 and waits
// until its sockets are bound.
func startPython(t *testing.T, base, dpSize, gen int, firstSeq uint64) *pyPublisher {
	t.Helper()
	cmd := exec.Command(needPython(t), "testdata/publisher.py",
		strconv.Itoa(base), strconv.Itoa(dpSize), strconv.Itoa(gen), strconv.FormatUint(firstSeq, 10))
	out := &readyWriter{ready: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	if _, err := cmd.StdinPipe(); err != nil { // closed by Wait: the script's signal to exit
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pyPublisher{cmd: cmd, out: out}
	t.Cleanup(p.kill)
	select {
	case <-out.ready:
	case <-time.After(sourcetest.Wait):
		p.kill()
		t.Fatalf("publisher.py not ready within %s; output:\n%s", sourcetest.Wait, out.String())
	}
	return p
}

// kill ends the publisher as a crash would, and reaps it.
func (p *pyPublisher) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
}

// readyWriter collects the script's output and closes ready at its
// "ready" line.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	seen  bool
}

func (w *readyWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if !w.seen && strings.Contains(w.buf.String(), "ready\n") {
		w.seen = true
		close(w.ready)
	}
	return len(b), nil
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestPythonPublisher subscribes to a real libzmq PUB socket written the
// way SGLang writes it, then kills the publisher and starts another on the
// same ports with its sequence starting over: the Source reconnects,
// resubscribes, serves the new values and counts one reset per rank.
func TestPythonPublisher(t *testing.T) {
	needPython(t)
	const dpSize = 2
	base := sharedtest.ConsecutivePorts(t, dpSize)
	c := newCounts()
	gen1 := startPython(t, base, dpSize, 1, 1000)
	s := start(t, Options{
		Endpoint: fmt.Sprintf("tcp://127.0.0.1:%d", base), DPSize: dpSize, Clock: porttest.NewClock(t0),
		ReconnectInterval: 10 * time.Millisecond, ResubscribeAfter: time.Hour, Observer: c.observer(),
	})
	waitGeneration(t, s, 1)
	want := domain.RankLoad{
		DPRank: 1, SnapshotTime: t0,
		NumRunningReqs: 11, NumWaitingReqs: 1, NumUsedTokens: 1001, MaxTotalNumTokens: 200000, TokenUsage: 1001.0 / 200000,
		NumWaitingUncachedTokens: 64, NumTotalTokens: 2000, MaxRunningRequests: 256,
	}
	if got := mustPull(t, s)[1]; !reflect.DeepEqual(got, want) {
		t.Errorf("rank 1:\n got %+v\nwant %+v", got, want)
	}

	gen1.kill()
	startPython(t, base, dpSize, 2, 0)
	waitGeneration(t, s, 2)
	resets, gaps, bad, resubs := c.snapshot()
	if !reflect.DeepEqual(resets, map[int]int{0: 1, 1: 1}) {
		t.Errorf("resets %v, want one per rank", resets)
	}
	if len(gaps) != 0 || len(bad) != 0 || len(resubs) != 0 {
		t.Errorf("gaps %v, bad messages %v, resubscriptions %v; want none", gaps, bad, resubs)
	}
}

// waitGeneration waits until Pull serves generation gen's values on every
// rank.
func waitGeneration(t *testing.T, s *Source, gen int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("generation %d's values", gen), func() bool {
		snap, err := s.Pull(context.Background())
		if err != nil {
			return false
		}
		for _, r := range snap.Ranks {
			if r.NumRunningReqs != 10*gen+r.DPRank {
				return false
			}
		}
		return true
	})
}
