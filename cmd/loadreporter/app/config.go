package app

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/loadreporter/loadreporter/adapters/front"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/source/sglangzmq"
	"github.com/loadreporter/loadreporter/adapters/source/sim"
	"github.com/loadreporter/loadreporter/adapters/source/vllm"
	"github.com/loadreporter/loadreporter/adapters/store/memory"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/logging"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/serving"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
)

// Config is everything `loadreporter serve` can be told, by subsystem.
// Each section goes to the providers of its subsystem (wire.FieldsOf),
// and the package a setting configures validates it in its constructor;
// flagError names the flag of a constructor's refusal.
type Config struct {
	Source   SourceConfig
	Server   ServerConfig
	Worker   WorkerConfig
	Security SecurityConfig
	History  HistoryConfig
	Front    FrontConfig
	Poll     PollConfig
	Fire     FireConfig
	Sessions session.Limits
	Streams  StreamsConfig
	Logs     logging.Flags
}

// SourceConfig is where the load is read: the source (a row of sources)
// and the engine settings every source shares; each source's own options
// are its package's, with the flags it declares.
type SourceConfig struct {
	// Name is --source: the name of a row of sources.
	Name string
	// EngineURL and EngineAPIKey are --engine-url and --engine-api-key.
	EngineURL    string
	EngineAPIKey string
	// DPSize is --dp-size: the expected ranks (0: learn them).
	DPSize int
	// MaxDPSize is --max-dp-size: the largest DP size --dp-size,
	// discovery and AdminService.SetTopology accept.
	MaxDPSize int

	// The sources' own options (their flags); the engine settings above
	// are filled in by the row that builds the source.
	Sim  sim.Options
	ZMQ  sglangzmq.Options
	VLLM vllm.Options
}

// ServerConfig is the one port.
type ServerConfig struct {
	// Listen is --listen: one address for RPCs, pages, health and metrics.
	Listen string
	// ShutdownGrace is --shutdown-grace.
	ShutdownGrace time.Duration
	// ReadyRequiresLoad makes /readyz also require a latest report that is
	// not UNREACHABLE.
	ReadyRequiresLoad bool
	// NativeGRPC serves plaintext connections whose first request is
	// native gRPC through grpc-go's transport (--native-grpc).
	NativeGRPC bool
}

// WorkerConfig is what every report says about the worker.
type WorkerConfig struct {
	// Addr is worker_addr (empty: the listen address).
	Addr  string
	Type  string
	Model string
	Zone  string
}

// SecurityConfig is TLS and who may call what.
type SecurityConfig struct {
	TLSCert     string
	TLSKey      string
	TLSClientCA string
	AuthToken   string
	// AuthScope is what AuthToken guards: AuthScopeAll or
	// AuthScopeOperators.
	AuthScope string
	// AdminToken, when set, is the only token AdminService accepts.
	AdminToken string
	// AllowedHosts are names, besides IPs, localhost and the --listen
	// host, that requests may carry in Host when no token is set.
	AllowedHosts string

	// warnings are said at start: settings that work but are likely not
	// what the operator meant.
	warnings []string
}

// HistoryConfig is the recorded history.
type HistoryConfig struct {
	// DatabaseURL is PostgreSQL's (empty: a bounded in-memory history).
	DatabaseURL string
	Migrate     bool
	// Interval is how often a report is recorded besides every status
	// change (0: history off).
	Interval  time.Duration
	Retention time.Duration
	// Capacity bounds the in-memory history.
	Capacity int
}

// PollConfig is what pollers (GET /v1/loads, /get_load, gRPC GetLoads)
// and the live page are answered.
type PollConfig struct {
	MaxAge time.Duration
	// ServeStale answers polls with a STALE report's numbers instead of a
	// 503.
	ServeStale bool
	// GetLoadShape is the shape of GET /get_load (empty: the source's
	// engine's).
	GetLoadShape string
}

// FireConfig is the fire loop: when reports are due and what each holds.
type FireConfig struct {
	StaleAfter time.Duration
	PullBudget time.Duration
	Schedule   string
	PhaseSlots int
}

// StreamsConfig bounds what one peer's streams may cost: router streams
// (Monitor) and every connection of the port.
type StreamsConfig struct {
	// Monitor holds the limits of router streams; its Clock, Logger and
	// Stalls are set by the providers.
	Monitor rpc.MonitorOptions
	// Port bounds the port's peers, as fleet's: HTTP/2 streams per
	// connection, a stalled write, a request body.
	Port serving.Port
}

