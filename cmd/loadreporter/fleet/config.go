package fleet

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/routerflags"
)

// Config is what `loadreporter fleet` can be told.
type Config struct {
	routerflags.Router
	Targets []string // HOST:PORT of each worker
	Listen  string   // where the fleet view is served
	// AllowedHosts are names, besides IPs, localhost and the --listen
	// host, a request may name in its Host header (comma-separated).
	AllowedHosts string
	// Logger gets a line when the view starts and each time a worker is
	// connected or lost; nil is slog.Default().
	Logger *slog.Logger
}

// Parse reads fleet's configuration from args and the environment.
func Parse(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	c := Config{Router: routerflags.Defaults("fleet"), Listen: "127.0.0.1:8090"}
	var targets string
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&targets, "targets", "", "comma-separated HOST:PORTs of the workers' loadreporters (required)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "HOST:PORT to serve the fleet view (/, /v1/fleet/loads and the WatchFleet stream) on")
	fs.StringVar(&c.AllowedHosts, "allowed-host", c.AllowedHosts, "host names (comma-separated) requests may name in Host, besides IPs, localhost and the --listen host (a DNS-rebinding page must not read the fleet)")
	c.Router.Register(fs)
	fs.Usage = envflag.Usage(fs, out, "Usage: loadreporter fleet [flags]\n\nWatches many workers as a router and serves their loads: a live page at /\nand JSON at /v1/fleet/loads.", nil)
	if err := envflag.Parse(fs, args, getenv, nil); err != nil {
		return c, err
	}
	if err := envflag.NoArguments(fs, args, "fleet"); err != nil {
		return c, err
	}
	var err error
	if c.Targets, err = routerflags.Targets(targets); err != nil {
		return c, err
	}
	if err := c.Router.Check(); err != nil {
		return c, err
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return c, fmt.Errorf("--listen %q: want HOST:PORT", c.Listen)
	}
	return c, nil
}

// dashboard is the worker's own live page.
func (c Config) dashboard(target string) string {
	if c.TLS {
		return "https://" + target + "/"
	}
	return "http://" + target + "/"
}
