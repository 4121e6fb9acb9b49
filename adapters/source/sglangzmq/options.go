package sglangzmq

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Name is the source's name, the --source value that selects it.
const Name = "sglang-zmq"

// Defaults for unset Options.
const (
	// DefaultTopic is the topic SGLang's load publisher uses; discovery
	// reads the engine's own (kv_events.load_topic) instead.
	DefaultTopic = "load"
	// DefaultDetailInterval is what the --detail-interval flag should
	// default to. In Options, 0 turns the detail pull off.
	DefaultDetailInterval = time.Second
	// DefaultReconnectInterval is the pause between two attempts to reach a
	// rank's socket, libzmq's own default (ZMQ_RECONNECT_IVL).
	DefaultReconnectInterval = 100 * time.Millisecond
	// DefaultResubscribeAfter is how long a rank may stay silent before its
	// socket is thrown away and dialled anew. SGLang resends an unchanged
	// value about once a second, so ten seconds of silence means the
	// connection is dead even if TCP has not noticed.
	DefaultResubscribeAfter = 10 * time.Second
	// DefaultDiscoveryRetry is the pause between two GET /server_info
	// attempts while the engine cannot tell where its load sockets are.
	DefaultDiscoveryRetry = 2 * time.Second
	// detailMaxAgeFactor: detail values older than this many detail
	// intervals are dropped (DetailMaxAge's default).
	detailMaxAgeFactor = 3
)

// Options configure a Source. Either Endpoint (with DPSize) or EngineURL
// must be set.
type Options struct {
	// Endpoint is rank 0's load socket, tcp://HOST:BASE (the --zmq-endpoint
	// flag); rank r is tcp://HOST:BASE+r. When set, no discovery happens
	// and DPSize is required.
	Endpoint string
	// EngineURL is the engine's HTTP address (the --engine-url flag). When
	// Endpoint is unset, the sockets are found through GET
	// <EngineURL>/server_info, and their host is EngineURL's host.
	EngineURL string
	// APIKey, when set, is sent to /server_info as a bearer token (the
	// --engine-api-key flag).
	APIKey string
	// Client makes the /server_info request; nil means a client of the
	// Source's own.
	Client *http.Client
	// DPSize is the number of ranks (the --dp-size flag). Required with
	// Endpoint; with discovery, 0 means the engine's advertised dp_size,
	// and any other value must equal it.
	DPSize int
	// MaxDPSize bounds the dp_size discovery accepts (the --max-dp-size
	// flag): each rank is a socket and a goroutine redialling it, and an
	// engine that advertises thousands must not open them. 0 means
	// domain.MaxRanks, the most a report holds.
	MaxDPSize int
	// Topic is the topic to subscribe to with Endpoint; "" means
	// DefaultTopic. Discovery uses the engine's load_topic.
	Topic string

	// Clock stamps each message's arrival and times the detail pull,
	// discovery retries and the silence watchdog. Required.
	Clock ports.Clock

	// Detail is the slower source whose fields LoadStat does not carry
	// (gen_throughput, cache_hit_rate, utilization, …) are merged in: the
	// sglang-http source on the same engine. It is pulled every
	// DetailInterval by the Source's own goroutine, never by Pull.
	Detail ports.SnapshotSource
	// DetailInterval is the period of the detail pull (the
	// --detail-interval flag); 0 turns it off and leaves those fields 0.
	DetailInterval time.Duration
	// DetailMaxAge is how old detail values may be before they are dropped
	// (reported as 0); 0 means three DetailIntervals.
	DetailMaxAge time.Duration
	// MaxRunningRequests is reported as max_running_requests when neither
	// the LoadStat body nor a detail pull says it (engines whose LoadStat
	// has five values, with the detail pull off). 0 leaves it 0, which
	// domain.ValidateSnapshot rejects for a rank with running requests.
	MaxRunningRequests int64

	// ReconnectInterval is the pause between attempts to reach a socket;
	// 0 means DefaultReconnectInterval.
	ReconnectInterval time.Duration
	// ResubscribeAfter is how long a rank may stay silent before its socket
	// is closed and dialled anew; 0 means DefaultResubscribeAfter.
	ResubscribeAfter time.Duration
	// DiscoveryRetry is the pause between failed /server_info requests; 0
	// means DefaultDiscoveryRetry.
	DiscoveryRetry time.Duration

	// Observer learns what the Source sees besides load, for metrics; the
	// zero value observes nothing.
	Observer Observer
}

// Observer is told about events on the load sockets and the detail pull.
// Every field may be nil. Calls come from the Source's goroutines: return
// quickly and never call back into the Source. rank is the rank of the
// socket (its port minus the base port).
type Observer struct {
	// SequenceReset: a rank's sequence number went back (or repeated),
	// which happens when its scheduler restarts.
	SequenceReset func(rank int)
	// SequenceGap: a rank's sequence number skipped missed messages, which
	// the PUB socket dropped (back-pressure) or sent while we were
	// disconnected.
	SequenceGap func(rank int, missed uint64)
	// BadMessage: a rank's message did not decode; err says what was
	// wrong. Pull fails until a good message from that rank replaces it.
	BadMessage func(rank int, err error)
	// Resubscribed: a rank was silent for ResubscribeAfter, or its dial
	// failed, so its socket was closed and is dialled anew.
	Resubscribed func(rank int)
	// DetailPull: one detail pull ended; err is nil when it succeeded. A
	// failure does not fail Pull.
	DetailPull func(err error)
}

// config is Options validated, with defaults applied.
type config struct {
	Options
	explicit *endpoints // from Endpoint; nil means discovery
}

