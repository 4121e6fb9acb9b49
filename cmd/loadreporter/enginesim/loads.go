package enginesim

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	"github.com/loadreporter/loadreporter/domain"
)

// GET /v1/loads follows SGLang's python/sglang/srt/entrypoints/v1_loads.py
// (sgl-project/sglang at 0564b5215b333749d722348c3b3d9b92c3de8c44) and
// LoadSnapshot.to_dict in python/sglang/srt/managers/load_snapshot.py (at
// 025177e4c5b29b64f80609fd1e70c9bb1b59979c): the envelope {timestamp,
// version, accelerator, num_accelerators, loads}; per rank the core keys in
// that order, then the sections the include list asks for (none or "all":
// every section the rank has; "core" alone: none); a name outside the
// vocabulary is a 400; ?dp_rank= keeps one rank and ?format=prometheus
// renders the same numbers as gauges.
//
// The core keys start with the rank's own timestamp, as in SGLang 0.5.19
// and 0.5.23 (the PyPI wheels, sglang/srt/managers/load_snapshot.py:
// timestamp is LoadSnapshot's first field and _CORE_KEYS every field but
// the sections, so it leads every rank under any include), where it is the
// time.time() at which the scheduler took the snapshot
// (scheduler_components/load_inquirer.py). Here it is the published
// snapshot's time on the engine's clock, in seconds to the microsecond: it
// moves when the rank publishes, not when someone reads. Then come the
// twelve keys both releases share with the commit above; the newer keys of
// those releases (num_active_tokens, total_prefill_uncached_tokens,
// total_prefill_busy_us, decode_moments, and 0.5.23's
// num_prealloc_ready_tokens) are not sent.

// includeSections is the include vocabulary (LoadSnapshot.VALID_SECTIONS).
var includeSections = []string{"all", "core", "disagg", "lora", "memory", "queues", "spec"}

// The hardware the defaults describe, for the envelope and the memory
// section (see the model package: Llama-3.1-8B in bf16 on an A100 80 GB).
const (
	accelerator     = "NVIDIA A100-SXM4-80GB"
	weightGiB       = 14.957 // 8.03 B parameters × 2 bytes
	graphGiB        = 0.5    // CUDA graphs: an assumed figure
	kvBytesPerToken = 128 << 10
)

type loadJSON struct {
	Timestamp                pyFloat `json:"timestamp"`
	DPRank                   int     `json:"dp_rank"`
	NumRunningReqs           int     `json:"num_running_reqs"`
	NumWaitingReqs           int     `json:"num_waiting_reqs"`
	NumWaitingUncachedTokens int64   `json:"num_waiting_uncached_tokens"`
	NumUsedTokens            int64   `json:"num_used_tokens"`
	NumTotalTokens           int64   `json:"num_total_tokens"`
	MaxTotalNumTokens        int64   `json:"max_total_num_tokens"`
	MaxRunningRequests       int     `json:"max_running_requests"`
	TokenUsage               float64 `json:"token_usage"`
	GenThroughput            float64 `json:"gen_throughput"`
	CacheHitRate             float64 `json:"cache_hit_rate"`
	Utilization              float64 `json:"utilization"`

	Memory         *memoryJSON `json:"memory,omitempty"`
	Disaggregation *disaggJSON `json:"disaggregation,omitempty"`
	Queues         *queuesJSON `json:"queues,omitempty"`
}

type memoryJSON struct {
	WeightGB      float64 `json:"weight_gb"`
	KVCacheGB     float64 `json:"kv_cache_gb"`
	GraphGB       float64 `json:"graph_gb"`
	TokenCapacity int64   `json:"token_capacity"`
}

// disaggJSON is a rank outside prefill/decode disaggregation, as SGLang's
// load inquirer reports it: mode "null" and empty queues.
type disaggJSON struct {
	Mode                      string  `json:"mode"`
	PrefillBootstrapQueueReqs int     `json:"prefill_bootstrap_queue_reqs"`
	PrefillInflightQueueReqs  int     `json:"prefill_inflight_queue_reqs"`
	DecodePreallocQueueReqs   int     `json:"decode_prealloc_queue_reqs"`
	DecodeTransferQueueReqs   int     `json:"decode_transfer_queue_reqs"`
	DecodeRetractedQueueReqs  int     `json:"decode_retracted_queue_reqs"`
	KVTransferSpeedGBs        float64 `json:"kv_transfer_speed_gb_s"`
	KVTransferLatencyMs       float64 `json:"kv_transfer_latency_ms"`
}

