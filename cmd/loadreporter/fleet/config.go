package fleet

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/logging"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/routerflags"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/serving"
)

// Config is what `loadreporter fleet` can be told.
type Config struct {
	routerflags.Router
	// Port bounds the fleet view's peers as serve bounds its own, under the
	// same flags: HTTP/2 streams per connection, a stalled write, a
	// request body.
	serving.Port
	// Flags are --log-level and --log-format, as serve reads them.
	logging.Flags
	Targets []string // HOST:PORT of each worker
	Listen  string   // where the fleet view is served
	// AllowedHosts are names, besides IPs, localhost and the --listen
	// host, a request may name in its Host header (comma-separated).
	AllowedHosts string
	// MaxWatchSessions bounds the live WatchFleet streams (pages).
	MaxWatchSessions int
	// ShutdownGrace bounds Close; FinalWriteTimeout bounds each stream's
	// last writes once it begins, so a reader that stopped reading is cut
	// well within the grace.
	ShutdownGrace     time.Duration
	FinalWriteTimeout time.Duration
	// Logger gets a line when the view starts and stops and when workers
	// are connected or lost; nil is the logger Flags describe, on stderr.
	Logger *slog.Logger
}

// Parse reads fleet's configuration from args and the environment.
func Parse(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	c := Config{Router: routerflags.Defaults("fleet"), Port: serving.DefaultPort(), Flags: logging.Defaults(),
		Listen: "127.0.0.1:8090", MaxWatchSessions: serving.DefaultMaxWatchSessions,
		ShutdownGrace: serving.DefaultShutdownGrace, FinalWriteTimeout: rpc.DefaultFinalWriteTimeout}
	var targets string
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&targets, "targets", "", "comma-separated HOST:PORTs of the workers' loadreporters (required)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "HOST:PORT to serve the fleet view (/, /v1/fleet/loads and the WatchFleet stream) on")
	fs.StringVar(&c.AllowedHosts, "allowed-host", c.AllowedHosts, "host names (comma-separated) requests may name in Host, besides IPs, localhost and the --listen host (a DNS-rebinding page must not read the fleet)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", c.ShutdownGrace, "bound on graceful shutdown: streams still open when it ends have their connections closed")
	fs.DurationVar(&c.FinalWriteTimeout, "final-write-timeout", c.FinalWriteTimeout, "how long a stream's last writes may wait at shutdown for a reader that does not read (keep it below --shutdown-grace)")
	serving.RegisterMaxWatchSessions(fs, &c.MaxWatchSessions)
	c.Router.Register(fs)
	c.Port.Register(fs)
	c.Flags.Register(fs)
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
	return c, c.check()
}

// check names the first setting that cannot work.
func (c Config) check() error {
	if err := c.Router.Check(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT", c.Listen)
	}
	if err := c.Port.Check(); err != nil {
		return err
	}
	if c.MaxWatchSessions < 1 {
		return fmt.Errorf("--max-watch-sessions %d: want at least 1", c.MaxWatchSessions)
	}
	if c.ShutdownGrace <= 0 {
		return fmt.Errorf("--shutdown-grace %s: must be > 0", c.ShutdownGrace)
	}
	if c.FinalWriteTimeout <= 0 || c.FinalWriteTimeout >= c.ShutdownGrace {
		return fmt.Errorf("--final-write-timeout %s: must be above 0 and below --shutdown-grace %s", c.FinalWriteTimeout, c.ShutdownGrace)
	}
	return c.Flags.Check()
}

// dashboard is the worker's own live page.
func (c Config) dashboard(target string) string {
	if c.TLS {
		return "https://" + target + "/"
	}
	return "http://" + target + "/"
}
