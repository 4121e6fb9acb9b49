package fleet

import (
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
)

// Config is what `loadreporter fleet` can be told.
type Config struct {
	Targets   []string // HOST:PORT of each worker
	Listen    string   // where the fleet view is served
	Interval  time.Duration
	Lease     time.Duration
	RouterID  string
	AuthToken string
	TLS       bool
	Insecure  bool
}

// Parse reads fleet's configuration from args and the environment.
func Parse(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	host, _ := os.Hostname()
	c := Config{Listen: "127.0.0.1:8090", Interval: time.Second, Lease: 10 * time.Second,
		RouterID: fmt.Sprintf("fleet-%s-%d", host, os.Getpid())}
	var targets string
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&targets, "targets", "", "comma-separated HOST:PORTs of the workers' loadreporters (required)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "HOST:PORT to serve the fleet view (/, /v1/fleet/loads and the WatchFleet stream) on")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "report interval to ask each worker for")
	fs.DurationVar(&c.Lease, "lease", c.Lease, "lease to ask each worker for")
	fs.StringVar(&c.RouterID, "router-id", c.RouterID, "router_id to register as")
	fs.StringVar(&c.AuthToken, "auth-token", c.AuthToken, "bearer token the workers require")
	fs.BoolVar(&c.TLS, "tls", c.TLS, "dial the workers with TLS")
	fs.BoolVar(&c.Insecure, "tls-insecure", c.Insecure, "with --tls: do not verify the workers' certificates")
	fs.Usage = envflag.Usage(fs, out, "Usage: loadreporter fleet [flags]\n\nWatches many workers as a router and serves their loads: a live page at /\nand JSON at /v1/fleet/loads.", nil)
	if err := envflag.Parse(fs, args, getenv, nil); err != nil {
		return c, err
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
	switch {
	case len(c.Targets) == 0:
		return c, fmt.Errorf("--targets: want at least one HOST:PORT")
	case c.Interval < time.Millisecond || c.Lease < time.Millisecond:
		return c, fmt.Errorf("--interval and --lease must be at least 1ms")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return c, fmt.Errorf("--listen %q: want HOST:PORT", c.Listen)
	}
	return c, nil
}

// clientOptions are the client's options for c's flags.
func (c Config) clientOptions() client.Options {
	o := client.Options{RouterID: c.RouterID, ReportInterval: c.Interval, Lease: c.Lease, BearerToken: c.AuthToken}
	if c.TLS {
		o.TLS = &tls.Config{InsecureSkipVerify: c.Insecure} //nolint:gosec // opt-in flag
	}
	return o
}

// dashboard is the worker's own live page.
func (c Config) dashboard(target string) string {
	if c.TLS {
		return "https://" + target + "/"
	}
	return "http://" + target + "/"
}