type queuesJSON struct {
	Waiting   int `json:"waiting"`
	Grammar   int `json:"grammar"`
	Paused    int `json:"paused"`
	Retracted int `json:"retracted"`
}

// pyFloat is a float that prints as Python prints it (str, repr and the
// json module alike): the shortest digits that read back the same, with
// ".0" on a whole number. Python switches to an exponent below 1e-4 and
// from 1e16 on; a time in seconds since the epoch is never there.
type pyFloat float64

func (x pyFloat) String() string {
	s := strconv.FormatFloat(float64(x), 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// MarshalJSON writes x as Python's json.dumps does.
func (x pyFloat) MarshalJSON() ([]byte, error) { return []byte(x.String()), nil }

// snapshotSeconds is t as seconds since the epoch, to the microsecond.
func snapshotSeconds(t time.Time) pyFloat { return pyFloat(float64(t.UnixMicro()) / 1e6) }

// parseInclude reads ?include= (comma-separated, and repeated keys add
// up); nil means every section.
func parseInclude(values []string) (map[string]bool, error) {
	var names []string
	for _, v := range values {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	set := map[string]bool{}
	var bad []string
	for _, n := range names {
		if !slices.Contains(includeSections, n) {
			bad = append(bad, "'"+n+"'")
		}
		set[n] = true
	}
	if bad != nil {
		slices.Sort(bad)
		quoted := make([]string, len(includeSections))
		for i, s := range includeSections {
			quoted[i] = "'" + s + "'"
		}
		return nil, badRequest("Invalid include sections: {%s}. Valid options: [%s]", strings.Join(slices.Compact(bad), ", "), strings.Join(quoted, ", "))
	}
	if set["all"] {
		return nil, nil
	}
	return set, nil
}

// rankJSON is rank's snapshot with the sections include asks for.
func (m *Main) rankJSON(l model.Load, include map[string]bool) loadJSON {
	out := loadJSON{
		Timestamp: snapshotSeconds(l.Timestamp), DPRank: l.DPRank, NumRunningReqs: l.NumRunningReqs, NumWaitingReqs: l.NumWaitingReqs,
		NumWaitingUncachedTokens: l.NumWaitingUncachedTokens, NumUsedTokens: l.NumUsedTokens,
		NumTotalTokens: l.NumTotalTokens, MaxTotalNumTokens: l.MaxTotalNumTokens, MaxRunningRequests: l.MaxRunningRequests,
		TokenUsage: l.TokenUsage, GenThroughput: l.GenThroughput, CacheHitRate: l.CacheHitRate, Utilization: l.Utilization,
	}
	want := func(name string) bool { return include == nil || include[name] }
	if want("memory") {
		kv := float64(l.MaxTotalNumTokens) * kvBytesPerToken / (1 << 30)
		out.Memory = &memoryJSON{WeightGB: weightGiB, KVCacheGB: float64(int64(kv*1000+0.5)) / 1000, GraphGB: graphGiB, TokenCapacity: l.MaxTotalNumTokens}
	}
	if want("disagg") {
		out.Disaggregation = &disaggJSON{Mode: "null"}
	}
	if want("queues") {
		out.Queues = &queuesJSON{Waiting: l.NumWaitingReqs}
	}
	return out
}

func (m *Main) v1Loads(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	include, err := parseInclude(q["include"])
	if err != nil {
		writeError(w, err)
		return
	}
	loads := m.drv.loads()
	if v := q.Get("dp_rank"); v != "" {
		rank, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, badRequest("dp_rank %q: want an integer", domain.Shorten(v, 40)))
			return
		}
		loads = slices.DeleteFunc(loads, func(l model.Load) bool { return l.DPRank != rank })
	}
	out := make([]loadJSON, len(loads))
	for i, l := range loads {
		out[i] = m.rankJSON(l, include)
	}
	if q.Get("format") == "prometheus" {
		m.loadsPrometheus(w, out)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Timestamp       string     `json:"timestamp"`
		Version         string     `json:"version"`
		Accelerator     string     `json:"accelerator"`
		NumAccelerators int        `json:"num_accelerators"`
		Loads           []loadJSON `json:"loads"`
	}{
		// Python's datetime.now(timezone.utc).isoformat().
		Timestamp: m.clock.Now().UTC().Format("2006-01-02T15:04:05.000000-07:00"),
		Version:   m.cfg.Version, Accelerator: accelerator, NumAccelerators: 1, Loads: out,
	})
}

