package pollapi

import (
	"math"
	"net/http"

	"github.com/loadreporter/loadreporter/adapters/internal/httpjson"
	"github.com/loadreporter/loadreporter/domain"
)

// GetLoadRoute is where the /get_load handler is mounted.
const GetLoadRoute = "GET /get_load"

// Shapes of GET /get_load: the engine's behind the reporter, as the
// routers that poll it parse it.
const (
	// GetLoadSGLang is SGLang's (the engine's /get_load up to 0.5.20): one
	// object per DP rank, {dp_rank, num_reqs, num_waiting_reqs, num_tokens,
	// num_pending_tokens}. sglang-router's power-of-two sums num_tokens
	// over the array.
	GetLoadSGLang = "sglang"
	// GetLoadVLLM is {"load": N} with N the requests running and waiting
	// over every rank, which vllm-router's power-of-two adds to its own
	// in-flight count.
	GetLoadVLLM = "vllm"
)

// GetLoadShapes lists the accepted shapes.
var GetLoadShapes = []string{GetLoadSGLang, GetLoadVLLM}

// SaturatedLoad is what /get_load answers for a report no poller may
// route on. The routers that read /get_load cannot be told "unknown":
// sglang-router takes any failed poll (a 503, an unparsable body) as load
// −1, the least loaded of all, and would send every request to a worker
// whose engine is down. A full worker is what it should see instead.
const SaturatedLoad = math.MaxInt32

// SGLangRankLoad is one rank of SGLang's /get_load.
type SGLangRankLoad struct {
	DPRank         int32 `json:"dp_rank"`
	NumReqs        int32 `json:"num_reqs"`
	NumWaitingReqs int32 `json:"num_waiting_reqs"`
	// NumTokens is the rank's num_total_tokens: the KV tokens in use plus
	// the waiting queue's.
	NumTokens int32 `json:"num_tokens"`
	// NumPendingTokens is num_total_tokens − num_used_tokens.
	NumPendingTokens int32 `json:"num_pending_tokens"`

	// Status and Error say why a saturated answer is one; SGLang sends
	// neither, and routers ignore them.
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// VLLMLoad is the {"load": N} shape.
type VLLMLoad struct {
	Load   int32  `json:"load"`
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// ServeGetLoad answers GET /get_load in the configured shape. Every answer
// is a 200 (see SaturatedLoad): a report that is UNREACHABLE, STALE
// without ServeStale, or that could not be had at all is answered
// saturated, with its status and reason beside the numbers.
func (h *Handler) ServeGetLoad(w http.ResponseWriter, r *http.Request) {
	rep, err := h.poller.Poll(r.Context(), h.opts.MaxAge)
	if err != nil {
		if r.Context().Err() != nil {
			return // the poller went away
		}
		h.writeSaturated(w, domain.ErrorCode(err), domain.ErrorMessage(err))
		return
	}
	if refused := h.refusal(rep); refused != nil {
		h.writeSaturated(w, refused.Error.Code, refused.Error.Message)
		return
	}
	if h.opts.GetLoadShape == GetLoadVLLM {
		var reqs int64
		for _, k := range rep.Ranks {
			reqs = addSat(reqs, addSat(k.NumRunningReqs, k.NumWaitingReqs))
		}
		httpjson.Write(w, http.StatusOK, VLLMLoad{Load: sat32(reqs)})
		return
	}
	out := make([]SGLangRankLoad, len(rep.Ranks))
	for i, k := range rep.Ranks {
		total := k.NumTotalTokens
		if total == 0 {
			// Sources that do not publish it (gRPC, older engines): the
			// same sum, from its parts.
			total = addSat(k.NumUsedTokens, k.NumWaitingUncachedTokens)
		}
		out[i] = SGLangRankLoad{
			DPRank:           int32(k.DPRank),
			NumReqs:          sat32(addSat(k.NumRunningReqs, k.NumWaitingReqs)),
			NumWaitingReqs:   sat32(k.NumWaitingReqs),
			NumTokens:        sat32(total),
			NumPendingTokens: sat32(max(0, total-k.NumUsedTokens)),
		}
	}
	httpjson.Write(w, http.StatusOK, out)
}

// writeSaturated answers a full worker, saying why.
func (h *Handler) writeSaturated(w http.ResponseWriter, status, reason string) {
	if h.opts.GetLoadShape == GetLoadVLLM {
		httpjson.Write(w, http.StatusOK, VLLMLoad{Load: SaturatedLoad, Status: status, Error: reason})
		return
	}
	// One entry, so that a router summing num_tokens cannot overflow.
	httpjson.Write(w, http.StatusOK, []SGLangRankLoad{{DPRank: 0, NumTokens: SaturatedLoad, Status: status, Error: reason}})
}
