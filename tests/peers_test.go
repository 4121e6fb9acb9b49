package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// The peers are the real routers and publishers from PyPI, each in a venv
// of its own made by tests/peers/setup.sh (`make test` runs it) from the
// pinned tests/peers/NAME.txt into .venv-peers/NAME.

// peersDir is where setup.sh makes the venvs, seen from this package.
const peersDir = "../.venv-peers"

// needPeer returns the venv made from tests/peers/name.txt, or skips the
// test saying why; under CI=true it fails instead, unless setup.sh found
// the cause outside the project (PyPI or the network unreachable, no wheel
// for this machine, no Python).
func needPeer(t testing.TB, name string) string {
	t.Helper()
	why, outside := peerMissing(name)
	if why == "" {
		abs, err := filepath.Abs(filepath.Join(peersDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	const how = "run `bash tests/peers/setup.sh` (`make test` does) to install the pinned peers"
	if os.Getenv("CI") == "true" && !outside {
		t.Fatalf("the %s peer must run under CI=true, but %s: %s", name, why, how)
	}
	t.Skipf("%s: %s", why, how)
	return ""
}

// peerMissing says why the venv of name cannot be used ("" when it can),
// and whether the cause is outside the project.
func peerMissing(name string) (why string, outside bool) {
	req, err := os.ReadFile(filepath.Join("peers", name+".txt"))
	if err != nil {
		return fmt.Sprintf("tests/peers/%s.txt: %v", name, err), false
	}
	sum := sha256.Sum256(req)
	dir := filepath.Join(peersDir, name)
	if stamp, err := os.ReadFile(filepath.Join(dir, ".stamp")); err == nil {
		hash, _, _ := strings.Cut(strings.TrimSpace(string(stamp)), " ")
		if hash == hex.EncodeToString(sum[:]) {
			if _, err := os.Stat(filepath.Join(dir, "bin", "python")); err == nil {
				return "", false
			}
		}
		return fmt.Sprintf(".venv-peers/%s was made from another tests/peers/%s.txt", name, name), false
	}
	if failed, err := os.ReadFile(filepath.Join(peersDir, name+".failed")); err == nil {
		cause, reason, _ := strings.Cut(strings.TrimSpace(string(failed)), " ")
		return fmt.Sprintf("setup.sh could not install .venv-peers/%s: %s", name, reason), cause == "outside"
	}
	return fmt.Sprintf(".venv-peers/%s is not installed", name), false
}

// peerProcess is one peer's process, its output kept for failure messages.
type peerProcess struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser // the process's standard input; closing it is EOF
	out    *sharedtest.LockedBuffer
	exited chan struct{}
}

// startPeer runs a console script or interpreter of the venv in its own
// process group, on 127.0.0.1 only and offline (no model hub, no proxy);
// it is killed with its children at cleanup, and its output is logged when
// the test failed.
func startPeer(t testing.TB, venv, bin string, args ...string) *peerProcess {
	t.Helper()
	cmd := exec.Command(filepath.Join(venv, "bin", bin), args...)
	cmd.Env = append(environWithout("http_proxy", "https_proxy", "all_proxy", "grpc_proxy"),
		"HF_HUB_OFFLINE=1", "NO_PROXY=*", "no_proxy=*", "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &peerProcess{name: bin, cmd: cmd, out: &sharedtest.LockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		if t.Failed() {
			t.Logf("%s %s output:\n%s", bin, strings.Join(args, " "), tail(p.out.String(), 6000))
		}
	})
	return p
}

// environWithout is this process's environment without the variables
// named, in any case (HTTP_PROXY as http_proxy): what a child starts with
// that must not go through a proxy in front of 127.0.0.1.
func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, strings.ToLower(name)) {
			env = append(env, kv)
		}
	}
	return env
}

// alive fails the test when the peer has exited.
func (p *peerProcess) alive(t testing.TB) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("%s exited: %v\n%s", p.name, p.cmd.ProcessState, tail(p.out.String(), 4000))
	default:
	}
}

// line waits up to d for an output line starting with prefix and returns
// it; the peer exiting first fails the test.
func (p *peerProcess) line(t testing.TB, prefix string, d time.Duration) string {
	t.Helper()
	var found string
	waitUntil(t, d, func() string {
		return fmt.Sprintf("%s printing %q; output:\n%s", p.name, prefix, tail(p.out.String(), 4000))
	},
		func() bool {
			p.alive(t)
			for _, l := range strings.Split(p.out.String(), "\n") {
				if strings.HasPrefix(l, prefix) {
					found = l
					return true
				}
			}
			return false
		})
	return found
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// freePort is a port free on 127.0.0.1 a moment ago, for a peer that
// takes its port as a flag.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// scrapeFamilies reads a Prometheus exposition with Prometheus's own parser.
func scrapeFamilies(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(&buf)
}

// byLabel sums a family's counters or gauges by the value of one label.
func byLabel(f *dto.MetricFamily, label string, keep func(map[string]string) bool) map[string]float64 {
	out := map[string]float64{}
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if keep != nil && !keep(labels) {
			continue
		}
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		out[labels[label]] += v
	}
	return out
}

// waitUntil calls cond every 50 ms until it holds, failing with what when
// d passes first.
func waitUntil(t testing.TB, d time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("not within %s: %s", d, what())
		case <-tick.C:
		}
	}
}

// TestReadmeNamesThePeerTests: every test the README's table of real
// routers names exists, and every test of the peer files is in the table.
func TestReadmeNamesThePeerTests(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(readme, []byte("| router | version | what it reads | verified by |"))
	end := bytes.Index(readme[max(start, 0):], []byte("\n\n"))
	if start < 0 || end < 0 {
		t.Fatal("README lacks the table of real routers")
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`(Test\\w+)`").FindAllSubmatch(readme[start:start+end], -1) {
		named[string(m[1])] = true
	}
	defined := map[string]bool{}
	files, _ := filepath.Glob("peer_*_test.go")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`).FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
	}
	for name := range named {
		if !defined[name] {
			t.Errorf("the README names %s, which no peer_*_test.go defines", name)
		}
	}
	for name := range defined {
		if !named[name] {
			t.Errorf("%s is not in the README's table of real routers", name)
		}
	}
}
