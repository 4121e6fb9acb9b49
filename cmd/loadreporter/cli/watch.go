package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/routerflags"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// WatchConfig is what `loadreporter watch` can be told.
type WatchConfig struct {
	routerflags.Router
	Target  string
	Targets []string // set: print a fleet table of these workers instead
	Count   int
	// Problems is where Watch says why it is not connected, apart from
	// the reports; nil is os.Stderr.
	Problems io.Writer
}

// dialing is the reason of the view client.Dial starts with, before any
// attempt has failed: no news to an operator.
const dialing = "connecting"

// ParseWatch reads watch's configuration from args and the environment.
func ParseWatch(args []string, getenv func(string) string, out io.Writer) (WatchConfig, error) {
	c := WatchConfig{Router: routerflags.Defaults("watch"), Target: "127.0.0.1:8080"}
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Target, "target", c.Target, "HOST:PORT of the worker's loadreporter")
	var targets string
	fs.StringVar(&targets, "targets", "", "comma-separated HOST:PORTs: print a fleet table of these workers, refreshed every --interval, instead of one worker's reports")
	c.Router.Register(fs)
	fs.IntVar(&c.Count, "count", c.Count, "exit after this many reports, or fleet tables with --targets (0: until interrupted)")
	fs.Usage = envflag.Usage(fs, out, "Usage: loadreporter watch [flags]\n\nDials a worker as a router and prints each report, one line per rank;\nwith --targets, prints a table of the fleet, one line per worker.", nil)
	if err := envflag.Parse(fs, args, getenv, nil); err != nil {
		return c, err
	}
	if err := envflag.NoArguments(fs, args, "watch"); err != nil {
		return c, err
	}
	// --target and --targets exclude each other; the command line wins
	// over the environment, as it does for one flag. Given at all (flag
	// or variable), --targets must name a worker: an empty list is a
	// mistake, not a request for --target.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["target"] && given["targets"] {
		switch cmd := envflag.OnCommandLine(fs, args); {
		case cmd["target"] == cmd["targets"]:
			return c, fmt.Errorf("--target and --targets are both given: give one (--target watches one worker's reports, --targets prints a table of several)")
		case cmd["target"]:
			given["targets"] = false
		}
	}
	if given["targets"] {
		var err error
		if c.Targets, err = routerflags.Targets(targets); err != nil {
			return c, err
		}
	} else if _, _, err := net.SplitHostPort(c.Target); err != nil {
		return c, fmt.Errorf("--target %q: want HOST:PORT", c.Target)
	}
	return c, c.Router.Check()
}

// Watch registers with the worker as a router (through package client)
// and writes every report to out until ctx ends or Count reports arrived;
// with Targets it prints a fleet table instead (see watchFleet). A stream
// that ends, or never opens, is reopened with backoff, as a router would,
// and each new reason it is down is written to c.Problems; only a worker
// refusing the configuration for good ends the watch with an error.
func Watch(ctx context.Context, c WatchConfig, out io.Writer) error {
	if len(c.Targets) > 0 {
		return watchFleet(ctx, c, out, isTerminal(out))
	}
	problems := c.Problems
	if problems == nil {
		problems = os.Stderr
	}
	w, err := client.Dial(c.Target, c.ClientOptions())
	if err != nil {
		return err
	}
	defer w.Close()
	views, cancel := w.Subscribe()
	defer cancel()
	var (
		last    *pb.LoadReport
		granted client.Grant // the grant printed last; zero while disconnected
		down    string       // the reason printed last; "" while connected
		// registered is whether any stream registered since the watch began.
		registered bool
		reports    int
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
		case v.State != client.Disconnected:
			down, registered = "", true
			if v.Granted != granted {
				granted = v.Granted
				fmt.Fprint(out, grantLine(c, v.Granted))
			}
		case refusedToken(v.Reason):
			// A wrong token stays wrong: a retry cannot fix it.
			return fmt.Errorf("%s refused us (%s): give the worker's token with --auth-token, or LOADREPORTER_AUTH_TOKEN", c.Target, v.Reason)
		case v.Reason != down && v.Reason != dialing:
			// Each retry that fails alike republishes the same reason:
			// said once, it need not be said again until it changes.
			granted, down = client.Grant{}, v.Reason
			hint := ""
			if !registered { // a worker that served us once is not on the wrong port
				hint = portHint(v.Reason, c.Router.TLS)
			}
			fmt.Fprintf(problems, "%s: disconnected (%s)%s; retrying\n", c.Target, v.Reason, hint)
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

// refusedToken reports whether a stream ended for its credentials.
func refusedToken(reason string) bool {
	return strings.Contains(reason, "unauthenticated:") || strings.Contains(reason, "permission_denied:")
}

// portHint says what a first failure suggests about --target: an
// HTTP/1.1 server (the front, an engine), or TLS on one side only.
func portHint(reason string, withTLS bool) string {
	switch {
	case strings.Contains(reason, "looked like an HTTP/1.1 header"):
		return " (an HTTP/1.1 server answers there, not the reporter: the front or the engine? watch the reporter's --listen port)"
	case !withTLS && (strings.Contains(reason, "unexpected EOF") || strings.Contains(reason, "frame too large") ||
		strings.Contains(reason, "could not be established") || strings.Contains(reason, "broken pipe") ||
		strings.Contains(reason, "connection reset by peer")):
		// A TLS server drops a plaintext connection at once; the client
		// sees one of these, depending on timing.
		return " (a TLS port? add --tls)"
	case withTLS && answeredInPlaintext(reason):
		return " (a plaintext port? drop --tls)"
	}
	return ""
}

// answeredInPlaintext reports whether a TLS client's error says the
// server answered without TLS.
func answeredInPlaintext(msg string) bool {
	return strings.Contains(msg, "does not look like a TLS handshake") || strings.Contains(msg, "HTTP response to HTTPS client")
}

// grantLine is the line watch prints when the worker acknowledges a
// registration: what it granted next to what c asked, since the worker
// clamps the lease and keep-alives follow its renew_after_ms. (watch
// never sends update_config, so the lease is always acknowledged.)
func grantLine(c WatchConfig, g client.Grant) string {
	return fmt.Sprintf("registered as %q with %s: interval %d ms, lease %d ms granted (%d ms asked), renew after %d ms\n",
		c.RouterID, c.Target, g.Interval.Milliseconds(), g.Lease.Milliseconds(), c.Lease.Milliseconds(), g.RenewAfter.Milliseconds())
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
