-- History at fleet scale (issue 14).
--
-- 1. A report is one row: its ranks move from history_ranks (one row per
--    rank) into parallel arrays on history_reports, ordered by dp_rank and
--    NULL for a report without ranks. The store writes reports with COPY.
-- 2. Two rollups, written by the store in the same transaction as the
--    reports they summarise, so the audit queries read them instead of every
--    report:
--    history_minutes: per worker and UTC minute, counts and bounds (the
--    first and last report, statuses seen, the largest step between two
--    reports, token_usage spread range) and, per report in report order,
--    the few columns runs and gaps need (time offset, source, sequence,
--    status, last_error, spread);
--    history_rank_minutes: per worker, minute and dp_rank, the sums and
--    maxima of the rank statistics and every token_usage of the minute in
--    ascending order, so that the 95th percentile stays exact.
-- 3. Narrower indexes: the report_time index loses worker_addr, and the
--    (worker_addr, status, report_time) index becomes a partial index on
--    the non-HEALTHY reports only.
--
-- Every table is range-partitioned by day (report_time or minute), so
-- retention drops a day of reports and of rollups together; keys start
-- with worker_addr and include the partitioning column, as 0001's do, so
-- the tables still work as Citus tables distributed by worker_addr and as
-- TimescaleDB hypertables (see docs/history-scale.md).
--
-- Existing history is carried over: rank rows become arrays, history_ranks
-- is dropped, and rollups are computed for every stored minute.

-- +goose Up
ALTER TABLE history_reports
    ADD COLUMN dp_rank                     integer[],
    ADD COLUMN snapshot_time               timestamptz[],
    ADD COLUMN num_running_reqs            bigint[],
    ADD COLUMN num_waiting_reqs            bigint[],
    ADD COLUMN num_waiting_uncached_tokens bigint[],
    ADD COLUMN num_used_tokens             bigint[],
    ADD COLUMN num_total_tokens            bigint[],
    ADD COLUMN max_total_num_tokens        bigint[],
    ADD COLUMN max_running_requests        bigint[],
    ADD COLUMN token_usage                 double precision[],
    ADD COLUMN gen_throughput              double precision[],
    ADD COLUMN cache_hit_rate              double precision[],
    ADD COLUMN utilization                 double precision[];

UPDATE history_reports r
SET dp_rank = k.dp_rank, snapshot_time = k.snapshot_time, num_running_reqs = k.num_running_reqs,
    num_waiting_reqs = k.num_waiting_reqs, num_waiting_uncached_tokens = k.num_waiting_uncached_tokens,
    num_used_tokens = k.num_used_tokens, num_total_tokens = k.num_total_tokens,
    max_total_num_tokens = k.max_total_num_tokens, max_running_requests = k.max_running_requests,
    token_usage = k.token_usage, gen_throughput = k.gen_throughput, cache_hit_rate = k.cache_hit_rate,
    utilization = k.utilization
FROM (
    SELECT worker_addr, report_time, source_instance_id, sequence_id,
           array_agg(dp_rank ORDER BY dp_rank) AS dp_rank,
           array_agg(snapshot_time ORDER BY dp_rank) AS snapshot_time,
           array_agg(num_running_reqs ORDER BY dp_rank) AS num_running_reqs,
           array_agg(num_waiting_reqs ORDER BY dp_rank) AS num_waiting_reqs,
           array_agg(num_waiting_uncached_tokens ORDER BY dp_rank) AS num_waiting_uncached_tokens,
           array_agg(num_used_tokens ORDER BY dp_rank) AS num_used_tokens,
           array_agg(num_total_tokens ORDER BY dp_rank) AS num_total_tokens,
           array_agg(max_total_num_tokens ORDER BY dp_rank) AS max_total_num_tokens,
           array_agg(max_running_requests ORDER BY dp_rank) AS max_running_requests,
           array_agg(token_usage ORDER BY dp_rank) AS token_usage,
           array_agg(gen_throughput ORDER BY dp_rank) AS gen_throughput,
           array_agg(cache_hit_rate ORDER BY dp_rank) AS cache_hit_rate,
           array_agg(utilization ORDER BY dp_rank) AS utilization
    FROM history_ranks
    GROUP BY worker_addr, report_time, source_instance_id, sequence_id
) k
WHERE r.worker_addr = k.worker_addr AND r.report_time = k.report_time
  AND r.source_instance_id = k.source_instance_id AND r.sequence_id = k.sequence_id;

DROP TABLE history_ranks;

DROP INDEX history_reports_worker_status_time;
DROP INDEX history_reports_time;
-- Fleet-wide pages ordered by time (an incremental sort orders ties).
CREATE INDEX history_reports_time ON history_reports (report_time);
-- Reports of one worker with a status other than HEALTHY: few, so small.
CREATE INDEX history_reports_unhealthy ON history_reports (worker_addr, report_time) WHERE status <> 1;

