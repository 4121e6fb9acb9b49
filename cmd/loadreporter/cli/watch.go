package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// WatchConfig is what `loadreporter watch` can be told.
type WatchConfig struct {
	Target    string
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
	fs.DurationVar(&c.Interval, "interval", c.Interval, "report interval to ask for")
	fs.DurationVar(&c.Lease, "lease", c.Lease, "lease to ask for (keep-alives go at the granted renew_after)")
	fs.StringVar(&c.RouterID, "router-id", c.RouterID, "router_id to register as")
	fs.StringVar(&c.AuthToken, "auth-token", c.AuthToken, "bearer token the worker requires")
	fs.BoolVar(&c.TLS, "tls", c.TLS, "dial with TLS")
	fs.BoolVar(&c.Insecure, "tls-insecure", c.Insecure, "with --tls: do not verify the server certificate")
	fs.IntVar(&c.Count, "count", c.Count, "exit after this many reports (0: until interrupted)")
	fs.Usage = envflag.Usage(fs, out, "Usage: loadreporter watch [flags]\n\nDials a worker as a router and prints each report, one line per rank.", nil)
	if err := envflag.Parse(fs, args, getenv, nil); err != nil {
		return c, err
	}
	if _, _, err := net.SplitHostPort(c.Target); err != nil {
		return c, fmt.Errorf("--target %q: want HOST:PORT", c.Target)
	}
	if c.Interval < time.Millisecond || c.Lease < time.Millisecond {
		return c, fmt.Errorf("--interval and --lease must be at least 1ms")
	}
	return c, nil
}

// Watch registers with the worker as a router and writes every report to
// out until ctx ends, Count reports arrived, or the worker ends the stream.
func Watch(ctx context.Context, c WatchConfig, out io.Writer) error {
	client := loadmonitorv1connect.NewLoadMonitorServiceClient(watchHTTPClient(c), watchBaseURL(c), connect.WithGRPC())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := client.Monitor(ctx)
	if c.AuthToken != "" {
		stream.RequestHeader().Set("Authorization", "Bearer "+c.AuthToken)
	}
	err := stream.Send(&pb.RouterFrame{Payload: &pb.RouterFrame_Register{Register: &pb.RegisterRequest{
		RouterId: c.RouterID, ReportIntervalMs: c.Interval.Milliseconds(), LeaseTtlMs: c.Lease.Milliseconds(),
	}}})
	if err != nil {
		// A failed send says little ("EOF"); the receive side has the cause.
		if _, rerr := stream.Receive(); rerr != nil && !errors.Is(rerr, io.EOF) {
			err = rerr
		}
		return fmt.Errorf("register with %s: %w", c.Target, err)
	}
	keepAlive := make(chan time.Duration, 1)
	keepAliveDone := make(chan struct{})
	go func() {
		defer close(keepAliveDone)
		sendKeepAlives(ctx, stream, keepAlive)
	}()
	defer func() {
		cancel()
		<-keepAliveDone
	}()
	reports := 0
	for {
		f, err := stream.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("monitor stream from %s: %w", c.Target, err)
		}
		switch p := f.GetPayload().(type) {
		case *pb.WorkerFrame_Registered:
			fmt.Fprintf(out, "registered as %q: lease %d ms, renew after %d ms\n",
				c.RouterID, p.Registered.GetLeaseTtlMs(), p.Registered.GetRenewAfterMs())
			keepAlive <- time.Duration(p.Registered.GetRenewAfterMs()) * time.Millisecond
		case *pb.WorkerFrame_Report:
			fmt.Fprint(out, FormatReport(p.Report))
			reports++
			if c.Count > 0 && reports >= c.Count {
				_ = stream.Send(&pb.RouterFrame{Payload: &pb.RouterFrame_Stop{Stop: &pb.StopRequest{}}})
				return stream.CloseRequest()
			}
		case *pb.WorkerFrame_Error:
			return fmt.Errorf("worker ended the stream: %s: %s", p.Error.GetCode(), p.Error.GetMessage())
		}
	}
}

func sendKeepAlives(ctx context.Context, stream *connect.BidiStreamForClient[pb.RouterFrame, pb.WorkerFrame], every <-chan time.Duration) {
	var period time.Duration
	select {
	case period = <-every:
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if stream.Send(&pb.RouterFrame{Payload: &pb.RouterFrame_KeepAlive{KeepAlive: &pb.KeepAlive{}}}) != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

func watchBaseURL(c WatchConfig) string {
	if c.TLS {
		return "https://" + c.Target
	}
	return "http://" + c.Target
}

func watchHTTPClient(c WatchConfig) *http.Client {
	var p http.Protocols
	tr := &http.Transport{Protocols: &p}
	if c.TLS {
		p.SetHTTP2(true)
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: c.Insecure} //nolint:gosec // opt-in flag
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return &http.Client{Transport: tr}
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
