package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain/audit"
)

// The run queries (outages, imbalance) and gaps read history_minutes, not
// every report: a minute that lies wholly inside the window and is uniform
// for the question asked (every report HEALTHY, or none; every spread above
// the threshold, or none; no step longer than the gap threshold and one
// source) is read as its summary; the others, and the minutes the window
// cuts, are read with their reports from history_minute_entries. The
// questions are then answered in Go, worker by worker, in report order.

// minuteRead is a history_minutes row as the queries read it: the summary
// always, the entries (inside the window only) when the row is detailed,
// and the minute and last report of the worker's previous minute in the
// window (lagMinute zero for its first), which the query may have left
// out.
type minuteRead struct {
	minuteKey
	summary
	detailed bool
	entries  []entry

	lagMinute, lagLastTime time.Time
	lagLastSource          string
}

// timelineSQL reads the minutes of a window ($1, $2) and workers ($3) in
// worker and minute order; $4 is the start of the first minute. detail is
// the condition (on the row's columns, parameters from $5) under which a
// minute wholly inside the window is read with its entries; keep the
// condition (also on lag_* columns, the previous minute's) under which a
// minute not read with its entries is returned at all: a query leaves out
// the minutes that cannot change its answer.
func timelineSQL(detail, keep string) string {
	return `
SELECT m.worker_addr, m.minute, reports, unhealthy, status_mask, coalesce(last_error, ''),
       first_time, last_time, first_source, last_source, max_step, min_spread, max_spread, peak_time,
       detailed, lag_minute, lag_last_time, lag_last_source, e.sources, e.errors, e.entries
FROM (
    SELECT *, (minute < $1 OR minute + interval '1 minute' > $2 OR (` + detail + `)) AS detailed,
           lag(minute) OVER w AS lag_minute, lag(last_time) OVER w AS lag_last_time,
           lag(last_source) OVER w AS lag_last_source, lag(unhealthy) OVER w AS lag_unhealthy,
           lag(max_spread) OVER w AS lag_max_spread
    FROM history_minutes
    WHERE minute >= $4 AND minute < $2
      AND (cardinality($3::text[]) = 0 OR worker_addr = ANY($3::text[]))
    WINDOW w AS (PARTITION BY worker_addr ORDER BY minute)
) m
LEFT JOIN LATERAL (
    SELECT sources, errors, entries FROM history_minute_entries e
    WHERE m.detailed AND e.worker_addr = m.worker_addr AND e.minute = m.minute
    OFFSET 0 -- kept a subquery: m.detailed gates the lookup instead of filtering after it
) e ON true
WHERE detailed OR (` + keep + `)
ORDER BY m.worker_addr, m.minute`
}

// readTimeline runs a timelineSQL statement for w and workers, with the
// detail condition's parameters, and calls fn with each worker's minutes in
// order.
func readTimeline(ctx context.Context, tx pgx.Tx, sql string, w audit.Window, workers []string,
	params []any, fn func(worker string, ms []minuteRead)) error {
	args := append([]any{w.Since, w.Until, nonNil(workers), minuteOf(w.Since.UTC())}, params...)
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		worker string
		ms     []minuteRead
	)
	for rows.Next() {
		m, err := scanMinuteRead(rows, w)
		if err != nil {
			return err
		}
		if m.worker != worker && len(ms) > 0 {
			fn(worker, ms)
			ms = ms[:0]
		}
		worker = m.worker
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(ms) > 0 {
		fn(worker, ms)
	}
	return nil
}

func scanMinuteRead(rows pgx.Rows, w audit.Window) (minuteRead, error) {
	var (
		m             minuteRead
		maxStep       int64
		lagMinute     *time.Time
		lagLastTime   *time.Time
		lagLastSource *string
		sources, errs []string
		packed        []byte
	)
	if err := rows.Scan(&m.worker, &m.minute, &m.reports, &m.unhealthy, &m.statusMask, &m.lastError,
		&m.firstTime, &m.lastTime, &m.firstSource, &m.lastSource, &maxStep, &m.minSpread, &m.maxSpread, &m.peakTime,
		&m.detailed, &lagMinute, &lagLastTime, &lagLastSource, &sources, &errs, &packed); err != nil {
		return m, err
	}
	m.minute, m.firstTime, m.lastTime, m.peakTime = m.minute.UTC(), m.firstTime.UTC(), m.lastTime.UTC(), m.peakTime.UTC()
	m.maxStep = time.Duration(maxStep) * time.Microsecond
	if lagMinute != nil {
		m.lagMinute, m.lagLastTime, m.lagLastSource = lagMinute.UTC(), lagLastTime.UTC(), *lagLastSource
	}
	if m.detailed {
		es, err := unpackEntries(m.minute, packed, sources, errs)
		if err != nil {
			return m, err
		}
		for _, e := range es {
			if w.Contains(e.t) {
				m.entries = append(m.entries, e)
			}
		}
	}
	return m, nil
}

// episodes finds a worker's maximal runs of reports for which a condition
// holds, from its minutes: a summarised minute is wholly in or wholly out.
type episodes struct {
	worker string
	open   *episode
	done   []episode
}

// episode is one run being built: the fields of audit.Episode, and what
// outages (statuses, last error) and imbalance (peak) report of it.
type episode struct {
	audit.Episode
	statusMask int32
	lastError  string
	peak       float64
	peakTime   time.Time
}

// minute adds a summarised minute, in (all of its reports meet the
// condition) or out (none does).
func (b *episodes) minute(m *minuteRead, in bool) {
	if !in {
		b.close(m.firstTime)
		return
	}
	b.extend(m.firstTime, m.lastTime, m.reports, m.statusMask, m.lastError, m.maxSpread, m.peakTime)
}

// report adds one report.
func (b *episodes) report(e entry, in bool) {
	if !in {
		b.close(e.t)
		return
	}
	b.extend(e.t, e.t, 1, 1<<e.status, e.err, e.spread, e.t)
}

func (b *episodes) extend(first, last time.Time, n int64, mask int32, lastErr string, peak float64, peakTime time.Time) {
	if b.open == nil {
		b.open = &episode{peak: peak, peakTime: peakTime}
		b.open.WorkerAddr, b.open.Start = b.worker, first
	}
	o := b.open
	o.LastSeen = last
	o.Reports += n
	o.statusMask |= mask
	if lastErr != "" {
		o.lastError = lastErr
	}
	if peak > o.peak {
		o.peak, o.peakTime = peak, peakTime
	}
}

// close ends the open run, if any, at the report at t.
func (b *episodes) close(t time.Time) {
	if b.open == nil {
		return
	}
	o := b.open
	o.End, o.Duration = t, t.Sub(o.Start)
	b.done = append(b.done, *o)
	b.open = nil
}

// finish ends the worker's minutes: a run still open is ongoing.
func (b *episodes) finish() []episode {
	if o := b.open; o != nil {
		o.Ongoing, o.Duration = true, o.LastSeen.Sub(o.Start)
		b.done = append(b.done, *o)
		b.open = nil
	}
	return b.done
}

// runsOf finds the runs of one worker's minutes: in says whether a
// summarised minute is in, hot whether a report is. The minutes left out
// must be out, and follow a minute whose reports are all out (so no run is
// open across them).
func runsOf(worker string, ms []minuteRead, in func(*minuteRead) bool, hot func(entry) bool) []episode {
	b := episodes{worker: worker}
	for i := range ms {
		m := &ms[i]
		if !m.detailed {
			b.minute(m, in(m))
			continue
		}
		for _, e := range m.entries {
			b.report(e, hot(e))
		}
	}
	return b.finish()
}