func newConfig(o Options) (config, error) {
	c := config{Options: o}
	if o.DPSize < 0 {
		return c, domain.Errorf(domain.CodeInvalidArgument, "--dp-size must be ≥ 0, got %d", o.DPSize)
	}
	switch {
	case strings.TrimSpace(o.Endpoint) != "":
		if o.DPSize == 0 {
			return c, domain.Errorf(domain.CodeInvalidArgument, "--zmq-endpoint needs --dp-size (one socket per rank)")
		}
		topic := o.Topic
		if topic == "" {
			topic = DefaultTopic
		}
		host, base, err := parseEndpoint(o.Endpoint)
		if err != nil {
			return c, err
		}
		ep, err := newEndpoints(host, base, o.DPSize, topic)
		if err != nil {
			return c, domain.Errorf(domain.CodeInvalidArgument, "--zmq-endpoint %q: %s", o.Endpoint, err)
		}
		c.explicit = &ep
	case strings.TrimSpace(o.EngineURL) == "":
		return c, domain.Errorf(domain.CodeInvalidArgument,
			"the sglang-zmq source needs --zmq-endpoint (for example tcp://127.0.0.1:5558 with --dp-size) or --engine-url to find the sockets through /server_info")
	}
	switch {
	case o.DetailInterval < 0:
		return c, domain.Errorf(domain.CodeInvalidArgument, "--detail-interval must be ≥ 0, got %s", o.DetailInterval)
	case o.DetailInterval > 0 && o.Detail == nil:
		return c, domain.Errorf(domain.CodeInvalidArgument, "--detail-interval %s needs a detail source", o.DetailInterval)
	case o.DetailMaxAge < 0 || o.ReconnectInterval < 0 || o.ResubscribeAfter < 0 || o.DiscoveryRetry < 0:
		return c, domain.Errorf(domain.CodeInvalidArgument, "sglang-zmq intervals must be ≥ 0")
	case o.MaxRunningRequests < 0:
		return c, domain.Errorf(domain.CodeInvalidArgument, "--zmq-max-running-requests %d: must not be negative (0: unknown)", o.MaxRunningRequests)
	}
	if c.DetailMaxAge == 0 {
		c.DetailMaxAge = detailMaxAgeFactor * c.DetailInterval
	}
	c.ReconnectInterval = orDefault(c.ReconnectInterval, DefaultReconnectInterval)
	c.ResubscribeAfter = orDefault(c.ResubscribeAfter, DefaultResubscribeAfter)
	c.DiscoveryRetry = orDefault(c.DiscoveryRetry, DefaultDiscoveryRetry)
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// parseEndpoint reads tcp://HOST:PORT.
func parseEndpoint(raw string) (host string, port int, err error) {
	bad := func(why string) error {
		return domain.Errorf(domain.CodeInvalidArgument, "--zmq-endpoint %q: %s (want tcp://HOST:PORT, for example tcp://127.0.0.1:5558)", raw, why)
	}
	rest, ok := strings.CutPrefix(raw, "tcp://")
	if !ok {
		return "", 0, bad("only tcp:// endpoints can be subscribed to, one port per rank")
	}
	host, p, err := net.SplitHostPort(rest)
	if err != nil {
		return "", 0, bad(err.Error())
	}
	switch host {
	case "", "*", "0.0.0.0", "::":
		return "", 0, bad("give the engine's address, not a wildcard")
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, bad(fmt.Sprintf("port %q is not in 1..65535", p))
	}
	return host, port, nil
}

// endpoints are where the ranks' sockets are.
type endpoints struct {
	host  string
	base  int
	size  int
	topic string
}

func newEndpoints(host string, base, size int, topic string) (endpoints, error) {
	switch {
	case size < 1:
		return endpoints{}, fmt.Errorf("dp_size %d, want ≥ 1", size)
	case base < 1 || base+size-1 > 65535:
		return endpoints{}, fmt.Errorf("ports %d..%d do not fit in 1..65535", base, base+size-1)
	}
	return endpoints{host: host, base: base, size: size, topic: topic}, nil
}

// endpoint is rank r's socket address as messages show it.
func (e endpoints) endpoint(r int) string {
	return "tcp://" + net.JoinHostPort(e.host, strconv.Itoa(e.base+r))
}

func (e endpoints) String() string {
	if e.size == 1 {
		return e.endpoint(0)
	}
	return fmt.Sprintf("%s..%d", e.endpoint(0), e.base+e.size-1)
}

// RegisterFlags declares the source's own flags on fs, into o, with o's
// values as defaults: --zmq-endpoint, --zmq-max-running-requests and
// --detail-interval. --engine-url, --engine-api-key, --dp-size and
// --max-dp-size are every engine source's and belong to the caller, as
// does the detail source itself (Detail).
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Endpoint, "zmq-endpoint", o.Endpoint,
		"sglang-zmq: rank 0's load socket tcp://HOST:BASE (rank r at BASE+r; needs --dp-size); empty: found through --engine-url's /server_info")
	fs.Int64Var(&o.MaxRunningRequests, "zmq-max-running-requests", o.MaxRunningRequests,
		"sglang-zmq: the engine's --max-running-requests, used until the /v1/loads detail pull gives it (LoadStat does not carry it; 0: unknown, and a rank with running requests is unreachable until then)")
	fs.DurationVar(&o.DetailInterval, "detail-interval", o.DetailInterval,
		"sglang-zmq: how often the fields LoadStat lacks are pulled from --engine-url's /v1/loads (0: off, they stay 0)")
}
