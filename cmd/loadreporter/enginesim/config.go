package enginesim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/ports"
)

// Config is what `loadreporter engine-sim` can be told.
type Config struct {
	// Params is the simulated engine (see package model).
	Params model.Params
	// Listen is where the HTTP API is served (HOST:PORT; port 0 picks one).
	Listen string
	// GRPCListen, when set, is where sglang.grpc.scheduler.SglangScheduler
	// is served (h2c), as by an SGLang engine in gRPC mode. Empty is off.
	GRPCListen string
	// ServedModelName is the model the engine says it serves.
	ServedModelName string
	// APIKey, when set, is the bearer token every route but /health* and
	// /metrics requires, as SGLang's --api-key.
	APIKey string
	// DefaultMaxTokens is the output length of a request that sets no
	// max_new_tokens / max_tokens; such a request ends as if the model
	// had stopped by itself (finish reason "stop").
	DefaultMaxTokens int
	// LoadPublishEndpoint, when set, is tcp://HOST:PORT: rank r publishes
	// LoadStat on a ZMQ PUB socket at PORT+r, as SGLang's
	// --load-publish-endpoint (PORT 0 picks a free range). Empty is off.
	LoadPublishEndpoint string
	// VLLMMetrics adds vLLM's metric names (per engine label) to /metrics,
	// so the vllm-metrics source can read the simulated engine too.
	VLLMMetrics bool
	// ShutdownGrace bounds Close.
	ShutdownGrace time.Duration
	// Version is what /version, /server_info and /v1/loads say.
	Version string

	// Clock drives the engine; nil is the machine's clock. Tests give a
	// fake one.
	Clock ports.Clock
	// RequestDone, when set, hears every request's stats as it leaves the
	// engine, finished or cancelled (not those Close aborts, nor health
	// probes), on
	// the engine's own times. It is called under the engine's lock: it
	// must return quickly and never call back into Main. A benchmark
	// reads queue waits from it, which no API response carries.
	RequestDone func(model.RequestStats)
	// Logger gets a line when the engine starts and stops; nil is
	// slog.Default().
	Logger *slog.Logger
}

// DefaultVersion is the SGLang version the simulated engine claims: its
// response shapes follow that line of releases. The suffix tells a human
// it is not the real thing; version parsers ignore it.
const DefaultVersion = "0.5.6+enginesim"

// DefaultConfig is the configuration with every flag at its default.
func DefaultConfig() Config {
	return Config{
		Params:           model.DefaultParams(),
		Listen:           "127.0.0.1:30000",
		ServedModelName:  "meta-llama/Llama-3.1-8B-Instruct",
		DefaultMaxTokens: 128,
		ShutdownGrace:    5 * time.Second,
		Version:          DefaultVersion,
	}
}

// paramFlags names the flag of each model parameter whose flag is not
// its name with dashes.
var paramFlags = map[string]string{"max_total_num_tokens": "--max-total-tokens"}

func flagOf(field string) string {
	if f, ok := paramFlags[field]; ok {
		return f
	}
	return "--" + strings.ReplaceAll(field, "_", "-")
}

const synopsis = `Usage: loadreporter engine-sim [flags]

Runs a simulated SGLang engine: continuous batching on a step clock
(no GPU, no model), behind SGLang's HTTP API (/generate,
/v1/chat/completions, /v1/loads, /get_load, /server_info, /metrics, …)
and, with --load-publish-endpoint, its per-rank LoadStat sockets.
Point loadreporter, a router or a benchmark at it instead of an engine.`

