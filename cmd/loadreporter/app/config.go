package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/source/sglangzmq"
	"github.com/loadreporter/loadreporter/adapters/store/memory"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/logging"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/serving"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
)

// Config is everything `loadreporter serve` can be told.
type Config struct {
	Listen       string
	Source       string
	EngineURL    string
	EngineAPIKey string
	DPSize       int
	SimMode      string
	SimSeed      uint64
	PollMaxAge   time.Duration
	// PollServeStale answers polls with a STALE report's numbers instead
	// of a 503.
	PollServeStale bool
	// GetLoadShape is the shape of GET /get_load (empty: the source's
	// engine's).
	GetLoadShape string

	VLLMMaxRunningRequests int64
	VLLMMaxTotalNumTokens  int64
	ZMQMaxRunningRequests  int64

	ZMQEndpoint    string
	DetailInterval time.Duration

	StaleAfter time.Duration
	PullBudget time.Duration
	Schedule   string
	PhaseSlots int
	Limits     session.Limits

	ShutdownGrace time.Duration

	DatabaseURL      string
	Migrate          bool
	HistoryInterval  time.Duration
	HistoryRetention time.Duration
	HistoryCapacity  int

	WorkerAddr string
	WorkerType string
	Model      string
	Zone       string

	TLSCert     string
	TLSKey      string
	TLSClientCA string
	AuthToken   string
	// AuthScope is what AuthToken guards: AuthScopeAll or
	// AuthScopeOperators.
	AuthScope string
	// AllowedHosts are names, besides IPs, localhost and the --listen
	// host, that requests may carry in Host when no token is set.
	AllowedHosts string
	// Port bounds the port's peers, as fleet's: HTTP/2 streams per
	// connection, a stalled write (Watch, ORCA, Monitor), a request body
	// (but Monitor's).
	serving.Port
	// Monitor holds the limits of router streams (first frame, frame
	// budget, final write); its Clock and Logger are set by the providers.
	Monitor rpc.MonitorOptions
	// AdminToken, when set, is the only token AdminService accepts.
	AdminToken string
	// MaxDPSize bounds --dp-size and AdminService.SetTopology.
	MaxDPSize int
	// ReadyRequiresLoad makes /readyz also require a latest report that is
	// not UNREACHABLE.
	ReadyRequiresLoad bool

	// Front holds the front mode's settings: the reporter at the
	// worker's public address.
	Front FrontConfig

	logging.Flags

	// warnings are said at start: settings that work but are likely not
	// what the operator meant.
	warnings []string
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
}

// DefaultConfig is the embedded default: a simulated engine on localhost.
func DefaultConfig() Config {
	return Config{
		Listen:           "127.0.0.1:8080",
		Source:           "sim",
		StaleAfter:       3 * time.Second,
		PullBudget:       fireloop.DefaultPullBudget,
		Schedule:         "aligned",
		PhaseSlots:       1,
		Limits:           session.DefaultLimits(),
		ShutdownGrace:    serving.DefaultShutdownGrace,
		Migrate:          true,
		HistoryInterval:  time.Second,
		HistoryRetention: 7 * 24 * time.Hour,
		HistoryCapacity:  memory.DefaultCapacity,
		WorkerType:       "regular",
		AuthScope:        AuthScopeAll,
		SimMode:          "normal",
		PollMaxAge:       pollapi.DefaultMaxAge,
		Port:             serving.DefaultPort(),
		MaxDPSize:        rpc.DefaultMaxDPSize,
		Monitor: rpc.MonitorOptions{
			FirstFrameTimeout: rpc.DefaultFirstFrameTimeout, MaxFramesPerSecond: rpc.DefaultMaxFramesPerSecond,
			FrameBurst: rpc.DefaultFrameBurst, FinalWriteTimeout: rpc.DefaultFinalWriteTimeout,
			MaxConnFramesPerSecond: rpc.DefaultMaxConnFramesPerSecond, MaxPeerFramesPerSecond: rpc.DefaultMaxPeerFramesPerSecond,
			MaxPendingStreams: rpc.DefaultMaxPendingStreams,
		},
		DetailInterval: sglangzmq.DefaultDetailInterval,
		Flags:          logging.Defaults(),
	}
}

// Sources lists the accepted --source values.
var Sources = []string{"sim", "sglang-http", "sglang-grpc", "sglang-zmq", "vllm-metrics"}

