package pollapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/adapters/internal/httpjson"
	"github.com/loadreporter/loadreporter/domain"
)

// DefaultMaxAge is how old the latest report may be and still be served
// without waiting for the next fire.
const DefaultMaxAge = time.Second

// Poller yields a report at most maxAge old; *fireloop.Loop implements it.
type Poller interface {
	Poll(ctx context.Context, maxAge time.Duration) (*domain.Report, error)
}

// Handler serves GET /v1/loads.
type Handler struct {
	poller Poller
	opts   Options
}

// Options configure the pollers' answers.
type Options struct {
	// MaxAge is how old the latest report may be and still be served
	// without waiting for the next fire; 0 means DefaultMaxAge.
	MaxAge time.Duration
	// ServeStale answers a STALE report with its numbers (HTTP 200 and
	// status STALE in the envelope). By default a STALE report is a 503
	// with the snapshot's age: pollers' types have no status, so old
	// numbers in a 200 would be routed on as if current.
	ServeStale bool
	// GetLoadShape is the shape of GET /get_load, one of GetLoadShapes;
	// empty means GetLoadSGLang.
	GetLoadShape string
}

// New returns the handler. Its errors are INVALID_ARGUMENT naming the
// option: max-age (negative), get-load-shape (not one of GetLoadShapes).
func New(p Poller, o Options) (*Handler, error) {
	switch {
	case o.MaxAge < 0:
		return nil, domain.InvalidOption("max-age", "%s: must not be negative (0: %s)", o.MaxAge, DefaultMaxAge)
	case o.MaxAge == 0:
		o.MaxAge = DefaultMaxAge
	}
	switch {
	case o.GetLoadShape == "":
		o.GetLoadShape = GetLoadSGLang
	case !slices.Contains(GetLoadShapes, o.GetLoadShape):
		return nil, domain.InvalidOption("get-load-shape", "%q: want one of %v", o.GetLoadShape, GetLoadShapes)
	}
	return &Handler{poller: p, opts: o}, nil
}

// MaxAge is how old a report the handler serves without waiting for the
// next fire (Options.MaxAge, or its default).
func (h *Handler) MaxAge() time.Duration { return h.opts.MaxAge }

// Route is where Handler is mounted.
const Route = "GET /v1/loads"

// Envelope is the response body: SGLang's /v1/loads envelope with the core
// keys of every rank and the aggregate block older engines send, plus status
// fields SGLang clients ignore. The optional sections (memory, speculative,
// lora, disaggregation, queues) are never sent: no source reports them, and
// a client reads a missing section as unknown, where made-up zeros would be
// a lie.
type Envelope struct {
	Timestamp   string    `json:"timestamp"`
	Version     string    `json:"version"`
	DPRankCount int       `json:"dp_rank_count"`
	Loads       []Load    `json:"loads"`
	Aggregate   Aggregate `json:"aggregate"`

	Status           string `json:"status"`
	SequenceID       uint64 `json:"sequence_id"`
	SourceInstanceID string `json:"source_instance_id"`
	LastError        string `json:"last_error,omitempty"`
}

// Load is one rank's core section. Integer fields are int32 on purpose:
// polling clients parse them as such; larger values saturate.
type Load struct {
	DPRank                   int32   `json:"dp_rank"`
	Timestamp                float64 `json:"timestamp"`
	NumRunningReqs           int32   `json:"num_running_reqs"`
	NumWaitingReqs           int32   `json:"num_waiting_reqs"`
	NumWaitingUncachedTokens int32   `json:"num_waiting_uncached_tokens"`
	NumUsedTokens            int32   `json:"num_used_tokens"`
	NumTotalTokens           int32   `json:"num_total_tokens"`
	MaxTotalNumTokens        int32   `json:"max_total_num_tokens"`
	MaxRunningRequests       int32   `json:"max_running_requests"`
	TokenUsage               float64 `json:"token_usage"`
	GenThroughput            float64 `json:"gen_throughput"`
	CacheHitRate             float64 `json:"cache_hit_rate"`
	Utilization              float64 `json:"utilization"`
}