CREATE TABLE history_minutes (
    worker_addr   text COLLATE "C" NOT NULL,
    minute        timestamptz      NOT NULL, -- start of the UTC minute
    reports       integer          NOT NULL,
    unhealthy     integer          NOT NULL, -- reports with status <> 1
    status_mask   integer          NOT NULL, -- bit 1 << status for each status seen
    last_error    text,                      -- last non-empty last_error, in report order
    first_time    timestamptz      NOT NULL,
    last_time     timestamptz      NOT NULL,
    first_source  text COLLATE "C" NOT NULL,
    last_source   text COLLATE "C" NOT NULL,
    max_step      bigint           NOT NULL, -- µs, largest step between two consecutive reports of the minute
    min_spread    double precision NOT NULL,
    max_spread    double precision NOT NULL,
    peak_time     timestamptz      NOT NULL, -- first report with max_spread
    -- One element per report, in report order (report_time,
    -- source_instance_id, sequence_id):
    sources       text[] COLLATE "C" NOT NULL, -- distinct source_instance_id, ascending
    offsets       integer[]        NOT NULL, -- µs after minute
    source_index  integer[]        NOT NULL, -- 1-based into sources
    sequence_ids  bigint[]         NOT NULL,
    statuses      smallint[]       NOT NULL,
    errors        text[]           NOT NULL, -- NULL element when empty
    spreads       double precision[] NOT NULL,
    PRIMARY KEY (worker_addr, minute)
) PARTITION BY RANGE (minute);

CREATE TABLE history_minutes_default PARTITION OF history_minutes DEFAULT;

CREATE TABLE history_rank_minutes (
    worker_addr text COLLATE "C" NOT NULL,
    minute      timestamptz      NOT NULL,
    dp_rank     integer          NOT NULL,
    reports     integer          NOT NULL, -- rank rows summarised
    usage_sum   double precision NOT NULL,
    usage_max   double precision NOT NULL,
    waiting_max bigint           NOT NULL,
    gen_sum     double precision NOT NULL,
    -- every token_usage of the minute, ascending, as big-endian float8
    -- (8 bytes each, float8send): the exact input of the 95th percentile.
    usage       bytea            NOT NULL,
    PRIMARY KEY (worker_addr, minute, dp_rank)
) PARTITION BY RANGE (minute);

CREATE TABLE history_rank_minutes_default PARTITION OF history_rank_minutes DEFAULT;

-- The rollups get the daily partitions the reports have.
-- +goose StatementBegin
DO $$
DECLARE
    day text;
BEGIN
    FOR day IN
        SELECT substring(c.relname FROM '^history_reports_p([0-9]{8})$')
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'history_reports'::regclass AND c.relname ~ '^history_reports_p[0-9]{8}$'
    LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF history_minutes FOR VALUES FROM (%L) TO (%L)',
            'history_minutes_p' || day, to_date(day, 'YYYYMMDD')::text || ' 00:00:00+00',
            (to_date(day, 'YYYYMMDD') + 1)::text || ' 00:00:00+00');
        EXECUTE format('CREATE TABLE %I PARTITION OF history_rank_minutes FOR VALUES FROM (%L) TO (%L)',
            'history_rank_minutes_p' || day, to_date(day, 'YYYYMMDD')::text || ' 00:00:00+00',
            (to_date(day, 'YYYYMMDD') + 1)::text || ' 00:00:00+00');
    END LOOP;
END
$$;
-- +goose StatementEnd

INSERT INTO history_minutes
WITH r AS (
    SELECT worker_addr, date_trunc('minute', report_time, 'UTC') AS minute, report_time,
           source_instance_id, sequence_id, status, last_error, token_usage_spread,
           report_time - lag(report_time) OVER (
               PARTITION BY worker_addr, date_trunc('minute', report_time, 'UTC')
               ORDER BY report_time, source_instance_id, sequence_id) AS step
    FROM history_reports
), m AS (
    SELECT worker_addr, minute,
           array_agg(DISTINCT source_instance_id ORDER BY source_instance_id) AS sources
    FROM r GROUP BY worker_addr, minute
)
SELECT r.worker_addr, r.minute,
       count(*), count(*) FILTER (WHERE status <> 1),
       bit_or(1 << status),
       (array_agg(last_error ORDER BY report_time DESC, source_instance_id DESC, sequence_id DESC)
            FILTER (WHERE last_error <> ''))[1],
       min(report_time), max(report_time),
       (array_agg(source_instance_id ORDER BY report_time, source_instance_id, sequence_id))[1],
       (array_agg(source_instance_id ORDER BY report_time DESC, source_instance_id DESC, sequence_id DESC))[1],
       coalesce((extract(epoch FROM max(step)) * 1000000)::bigint, 0),
       min(token_usage_spread), max(token_usage_spread),
       (array_agg(report_time ORDER BY token_usage_spread DESC, report_time, source_instance_id, sequence_id))[1],
       m.sources,
       array_agg(((extract(epoch FROM report_time - r.minute) * 1000000)::bigint)::integer
                 ORDER BY report_time, source_instance_id, sequence_id),
       array_agg(array_position(m.sources, source_instance_id) ORDER BY report_time, source_instance_id, sequence_id),
       array_agg(sequence_id ORDER BY report_time, source_instance_id, sequence_id),
       array_agg(status ORDER BY report_time, source_instance_id, sequence_id),
       array_agg(NULLIF(last_error, '') ORDER BY report_time, source_instance_id, sequence_id),
       array_agg(token_usage_spread ORDER BY report_time, source_instance_id, sequence_id)