// ParseServe reads serve's configuration from args and the environment.
func ParseServe(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Listen, "listen", c.Listen, "one address for RPCs, pages, health and metrics")
	fs.StringVar(&c.Source, "source", c.Source, "snapshot source: sim, sglang-http, sglang-grpc, sglang-zmq or vllm-metrics")
	fs.StringVar(&c.EngineURL, "engine-url", c.EngineURL, "where the source reads the engine (e.g. http://127.0.0.1:30000)")
	fs.StringVar(&c.EngineAPIKey, "engine-api-key", c.EngineAPIKey, "bearer token sent to the engine")
	fs.IntVar(&c.DPSize, "dp-size", c.DPSize, "expected number of DP ranks (0: learn from the first valid snapshot; sim uses 4)")
	fs.StringVar(&c.SimMode, "sim-mode", c.SimMode, "sim source start mode: normal, stall, error, hang, garbage")
	fs.Uint64Var(&c.SimSeed, "sim-seed", c.SimSeed, "sim source random seed")
	fs.DurationVar(&c.PollMaxAge, "poll-max-age", c.PollMaxAge, "GET /v1/loads, the live page and --ready-requires-load serve the latest report when younger, else wait for the next fire")
	fs.BoolVar(&c.PollServeStale, "poll-serve-stale", c.PollServeStale, "answer GET /v1/loads and /get_load with a STALE report's numbers (200, status STALE in the envelope) instead of 503 with the snapshot's age: pollers' types have no status and would route on old load as if current")
	fs.StringVar(&c.GetLoadShape, "get-load-shape", c.GetLoadShape, "shape of GET /get_load: sglang (a per-rank array, read by sglang-router) or vllm ({\"load\": N}, read by vllm-router); empty: vllm with --source vllm-metrics, else sglang")
	fs.Int64Var(&c.VLLMMaxRunningRequests, "vllm-max-running-requests", c.VLLMMaxRunningRequests, "vllm-metrics: the server's --max-num-seqs (vLLM does not publish it; 0: 256)")
	fs.Int64Var(&c.VLLMMaxTotalNumTokens, "vllm-max-total-num-tokens", c.VLLMMaxTotalNumTokens, "vllm-metrics: each engine's KV capacity in tokens, num_gpu_blocks × block_size (vLLM logs it at start as \"GPU KV cache size: N tokens\"), for engines whose vllm:cache_config_info does not give it (0: unknown, sent as max_total_num_tokens 0)")
	fs.Int64Var(&c.ZMQMaxRunningRequests, "zmq-max-running-requests", c.ZMQMaxRunningRequests, "sglang-zmq: the engine's --max-running-requests, used until the /v1/loads detail pull gives it (LoadStat does not carry it; 0: unknown, and a rank with running requests is unreachable until then)")
	fs.StringVar(&c.ZMQEndpoint, "zmq-endpoint", c.ZMQEndpoint, "sglang-zmq: rank 0's load socket tcp://HOST:BASE (rank r at BASE+r; needs --dp-size); empty: found through --engine-url's /server_info")
	fs.DurationVar(&c.DetailInterval, "detail-interval", c.DetailInterval, "sglang-zmq: how often the fields LoadStat lacks are pulled from --engine-url's /v1/loads (0: off, they stay 0)")
	fs.DurationVar(&c.StaleAfter, "stale-after", c.StaleAfter, "a report whose oldest rank is older than this is STALE")
	fs.DurationVar(&c.PullBudget, "pull-budget", c.PullBudget, "bound on one fire's pull, retry included")
	fs.StringVar(&c.Schedule, "schedule", c.Schedule, "report deadlines: aligned (shared grid) or anchored (per registration)")
	fs.IntVar(&c.PhaseSlots, "phase-slots", c.PhaseSlots, "aligned: spread routers over this many phases of their interval; each fire serves one phase's routers, so its burst shrinks, but pulls grow to this many per interval (1: one shared grid; about one phase per 100 routers is a good start)")
	fs.DurationVar(&c.Limits.MinInterval, "min-report-interval", c.Limits.MinInterval, "smallest report interval a router may ask for")
	fs.DurationVar(&c.Limits.MaxInterval, "max-report-interval", c.Limits.MaxInterval, "largest report interval a router may ask for")
	fs.DurationVar(&c.Limits.MinLease, "min-lease", c.Limits.MinLease, "shortest lease granted (shorter requests are raised)")
	fs.DurationVar(&c.Limits.MaxLease, "max-lease", c.Limits.MaxLease, "longest lease granted (longer requests are lowered)")
	fs.IntVar(&c.Limits.MaxSessions, "max-sessions", c.Limits.MaxSessions, "live router sessions at most: Monitor and ORCA streams (GET /v1/loads polls waiting for a report have a bound of this size of their own)")
	serving.RegisterMaxWatchSessions(fs, &c.Limits.MaxWatchSessions)
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", c.ShutdownGrace, "bound on graceful shutdown")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL URL for the history (empty: a bounded in-memory history)")
	fs.BoolVar(&c.Migrate, "migrate", c.Migrate, "apply the schema migrations at start (with --database-url)")
	fs.DurationVar(&c.HistoryInterval, "history-interval", c.HistoryInterval, "how often history records a report, besides every status change (0: history off)")
	fs.DurationVar(&c.HistoryRetention, "history-retention", c.HistoryRetention, "history kept; older reports are removed every 10 minutes, PostgreSQL's by whole UTC days (0: keep all)")
	fs.IntVar(&c.HistoryCapacity, "history-capacity", c.HistoryCapacity, "reports the in-memory history keeps (oldest evicted first)")
	fs.StringVar(&c.WorkerAddr, "worker-addr", c.WorkerAddr, "worker_addr in reports (empty: the listen address)")
	fs.StringVar(&c.WorkerType, "worker-type", c.WorkerType, "worker_type in reports: regular, prefill or decode")
	fs.StringVar(&c.Model, "model", c.Model, "model in reports")
	fs.StringVar(&c.Zone, "zone", c.Zone, "zone in reports")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "TLS certificate file (PEM); with --tls-key turns on TLS")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "TLS private key file (PEM)")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", c.TLSClientCA, "CA file (PEM) for client certificates; turns on mutual TLS")
	fs.StringVar(&c.AuthToken, "auth-token", c.AuthToken, "bearer token required on every RPC and page (a browser sends it as the password of HTTP Basic authentication)")
	fs.StringVar(&c.AuthScope, "auth-scope", c.AuthScope, "what --auth-token guards: all (every RPC and page) or operators (pages, Watch, history and AdminService; routers' Monitor and ORCA streams, gRPC health checks, GET /v1/loads and /metrics are served without it, as the routers that exist send no credentials)")
	fs.StringVar(&c.AllowedHosts, "allowed-host", c.AllowedHosts, "without --auth-token: host names (comma-separated) requests may name in Host, besides IPs, localhost and the --listen host")
	fs.BoolVar(&c.ReadyRequiresLoad, "ready-requires-load", c.ReadyRequiresLoad, "/readyz also requires the latest report (at most --poll-max-age old) not to be UNREACHABLE, so traffic is steered away from a worker whose engine is down")
	fs.DurationVar(&c.Monitor.FirstFrameTimeout, "first-frame-timeout", c.Monitor.FirstFrameTimeout, "a router stream that sends no register within this ends with status DEADLINE_EXCEEDED (0: as if unset)")
	fs.Float64Var(&c.Monitor.MaxFramesPerSecond, "max-frames-per-second", c.Monitor.MaxFramesPerSecond, "router frames one stream may send per second on average; beyond it the stream ends with RESOURCE_EXHAUSTED (0: as if unset)")
	fs.IntVar(&c.Monitor.FrameBurst, "frame-burst", c.Monitor.FrameBurst, "router frames one stream may send at once, above --max-frames-per-second (0: as if unset)")
	fs.Float64Var(&c.Monitor.MaxConnFramesPerSecond, "max-conn-frames-per-second", c.Monitor.MaxConnFramesPerSecond, "router frames the Monitor streams of one connection may send per second together (a second's worth at once); beyond it a stream ends with RESOURCE_EXHAUSTED (0: as if unset)")
	fs.Float64Var(&c.Monitor.MaxPeerFramesPerSecond, "max-peer-frames-per-second", c.Monitor.MaxPeerFramesPerSecond, "router frames the Monitor streams of one peer host may send per second together, over all its connections; beyond it a stream ends with RESOURCE_EXHAUSTED (0: as if unset)")
	fs.IntVar(&c.Monitor.MaxPendingStreams, "max-pending-streams", c.Monitor.MaxPendingStreams, "Monitor streams open but not registered yet, over all connections; one more ends at once with RESOURCE_EXHAUSTED (0: as if unset)")
	fs.DurationVar(&c.Monitor.FinalWriteTimeout, "final-write-timeout", c.Monitor.FinalWriteTimeout, "how long a stream's last writes may wait for a peer that does not read: a Monitor stream's once its session ended, and at shutdown every stream's (Monitor, Watch, ORCA, page events; keep it below --shutdown-grace)")
	c.Port.Register(fs)
	fs.StringVar(&c.AdminToken, "admin-token", c.AdminToken, "the only bearer token AdminService accepts (so routers' --auth-token cannot change the topology or the sim mode)")
	fs.IntVar(&c.MaxDPSize, "max-dp-size", c.MaxDPSize, "largest DP size --dp-size and AdminService.SetTopology accept")
	fs.StringVar(&c.Front.Listen, "front-listen", c.Front.Listen, "front mode: the worker's public address (e.g. 0.0.0.0:30000); every request there is passed to the engine unchanged but GET /v1/loads and /get_load, answered from the shared pull, and GET /metrics, the engine's own served from one scrape per --poll-max-age (empty: off)")
	fs.StringVar(&c.Front.EngineURL, "front-engine-url", c.Front.EngineURL, "front mode: where requests are passed (empty: --engine-url); http://HOST:PORT, or grpc://HOST:PORT for an engine's gRPC server")
	fs.BoolVar(&c.Front.TLS, "front-tls", c.Front.TLS, "front mode: serve the worker's address over TLS with --tls-cert and --tls-key (and mutual TLS with --tls-client-ca), for routers that reach workers by https:// or TLS gRPC; the engine behind stays plaintext on loopback")
	fs.DurationVar(&c.Front.ResponseHeaderTimeout, "front-response-header-timeout", c.Front.ResponseHeaderTimeout, "front mode: how long a proxied request waits for the engine's response headers (0: as long as the client waits; a generation that does not stream answers when it is done)")
	c.Flags.Register(fs)
	fs.Usage = envflag.Usage(fs, out, "Usage: loadreporter serve [flags]\n\nServes per-rank engine load to routers (Monitor), browsers and operators.",
		map[string]string{"database-url": "DATABASE_URL"})
	if err := envflag.Parse(fs, args, getenv, map[string]string{"database-url": "DATABASE_URL"}); err != nil {
		return c, err
	}
	if err := envflag.NoArguments(fs, args, "serve"); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "auth-token" && c.AuthToken == "" {
			c.warnings = append(c.warnings, "--auth-token was given empty, so no token is required: whoever reaches the port may read every page and RPC (an unset variable in --auth-token \"$TOKEN\"?)")
		}
	})
	return c, c.Validate()
}

