package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
)

// child is a proxy the bench started: the front or nginx.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process is reaped
	err  error         // its exit, once done is closed
	// profile is where the front child in profiling mode serves
	// net/http/pprof; "" otherwise.
	profile string
}

// startProcess starts cmd in a process group of its own, so that stop can
// end it and everything it forked (nginx's workers) by the group's id, and
// with SIGKILL as the parent-death signal, so that a bench killed outright
// leaves no orphan behind it.
func startProcess(name string, cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// pid is the process's id (nginx: its master).
func (c *child) pid() int { return c.cmd.Process.Pid }

// pids are the process and its descendants, read afresh (nginx respawns
// a worker that dies).
func (c *child) pids() []int { return tree(c.pid(), allPPIDs()) }

// exited reports whether the process has ended, and how.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// stop asks the process to end (SIGTERM: nginx's fast shutdown, which
// waits for its workers; the reporter's graceful one), then kills its
// whole group if it has not within grace. Safe to call twice.
func (c *child) stop(grace time.Duration) {
	if done, _ := c.exited(); done {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return
	case <-time.After(grace):
	}
	// The leader is not reaped yet, so the group is still ours.
	_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
	<-c.done
}

// freePort is a loopback port nothing listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startFront starts the built loadreporter in front mode before the engine
// (or, with --cpuprofile, this binary serving the same composition with
// net/http/pprof beside it), named name. With grpcEngine set it passes
// requests there, as an engine's gRPC server (--front-engine-url
// grpc://…), and the engine's HTTP address only serves its loads. It
// returns once the front answers a poll from the shared pull, which needs
// the engine's /v1/loads read.
func startFront(ctx context.Context, o options, name, engine, grpcEngine string) (*child, string, error) {
	front, err := freePort()
	if err != nil {
		return nil, "", err
	}
	own, err := freePort()
	if err != nil {
		return nil, "", err
	}
	args := serveArgs(engine, front, own, o.window)
	if grpcEngine != "" {
		args = append(args, grpcFrontArgs(grpcEngine)...)
	}
	var cmd *exec.Cmd
	if o.cpuProfile != "" {
		self, err := os.Executable()
		if err != nil {
			return nil, "", err
		}
		cmd = exec.Command(self, append([]string{"--child-front"}, args...)...)
	} else {
		cmd = exec.Command(o.loadreporter, args...)
	}
	cmd.Stderr = os.Stderr
	var stdout io.ReadCloser
	if o.cpuProfile != "" {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, "", err
		}
	}
	c, err := startProcess(name, cmd)
	if err != nil {
		return nil, "", err
	}
	if stdout != nil {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "pprof ")
		if err != nil || !ok {
			c.stop(time.Second)
			return nil, "", fmt.Errorf("%s (profiling) did not say where its profile is served: %q %v", name, line, err)
		}
		c.profile = addr
	}
	base := "http://" + front
	if err := waitReady(ctx, c, base+pathLoads, 30*time.Second); err != nil {
		c.stop(time.Second)
		return nil, "", err
	}
	return c, base, nil
}

// serveArgs is the front's command line: the engine's loads read by the
// sglang-http source, the engine's API at front, the reporter's own port
// at own, /metrics cached for window.
func serveArgs(engine, front, own string, window time.Duration) []string {
	return []string{"serve", "--source", "sglang-http", "--engine-url", "http://" + engine,
		"--front-listen", front, "--listen", own, "--poll-max-age", window.String(), "--log-level", "warn"}
}

// grpcFrontArgs are what the gRPC front adds to serveArgs: every request
// passed to the engine's gRPC server over h2c.
func grpcFrontArgs(grpcEngine string) []string {
	return []string{"--front-engine-url", "grpc://" + grpcEngine}
}

// startNginx writes nginx's config into dir and starts it in the
// foreground; it returns once nginx passes a request to the engine.
func startNginx(ctx context.Context, o options, dir, engine string) (*child, string, error) {
	listen, err := freePort()
	if err != nil {
		return nil, "", err
	}
	conf, err := nginxConfig{Dir: dir, Listen: listen, Engine: engine, Workers: o.nginxWorkers,
		AsRoot: os.Geteuid() == 0, MaxConns: 4 * o.holdStreams}.render()
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, "", err
	}
	// -e: the error log before the config is read is ours too, not
	// /var/log/nginx's.
	cmd := exec.Command(o.nginx, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	c, err := startProcess("nginx", cmd)
	if err != nil {
		return nil, "", err
	}
	base := "http://" + listen
	if err := waitReady(ctx, c, base+pathHealth, 15*time.Second); err != nil {
		c.stop(time.Second)
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return nil, "", fmt.Errorf("%w; nginx's error log: %s", err, strings.TrimSpace(string(b)))
	}
	return c, base, nil
}

// waitReady polls url until it answers 200, the child exits or within
// passes.
func waitReady(ctx context.Context, c *child, url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	var last string
	for {
		if done, err := c.exited(); done {
			return fmt.Errorf("%s exited before it answered %s: %v", c.name, url, err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer %s with 200 within %v (last: %s)", c.name, url, within, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serveFrontChild is --child-front: loadreporter's serve composition, as
// its main runs it, with net/http/pprof on a loopback port of its own,
// whose address it prints first.
func serveFrontChild(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "serve" {
		return errors.New("--child-front: want serve's arguments")
	}
	cfg, err := app.ParseServe(args[1:], func(string) string { return "" }, io.Discard)
	if err != nil {
		return err
	}
	m, err := app.InitializeMain(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// POST /start begins a CPU profile, POST /stop ends it and answers
	// it: the parent brackets its measured rounds with them.
	var mu sync.Mutex
	var prof *bytes.Buffer
	mux := http.NewServeMux()
	mux.HandleFunc("POST /start", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		prof = new(bytes.Buffer)
		if err := pprof.StartCPUProfile(prof); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	})
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if prof == nil {
			http.Error(w, "no profile started", http.StatusConflict)
			return
		}
		pprof.StopCPUProfile()
		_, _ = w.Write(prof.Bytes())
		prof = nil
	})
	go func() { _ = http.Serve(ln, mux) }()
	fmt.Printf("pprof %s\n", ln.Addr())
	return m.Run(ctx)
}