// FrontConfig is the front mode: serve the engine's API at Listen,
// passing every request to EngineURL except the load endpoints.
type FrontConfig struct {
	// Listen is the worker's public address (empty: no front).
	Listen string
	// EngineURL is where requests are passed (empty: --engine-url).
	EngineURL string
	// ResponseHeaderTimeout bounds the wait for the engine's headers (0:
	// none, as a generation that does not stream answers when done).
	ResponseHeaderTimeout time.Duration
	// TLS serves the front over TLS with --tls-cert and --tls-key (the
	// client CA too, when set), for routers that reach the worker by
	// https:// or TLS gRPC.
	TLS bool
	// MaxRequests bounds the requests passed to the engine at once.
	MaxRequests int
	// Drain is how long the front keeps taking requests once the
	// reporter stops (its load endpoints then answer "shutting down", a
	// full worker to /get_load), before it stops accepting and lets those
	// in flight finish within the grace: a router polling it meanwhile
	// steers away instead of meeting a refused connection.
	Drain time.Duration
	// CountForwarded adds the requests the front passed to the engine
	// that the engine's published snapshot does not show yet to every
	// report (domain/forwarded).
	CountForwarded bool
	// PushOnForward, when positive, also sends the routers a report
	// between their deadlines each time the front passes a request on,
	// at most once per PushOnForward (0: off, one report per deadline).
	PushOnForward time.Duration
}

// DefaultConfig is the embedded default: a simulated engine on localhost.
func DefaultConfig() Config {
	return Config{
		Source: SourceConfig{
			Name:      sim.Name,
			MaxDPSize: rpc.DefaultMaxDPSize,
			Sim:       sim.Options{Mode: string(sim.ModeNormal)},
			ZMQ:       sglangzmq.Options{DetailInterval: sglangzmq.DefaultDetailInterval},
		},
		Server:   ServerConfig{Listen: "127.0.0.1:8080", ShutdownGrace: serving.DefaultShutdownGrace, NativeGRPC: true},
		Worker:   WorkerConfig{Type: "regular"},
		Security: SecurityConfig{AuthScope: AuthScopeAll},
		History: HistoryConfig{Migrate: true, Interval: time.Second, Retention: 7 * 24 * time.Hour,
			Capacity: memory.DefaultCapacity},
		Front:    FrontConfig{MaxRequests: front.DefaultMaxInFlight, Drain: 2 * time.Second, CountForwarded: true},
		Poll:     PollConfig{MaxAge: pollapi.DefaultMaxAge},
		Fire:     FireConfig{StaleAfter: 3 * time.Second, PullBudget: fireloop.DefaultPullBudget, Schedule: "aligned", PhaseSlots: session.AutoPhaseSlots},
		Sessions: session.DefaultLimits(),
		Streams: StreamsConfig{
			Monitor: rpc.MonitorOptions{
				FirstFrameTimeout: rpc.DefaultFirstFrameTimeout, MaxFramesPerSecond: rpc.DefaultMaxFramesPerSecond,
				FrameBurst: rpc.DefaultFrameBurst, FinalWriteTimeout: rpc.DefaultFinalWriteTimeout,
				MaxConnFramesPerSecond: rpc.DefaultMaxConnFramesPerSecond, MaxPeerFramesPerSecond: rpc.DefaultMaxPeerFramesPerSecond,
				MaxPendingStreams: rpc.DefaultMaxPendingStreams,
			},
			Port: serving.DefaultPort(),
		},
		Logs: logging.Defaults(),
	}
}

// serveSynopsis opens serve's usage.
const serveSynopsis = "Usage: loadreporter serve [flags]\n\nServes per-rank engine load to routers (Monitor), browsers and operators."

// serveExtra are the variables serve reads besides LOADREPORTER_*.
var serveExtra = map[string]string{"database-url": "DATABASE_URL"}

// ParseServe reads serve's configuration from args and the environment.
// It refuses what the flag package refuses (a value of the wrong kind, an
// unknown flag, a stray argument); what a value means is refused by the
// constructor it configures, when InitializeMain builds the service.
func ParseServe(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	sections := c.register(fs)
	fs.Usage = sections.Usage(out, serveSynopsis, serveExtra)
	if err := envflag.Parse(fs, args, getenv, serveExtra); err != nil {
		return c, err
	}
	if err := envflag.NoArguments(fs, args, "serve"); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "auth-token" && c.Security.AuthToken == "" {
			c.Security.warnings = append(c.Security.warnings, "--auth-token was given empty, so no token is required: whoever reaches the port may read every page and RPC (an unset variable in --auth-token \"$TOKEN\"?)")
		}
	})
	return c, nil
}

