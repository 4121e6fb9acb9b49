package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(1)
	}
}

type options struct {
	routers  int
	interval time.Duration
	lease    time.Duration
	warmup   time.Duration
	measure  time.Duration
	conns    int
	ranks    int
	child    string // internal: run as the server child ("ours" or "baseline")
	profile  string // write a CPU profile of our server's measured window here
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("loadbench", flag.ContinueOnError)
	fs.IntVar(&o.routers, "routers", 1000, "router streams to open")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "report interval each router asks for")
	fs.DurationVar(&o.lease, "lease", 10*time.Second, "lease each router asks for (keep-alives at renew_after)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "time after the last stream opened before measuring")
	fs.DurationVar(&o.measure, "measure", 10*time.Second, "measured time")
	fs.IntVar(&o.conns, "conns", 1, "HTTP/2 connections the streams are spread over")
	fs.IntVar(&o.ranks, "ranks", 8, "DP ranks of the instant engine")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of loadreporter's measured window to this file")
	fs.StringVar(&o.child, "child", "", "internal: serve as the child process (ours or baseline)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.child != "" {
		return serveChild(ctx, o)
	}
	fmt.Fprintf(out, "loadbench: %d routers × %v, %d ranks, %d connection(s), %v measured after %v warm-up\n\n",
		o.routers, o.interval, o.ranks, o.conns, o.measure, o.warmup)
	var results []result
	for _, kind := range []string{"baseline", "ours"} {
		r, err := measureServer(ctx, o, kind)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		results = append(results, r)
	}
	printTable(out, o, results[0], results[1])
	return nil
}

// startChild runs this binary as the server and returns its address.
func startChild(ctx context.Context, o options, kind string) (*exec.Cmd, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, self, "--child", kind, "--ranks", fmt.Sprint(o.ranks),
		"--routers", fmt.Sprint(o.routers))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, "", fmt.Errorf("child did not report its address: %w", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		_ = cmd.Process.Kill()
		return nil, "", errors.New("child said " + line)
	}
	return cmd, addr, nil
}
