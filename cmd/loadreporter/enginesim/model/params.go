package model

import (
	"fmt"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// Load-balance methods: how a request that names no rank is given one, as
// SGLang's DataParallelController does (its --load-balance-method).
const (
	// RoundRobin gives ranks in turn (SGLang's default).
	RoundRobin = "round_robin"
	// TotalRequests gives the rank whose published snapshot shows the
	// fewest running plus waiting requests (lowest rank on a tie). It reads
	// the snapshot, not the live queues, as SGLang's controller reads its
	// shared-memory copy, so between two publications it sends every
	// request to the same rank.
	TotalRequests = "total_requests"
)

// Params are the engine's settings. Every rank has the same. Durations are
// GPU time; see the package documentation for where the defaults come
// from.
type Params struct {
	// DPSize is the number of data-parallel ranks, each with a scheduler
	// and a KV cache of its own.
	DPSize int
	// MaxRunningRequests bounds the requests a rank holds admitted
	// (prefilling or decoding) at once.
	MaxRunningRequests int
	// MaxTotalNumTokens is a rank's KV cache in tokens. A request is
	// admitted only when its whole possible length (prompt plus
	// max_new_tokens) fits beside what the admitted requests may still
	// write.
	MaxTotalNumTokens int64
	// ContextLength bounds one request's prompt plus max_new_tokens.
	ContextLength int
	// ChunkedPrefillSize bounds the prompt tokens one prefill step
	// processes; a longer prompt is prefilled over several steps.
	ChunkedPrefillSize int

	// StepOverhead is the fixed cost of every step (for decode: reading
	// the weights once).
	StepOverhead time.Duration
	// DecodePerSeq is a decode step's cost per sequence in the batch.
	DecodePerSeq time.Duration
	// DecodePer1kKVTokens is a decode step's cost per thousand KV tokens
	// the batch's attention reads.
	DecodePer1kKVTokens time.Duration
	// PrefillPerToken is a prefill step's cost per prompt token.
	PrefillPerToken time.Duration

	// LoadSnapshotPublishInterval is how many decode steps pass between
	// two refreshes of the published load snapshot; a prefill step and
	// the step after which a rank goes idle always publish (SGLang's
	// --load-snapshot-publish-interval).
	LoadSnapshotPublishInterval int
	// DecodeLogInterval is the same for the metrics snapshot behind
	// /metrics (SGLang's --decode-log-interval).
	DecodeLogInterval int
	// LoadBalanceMethod is RoundRobin or TotalRequests.
	LoadBalanceMethod string
}

// DefaultParams are one Llama-3.1-8B-Instruct in bf16 on one A100-SXM4-80GB
// per rank, one rank; see the package documentation for the arithmetic.
func DefaultParams() Params {
	return Params{
		DPSize:                      1,
		MaxRunningRequests:          256,
		MaxTotalNumTokens:           400_000,
		ContextLength:               131_072,
		ChunkedPrefillSize:          8192,
		StepOverhead:                9 * time.Millisecond,
		DecodePerSeq:                100 * time.Microsecond,
		DecodePer1kKVTokens:         65 * time.Microsecond,
		PrefillPerToken:             100 * time.Microsecond,
		LoadSnapshotPublishInterval: 15,
		DecodeLogInterval:           40,
		LoadBalanceMethod:           RoundRobin,
	}
}

// Bounds on the parameters. They keep the arithmetic far from overflow
// and refuse settings no engine has.
const (
	MaxDPSize      = 1024
	maxCount       = 1 << 30
	maxStepCost    = time.Hour
	maxIntervalLen = 1 << 20
)

// ParamError says which parameter was refused; it is the Cause of the
// *domain.Error that New and Validate return, so a command line can name
// its own flag for the parameter.
type ParamError struct {
	// Field is the parameter's name in SGLang's spelling
	// (max_running_requests, decode_per_seq, …).
	Field string
	// Value is the refused value, as text.
	Value string
	// Want says what is allowed.
	Want string
}

func (e *ParamError) Error() string { return fmt.Sprintf("%s %s: %s", e.Field, e.Value, e.Want) }

// Validate reports the first parameter out of its range as a
// *domain.Error with code CodeInvalidArgument whose Cause is a *ParamError.
func (p Params) Validate() error {
	type check struct {
		field string
		bad   bool
		value any
		want  string
	}
	count := func(field string, v int64, lo int64) check {
		return check{field, v < lo || v > maxCount, v, fmt.Sprintf("want %d to %d", lo, int64(maxCount))}
	}
	cost := func(field string, d time.Duration) check {
		return check{field, d < 0 || d > maxStepCost, d, "want a duration from 0 to 1h"}
	}
	interval := func(field string, n int) check {
		return check{field, n < 1 || n > maxIntervalLen, n, fmt.Sprintf("want 1 to %d steps", maxIntervalLen)}
	}
	for _, c := range []check{
		{"dp_size", p.DPSize < 1 || p.DPSize > MaxDPSize, p.DPSize, fmt.Sprintf("want 1 to %d ranks", MaxDPSize)},
		count("max_running_requests", int64(p.MaxRunningRequests), 1),
		count("max_total_num_tokens", p.MaxTotalNumTokens, 2),
		count("context_length", int64(p.ContextLength), 2),
		count("chunked_prefill_size", int64(p.ChunkedPrefillSize), 1),
		cost("step_overhead", p.StepOverhead),
		cost("decode_per_seq", p.DecodePerSeq),
		cost("decode_per_1k_kv_tokens", p.DecodePer1kKVTokens),
		cost("prefill_per_token", p.PrefillPerToken),
		interval("load_snapshot_publish_interval", p.LoadSnapshotPublishInterval),
		interval("decode_log_interval", p.DecodeLogInterval),
		{"load_balance_method", p.LoadBalanceMethod != RoundRobin && p.LoadBalanceMethod != TotalRequests,
			fmt.Sprintf("%q", p.LoadBalanceMethod), fmt.Sprintf("want %s or %s", RoundRobin, TotalRequests)},
	} {
		if c.bad {
			pe := &ParamError{Field: c.field, Value: fmt.Sprint(c.value), Want: c.want}
			return &domain.Error{Code: domain.CodeInvalidArgument, Message: pe.Error(), Cause: pe}
		}
	}
	return nil
}

// decodeStep is the length of a decode step over seqs sequences whose
// attention reads kvTokens KV tokens.
func (p Params) decodeStep(seqs int, kvTokens int64) time.Duration {
	return p.StepOverhead + time.Duration(seqs)*p.DecodePerSeq +
		time.Duration(kvTokens)*p.DecodePer1kKVTokens/1000
}

// prefillStep is the length of a prefill step over tokens prompt tokens.
func (p Params) prefillStep(tokens int) time.Duration {
	return p.StepOverhead + time.Duration(tokens)*p.PrefillPerToken
}