// register declares serve's flags on fs into c, by section: what most
// deployments set first, the bounds on peers and the logs last.
func (c *Config) register(fs *flag.FlagSet) *envflag.Sections {
	s := envflag.NewSections(fs)
	s.Add("Source (where the load is read)", c.Source.register, "source", "engine-url", "engine-api-key", "dp-size")
	for _, row := range sources {
		if row.flags != nil {
			s.Add("Source "+row.name, func(fs *flag.FlagSet) { row.flags(&c.Source, fs) })
		}
	}
	s.Add("Server (the one port)", c.Server.register, "listen")
	s.Add("Worker (what every report says about it)", c.Worker.register, "worker-addr", "worker-type", "model", "zone")
	s.Add("Security (TLS and tokens)", c.Security.register, "tls-cert", "tls-key", "tls-client-ca", "auth-token", "auth-scope")
	s.Add("History (what is recorded, and where)", c.History.register, "database-url", "history-interval", "history-retention")
	s.Add("Front (the engine's API at the worker's public address)", c.Front.register, "front-listen", "front-engine-url")
	s.Add("Polling (GET /v1/loads, /get_load, gRPC GetLoads)", c.Poll.register, "poll-max-age")
	s.Add("Fire loop (when reports are due, what they hold)", c.Fire.register, "stale-after", "pull-budget", "schedule")
	s.Add("Sessions (what routers and pages may ask for)", c.registerSessions,
		"min-report-interval", "max-report-interval", "min-lease", "max-lease", "max-sessions")
	s.Add("Streams (what one peer may cost)", c.Streams.register, "final-write-timeout", "stalled-write-timeout", "first-frame-timeout")
	s.Add("Logs", c.Logs.Register)
	return s
}

func (c *SourceConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Name, "source", c.Name, "snapshot source: "+sourceNames())
	fs.StringVar(&c.EngineURL, "engine-url", c.EngineURL, "where the source reads the engine (e.g. http://127.0.0.1:30000)")
	fs.StringVar(&c.EngineAPIKey, "engine-api-key", c.EngineAPIKey, "bearer token sent to the engine")
	fs.IntVar(&c.DPSize, "dp-size", c.DPSize, "expected number of DP ranks (0: learn from the first valid snapshot; sim uses 4)")
	fs.IntVar(&c.MaxDPSize, "max-dp-size", c.MaxDPSize, "largest DP size --dp-size and AdminService.SetTopology accept")
}

func (c *ServerConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "one address for RPCs, pages, health and metrics")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", c.ShutdownGrace, "bound on graceful shutdown")
	fs.BoolVar(&c.ReadyRequiresLoad, "ready-requires-load", c.ReadyRequiresLoad, "/readyz also requires the latest report (at most --poll-max-age old) not to be UNREACHABLE, so traffic is steered away from a worker whose engine is down")
	fs.BoolVar(&c.NativeGRPC, "native-grpc", c.NativeGRPC, "serve the port's plaintext connections whose first request is native gRPC (routers' Monitor streams) through grpc-go's own HTTP/2 transport, every service and check the same as on net/http's; false serves every connection with net/http (with TLS it always does)")
}

func (c *WorkerConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "worker-addr", c.Addr, "worker_addr in reports (empty: the listen address)")
	fs.StringVar(&c.Type, "worker-type", c.Type, "worker_type in reports: regular, prefill or decode")
	fs.StringVar(&c.Model, "model", c.Model, "model in reports")
	fs.StringVar(&c.Zone, "zone", c.Zone, "zone in reports")
}

func (c *SecurityConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "TLS certificate file (PEM); with --tls-key turns on TLS")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "TLS private key file (PEM)")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", c.TLSClientCA, "CA file (PEM) for client certificates; turns on mutual TLS")
	fs.StringVar(&c.AuthToken, "auth-token", c.AuthToken, "bearer token required on every RPC and page (a browser sends it as the password of HTTP Basic authentication)")
	fs.StringVar(&c.AuthScope, "auth-scope", c.AuthScope, "what --auth-token guards: all (every RPC and page) or operators (pages, Watch, history and AdminService; routers' Monitor and ORCA streams, gRPC health checks, GET /v1/loads, GET /get_load, SglangScheduler/GetLoads and /metrics are served without it, as the routers that exist send no credentials)")
	fs.StringVar(&c.AdminToken, "admin-token", c.AdminToken, "the only bearer token AdminService accepts (so routers' --auth-token cannot change the topology or the sim mode)")
	fs.StringVar(&c.AllowedHosts, "allowed-host", c.AllowedHosts, "without --auth-token: host names (comma-separated) requests may name in Host, besides IPs, localhost and the --listen host")
}

