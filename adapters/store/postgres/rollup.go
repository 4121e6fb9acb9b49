package postgres

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// The rollups (history_minutes, history_minute_ranks) are computed here,
// in Go, from the reports a transaction inserts merged with what the
// minute already held; rollup_sql.go reads and writes them.

// minuteKey names a worker's UTC minute.
type minuteKey struct {
	worker string
	minute time.Time
}

// rankKey names one rank of a worker's minute.
type rankKey struct {
	minuteKey
	dp int32
}

// entry is what history_minutes keeps of one report.
type entry struct {
	t      time.Time // UTC, µs
	source string
	seq    int64
	status int16
	err    string
	spread float64
}

// compareEntries orders a worker's entries as its reports are ordered.
func compareEntries(a, b entry) int {
	return cmp.Or(a.t.Compare(b.t), strings.Compare(a.source, b.source), cmp.Compare(a.seq, b.seq))
}

func (e entry) bad() bool { return e.status != int16(domain.StatusHealthy) }

func minuteOf(t time.Time) time.Time { return t.Truncate(time.Minute) }

// minuteRow is one history_minutes row: a worker's reports of one minute,
// in report order. Its other columns are computed from them (summary).
type minuteRow struct {
	minuteKey
	entries []entry
}

// summary is the columns of history_minutes computed from the entries.
type summary struct {
	reports, unhealthy      int64
	statusMask              int32
	lastError               string
	firstTime, lastTime     time.Time
	firstSource, lastSource string
	maxStep                 time.Duration
	minSpread, maxSpread    float64
	peakTime                time.Time
}

func (m *minuteRow) summary() summary {
	es := m.entries
	first, last := es[0], es[len(es)-1]
	s := summary{
		reports: int64(len(es)), firstTime: first.t, lastTime: last.t,
		firstSource: first.source, lastSource: last.source,
		minSpread: math.Inf(1), maxSpread: math.Inf(-1),
	}
	for i, e := range es {
		if e.bad() {
			s.unhealthy++
		}
		s.statusMask |= 1 << e.status
		if e.err != "" {
			s.lastError = e.err
		}
		if i > 0 {
			s.maxStep = max(s.maxStep, e.t.Sub(es[i-1].t))
		}
		s.minSpread = min(s.minSpread, e.spread)
		if e.spread > s.maxSpread {
			s.maxSpread, s.peakTime = e.spread, e.t
		}
	}
	return s
}

// rankRow is one rank of a history_minute_ranks row, with its values
// (history_rank_minute_usage).
type rankRow struct {
	rankKey
	reports    int64
	usageSum   float64
	usageMax   float64
	waitingMax int64
	genSum     float64
	usage      []float64 // ascending
}

func (r *rankRow) add(k domain.RankLoad) {
	if r.reports == 0 {
		r.usageMax, r.waitingMax = k.TokenUsage, k.NumWaitingReqs
	}
	r.reports++
	r.usageSum += k.TokenUsage
	r.usageMax = max(r.usageMax, k.TokenUsage)
	r.waitingMax = max(r.waitingMax, k.NumWaitingReqs)
	r.genSum += k.GenThroughput
	r.usage = append(r.usage, k.TokenUsage)
}

// merge adds o (the same rank and minute) to r.
func (r *rankRow) merge(o *rankRow) {
	if r.reports == 0 {
		*r = *o
		return
	}
	r.reports += o.reports
	r.usageSum += o.usageSum
	r.usageMax = max(r.usageMax, o.usageMax)
	r.waitingMax = max(r.waitingMax, o.waitingMax)
	r.genSum += o.genSum
	r.usage = append(r.usage, o.usage...)
}

// rollups are the rollup rows a batch of reports changes.
type rollups struct {
	minutes map[minuteKey]*minuteRow
	ranks   map[rankKey]*rankRow
}

