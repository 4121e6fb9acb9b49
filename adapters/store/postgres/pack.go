package postgres

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// Packed columns: fixed-width big-endian records, the bytes PostgreSQL's
// int2send, int4send, int8send and float8send produce, so that migrations
// build them in SQL and history_report_ranks() reads them back in SQL.
// Binary COPY sends a bytea as it is, where an array would cost the server
// a call per element.

// rankSize is the size of one rank in history_reports.ranks: dp_rank
// (int4), snapshot_time (int8, µs since 1970), the seven counters (int8)
// from num_running_reqs to max_running_requests, and token_usage,
// gen_throughput, cache_hit_rate, utilization (float8).
const rankSize = 4 + 8 + 7*8 + 4*8

// packRanks packs ranks (ordered by dp_rank); nil for none.
func packRanks(ranks []domain.RankLoad) []byte {
	if len(ranks) == 0 {
		return nil
	}
	b := make([]byte, 0, rankSize*len(ranks))
	for _, k := range ranks {
		b = binary.BigEndian.AppendUint32(b, uint32(int32(k.DPRank)))
		b = binary.BigEndian.AppendUint64(b, uint64(k.SnapshotTime.UnixMicro()))
		for _, v := range [...]int64{k.NumRunningReqs, k.NumWaitingReqs, k.NumWaitingUncachedTokens, k.NumUsedTokens,
			k.NumTotalTokens, k.MaxTotalNumTokens, k.MaxRunningRequests} {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
		for _, v := range [...]float64{k.TokenUsage, k.GenThroughput, k.CacheHitRate, k.Utilization} {
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b
}

// unpackRanks reads what packRanks wrote.
func unpackRanks(b []byte) ([]domain.RankLoad, error) { return unpackRanksInto(nil, b) }

// unpackRanksInto appends the ranks packed in b to out (which a caller
// reading many reports reuses).
func unpackRanksInto(out []domain.RankLoad, b []byte) ([]domain.RankLoad, error) {
	if len(b)%rankSize != 0 {
		return out, fmt.Errorf("ranks: %d bytes is not a whole number of %d-byte ranks", len(b), rankSize)
	}
	for ; len(b) > 0; b = b[rankSize:] {
		i64 := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[12+8*i:])) }
		f64 := func(i int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(b[68+8*i:])) }
		out = append(out, domain.RankLoad{
			DPRank:         int64(int32(binary.BigEndian.Uint32(b))),
			SnapshotTime:   time.UnixMicro(int64(binary.BigEndian.Uint64(b[4:]))).UTC(),
			NumRunningReqs: i64(0), NumWaitingReqs: i64(1), NumWaitingUncachedTokens: i64(2), NumUsedTokens: i64(3),
			NumTotalTokens: i64(4), MaxTotalNumTokens: i64(5), MaxRunningRequests: i64(6),
			TokenUsage: f64(0), GenThroughput: f64(1), CacheHitRate: f64(2), Utilization: f64(3),
		})
	}
	return out, nil
}

// entrySize is the size of one report in history_minutes.entries: its
// offset in the minute (int4, µs), source (int2, 1-based into sources),
// status (int2), sequence_id (int8), token_usage spread (float8) and
// last_error (int2, 1-based into errors, 0 for none).
const entrySize = 4 + 2 + 2 + 8 + 8 + 2

// packEntries packs a minute's entries (in report order) with the
// dictionaries of their sources and errors, each ascending.
func packEntries(minute time.Time, es []entry) (b []byte, sources, errs []string) {
	for _, e := range es {
		sources = append(sources, e.source)
		if e.err != "" {
			errs = append(errs, e.err)
		}
	}
	slices.Sort(sources)
	sources = slices.Compact(sources)
	slices.Sort(errs)
	errs = slices.Compact(errs)
	if errs == nil {
		errs = []string{} // an empty array, not NULL
	}
	b = make([]byte, 0, entrySize*len(es))
	for _, e := range es {
		src, _ := slices.BinarySearch(sources, e.source)
		errIndex := 0
		if e.err != "" {
			i, _ := slices.BinarySearch(errs, e.err)
			errIndex = i + 1
		}
		b = binary.BigEndian.AppendUint32(b, uint32(e.t.Sub(minute)/time.Microsecond))
		b = binary.BigEndian.AppendUint16(b, uint16(src+1))
		b = binary.BigEndian.AppendUint16(b, uint16(e.status))
		b = binary.BigEndian.AppendUint64(b, uint64(e.seq))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.spread))
		b = binary.BigEndian.AppendUint16(b, uint16(errIndex))
	}
	return b, sources, errs
}

// unpackEntries reads what packEntries wrote.
func unpackEntries(minute time.Time, b []byte, sources, errs []string) ([]entry, error) {
	if len(b)%entrySize != 0 {
		return nil, fmt.Errorf("entries: %d bytes is not a whole number of %d-byte entries", len(b), entrySize)
	}
	out := make([]entry, 0, len(b)/entrySize)
	for ; len(b) > 0; b = b[entrySize:] {
		src, errIndex := int(binary.BigEndian.Uint16(b[4:])), int(binary.BigEndian.Uint16(b[24:]))
		if src < 1 || src > len(sources) || errIndex > len(errs) {
			return nil, fmt.Errorf("entries: source %d of %d, error %d of %d", src, len(sources), errIndex, len(errs))
		}
		e := entry{
			t:      minute.Add(time.Duration(binary.BigEndian.Uint32(b)) * time.Microsecond),
			source: sources[src-1],
			status: int16(binary.BigEndian.Uint16(b[6:])),
			seq:    int64(binary.BigEndian.Uint64(b[8:])),
			spread: math.Float64frombits(binary.BigEndian.Uint64(b[16:])),
		}
		if errIndex > 0 {
			e.err = errs[errIndex-1]
		}
		out = append(out, e)
	}
	return out, nil
}
