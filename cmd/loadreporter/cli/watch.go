package cli

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// WatchConfig is what `loadreporter watch` can be told.
type WatchConfig struct {
	Target    string
	Targets   []string // set: print a fleet table of these workers instead
	Interval  time.Duration
	Lease     time.Duration
	RouterID  string
	AuthToken string
	TLS       bool
	Insecure  bool
	Count     int
}

// ParseWatch reads watch's configuration from args and the environment.
func ParseWatch(args []string, getenv func(string) string, out io.Writer) (WatchConfig, error) {
	host, _ := os.Hostname()
	c := WatchConfig{Target: "127.0.0.1:8080", Interval: time.Second, Lease: 10 * time.Second,
		RouterID: fmt.Sprintf("watch-%s-%d", host, os.Getpid())}
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Target, "target", c.Target, "HOST:PORT of the worker's loadreporter")
	var targets string
	fs.StringVar(&targets, "targets", "", "comma-separated HOST:PORTs: print a fleet table of these workers, refreshed every --interval, instead of one worker's reports")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "report interval to ask for")
	fs.DurationVar(&c.Lease, "lease", c.Lease, "lease to ask for (keep-alives go at the granted renew_after)")
	fs.StringVar(&c.RouterID, "router-id", c.RouterID, "router_id to register as")
	fs.StringVar(&c.AuthToken, "auth-token", c.AuthToken, "bearer token the worker requires")
	fs.BoolVar(&c.TLS, "tls", c.TLS, "dial with TLS")
	fs.BoolVar(&c.Insecure, "tls-insecure", c.Insecure, "with --tls: do not verify the server certificate")
	fs.IntVar(&c.Count, "count", c.Count, "exit after this many reports, or fleet tables with --targets (0: until interrupted)")
	fs.Usage = envflag.Usage(fs, out, "Usage: loadreporter watch [flags]\n\nDials a worker as a router and prints each report, one line per rank;\nwith --targets, prints a table of the fleet, one line per worker.", nil)
	if err := envflag.Parse(fs, args, getenv, nil); err != nil {
		return c, err
	}
	if _, _, err := net.SplitHostPort(c.Target); err != nil {
		return c, fmt.Errorf("--target %q: want HOST:PORT", c.Target)
	}
	for t := range strings.SplitSeq(targets, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(t); err != nil {
			return c, fmt.Errorf("--targets: %q: want HOST:PORT", t)
		}
		c.Targets = append(c.Targets, t)
	}
	if c.Interval < time.Millisecond || c.Lease < time.Millisecond {
		return c, fmt.Errorf("--interval and --lease must be at least 1ms")
	}
	return c, nil
}

// Watch registers with the worker as a router (through package client)
// and writes every report to out until ctx ends or Count reports arrived;
// with Targets it prints a fleet table instead (see watchFleet). A stream
// that ends is reopened with backoff, as a router would; only a worker
// refusing the configuration for good ends the watch with an error.
func Watch(ctx context.Context, c WatchConfig, out io.Writer) error {
	if len(c.Targets) > 0 {
		return watchFleet(ctx, c, out, isTerminal(out))
	}
	w, err := client.Dial(c.Target, c.clientOptions())
	if err != nil {
		return err
	}
	defer w.Close()
	views, cancel := w.Subscribe()
	defer cancel()
	var (
		last    *pb.LoadReport
		granted client.Grant // the grant printed last; zero while disconnected
		reports int
	)
	for {
		var v *client.View
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case v, ok = <-views:
		}
		if !ok {
			if err := w.Err(); err != nil {
				return fmt.Errorf("worker ended the stream: %w", err)
			}
			return nil
		}
		switch {
		case v.State != client.Disconnected && v.Granted != granted:
			granted = v.Granted
			fmt.Fprint(out, grantLine(c, v.Granted))
		case v.State == client.Disconnected && granted != (client.Grant{}):
			granted = client.Grant{}
			fmt.Fprintf(out, "disconnected from %s: %s (reconnecting)\n", c.Target, v.Reason)
		}
		if v.Report == nil || v.Report == last {
			continue
		}
		last = v.Report
		fmt.Fprint(out, FormatReport(v.Report))
		if reports++; c.Count > 0 && reports >= c.Count {
			return nil // the deferred Close sends stop
		}
	}
}

// grantLine is the line watch prints when the worker acknowledges a
// registration: what it granted next to what c asked, since the worker
// clamps the lease and keep-alives follow its renew_after_ms. (watch
// never sends update_config, so the lease is always acknowledged.)
func grantLine(c WatchConfig, g client.Grant) string {
	return fmt.Sprintf("registered as %q with %s: interval %d ms, lease %d ms granted (%d ms asked), renew after %d ms\n",
		c.RouterID, c.Target, g.Interval.Milliseconds(), g.Lease.Milliseconds(), c.Lease.Milliseconds(), g.RenewAfter.Milliseconds())
}

// clientOptions are the client's options for c's flags.
func (c WatchConfig) clientOptions() client.Options {
	o := client.Options{RouterID: c.RouterID, ReportInterval: c.Interval, Lease: c.Lease, BearerToken: c.AuthToken}
	if c.TLS {
		o.TLS = &tls.Config{InsecureSkipVerify: c.Insecure} //nolint:gosec // opt-in flag
	}
	return o
}

// FormatReport renders a report as a header line and one line per rank.
func FormatReport(r *pb.LoadReport) string {
	var b strings.Builder
	t := time.UnixMilli(r.GetReportTimeUnixMs()).UTC().Format("15:04:05.000")
	status := strings.TrimPrefix(r.GetStatus().String(), "REPORT_STATUS_")
	fmt.Fprintf(&b, "#%d %s %s %s %d ranks", r.GetSequenceId(), t, r.GetWorker().GetWorkerAddr(), status, len(r.GetRanks()))
	if r.LastError != nil {
		fmt.Fprintf(&b, " last_error=%q", r.GetLastError())
	}
	b.WriteByte('\n')
	for _, k := range r.GetRanks() {
		age := r.GetReportTimeUnixMs() - k.GetSnapshotTimeUnixMs()
		fmt.Fprintf(&b, "  rank %-3d running %4d/%-4d waiting %4d  kv %5.1f%% (%d/%d tokens)  gen %8.1f tok/s  cache hit %5.1f%%  util %5.1f%%  age %d ms\n",
			k.GetDpRank(), k.GetNumRunningReqs(), k.GetMaxRunningRequests(), k.GetNumWaitingReqs(),
			k.GetTokenUsage()*100, k.GetNumUsedTokens(), k.GetMaxTotalNumTokens(),
			k.GetGenThroughput(), k.GetCacheHitRate()*100, k.GetUtilization()*100, age)
	}
	return b.String()
}