// Validate reports the first setting that cannot work, naming its flag.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT: %v", c.Listen, err)
	}
	if !slices.Contains(Sources, c.Source) {
		return fmt.Errorf("--source %q: want one of %v", c.Source, Sources)
	}
	if c.Source != "sim" && c.EngineURL == "" && (c.Source != "sglang-zmq" || c.ZMQEndpoint == "") {
		if c.Source == "sglang-zmq" {
			return fmt.Errorf("--source sglang-zmq needs --engine-url (its /server_info names the load sockets) or --zmq-endpoint with --dp-size")
		}
		return fmt.Errorf("--engine-url is required with --source %s", c.Source)
	}
	if err := c.Port.Check(); err != nil {
		return err
	}
	if c.DetailInterval < 0 {
		return fmt.Errorf("--detail-interval %s: must not be negative (0 turns the detail pull off)", c.DetailInterval)
	}
	if c.MaxDPSize < 1 || c.MaxDPSize > domain.MaxRanks {
		return fmt.Errorf("--max-dp-size %d: want 1 to %d (the most ranks a report holds)", c.MaxDPSize, domain.MaxRanks)
	}
	if c.DPSize < 0 || c.DPSize > c.MaxDPSize {
		return fmt.Errorf("--dp-size %d: want 0 (learn) to %d (--max-dp-size)", c.DPSize, c.MaxDPSize)
	}
	if err := c.Monitor.Validate(); err != nil {
		return errors.New(domain.ErrorMessage(err))
	}
	if c.ShutdownGrace <= 0 {
		return fmt.Errorf("--shutdown-grace %s: must be > 0", c.ShutdownGrace)
	}
	if c.Monitor.FinalWriteTimeout >= c.ShutdownGrace {
		return fmt.Errorf("--final-write-timeout %s: must be below --shutdown-grace %s", c.Monitor.FinalWriteTimeout, c.ShutdownGrace)
	}
	// They go into every report: to routers as protobuf strings, which
	// must be UTF-8, and to the history, which refuses NUL.
	for _, f := range []struct{ flag, v string }{{"worker-addr", c.WorkerAddr}, {"model", c.Model}, {"zone", c.Zone}} {
		if !utf8.ValidString(f.v) || strings.ContainsRune(f.v, 0) {
			return fmt.Errorf("--%s %q: must be UTF-8 text without NUL", f.flag, f.v)
		}
	}
	if strings.TrimSpace(c.WorkerAddr) != c.WorkerAddr {
		// Audits filter by worker, and a filter is read trimmed.
		return fmt.Errorf("--worker-addr %q: must not start or end with spaces", c.WorkerAddr)
	}
	if c.StaleAfter <= 0 {
		return fmt.Errorf("--stale-after %s: must be > 0 (a report whose oldest rank is older is STALE; 0 would make every report STALE)", c.StaleAfter)
	}
	if c.PollMaxAge < 0 {
		return fmt.Errorf("--poll-max-age %s: must not be negative", c.PollMaxAge)
	}
	if c.ZMQMaxRunningRequests < 0 {
		return fmt.Errorf("--zmq-max-running-requests %d: must not be negative", c.ZMQMaxRunningRequests)
	}
	if c.VLLMMaxRunningRequests < 0 {
		return fmt.Errorf("--vllm-max-running-requests %d: must not be negative", c.VLLMMaxRunningRequests)
	}
	if c.GetLoadShape != "" && !slices.Contains(pollapi.GetLoadShapes, c.GetLoadShape) {
		return fmt.Errorf("--get-load-shape %q: want one of %v (or empty: the source's engine's)", c.GetLoadShape, pollapi.GetLoadShapes)
	}
	if c.VLLMMaxTotalNumTokens < 0 {
		return fmt.Errorf("--vllm-max-total-num-tokens %d: must not be negative (0: unknown)", c.VLLMMaxTotalNumTokens)
	}
	if c.HistoryInterval < 0 {
		return fmt.Errorf("--history-interval %s: must not be negative (0 turns history off)", c.HistoryInterval)
	}
	if c.HistoryInterval > 0 && (c.HistoryInterval < 10*time.Millisecond || c.HistoryInterval > audit.MaxGapInterval) {
		return fmt.Errorf("--history-interval %s: want 0 (off), or from 10ms to %s", c.HistoryInterval, audit.MaxGapInterval)
	}
	if c.HistoryRetention < 0 {
		return fmt.Errorf("--history-retention %s: must not be negative (0 keeps all)", c.HistoryRetention)
	}
	if c.HistoryCapacity <= 0 {
		return fmt.Errorf("--history-capacity %d: must be > 0", c.HistoryCapacity)
	}
	if c.PullBudget <= 0 {
		return fmt.Errorf("--pull-budget %s: must be > 0", c.PullBudget)
	}
	schedule, err := session.ParseSchedule(c.Schedule)
	if err != nil {
		return fmt.Errorf("--%s", domain.ErrorMessage(err))
	}
	if c.PhaseSlots < 1 || c.PhaseSlots > session.MaxPhaseSlots {
		return fmt.Errorf("--phase-slots %d: must be in [1, %d] (1: one shared grid)", c.PhaseSlots, session.MaxPhaseSlots)
	}
	if err := (session.Grid{Schedule: schedule, PhaseSlots: c.PhaseSlots}).Validate(); err != nil {
		return fmt.Errorf("--%s", domain.ErrorMessage(err))
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("--%s", domain.ErrorMessage(err))
	}
	if _, err := domain.ParseWorkerType(c.WorkerType); err != nil {
		return fmt.Errorf("--worker-type: %s", domain.ErrorMessage(err))
	}
	if c.AuthScope != AuthScopeAll && c.AuthScope != AuthScopeOperators {
		return fmt.Errorf("--auth-scope %q: want %s or %s", c.AuthScope, AuthScopeAll, AuthScopeOperators)
	}
	for _, tok := range []struct{ flag, v string }{{"auth-token", c.AuthToken}, {"admin-token", c.AdminToken}} {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(tok.v)), "change-me") {
			return fmt.Errorf("--%s is still the shipped placeholder %q: set a long random token (openssl rand -hex 32) or remove the setting",
				tok.flag, domain.Shorten(tok.v, 40))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		return fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key")
	}
	if err := c.Front.validate(c); err != nil {
		return err
	}
	return c.Flags.Check()
}
