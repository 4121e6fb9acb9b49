package client

import (
	"fmt"
	"math"
	"slices"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// RejectReason says why a report was not accepted; it labels the
// rejected-reports counts and metric.
type RejectReason string

// The reasons a report is rejected. A rejected report changes nothing:
// the view stays as it was and the sequence does not advance.
const (
	// RejectInstance: source_instance_id is empty or longer than
	// MaxInstanceIDBytes.
	RejectInstance RejectReason = "instance_id"
	// RejectSequence: sequence_id did not increase over the last
	// accepted report's, of the same source_instance_id (out of order or
	// repeated).
	RejectSequence RejectReason = "sequence"
	// RejectStatus: status is UNSPECIFIED or unknown.
	RejectStatus RejectReason = "status"
	// RejectUnreachableShape: an UNREACHABLE report carries ranks or no
	// last_error.
	RejectUnreachableShape RejectReason = "unreachable_shape"
	// RejectNoRanks: a HEALTHY or STALE report has no ranks.
	RejectNoRanks RejectReason = "no_ranks"
	// RejectRank: a dp_rank is negative or appears twice, or the report
	// has more than MaxRanks ranks.
	RejectRank RejectReason = "rank"
	// RejectCounter: one of the seven counters is negative.
	RejectCounter RejectReason = "negative_counter"
	// RejectCapacity: num_used_tokens > max_total_num_tokens or
	// num_running_reqs > max_running_requests (where the max is > 0).
	RejectCapacity RejectReason = "over_capacity"
	// RejectRatio: a ratio or rate is not finite, or token_usage is
	// outside [0, 1].
	RejectRatio RejectReason = "ratio"
)

// numRejectReasons is how many reasons there are, as a constant.
const numRejectReasons = 9

// RejectReasons lists every RejectReason.
func RejectReasons() []RejectReason { return slices.Clone(rejectReasons[:]) }

var rejectReasons = [numRejectReasons]RejectReason{
	RejectInstance, RejectSequence, RejectStatus, RejectUnreachableShape,
	RejectNoRanks, RejectRank, RejectCounter, RejectCapacity, RejectRatio,
}

// ReportError is why ValidateReport refused a report.
type ReportError struct {
	Reason  RejectReason
	Message string
}

// Error says the reason and the field.
func (e *ReportError) Error() string { return string(e.Reason) + ": " + e.Message }

// MaxRanks bounds the ranks of one report: far above any data-parallel
// size, and a loadreporter worker never sends more (its --max-dp-size
// stops there); it keeps a hostile worker's 4 MiB frame of 280 000 ranks
// out of a router's memory and a fleet page.
const MaxRanks = 4096

// MaxInstanceIDBytes bounds source_instance_id. It is an identity (the
// sequence is kept per instance), so a longer one is refused, not cut: two
// ids cut to one prefix would be taken for one instance. A loadreporter
// worker sends a UUID.
const MaxInstanceIDBytes = 256

func reject(reason RejectReason, format string, args ...any) *ReportError {
	return &ReportError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ValidateReport checks one report the way SGLang's router does before it
// routes on it (the validation of docs/routers.md, seen from the receiving side): an
// instance id of at most MaxInstanceIDBytes; a known status; UNREACHABLE with last_error and no ranks;
// HEALTHY and STALE with ranks (at most MaxRanks), each dp_rank non-negative and unique, the
// seven counters non-negative, used ≤ max_total_num_tokens and running ≤
// max_running_requests where the max is > 0, the four ratios finite and
// token_usage in [0, 1]. The sequence is checked by the Worker, which
// knows the previous report. The error is a *ReportError.
func ValidateReport(r *pb.LoadReport) error {
	if r.GetSourceInstanceId() == "" {
		return reject(RejectInstance, "source_instance_id is empty")
	}
	if n := len(r.GetSourceInstanceId()); n > MaxInstanceIDBytes {
		return reject(RejectInstance, "source_instance_id is %d bytes, more than %d", n, MaxInstanceIDBytes)
	}
	switch r.GetStatus() {
	case pb.ReportStatus_REPORT_STATUS_UNREACHABLE:
		if len(r.GetRanks()) > 0 || r.LastError == nil {
			return reject(RejectUnreachableShape, "UNREACHABLE needs last_error and no ranks (has %d ranks, last_error set: %t)",
				len(r.GetRanks()), r.LastError != nil)
		}
		return nil
	case pb.ReportStatus_REPORT_STATUS_HEALTHY, pb.ReportStatus_REPORT_STATUS_STALE:
		if len(r.GetRanks()) == 0 {
			return reject(RejectNoRanks, "%s report has no ranks", r.GetStatus())
		}
	default:
		return reject(RejectStatus, "status %s is not HEALTHY, STALE or UNREACHABLE", r.GetStatus())
	}
	if n := len(r.GetRanks()); n > MaxRanks {
		return reject(RejectRank, "%d ranks, more than the %d a report may hold", n, MaxRanks)
	}
	seen := make(map[int32]struct{}, len(r.GetRanks()))
	for _, k := range r.GetRanks() {
		if err := validateRank(k); err != nil {
			return err
		}
		if _, dup := seen[k.GetDpRank()]; dup {
			return reject(RejectRank, "dp_rank %d appears more than once", k.GetDpRank())
		}
		seen[k.GetDpRank()] = struct{}{}
	}
	return nil
}

func validateRank(k *pb.RankLoad) error {
	if k.GetDpRank() < 0 {
		return reject(RejectRank, "dp_rank %d is negative", k.GetDpRank())
	}
	counters := [...]struct {
		name string
		v    int64
	}{
		{"num_running_reqs", k.GetNumRunningReqs()},
		{"num_waiting_reqs", k.GetNumWaitingReqs()},
		{"num_waiting_uncached_tokens", k.GetNumWaitingUncachedTokens()},
		{"num_used_tokens", k.GetNumUsedTokens()},
		{"num_total_tokens", k.GetNumTotalTokens()},
		{"max_total_num_tokens", k.GetMaxTotalNumTokens()},
		{"max_running_requests", k.GetMaxRunningRequests()},
	}
	for _, c := range counters {
		if c.v < 0 {
			return reject(RejectCounter, "rank %d: %s is negative (%d)", k.GetDpRank(), c.name, c.v)
		}
	}
	if m := k.GetMaxTotalNumTokens(); m > 0 && k.GetNumUsedTokens() > m {
		return reject(RejectCapacity, "rank %d: num_used_tokens %d exceeds max_total_num_tokens %d", k.GetDpRank(), k.GetNumUsedTokens(), m)
	}
	if m := k.GetMaxRunningRequests(); m > 0 && k.GetNumRunningReqs() > m {
		return reject(RejectCapacity, "rank %d: num_running_reqs %d exceeds max_running_requests %d", k.GetDpRank(), k.GetNumRunningReqs(), m)
	}
	ratios := [...]struct {
		name string
		v    float64
	}{
		{"token_usage", k.GetTokenUsage()},
		{"gen_throughput", k.GetGenThroughput()},
		{"cache_hit_rate", k.GetCacheHitRate()},
		{"utilization", k.GetUtilization()},
	}
	for _, f := range ratios {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return reject(RejectRatio, "rank %d: %s is not finite (%v)", k.GetDpRank(), f.name, f.v)
		}
	}
	if u := k.GetTokenUsage(); u < 0 || u > 1 {
		return reject(RejectRatio, "rank %d: token_usage %v is outside [0, 1]", k.GetDpRank(), u)
	}
	return nil
}

// sequencer remembers the latest accepted (instance, sequence): SGLang's
// router keeps one per worker, and a new instance id (the worker
// restarted) replaces the old one and resets the sequence.
type sequencer struct {
	instance string
	last     uint64
}

// accept checks r's sequence and, when it passes, records it.
func (s *sequencer) accept(r *pb.LoadReport) error {
	id, seq := r.GetSourceInstanceId(), r.GetSequenceId()
	if id == s.instance && seq <= s.last {
		return reject(RejectSequence, "sequence_id %d of instance %s does not follow %d", seq, id, s.last)
	}
	s.instance, s.last = id, seq
	return nil
}