FROM r JOIN m ON m.worker_addr = r.worker_addr AND m.minute = r.minute
GROUP BY r.worker_addr, r.minute, m.sources;

INSERT INTO history_rank_minutes
SELECT worker_addr, date_trunc('minute', report_time, 'UTC'), k.dp, count(*), sum(k.usage), max(k.usage),
       max(k.waiting), sum(k.gen), string_agg(float8send(k.usage), ''::bytea ORDER BY k.usage)
FROM history_reports, unnest(dp_rank, token_usage, num_waiting_reqs, gen_throughput) AS k(dp, usage, waiting, gen)
GROUP BY worker_addr, date_trunc('minute', report_time, 'UTC'), k.dp;

-- +goose Down
DROP TABLE history_rank_minutes;
DROP TABLE history_minutes;

CREATE TABLE history_ranks (
    worker_addr                 text COLLATE "C" NOT NULL,
    report_time                 timestamptz      NOT NULL,
    source_instance_id          text COLLATE "C" NOT NULL,
    sequence_id                 bigint           NOT NULL,
    dp_rank                     integer          NOT NULL,
    snapshot_time               timestamptz      NOT NULL,
    num_running_reqs            bigint           NOT NULL,
    num_waiting_reqs            bigint           NOT NULL,
    num_waiting_uncached_tokens bigint           NOT NULL,
    num_used_tokens             bigint           NOT NULL,
    num_total_tokens            bigint           NOT NULL,
    max_total_num_tokens        bigint           NOT NULL,
    max_running_requests        bigint           NOT NULL,
    token_usage                 double precision NOT NULL,
    gen_throughput              double precision NOT NULL,
    cache_hit_rate              double precision NOT NULL,
    utilization                 double precision NOT NULL,
    PRIMARY KEY (worker_addr, report_time, source_instance_id, sequence_id, dp_rank)
) PARTITION BY RANGE (report_time);
CREATE INDEX history_ranks_time_brin ON history_ranks USING brin (report_time);
CREATE TABLE history_ranks_default PARTITION OF history_ranks DEFAULT;

-- +goose StatementBegin
DO $$
DECLARE
    day text;
BEGIN
    FOR day IN
        SELECT substring(c.relname FROM '^history_reports_p([0-9]{8})$')
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'history_reports'::regclass AND c.relname ~ '^history_reports_p[0-9]{8}$'
    LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF history_ranks FOR VALUES FROM (%L) TO (%L)',
            'history_ranks_p' || day, to_date(day, 'YYYYMMDD')::text || ' 00:00:00+00',
            (to_date(day, 'YYYYMMDD') + 1)::text || ' 00:00:00+00');
    END LOOP;
END
$$;
-- +goose StatementEnd

INSERT INTO history_ranks
SELECT r.worker_addr, r.report_time, r.source_instance_id, r.sequence_id, k.*
FROM history_reports r,
     unnest(r.dp_rank, r.snapshot_time, r.num_running_reqs, r.num_waiting_reqs, r.num_waiting_uncached_tokens,
            r.num_used_tokens, r.num_total_tokens, r.max_total_num_tokens, r.max_running_requests,
            r.token_usage, r.gen_throughput, r.cache_hit_rate, r.utilization) AS k;

DROP INDEX history_reports_unhealthy;
DROP INDEX history_reports_time;
CREATE INDEX history_reports_worker_status_time ON history_reports (worker_addr, status, report_time);
CREATE INDEX history_reports_time ON history_reports (report_time, worker_addr);

ALTER TABLE history_reports
    DROP COLUMN dp_rank,
    DROP COLUMN snapshot_time,
    DROP COLUMN num_running_reqs,
    DROP COLUMN num_waiting_reqs,
    DROP COLUMN num_waiting_uncached_tokens,
    DROP COLUMN num_used_tokens,
    DROP COLUMN num_total_tokens,
    DROP COLUMN max_total_num_tokens,
    DROP COLUMN max_running_requests,
    DROP COLUMN token_usage,
    DROP COLUMN gen_throughput,
    DROP COLUMN cache_hit_rate,
    DROP COLUMN utilization;
