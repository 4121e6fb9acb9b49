package enginesim

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
)

// generateRequest is the part of SGLang's GenerateReqInput the simulated
// engine reads (python/sglang/srt/managers/io_struct.py): one prompt, as
// text or token ids; its sampling_params' max_new_tokens; stream; rid;
// and the rank an external router routes to.
type generateRequest struct {
	Text           json.RawMessage `json:"text"`
	InputIDs       json.RawMessage `json:"input_ids"`
	SamplingParams *struct {
		MaxNewTokens *int `json:"max_new_tokens"`
	} `json:"sampling_params"`
	Stream           bool            `json:"stream"`
	RID              json.RawMessage `json:"rid"`
	RoutedDPRank     *int            `json:"routed_dp_rank"`
	DataParallelRank *int            `json:"data_parallel_rank"` // SGLang's older spelling
}

// generateOutput is one /generate answer, or one streamed chunk: the text
// and token ids so far and meta_info, as SGLang's tokenizer manager
// builds them.
type generateOutput struct {
	Text      string   `json:"text"`
	OutputIDs []int    `json:"output_ids"`
	MetaInfo  metaInfo `json:"meta_info"`
}

type metaInfo struct {
	ID               string   `json:"id"`
	FinishReason     any      `json:"finish_reason"`
	PromptTokens     int      `json:"prompt_tokens"`
	WeightVersion    string   `json:"weight_version"`
	CompletionTokens int      `json:"completion_tokens"`
	CachedTokens     int      `json:"cached_tokens"`
	QueueTime        *float64 `json:"queue_time,omitempty"`
	E2ELatency       *float64 `json:"e2e_latency,omitempty"`
}

// SGLang's finish reasons (BaseFinishReason.to_json).
type finishLength struct {
	Type   string `json:"type"`
	Length int    `json:"length"`
}

type finishStop struct {
	Type    string `json:"type"`
	Matched int    `json:"matched"`
}

type finishAbort struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

const abortMessage = "the engine shut down before the request finished"

// job is a request on its way into the engine: what the handler parsed.
type job struct {
	rid string
	req model.Request
	// defaulted: no maximum was given, so the request ends as if the
	// model stopped by itself.
	defaulted bool
}

// admit decodes an HTTP request's body, reads it into a job with toJob
// and puts the job into the engine: the prologue of /generate and
// /v1/chat/completions. When any step fails it has answered w, and ok is
// false. The caller cancels f when it returns, so that a request whose
// client goes away leaves the engine.
func admit[In any](m *Main, w http.ResponseWriter, r *http.Request, toJob func(In) (job, error)) (in In, j job, f *flight, ok bool) {
	if err := decodeBody(w, r, &in); err != nil {
		writeError(w, err)
		return in, j, nil, false
	}
	j, err := toJob(in)
	if err != nil {
		writeError(w, err)
		return in, j, nil, false
	}
	if f, err = m.drv.submit(j.req, false); err != nil {
		writeError(w, err)
		return in, j, nil, false
	}
	return in, j, f, true
}

func (m *Main) generate(w http.ResponseWriter, r *http.Request) {
	in, j, f, ok := admit(m, w, r, m.generateJob)
	if !ok {
		return
	}
	defer m.drv.cancel(f)
	if !in.Stream {
		tokens, aborted, st, ok := m.awaitDone(r, f)
		switch {
		case !ok:
		case aborted:
			writeError(w, shuttingDown())
		default:
			writeJSON(w, http.StatusOK, m.generateOut(j, tokens, true, false, st))
		}
		return
	}
	s := startSSE(w)
	seen, finished := 0, false
	for !finished {
		tokens, done, aborted, st, err := m.await(r.Context(), f, seen)
		if err != nil {
			return
		}
		for seen < tokens {
			seen++
			last := done && seen == tokens
			if s.data(m.generateOut(j, seen, last, aborted && last, st)) != nil {
				return
			}
			finished = last
		}
		if done && !finished {
			if s.data(m.generateOut(j, seen, true, aborted, st)) != nil {
				return
			}
			finished = true
		}
	}
	_ = s.done()
}