// Parse reads engine-sim's configuration from args and the environment
// and checks it; an error names the flag.
func Parse(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	c := DefaultConfig()
	p := &c.Params
	fs := flag.NewFlagSet("engine-sim", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Listen, "listen", c.Listen, "HOST:PORT of the HTTP API (port 0 picks a free one)")
	fs.StringVar(&c.GRPCListen, "grpc-listen", c.GRPCListen, "HOST:PORT to also serve SGLang's gRPC scheduler service on (Generate, GetLoads, HealthCheck, …; plaintext HTTP/2); empty: off")
	fs.StringVar(&c.ServedModelName, "served-model-name", c.ServedModelName, "the model the engine says it serves (/v1/models, responses)")
	fs.StringVar(&c.APIKey, "api-key", c.APIKey, "bearer token required on every route but /health* and /metrics; empty: none")
	fs.IntVar(&p.DPSize, "dp-size", p.DPSize, "data-parallel ranks, each with its own scheduler and KV cache")
	fs.IntVar(&p.MaxRunningRequests, "max-running-requests", p.MaxRunningRequests, "requests a rank runs at once; more wait")
	fs.Int64Var(&p.MaxTotalNumTokens, "max-total-tokens", p.MaxTotalNumTokens, "a rank's KV cache in tokens (max_total_num_tokens); a request waits until prompt+max tokens fit")
	fs.IntVar(&p.ContextLength, "context-length", p.ContextLength, "most tokens (prompt+output) one request may have")
	fs.IntVar(&p.ChunkedPrefillSize, "chunked-prefill-size", p.ChunkedPrefillSize, "prompt tokens one prefill step processes at most")
	fs.StringVar(&p.LoadBalanceMethod, "load-balance-method", p.LoadBalanceMethod, "rank of a request that names none: round_robin or total_requests (fewest published running+waiting)")
	fs.DurationVar(&p.StepOverhead, "step-overhead", p.StepOverhead, "fixed GPU time of every step")
	fs.DurationVar(&p.DecodePerSeq, "decode-per-seq", p.DecodePerSeq, "decode step time per sequence in the batch")
	fs.DurationVar(&p.DecodePer1kKVTokens, "decode-per-1k-kv-tokens", p.DecodePer1kKVTokens, "decode step time per 1000 KV tokens the batch reads")
	fs.DurationVar(&p.PrefillPerToken, "prefill-per-token", p.PrefillPerToken, "prefill step time per prompt token")
	fs.IntVar(&p.LoadSnapshotPublishInterval, "load-snapshot-publish-interval", p.LoadSnapshotPublishInterval, "decode steps between refreshes of the published load (/v1/loads, LoadStat); prefill and idle publish at once")
	fs.IntVar(&p.DecodeLogInterval, "decode-log-interval", p.DecodeLogInterval, "decode steps between refreshes of the /metrics gauges")
	fs.IntVar(&c.DefaultMaxTokens, "default-max-tokens", c.DefaultMaxTokens, "output tokens of a request that sets no maximum; it ends with finish reason stop")
	fs.StringVar(&c.LoadPublishEndpoint, "load-publish-endpoint", c.LoadPublishEndpoint, "tcp://HOST:PORT: rank r publishes LoadStat on a ZMQ PUB socket at PORT+r, advertised in /server_info (PORT 0 picks a free range); empty: off")
	fs.BoolVar(&c.VLLMMetrics, "vllm-metrics", c.VLLMMetrics, "also expose vLLM's metric names on /metrics (for the vllm-metrics source)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", c.ShutdownGrace, "bound on a graceful shutdown")
	fs.Usage = envflag.Usage(fs, out, synopsis, nil)
	if err := envflag.Parse(fs, args, getenv, nil); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("engine-sim takes no arguments, got %q", fs.Args())
	}
	return c, c.Check()
}

// Check says, naming the flag, what in c is out of range.
func (c Config) Check() error {
	if err := c.Params.Validate(); err != nil {
		var pe *model.ParamError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s %s: %s", flagOf(pe.Field), pe.Value, pe.Want)
		}
		return err
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT", c.Listen)
	}
	if c.GRPCListen != "" {
		if _, _, err := net.SplitHostPort(c.GRPCListen); err != nil {
			return fmt.Errorf("--grpc-listen %q: want HOST:PORT", c.GRPCListen)
		}
	}
	if strings.TrimSpace(c.ServedModelName) == "" {
		return errors.New("--served-model-name is empty: want the model's name")
	}
	if c.DefaultMaxTokens < 1 || c.DefaultMaxTokens >= c.Params.ContextLength {
		return fmt.Errorf("--default-max-tokens %d: want 1 to %d (below --context-length)", c.DefaultMaxTokens, c.Params.ContextLength-1)
	}
	if c.LoadPublishEndpoint != "" {
		if _, _, err := parseEndpoint(c.LoadPublishEndpoint, c.Params.DPSize); err != nil {
			return err
		}
	}
	if c.ShutdownGrace <= 0 {
		return fmt.Errorf("--shutdown-grace %s: want > 0", c.ShutdownGrace)
	}
	return nil
}

// parseEndpoint reads tcp://HOST:PORT; the ranks' load sockets take
// PORT..PORT+dp-1 and their KV-event sockets the dp ports after.
func parseEndpoint(raw string, dp int) (host string, port int, err error) {
	bad := func(why string) error {
		return fmt.Errorf("--load-publish-endpoint %q: %s (want tcp://HOST:PORT, for example tcp://127.0.0.1:5560)", raw, why)
	}
	rest, ok := strings.CutPrefix(raw, "tcp://")
	if !ok {
		return "", 0, bad("only tcp:// endpoints carry a port per rank")
	}
	host, p, err := net.SplitHostPort(rest)
	if err != nil {
		return "", 0, bad(err.Error())
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, bad(fmt.Sprintf("port %q is not in 0..65535", p))
	}
	if port > 0 && port+2*dp-1 > 65535 {
		return "", 0, bad(fmt.Sprintf("dp_size %d needs ports %d..%d (load, then KV events), past 65535", dp, port, port+2*dp-1))
	}
	return host, port, nil
}