func (c *HistoryConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL URL for the history (empty: a bounded in-memory history)")
	fs.BoolVar(&c.Migrate, "migrate", c.Migrate, "apply the schema migrations at start (with --database-url)")
	fs.DurationVar(&c.Interval, "history-interval", c.Interval, "how often history records a report, besides every status change (0: history off)")
	fs.DurationVar(&c.Retention, "history-retention", c.Retention, "history kept; older reports are removed every 10 minutes, PostgreSQL's by whole UTC days (0: keep all)")
	fs.IntVar(&c.Capacity, "history-capacity", c.Capacity, "reports the in-memory history keeps, oldest evicted first (0: 100000)")
}

func (c *FrontConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "front-listen", c.Listen, "front mode: the worker's public address (e.g. 0.0.0.0:30000); every request there is passed to the engine unchanged but GET /v1/loads and /get_load, answered from the shared pull, and GET /metrics, the engine's own served from one scrape per --poll-max-age (empty: off)")
	fs.StringVar(&c.EngineURL, "front-engine-url", c.EngineURL, "front mode: where requests are passed (empty: --engine-url); http://HOST:PORT, or grpc://HOST:PORT for an engine's gRPC server")
	fs.BoolVar(&c.TLS, "front-tls", c.TLS, "front mode: serve the worker's address over TLS with --tls-cert and --tls-key (and mutual TLS with --tls-client-ca), for routers that reach workers by https:// or TLS gRPC; the engine behind stays plaintext on loopback")
	fs.IntVar(&c.MaxRequests, "front-max-requests", c.MaxRequests, "front mode: requests passed to the engine at once at most; one more is answered 503 with Retry-After (gRPC: RESOURCE_EXHAUSTED) to be retried on another worker")
	fs.DurationVar(&c.Drain, "front-drain", c.Drain, "front mode: when the reporter stops, how long the front keeps taking requests while its load endpoints answer \"shutting down\" (a full worker to /get_load), so polling routers steer away before its port closes; then requests in flight have what is left of --shutdown-grace")
	fs.BoolVar(&c.CountForwarded, "front-count-forwarded", c.CountForwarded, "front mode: count into every report (pushed and polled) the requests passed to the engine since a rank's snapshot time and not yet answered, as waiting requests with their prompt tokens estimated from their bodies, so routers see what the others sent before the engine publishes it; needs an engine that stamps its ranks (SGLang's /v1/loads and LoadStat do; its gRPC GetLoads does not)")
	fs.DurationVar(&c.PushOnForward, "front-push-on-forward", c.PushOnForward, "front mode, with --front-count-forwarded: also send the routers' Monitor streams a report between their deadlines when the front passes a request on (the last pull's numbers with the count now; no engine read), at most once per this duration and once more at the end of a burst; 0: off, one report per deadline as the stream protocol has it")
	fs.DurationVar(&c.ResponseHeaderTimeout, "front-response-header-timeout", c.ResponseHeaderTimeout, "front mode: how long a proxied request waits for the engine's response headers (0: as long as the client waits; a generation that does not stream answers when it is done)")
}

func (c *PollConfig) register(fs *flag.FlagSet) {
	fs.DurationVar(&c.MaxAge, "poll-max-age", c.MaxAge, "GET /v1/loads, the live page and --ready-requires-load serve the latest report when younger, else wait for the next fire (0: 1s)")
	fs.BoolVar(&c.ServeStale, "poll-serve-stale", c.ServeStale, "answer GET /v1/loads and /get_load with a STALE report's numbers (200, status STALE in the envelope) instead of 503 with the snapshot's age: pollers' types have no status and would route on old load as if current")
	fs.StringVar(&c.GetLoadShape, "get-load-shape", c.GetLoadShape, "shape of GET /get_load: sglang (a per-rank array, read by sglang-router) or vllm ({\"load\": N}, read by vllm-router); empty: vllm with --source vllm-metrics, else sglang")
}