// loadsPrometheus is ?format=prometheus: a gauge per key but dp_rank, in
// the JSON's order (sglang_timestamp first), one sample per rank, sections
// prefixed by their include name (spec, disagg).
func (m *Main) loadsPrometheus(w http.ResponseWriter, loads []loadJSON) {
	type sample struct {
		rank  int
		value string
	}
	var names []string
	samples := map[string][]sample{}
	add := func(name, value string, rank int) {
		if _, ok := samples[name]; !ok {
			names = append(names, name)
		}
		samples[name] = append(samples[name], sample{rank, value})
	}
	i := strconv.Itoa
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, l := range loads {
		for _, kv := range [][2]string{
			{"timestamp", l.Timestamp.String()},
			{"num_running_reqs", i(l.NumRunningReqs)}, {"num_waiting_reqs", i(l.NumWaitingReqs)},
			{"num_waiting_uncached_tokens", fmt.Sprint(l.NumWaitingUncachedTokens)}, {"num_used_tokens", fmt.Sprint(l.NumUsedTokens)},
			{"num_total_tokens", fmt.Sprint(l.NumTotalTokens)}, {"max_total_num_tokens", fmt.Sprint(l.MaxTotalNumTokens)},
			{"max_running_requests", i(l.MaxRunningRequests)}, {"token_usage", f(l.TokenUsage)},
			{"gen_throughput", f(l.GenThroughput)}, {"cache_hit_rate", f(l.CacheHitRate)}, {"utilization", f(l.Utilization)},
		} {
			add("sglang_"+kv[0], kv[1], l.DPRank)
		}
		if mem := l.Memory; mem != nil {
			add("sglang_memory_weight_gb", f(mem.WeightGB), l.DPRank)
			add("sglang_memory_kv_cache_gb", f(mem.KVCacheGB), l.DPRank)
			add("sglang_memory_graph_gb", f(mem.GraphGB), l.DPRank)
			add("sglang_memory_token_capacity", fmt.Sprint(mem.TokenCapacity), l.DPRank)
		}
		if d := l.Disaggregation; d != nil {
			for _, kv := range [][2]string{
				{"prefill_bootstrap_queue_reqs", i(d.PrefillBootstrapQueueReqs)}, {"prefill_inflight_queue_reqs", i(d.PrefillInflightQueueReqs)},
				{"decode_prealloc_queue_reqs", i(d.DecodePreallocQueueReqs)}, {"decode_transfer_queue_reqs", i(d.DecodeTransferQueueReqs)},
				{"decode_retracted_queue_reqs", i(d.DecodeRetractedQueueReqs)}, {"kv_transfer_speed_gb_s", f(d.KVTransferSpeedGBs)},
				{"kv_transfer_latency_ms", f(d.KVTransferLatencyMs)},
			} {
				add("sglang_disagg_"+kv[0], kv[1], l.DPRank)
			}
		}
		if qs := l.Queues; qs != nil {
			for _, kv := range [][2]string{{"waiting", i(qs.Waiting)}, {"grammar", i(qs.Grammar)}, {"paused", i(qs.Paused)}, {"retracted", i(qs.Retracted)}} {
				add("sglang_queues_"+kv[0], kv[1], l.DPRank)
			}
		}
	}
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "# TYPE %s gauge\n", name)
		for _, s := range samples[name] {
			fmt.Fprintf(&b, "%s{dp_rank=\"%d\"} %s\n", name, s.rank, s.value)
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// getLoad is GET /get_load: per rank, the scheduler's own count, live as
// of the last step, in the shape of SGLang's GetLoadReqOutput
// (python/sglang/srt/managers/io_struct.py) as the engine answered it up
// to 0.5.20, the shape the project's poll API also serves: dp_rank,
// num_reqs (running + waiting), num_waiting_reqs, num_tokens (the KV
// tokens in use plus the prompt tokens still to prefill: num_total_tokens)
// and num_pending_tokens (the latter part alone).
func (m *Main) getLoad(w http.ResponseWriter, _ *http.Request) {
	type rankLoad struct {
		DPRank           int   `json:"dp_rank"`
		NumReqs          int   `json:"num_reqs"`
		NumWaitingReqs   int   `json:"num_waiting_reqs"`
		NumTokens        int64 `json:"num_tokens"`
		NumPendingTokens int64 `json:"num_pending_tokens"`
	}
	live := m.drv.live()
	out := make([]rankLoad, len(live))
	for i, l := range live {
		out[i] = rankLoad{DPRank: l.DPRank, NumReqs: l.NumRunningReqs + l.NumWaitingReqs, NumWaitingReqs: l.NumWaitingReqs,
			NumTokens: l.NumTotalTokens, NumPendingTokens: l.NumTotalTokens - l.NumUsedTokens}
	}
	writeJSON(w, http.StatusOK, out)
}