// Aggregate is the fleet-of-ranks summary older SGLang engines send beside
// loads. Counts saturate at int32 like the per-rank ones; TotalTokens (the
// summed capacity) is 0 unless every rank's capacity is known, so that it
// is never read as a real, smaller capacity.
type Aggregate struct {
	TotalRunningReqs int32   `json:"total_running_reqs"`
	TotalWaitingReqs int32   `json:"total_waiting_reqs"`
	TotalReqs        int32   `json:"total_reqs"`
	TotalUsedTokens  int32   `json:"total_used_tokens"`
	TotalTokens      int32   `json:"total_tokens"`
	AvgTokenUsage    float64 `json:"avg_token_usage"`
	AvgThroughput    float64 `json:"avg_throughput"`
	AvgUtilization   float64 `json:"avg_utilization"`
}

// ErrorBody is the body of every non-200 answer: the adapters' error
// body, and for a refused report its sequence and age.
type ErrorBody struct {
	httpjson.ErrorBody
	SequenceID uint64 `json:"sequence_id,omitempty"`
	// AgeMs is the snapshot's age when the refusal is for staleness.
	AgeMs int64 `json:"age_ms,omitempty"`
}

// ServeHTTP answers one poll.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkInclude(r.URL.Query()["include"]); err != nil {
		httpjson.WriteError(w, http.StatusBadRequest, domain.CodeInvalidArgument, err.Error())
		return
	}
	rep, err := h.poller.Poll(r.Context(), h.opts.MaxAge)
	if err != nil {
		if r.Context().Err() != nil {
			return // the poller went away
		}
		status := http.StatusServiceUnavailable
		if domain.ErrorCode(err) == domain.CodeResourceExhausted {
			status = http.StatusTooManyRequests
		}
		httpjson.WriteError(w, status, domain.ErrorCode(err), domain.ErrorMessage(err))
		return
	}
	if refused := h.refusal(rep); refused != nil {
		httpjson.Write(w, http.StatusServiceUnavailable, refused)
		return
	}
	httpjson.Write(w, http.StatusOK, EnvelopeOf(rep))
}

// refusal is the body of the 503 that answers a report no poller may
// route on, or nil: an UNREACHABLE one, and a STALE one unless
// ServeStale.
func (h *Handler) refusal(rep *domain.Report) *ErrorBody {
	var b ErrorBody
	switch {
	case rep.Status == domain.StatusUnreachable:
		b.Error.Code = "UNREACHABLE"
	case rep.Status == domain.StatusStale && !h.opts.ServeStale:
		b.Error.Code = "STALE"
		b.AgeMs = SnapshotAgeMs(rep)
	default:
		return nil
	}
	b.Error.Message, b.SequenceID = rep.LastError, rep.SequenceID
	return &b
}

// SnapshotAgeMs is how old the report's oldest rank was at report time,
// in the wire's whole milliseconds.
func SnapshotAgeMs(rep *domain.Report) int64 {
	return rep.OldestSnapshotAge().Milliseconds()
}

// Sections is SGLang's include vocabulary, in its order. Every name is
// accepted so that a client probing for several sections (SMG asks for
// include=core,disagg,queues,memory) gets the core keys; a section is then
// filled only with what the source really reported.
var Sections = []string{"core", "memory", "spec", "lora", "disagg", "queues", "all"}

// checkInclude accepts no include (meaning all), or names from Sections,
// comma-separated or repeated; an empty name is ignored. Anything else names
// the section and the accepted ones.
func checkInclude(values []string) error {
	for _, v := range values {
		for _, section := range strings.Split(v, ",") {
			s := strings.TrimSpace(section)
			if s != "" && !slices.Contains(Sections, s) {
				return includeError(s)
			}
		}
	}
	return nil
}

