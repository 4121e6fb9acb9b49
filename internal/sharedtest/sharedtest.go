package sharedtest

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// LockedBuffer is a bytes.Buffer that a logger or a command writes while
// the test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines returns the lines written so far that contain substr, each with
// its newline: a log's lines about one thing.
func (l *LockedBuffer) Lines(substr string) []string {
	var out []string
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// ServeH2C serves h over unencrypted HTTP/2 (prior knowledge, as a
// router's or a worker's client dials) on 127.0.0.1 until the test ends,
// and returns its address, as Serve does.
func ServeH2C(t testing.TB, h http.Handler) string {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, &http.Server{Handler: h, Protocols: &p, ReadHeaderTimeout: 10 * time.Second}, ln)
	return ln.Addr().String()
}

// StopWait bounds how long a server Serve started may take to stop.
const StopWait = 10 * time.Second

// Serve runs srv on ln until the test ends: then srv is closed, and its
// Serve has returned (within StopWait, else the test fails) before the
// test's earlier cleanups run.
func Serve(t testing.TB, srv *http.Server, ln net.Listener) {
	t.Helper()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		stop := time.NewTimer(StopWait)
		defer stop.Stop()
		select {
		case <-served:
		case <-stop.C:
			t.Errorf("the server on %s did not stop within %s of its Close", ln.Addr(), StopWait)
		}
	})
}

// Eventually calls cond every interval until it returns true, failing the
// test when ctx ends first: the wait for a condition that nothing
// signals (a counter on /metrics, a line in a log, a page's rows).
func Eventually(t testing.TB, ctx context.Context, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// Service is a composition a command runs: Start brings it up in the
// background, Close shuts it down and may be called more than once.
type Service interface {
	Start() error
	Close() error
}

// Start starts s and closes it when the test ends, failing the test when
// the Close fails; when s cannot start, it is closed at once (releasing
// what its constructor opened) and the test fails.
func Start(t testing.TB, s Service) {
	t.Helper()
	if err := s.Start(); err != nil {
		_ = s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
}

// ConsecutivePorts finds n consecutive free TCP ports on 127.0.0.1 and
// returns the first: where an engine's ranks listen at BASE+r. Another
// process may take one before the test binds it; that is unlikely enough
// on a test machine.
func ConsecutivePorts(t testing.TB, n int) int {
	t.Helper()
	for range 100 {
		base, ok, err := tryConsecutivePorts(n)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return base
		}
	}
	t.Fatalf("found no %d consecutive free ports", n)
	return 0
}

// tryConsecutivePorts binds a free port and the n-1 after it, then lets
// them all go; ok is false when one of them was taken, err says why no
// port at all could be bound.
func tryConsecutivePorts(n int) (base int, ok bool, err error) {
	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, false, err
	}
	defer first.Close()
	base = first.Addr().(*net.TCPAddr).Port
	if base+n-1 > 65535 {
		return 0, false, nil
	}
	for p := base + 1; p < base+n; p++ {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return 0, false, nil
		}
		defer ln.Close()
	}
	return base, true, nil
}

// Import is one import of a production (non-test) Go file.
type Import struct {
	File string // the file's name
	Path string // the imported path
}

// ThirdParty reports an import from outside the standard library: its
// first path element has a dot, as the go command decides.
func (i Import) ThirdParty() bool {
	first, _, _ := strings.Cut(i.Path, "/")
	return strings.Contains(first, ".")
}

// ProductionImports lists the imports of the Go files in the test's
// directory (its package), but for the _test.go files, file by file: for
// a test that holds a package to what it may import.
func ProductionImports(t testing.TB) []Import {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []Import
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatalf("%s: import %s: %v", name, imp.Path.Value, err)
			}
			out = append(out, Import{File: name, Path: path})
		}
	}
	return out
}

// RefusedAddr is a loopback HOST:PORT where nothing listens, held until
// the test ends: a TCP socket bound there that never listens, so a
// connection is refused and no listener of a test running beside it can
// take the port (a port listened on and closed again could be).
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
