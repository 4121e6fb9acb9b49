package domain

import (
	"math"
	"strings"
	"time"
)

// WorkerType is the worker's role. Values match the wire enum.
type WorkerType int8

// Worker types.
const (
	WorkerTypeUnspecified WorkerType = iota
	WorkerTypeRegular
	WorkerTypePrefill
	WorkerTypeDecode
)

func (t WorkerType) String() string {
	switch t {
	case WorkerTypeRegular:
		return "regular"
	case WorkerTypePrefill:
		return "prefill"
	case WorkerTypeDecode:
		return "decode"
	default:
		return "unspecified"
	}
}

// ParseWorkerType reads the flag spelling of a worker type.
func ParseWorkerType(s string) (WorkerType, error) {
	switch s {
	case "regular":
		return WorkerTypeRegular, nil
	case "prefill":
		return WorkerTypePrefill, nil
	case "decode":
		return WorkerTypeDecode, nil
	}
	return 0, InvalidOption("worker-type", "%q: want regular, prefill or decode", s)
}

// Worker identifies the engine worker a report describes. Empty Model and
// Zone mean "not set".
type Worker struct {
	Addr  string
	Type  WorkerType
	Model string
	Zone  string
}

// Validate checks what goes into every report about the worker: UTF-8
// text without NUL (routers read protobuf strings, which must be UTF-8,
// and the history refuses NUL), and an address without surrounding spaces
// (audits filter by worker, and a filter is read trimmed). Errors name
// the field as an option: worker-addr, model, zone.
func (w Worker) Validate() error {
	for _, f := range []struct{ option, v string }{{"worker-addr", w.Addr}, {"model", w.Model}, {"zone", w.Zone}} {
		if TextProblem(f.v) != "" {
			return InvalidOption(f.option, "%q: must be UTF-8 text without NUL", f.v)
		}
	}
	if strings.TrimSpace(w.Addr) != w.Addr {
		return InvalidOption("worker-addr", "%q: must not start or end with spaces", w.Addr)
	}
	return nil
}

// Report is what one fire produced; every session due at that fire receives
// the same *Report, which must therefore never be modified after Build.
type Report struct {
	SourceInstanceID string
	SequenceID       uint64
	ReportTime       time.Time
	Worker           Worker
	Status           Status
	// LastError is empty for HEALTHY reports and always set otherwise.
	LastError string
	// Ranks is empty for UNREACHABLE reports; otherwise sorted by DPRank,
	// each DPRank within int32 and each SnapshotTime set.
	Ranks []RankLoad
}

// OldestSnapshotAge is how much older than the report its oldest rank's
// snapshot is: the age a STALE status measures, and what a router
// recomputes from the wire, so it is counted between report_time and
// snapshot_time each in whole milliseconds. It is never negative (an engine
// clock a little ahead reads as no age), zero for a report without ranks,
// and saturates at the longest Duration for a rank whose snapshot time is
// unset or absurdly old (Build never leaves one unset).
func (r *Report) OldestSnapshotAge() time.Duration {
	var ms int64
	for _, rk := range r.Ranks {
		ms = max(ms, r.ReportTime.UnixMilli()-rk.SnapshotTime.UnixMilli())
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// sortedRanks copies ranks in DPRank order, filling a missing or
// non-positive snapshot time with the pull-completion time.
func sortedRanks(ranks []RankLoad, completedAt time.Time) []RankLoad {
	out := make([]RankLoad, len(ranks))
	copy(out, ranks)
	for i := range out {
		if out[i].SnapshotTime.IsZero() || out[i].SnapshotTime.UnixMilli() <= 0 {
			out[i].SnapshotTime = completedAt
		}
	}
	// Insertion sort: rank counts are small and usually already ordered.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].DPRank < out[j-1].DPRank; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func errorText(err error) string {
	if msg := ErrorMessage(err); msg != "internal error" {
		return msg
	}
	if s := err.Error(); s != "" {
		return s
	}
	return "load snapshot pull failed"
}
