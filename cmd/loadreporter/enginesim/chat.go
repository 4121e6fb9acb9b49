package enginesim

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// The OpenAI shapes below follow SGLang's protocol module
// (python/sglang/srt/entrypoints/openai/protocol.py in sgl-project/sglang
// at 004c82e07d876f6e4a0ad6e15325706b0f478f1a): ChatCompletionResponse,
// ChatCompletionStreamResponse, UsageInfo, ModelList.

// chatRequest is the part of ChatCompletionRequest the simulated engine
// reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	N                   *int `json:"n"`
	Stream              bool `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
	RID              *string `json:"rid"`
	RoutedDPRank     *int    `json:"routed_dp_rank"`
	DataParallelRank *int    `json:"data_parallel_rank"`
}

type chatMessage struct {
	Role             string  `json:"role"`
	Content          string  `json:"content"`
	ReasoningContent *string `json:"reasoning_content"`
	ToolCalls        []any   `json:"tool_calls"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     any         `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
	MatchedStop  any         `json:"matched_stop"`
}

type usageInfo struct {
	PromptTokens        int `json:"prompt_tokens"`
	TotalTokens         int `json:"total_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails any `json:"prompt_tokens_details"`
	ReasoningTokens     int `json:"reasoning_tokens"`
}

type chatResponse struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Created  int64             `json:"created"`
	Model    string            `json:"model"`
	Choices  []chatChoice      `json:"choices"`
	Usage    usageInfo         `json:"usage"`
	Metadata map[string]string `json:"metadata"`
}

type deltaMessage struct {
	Role             *string `json:"role"`
	Content          *string `json:"content"`
	ReasoningContent *string `json:"reasoning_content"`
	ToolCalls        []any   `json:"tool_calls"`
}

type streamChoice struct {
	Index        int          `json:"index"`
	Delta        deltaMessage `json:"delta"`
	Logprobs     any          `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
	MatchedStop  any          `json:"matched_stop"`
}

type chatChunk struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []streamChoice `json:"choices"`
	Usage   *usageInfo     `json:"usage"`
}

func (m *Main) chat(w http.ResponseWriter, r *http.Request) {
	in, j, f, ok := admit(m, w, r, m.chatJob)
	if !ok {
		return
	}
	defer m.drv.cancel(f)
	created := m.clock.Now().Unix()
	modelName := in.Model
	if modelName == "" || modelName == "default" {
		modelName = m.cfg.ServedModelName
	}
	usage := func(tokens int) usageInfo {
		return usageInfo{PromptTokens: j.req.PromptTokens, CompletionTokens: tokens, TotalTokens: j.req.PromptTokens + tokens}
	}
	if !in.Stream {
		tokens, aborted, _, ok := m.awaitDone(r, f)
		switch {
		case !ok:
		case aborted:
			writeError(w, shuttingDown())
		default:
			reason, matched := chatFinish(j, false)
			writeJSON(w, http.StatusOK, chatResponse{
				ID: j.rid, Object: "chat.completion", Created: created, Model: modelName,
				Choices:  []chatChoice{{Message: chatMessage{Role: "assistant", Content: outputText(tokens)}, FinishReason: reason, MatchedStop: matched}},
				Usage:    usage(tokens),
				Metadata: map[string]string{"weight_version": "default"},
			})
		}
		return
	}
	includeUsage := in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	continuous := in.StreamOptions != nil && in.StreamOptions.ContinuousUsageStats
	chunk := func(d deltaMessage, finish *string, matched any, tokens int) chatChunk {
		c := chatChunk{ID: j.rid, Object: "chat.completion.chunk", Created: created, Model: modelName,
			Choices: []streamChoice{{Delta: d, FinishReason: finish, MatchedStop: matched}}}
		if continuous {
			u := usage(tokens)
			c.Usage = &u
		}
		return c
	}
	s := startSSE(w)
	role, empty := "assistant", ""
	if s.data(chunk(deltaMessage{Role: &role, Content: &empty}, nil, nil, 0)) != nil {
		return
	}
	seen := 0
	for {
		tokens, done, aborted, _, err := m.await(r.Context(), f, seen)
		if err != nil {
			return
		}
		for seen < tokens {
			text := tokenText(seen)
			seen++
			if s.data(chunk(deltaMessage{Content: &text}, nil, nil, seen)) != nil {
				return
			}
		}
		if done {
			reason, matched := chatFinish(j, aborted)
			if s.data(chunk(deltaMessage{}, &reason, matched, seen)) != nil {
				return
			}
			if includeUsage {
				u := usage(seen)
				if s.data(chatChunk{ID: j.rid, Object: "chat.completion.chunk", Created: created, Model: modelName, Choices: []streamChoice{}, Usage: &u}) != nil {
					return
				}
			}
			_ = s.done()
			return
		}
	}
}

// chatFinish is the OpenAI finish reason and matched stop.
func chatFinish(j job, aborted bool) (string, any) {
	switch {
	case aborted:
		return "abort", nil
	case j.defaulted:
		return "stop", eosTokenID
	}
	return "length", nil
}

// chatJob reads a chat request into a request for the engine: the prompt
// is the messages' text at four characters a token plus what Llama 3's
// chat template adds.
func (m *Main) chatJob(in chatRequest) (job, error) {
	j := job{rid: newRID()}
	if in.RID != nil && *in.RID != "" {
		j.rid = *in.RID
	}
	if len(in.Messages) == 0 {
		return j, badRequest("messages: want at least one message")
	}
	if in.N != nil && *in.N != 1 {
		return j, badRequest("n %d: the simulated engine generates one choice per request", *in.N)
	}
	tokens := chatBeginTokens + chatAssistantTokens
	for i, msg := range in.Messages {
		text, err := messageText(msg.Content)
		if err != nil {
			return j, badRequest("messages[%d].content: %s", i, err.Error())
		}
		tokens += chatPerMessageTokens + textTokens(text)
	}
	j.req.PromptTokens = tokens
	j.req.MaxNewTokens, j.defaulted = m.cfg.DefaultMaxTokens, true
	for _, limit := range []*int{in.MaxCompletionTokens, in.MaxTokens} {
		if limit == nil {
			continue
		}
		if *limit <= 0 {
			return j, badRequest("max_tokens %d: must be positive", *limit)
		}
		j.req.MaxNewTokens, j.defaulted = *limit, false
		break
	}
	rank, err := routedRank(in.RoutedDPRank, in.DataParallelRank)
	j.req.Rank = rank
	return j, err
}

// messageText is a message's text: a string, or the text parts of a list
// of content parts (other parts count as no text).
func messageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errJSON("want a string or a list of content parts")
	}
	var b bytes.Buffer
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

type errJSON string

func (e errJSON) Error() string { return string(e) }

type modelCard struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len"`
}

func (m *Main) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelCard{{
		ID: m.cfg.ServedModelName, Object: "model", Created: m.started.Unix(), OwnedBy: "sglang",
		Root: m.cfg.ServedModelName, MaxModelLen: m.cfg.Params.ContextLength,
	}}})
}