// rollupsOf computes the rollups of reports alone.
func rollupsOf(reports []*domain.Report) rollups {
	ru := rollups{minutes: map[minuteKey]*minuteRow{}, ranks: map[rankKey]*rankRow{}}
	for _, r := range reports {
		mk := minuteKey{r.Worker.Addr, minuteOf(r.ReportTime)}
		m := ru.minutes[mk]
		if m == nil {
			m = &minuteRow{minuteKey: mk}
			ru.minutes[mk] = m
		}
		m.entries = append(m.entries, entry{
			t: r.ReportTime, source: r.SourceInstanceID, seq: int64(r.SequenceID),
			status: int16(r.Status), err: r.LastError, spread: audit.Spread(r),
		})
		for _, k := range r.Ranks {
			rk := rankKey{mk, int32(k.DPRank)}
			rr := ru.ranks[rk]
			if rr == nil {
				rr = &rankRow{rankKey: rk}
				ru.ranks[rk] = rr
			}
			rr.add(k)
		}
	}
	return ru
}

// merge adds the stored rows of the same minutes and ranks to ru, and
// puts every row in order.
func (ru rollups) merge(stored []*minuteRow, storedRanks []*rankRow) {
	for _, m := range stored {
		if n := ru.minutes[m.minuteKey]; n != nil {
			n.entries = append(n.entries, m.entries...)
		}
	}
	for _, r := range storedRanks {
		// A stored rank the new reports lack is written back as it is.
		if n := ru.ranks[r.rankKey]; n != nil {
			n.merge(r)
		} else {
			ru.ranks[r.rankKey] = r
		}
	}
	for _, m := range ru.minutes {
		slices.SortFunc(m.entries, compareEntries)
	}
	for _, r := range ru.ranks {
		slices.Sort(r.usage)
	}
}

// minuteRankSize is the bytes of one rank in history_minute_ranks.ranks.
const minuteRankSize = 48

// packMinuteRanks packs the ranks of one minute (ascending dp, each with
// its usage in order) as migration 0003 describes history_minute_ranks.ranks.
func packMinuteRanks(rs []*rankRow) []byte {
	b := make([]byte, 0, minuteRankSize*len(rs))
	for _, r := range rs {
		b = binary.BigEndian.AppendUint32(b, uint32(r.dp))
		b = binary.BigEndian.AppendUint32(b, uint32(int32(r.reports)))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.usageSum))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.usage[0]))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.usage[len(r.usage)-1]))
		b = binary.BigEndian.AppendUint64(b, uint64(r.waitingMax))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.genSum))
	}
	return b
}

// minuteRank is one rank of history_minute_ranks.ranks.
type minuteRank struct {
	dp                           int32
	reports                      int64
	usageSum, usageMin, usageMax float64
	waitingMax                   int64
	genSum                       float64
}

// unpackMinuteRanks calls f for each rank packed in b.
func unpackMinuteRanks(b []byte, f func(minuteRank)) error {
	if len(b)%minuteRankSize != 0 {
		return fmt.Errorf("history_minute_ranks.ranks of %d bytes, not a multiple of %d", len(b), minuteRankSize)
	}
	for ; len(b) > 0; b = b[minuteRankSize:] {
		f(minuteRank{
			dp:         int32(binary.BigEndian.Uint32(b)),
			reports:    int64(int32(binary.BigEndian.Uint32(b[4:]))),
			usageSum:   math.Float64frombits(binary.BigEndian.Uint64(b[8:])),
			usageMin:   math.Float64frombits(binary.BigEndian.Uint64(b[16:])),
			usageMax:   math.Float64frombits(binary.BigEndian.Uint64(b[24:])),
			waitingMax: int64(binary.BigEndian.Uint64(b[32:])),
			genSum:     math.Float64frombits(binary.BigEndian.Uint64(b[40:])),
		})
	}
	return nil
}

// encodeUsage packs ascending values as big-endian float8, as float8send
// does, so the migration can build the same bytes in SQL.
func encodeUsage(vs []float64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.BigEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b
}

// usageAt is value i of an encoded usage column.
func usageAt(b []byte, i int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(b[8*i:])) }

func decodeUsage(b []byte) []float64 {
	vs := make([]float64, len(b)/8)
	for i := range vs {
		vs[i] = usageAt(b, i)
	}
	return vs
}
