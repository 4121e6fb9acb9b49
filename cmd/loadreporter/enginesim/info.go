package enginesim

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	"github.com/loadreporter/loadreporter/domain"
)

// healthTimeout bounds a health check, as SGLang's
// SGLANG_HEALTH_CHECK_TIMEOUT (20 s by default).
const healthTimeout = 20 * time.Second

// health is GET /health and /health_generate, as SGLang's one handler for
// both (python/sglang/srt/entrypoints/http_server.py): 503 while shutting
// down; otherwise a one-token request (input_ids [0], not counted in the
// metrics) goes to the engine, and the answer is 200 as soon as the
// engine produces any token after the check began — the check's own or a
// running request's — and 503 if none comes within the timeout.
func (m *Main) health(w http.ResponseWriter, r *http.Request) {
	if ok, _ := m.probe(r.Context()); !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// probe is the health check of /health and gRPC's HealthCheck; why says
// what failed.
func (m *Main) probe(ctx context.Context) (ok bool, why string) {
	if m.drv.isClosed() {
		return false, "the engine is shutting down"
	}
	_, produced := m.drv.progress()
	f, err := m.drv.submit(model.Request{PromptTokens: 1, MaxNewTokens: 1, Rank: model.AnyRank}, true)
	if err != nil {
		return false, domain.ErrorMessage(err)
	}
	defer m.drv.cancel(f)
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	for {
		if _, done, aborted, _ := m.drv.state(f); done {
			if aborted {
				return false, "the engine is shutting down"
			}
			return true, ""
		}
		select {
		case <-produced:
			// Closed only when a token came after the probe began.
			return true, ""
		case <-f.notify:
		case <-ctx.Done():
			return false, "no token within " + healthTimeout.String()
		}
	}
}

// serverInfo is GET /server_info (and the older /get_server_info): the
// server arguments, the scheduler's info, one internal state per rank,
// the version and, with load sockets, the kv_events block SGLang's
// ServerArgs.describe_kv_events_publisher writes (sglang-zmq and SMG find
// the sockets through it). engine_sim says what is simulated.
func (m *Main) serverInfo(w http.ResponseWriter, _ *http.Request) {
	info := m.serverArgs()
	maps.Copy(info, m.schedulerInfo())
	info["version"] = m.cfg.Version
	var states []map[string]any
	for _, l := range m.drv.loads() {
		states = append(states, map[string]any{
			"dp_rank": l.DPRank, "load": l.NumRunningReqs + l.NumWaitingReqs,
			"last_gen_throughput": l.GenThroughput, "memory_usage": map[string]any{"weight": weightGiB, "graph": graphGiB},
		})
	}
	info["internal_states"] = states
	if m.pub != nil {
		info["kv_events"] = m.pub.kvEvents()
	}
	writeJSON(w, http.StatusOK, info)
}

// schedulerInfo is what SGLang's scheduler reports at start.
func (m *Main) schedulerInfo() map[string]any {
	p := m.cfg.Params
	return map[string]any{"max_total_num_tokens": p.MaxTotalNumTokens, "max_req_input_len": p.ContextLength - 1}
}

// serverArgs are the server arguments /server_info shows (SGLang's
// names, as far as the simulated engine has them), and engine_sim: what
// is simulated.
func (m *Main) serverArgs() map[string]any {
	p := m.cfg.Params
	host, portText, _ := net.SplitHostPort(m.Addr())
	port, _ := strconv.Atoi(portText)
	info := map[string]any{
		"model_path": m.cfg.ServedModelName, "tokenizer_path": m.cfg.ServedModelName, "served_model_name": m.cfg.ServedModelName,
		"host": host, "port": port, "tp_size": 1, "pp_size": 1, "dp_size": p.DPSize,
		"max_running_requests": p.MaxRunningRequests, "max_total_tokens": p.MaxTotalNumTokens,
		"context_length": p.ContextLength, "chunked_prefill_size": p.ChunkedPrefillSize, "page_size": 1,
		"schedule_policy": "fcfs", "load_balance_method": p.LoadBalanceMethod,
		"load_snapshot_publish_interval": p.LoadSnapshotPublishInterval, "decode_log_interval": p.DecodeLogInterval,
		"enable_metrics": true, "kv_events_config": nil, "load_publish_endpoint": nil,
		"engine_sim": map[string]any{
			"step_overhead_ms": ms(p.StepOverhead), "decode_per_seq_ms": ms(p.DecodePerSeq),
			"decode_per_1k_kv_tokens_ms": ms(p.DecodePer1kKVTokens), "prefill_per_token_ms": ms(p.PrefillPerToken),
			"default_max_tokens": m.cfg.DefaultMaxTokens, "chars_per_token": charsPerToken,
		},
	}
	if m.pub != nil {
		cfg, _ := json.Marshal(map[string]any{"publisher": "zmq", "endpoint": m.pub.kvEndpoint(), "topic": kvEventsTopic})
		info["kv_events_config"] = string(cfg)
		info["load_publish_endpoint"] = m.pub.endpoint(0)
	}
	return info
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// modelInfo is GET /get_model_info (and /model_info).
func (m *Main) modelInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"model_path": m.cfg.ServedModelName, "tokenizer_path": m.cfg.ServedModelName,
		"is_generation": true, "preferred_sampling_params": nil, "weight_version": "default",
	})
}

func (m *Main) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": m.cfg.Version})
}