// awaitDone waits for f's end; ok is false when the client went first.
func (m *Main) awaitDone(r *http.Request, f *flight) (tokens int, aborted bool, st model.RequestStats, ok bool) {
	seen := 0
	for {
		tokens, done, aborted, st, err := m.await(r.Context(), f, seen)
		if err != nil {
			return 0, false, st, false
		}
		if done {
			return tokens, aborted, st, true
		}
		seen = tokens
	}
}

// generateJob reads a /generate body into a request for the engine.
func (m *Main) generateJob(in generateRequest) (job, error) {
	j := job{rid: newRID(), req: model.Request{Rank: model.AnyRank}}
	hasText := len(in.Text) > 0 && !bytes.Equal(in.Text, []byte("null"))
	hasIDs := len(in.InputIDs) > 0 && !bytes.Equal(in.InputIDs, []byte("null"))
	switch {
	case hasText && hasIDs:
		return j, badRequest("Either text or input_ids should be provided, not both.")
	case hasText:
		var text string
		if err := json.Unmarshal(in.Text, &text); err != nil {
			return j, badRequest("text: want one prompt as a string (the simulated engine takes no batches: send one request per prompt)")
		}
		j.req.PromptTokens = textTokens(text)
	case hasIDs:
		var ids []int
		if err := json.Unmarshal(in.InputIDs, &ids); err != nil {
			return j, badRequest("input_ids: want one prompt as a list of token ids (the simulated engine takes no batches: send one request per prompt)")
		}
		j.req.PromptTokens = len(ids)
	default:
		return j, badRequest("Either text or input_ids should be provided.")
	}
	if len(in.RID) > 0 && !bytes.Equal(in.RID, []byte("null")) {
		if err := json.Unmarshal(in.RID, &j.rid); err != nil || j.rid == "" {
			return j, badRequest("rid: want a non-empty string")
		}
	}
	j.req.MaxNewTokens = m.cfg.DefaultMaxTokens
	j.defaulted = true
	if sp := in.SamplingParams; sp != nil && sp.MaxNewTokens != nil {
		j.req.MaxNewTokens, j.defaulted = *sp.MaxNewTokens, false
	}
	rank, err := routedRank(in.RoutedDPRank, in.DataParallelRank)
	if err != nil {
		return j, err
	}
	j.req.Rank = rank
	return j, nil
}

// generateOut is the answer (or chunk) after tokens tokens; final sets
// the finish reason and the latencies.
func (m *Main) generateOut(j job, tokens int, final, aborted bool, st model.RequestStats) generateOutput {
	out := generateOutput{Text: outputText(tokens), OutputIDs: outputIDs(tokens), MetaInfo: metaInfo{
		ID: j.rid, PromptTokens: j.req.PromptTokens, WeightVersion: "default", CompletionTokens: tokens,
	}}
	if final {
		out.MetaInfo.FinishReason = finishReason(j, tokens, aborted)
		queue, e2e := st.QueueWait().Seconds(), st.E2E().Seconds()
		out.MetaInfo.QueueTime, out.MetaInfo.E2ELatency = &queue, &e2e
	}
	return out
}

// routedRank is the rank a router named (routed_dp_rank, or SGLang's
// older data_parallel_rank), else model.AnyRank. The engine refuses a
// rank past its last.
func routedRank(routed, older *int) (int, error) {
	r := routed
	if r == nil {
		r = older
	}
	switch {
	case r == nil:
		return model.AnyRank, nil
	case *r < 0:
		return 0, badRequest("routed_dp_rank %d: want a rank ≥ 0", *r)
	}
	return *r, nil
}

func finishReason(j job, tokens int, aborted bool) any {
	switch {
	case aborted:
		return finishAbort{Type: "abort", Message: abortMessage}
	case j.defaulted:
		return finishStop{Type: "stop", Matched: eosTokenID}
	}
	return finishLength{Type: "length", Length: tokens}
}