// pythonISOFormat writes t as SGLang's engine does (Python's
// datetime.isoformat() of an aware UTC time): microseconds, "+00:00", and no
// fraction when it is zero. Pollers written in Python read it back with
// datetime.fromisoformat, which before 3.11 refused "Z" and nanoseconds.
func pythonISOFormat(t time.Time) string {
	t = t.UTC().Truncate(time.Microsecond)
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05-07:00")
	}
	return t.Format("2006-01-02T15:04:05.000000-07:00")
}

type includeError string

func (e includeError) Error() string {
	return fmt.Sprintf("include section %q is not one of %s", domain.Shorten(string(e), 64), strings.Join(Sections, ", "))
}

// EnvelopeOf is r in SGLang's /v1/loads shape, as a poller reads it.
func EnvelopeOf(r *domain.Report) Envelope {
	e := Envelope{
		Timestamp:        pythonISOFormat(r.ReportTime),
		Version:          "loadreporter",
		DPRankCount:      len(r.Ranks),
		Loads:            make([]Load, len(r.Ranks)),
		Status:           r.Status.String(),
		SequenceID:       r.SequenceID,
		SourceInstanceID: r.SourceInstanceID,
		LastError:        r.LastError,
	}
	for i, k := range r.Ranks {
		e.Loads[i] = Load{
			DPRank:                   int32(k.DPRank),
			Timestamp:                float64(k.SnapshotTime.UnixMicro()) / 1e6,
			NumRunningReqs:           sat32(k.NumRunningReqs),
			NumWaitingReqs:           sat32(k.NumWaitingReqs),
			NumWaitingUncachedTokens: sat32(k.NumWaitingUncachedTokens),
			NumUsedTokens:            sat32(k.NumUsedTokens),
			NumTotalTokens:           sat32(k.NumTotalTokens),
			// 0 when the source does not know the capacity: SMG reads a
			// positive capacity on any rank as "absolute token counts are
			// real", and falls back to token_usage otherwise.
			MaxTotalNumTokens:  sat32(k.MaxTotalNumTokens),
			MaxRunningRequests: sat32(k.MaxRunningRequests),
			TokenUsage:         k.TokenUsage,
			GenThroughput:      k.GenThroughput,
			CacheHitRate:       k.CacheHitRate,
			Utilization:        k.Utilization,
		}
	}
	e.Aggregate = AggregateOf(r.Ranks)
	return e
}

// AggregateOf sums ranks as the aggregate block does: counts saturate at
// int32, and the summed capacity is 0 unless every rank's is known.
func AggregateOf(ranks []domain.RankLoad) Aggregate {
	var a Aggregate
	if len(ranks) == 0 {
		return a
	}
	var running, waiting, used, capacity int64
	capacityKnown := true
	for _, k := range ranks {
		running = addSat(running, k.NumRunningReqs)
		waiting = addSat(waiting, k.NumWaitingReqs)
		used = addSat(used, k.NumUsedTokens)
		capacity = addSat(capacity, k.MaxTotalNumTokens)
		capacityKnown = capacityKnown && k.MaxTotalNumTokens > 0
		a.AvgTokenUsage += k.TokenUsage
		a.AvgThroughput += k.GenThroughput
		a.AvgUtilization += k.Utilization
	}
	n := float64(len(ranks))
	a.TotalRunningReqs, a.TotalWaitingReqs = sat32(running), sat32(waiting)
	a.TotalReqs, a.TotalUsedTokens = sat32(addSat(running, waiting)), sat32(used)
	if capacityKnown {
		a.TotalTokens = sat32(capacity)
	}
	a.AvgTokenUsage, a.AvgThroughput, a.AvgUtilization = a.AvgTokenUsage/n, a.AvgThroughput/n, a.AvgUtilization/n
	return a
}

// addSat adds two validated, non-negative counters without wrapping.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// sat32 narrows a validated, non-negative counter to int32, saturating.
func sat32(v int64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(v)
}