func (c *FireConfig) register(fs *flag.FlagSet) {
	fs.DurationVar(&c.StaleAfter, "stale-after", c.StaleAfter, "a report whose oldest rank is older than this is STALE")
	fs.DurationVar(&c.PullBudget, "pull-budget", c.PullBudget, "bound on one fire's pull, retry included (0: 1s)")
	fs.StringVar(&c.Schedule, "schedule", c.Schedule, "report deadlines: aligned (shared grid) or anchored (per registration)")
	fs.Var(phaseSlots{&c.PhaseSlots}, "phase-slots", fmt.Sprintf("aligned: how many phases of their interval routers spread over; each fire serves one phase's routers, so its burst shrinks, and pulls grow to one per open phase per interval. auto: one phase (SGLang's single grid) while an interval has under %d routers, one more per %d of them up to %d, a router keeping its phase; N: N phases from the start, filled least-loaded (0 or 1: one shared grid)", session.AutoPhaseSessions, session.AutoPhaseSessions, session.AutoPhases))
}

func (c *Config) registerSessions(fs *flag.FlagSet) {
	l := &c.Sessions
	fs.DurationVar(&l.MinInterval, "min-report-interval", l.MinInterval, "smallest report interval a router may ask for")
	fs.DurationVar(&l.MaxInterval, "max-report-interval", l.MaxInterval, "largest report interval a router may ask for")
	fs.DurationVar(&l.MinLease, "min-lease", l.MinLease, "shortest lease granted (shorter requests are raised)")
	fs.DurationVar(&l.MaxLease, "max-lease", l.MaxLease, "longest lease granted (longer requests are lowered)")
	fs.IntVar(&l.MaxSessions, "max-sessions", l.MaxSessions, "live router sessions at most: Monitor and ORCA streams (GET /v1/loads polls waiting for a report have a bound of this size of their own)")
	serving.RegisterMaxWatchSessions(fs, &l.MaxWatchSessions)
}

func (c *StreamsConfig) register(fs *flag.FlagSet) {
	m := &c.Monitor
	fs.DurationVar(&m.FirstFrameTimeout, "first-frame-timeout", m.FirstFrameTimeout, "a router stream that sends no register within this ends with status DEADLINE_EXCEEDED (0: as if unset)")
	fs.Float64Var(&m.MaxFramesPerSecond, "max-frames-per-second", m.MaxFramesPerSecond, "router frames one stream may send per second on average; beyond it the stream ends with RESOURCE_EXHAUSTED (0: as if unset)")
	fs.IntVar(&m.FrameBurst, "frame-burst", m.FrameBurst, "router frames one stream may send at once, above --max-frames-per-second (0: as if unset)")
	fs.Float64Var(&m.MaxConnFramesPerSecond, "max-conn-frames-per-second", m.MaxConnFramesPerSecond, "router frames the Monitor streams of one connection may send per second together (a second's worth at once); beyond it a stream ends with RESOURCE_EXHAUSTED (0: as if unset)")
	fs.Float64Var(&m.MaxPeerFramesPerSecond, "max-peer-frames-per-second", m.MaxPeerFramesPerSecond, "router frames the Monitor streams of one peer host may send per second together, over all its connections; beyond it a stream ends with RESOURCE_EXHAUSTED (0: as if unset)")
	fs.IntVar(&m.MaxPendingStreams, "max-pending-streams", m.MaxPendingStreams, "Monitor streams open but not registered yet, over all connections; one more ends at once with RESOURCE_EXHAUSTED (0: as if unset)")
	fs.DurationVar(&m.FinalWriteTimeout, "final-write-timeout", m.FinalWriteTimeout, "how long a stream's last writes may wait for a peer that does not read: a Monitor stream's once its session ended, and at shutdown every stream's (Monitor, Watch, ORCA, page events; keep it below --shutdown-grace)")
	c.Port.Register(fs)
}

// phaseSlots is --phase-slots: auto (session.AutoPhaseSlots) or a number
// of phases, checked by session.Grid.Validate.
type phaseSlots struct{ n *int }

func (p phaseSlots) String() string {
	switch {
	case p.n == nil:
		return ""
	case *p.n == session.AutoPhaseSlots:
		return "auto"
	}
	return strconv.Itoa(*p.n)
}

func (p phaseSlots) Set(v string) error {
	if v == "auto" {
		*p.n = session.AutoPhaseSlots
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > session.MaxPhaseSlots {
		return fmt.Errorf("want auto or a number of phases from 0 to %d", session.MaxPhaseSlots)
	}
	*p.n = n
	return nil
}
