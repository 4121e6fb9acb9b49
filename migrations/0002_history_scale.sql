-- History at fleet scale (issue 14).
--
-- 1. A report is one row: its ranks move from history_ranks (one row per
--    rank) into history_reports.ranks, packed (see below; NULL for a report
--    without ranks), and history_report_ranks(ranks) unpacks them in SQL.
--    The store writes reports with COPY.
-- 2. Two rollups, written by the store in the same transaction as the
--    reports they summarise, so the audit queries read them instead of every
--    report:
--    history_minutes: per worker and UTC minute, counts and bounds (the
--    first and last report, statuses seen, the largest step between two
--    reports, the token_usage spread range), narrow, and beside it
--    history_minute_entries: per report of the minute, in report order,
--    what runs and gaps need (entries, packed);
--    history_rank_minutes: per worker, minute and dp_rank, the sums and
--    maxima of the rank statistics and every token_usage of the minute in
--    ascending order, so that the 95th percentile stays exact.
-- 3. Narrower indexes: the report_time index loses worker_addr, and the
--    (worker_addr, status, report_time) index becomes a partial index on
--    the non-HEALTHY reports only.
--
-- Packed columns are fixed-width big-endian records, the bytes of int2send,
-- int4send, int8send and float8send (binary COPY sends a bytea as it is,
-- where an array costs the server a call per element):
--   ranks, 100 bytes a rank, ordered by dp_rank: dp_rank int4, snapshot_time
--     int8 (µs since 1970-01-01 UTC), num_running_reqs, num_waiting_reqs,
--     num_waiting_uncached_tokens, num_used_tokens, num_total_tokens,
--     max_total_num_tokens, max_running_requests int8, token_usage,
--     gen_throughput, cache_hit_rate, utilization float8;
--   entries, 26 bytes a report, in report order (report_time,
--     source_instance_id, sequence_id): offset int4 (µs after minute),
--     source int2 (1-based into sources), status int2, sequence_id int8,
--     token_usage spread float8, last_error int2 (1-based into errors, 0
--     for none);
--   usage, 8 bytes a value: float8, ascending.
--
-- Every table is range-partitioned by day (report_time or minute), so
-- retention drops a day of reports and of rollups together; keys start
-- with worker_addr and include the partitioning column, as 0001's do, so
-- the tables still work as Citus tables distributed by worker_addr and as
-- TimescaleDB hypertables (see docs/history-scale.md).
--
-- Existing history is carried over: rank rows are packed into their
-- reports, history_ranks is dropped, and every stored minute is rolled up.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION history_int8(b bytea, o integer) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN ('x' || encode(substring(b FROM o + 1 FOR 8), 'hex'))::bit(64)::bigint;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION history_float8(b bytea, o integer) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (
    SELECT CASE
        WHEN e = 2047 AND m = 0 THEN CASE WHEN s THEN '-Infinity'::float8 ELSE 'Infinity'::float8 END
        WHEN e = 2047 THEN 'NaN'::float8
        WHEN e = 0 THEN (CASE WHEN s THEN -1.0::float8 ELSE 1.0::float8 END) * (m::float8 * 2.0::float8 ^ -52) * 2.0::float8 ^ -1022
        ELSE (CASE WHEN s THEN -1.0::float8 ELSE 1.0::float8 END) * (1 + m::float8 * 2.0::float8 ^ -52) * 2.0::float8 ^ (e - 1023)
    END
    FROM (SELECT bits < 0 AS s, ((bits >> 52) & 2047)::integer AS e, bits & 4503599627370495 AS m
          FROM (SELECT history_int8(b, o) AS bits) x) y
);
-- +goose StatementEnd

-- history_report_ranks unpacks history_reports.ranks, one row per rank:
--   SELECT r.report_time, k.* FROM history_reports r, history_report_ranks(r.ranks) k
--   WHERE r.worker_addr = '10.0.0.1:30000' ORDER BY r.report_time, k.dp_rank;
-- +goose StatementBegin
CREATE FUNCTION history_report_ranks(ranks bytea) RETURNS TABLE (
    dp_rank integer, snapshot_time timestamptz,
    num_running_reqs bigint, num_waiting_reqs bigint, num_waiting_uncached_tokens bigint, num_used_tokens bigint,
    num_total_tokens bigint, max_total_num_tokens bigint, max_running_requests bigint,
    token_usage double precision, gen_throughput double precision, cache_hit_rate double precision,
    utilization double precision)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
BEGIN ATOMIC
    SELECT ('x' || encode(substring(ranks FROM o + 1 FOR 4), 'hex'))::bit(32)::integer,
           timestamptz '1970-01-01 00:00:00+00' + history_int8(ranks, o + 4) * interval '1 microsecond',
           history_int8(ranks, o + 12), history_int8(ranks, o + 20), history_int8(ranks, o + 28),
           history_int8(ranks, o + 36), history_int8(ranks, o + 44), history_int8(ranks, o + 52),
           history_int8(ranks, o + 60),
           history_float8(ranks, o + 68), history_float8(ranks, o + 76), history_float8(ranks, o + 84),
           history_float8(ranks, o + 92)
    FROM generate_series(0, length(ranks) - 100, 100) AS o
    ORDER BY o;
END;
-- +goose StatementEnd

ALTER TABLE history_reports ADD COLUMN ranks bytea;

UPDATE history_reports r SET ranks = k.ranks
FROM (
    SELECT worker_addr, report_time, source_instance_id, sequence_id,
           string_agg(int4send(dp_rank)
                      || int8send((extract(epoch FROM snapshot_time) * 1000000)::bigint)
                      || int8send(num_running_reqs) || int8send(num_waiting_reqs)
                      || int8send(num_waiting_uncached_tokens) || int8send(num_used_tokens)
                      || int8send(num_total_tokens) || int8send(max_total_num_tokens)
                      || int8send(max_running_requests)
                      || float8send(token_usage) || float8send(gen_throughput)
                      || float8send(cache_hit_rate) || float8send(utilization),
                      ''::bytea ORDER BY dp_rank) AS ranks
    FROM history_ranks
    GROUP BY worker_addr, report_time, source_instance_id, sequence_id
) k
WHERE r.worker_addr = k.worker_addr AND r.report_time = k.report_time
  AND r.source_instance_id = k.source_instance_id AND r.sequence_id = k.sequence_id;

DROP INDEX history_reports_worker_status_time;
DROP INDEX history_reports_time;
-- Fleet-wide pages ordered by time (an incremental sort orders ties).
CREATE INDEX history_reports_time ON history_reports (report_time);
-- Reports with a status other than HEALTHY, of one worker or of all: few,
-- so small.
CREATE INDEX history_reports_unhealthy ON history_reports (worker_addr, report_time) WHERE status <> 1;
CREATE INDEX history_reports_unhealthy_time ON history_reports (report_time) WHERE status <> 1;

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
    source_count  integer          NOT NULL, -- distinct source_instance_id
    max_step      bigint           NOT NULL, -- µs, largest step between two consecutive reports of the minute
    min_spread    double precision NOT NULL,
    max_spread    double precision NOT NULL,
    peak_time     timestamptz      NOT NULL, -- first report with max_spread
    PRIMARY KEY (worker_addr, minute)
) PARTITION BY RANGE (minute);
-- Fleet-wide windows shorter than a day.
CREATE INDEX history_minutes_minute ON history_minutes USING brin (minute);

-- The reports of a history_minutes row, apart, so that the queries scan the
-- narrow summaries and read these only for the minutes they must look into.
CREATE TABLE history_minute_entries (
    worker_addr   text COLLATE "C" NOT NULL,
    minute        timestamptz      NOT NULL,
    sources       text[] COLLATE "C" NOT NULL, -- distinct source_instance_id, ascending
    errors        text[] COLLATE "C" NOT NULL, -- distinct non-empty last_error, ascending
    entries       bytea            NOT NULL,   -- per report, packed (see above)
    PRIMARY KEY (worker_addr, minute)
) PARTITION BY RANGE (minute);

CREATE TABLE history_minute_entries_default PARTITION OF history_minute_entries DEFAULT;

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
    usage       bytea            NOT NULL, -- every token_usage of the minute, packed (see above)
    PRIMARY KEY (worker_addr, minute, dp_rank)
) PARTITION BY RANGE (minute);
CREATE INDEX history_rank_minutes_minute ON history_rank_minutes USING brin (minute);

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
        EXECUTE format('CREATE TABLE %I PARTITION OF history_minute_entries FOR VALUES FROM (%L) TO (%L)',
            'history_minute_entries_p' || day, to_date(day, 'YYYYMMDD')::text || ' 00:00:00+00',
            (to_date(day, 'YYYYMMDD') + 1)::text || ' 00:00:00+00');
        EXECUTE format('CREATE TABLE %I PARTITION OF history_rank_minutes FOR VALUES FROM (%L) TO (%L)',
            'history_rank_minutes_p' || day, to_date(day, 'YYYYMMDD')::text || ' 00:00:00+00',
            (to_date(day, 'YYYYMMDD') + 1)::text || ' 00:00:00+00');
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE TEMPORARY TABLE history_minutes_0002 ON COMMIT DROP AS
WITH r AS (
    SELECT worker_addr, date_trunc('minute', report_time, 'UTC') AS minute, report_time,
           source_instance_id, sequence_id, status, NULLIF(last_error, '') AS last_error, token_usage_spread,
           report_time - lag(report_time) OVER (
               PARTITION BY worker_addr, date_trunc('minute', report_time, 'UTC')
               ORDER BY report_time, source_instance_id, sequence_id) AS step
    FROM history_reports
), d AS (
    SELECT worker_addr, minute,
           array_agg(DISTINCT source_instance_id ORDER BY source_instance_id) AS sources,
           coalesce(array_agg(DISTINCT last_error ORDER BY last_error) FILTER (WHERE last_error IS NOT NULL), '{}') AS errors
    FROM r GROUP BY worker_addr, minute
)
SELECT r.worker_addr, r.minute,
       count(*) AS reports, count(*) FILTER (WHERE status <> 1) AS unhealthy,
       bit_or(1 << status) AS status_mask,
       (array_agg(last_error ORDER BY report_time DESC, source_instance_id DESC, sequence_id DESC)
            FILTER (WHERE last_error IS NOT NULL))[1] AS last_error,
       min(report_time) AS first_time, max(report_time) AS last_time,
       (array_agg(source_instance_id ORDER BY report_time, source_instance_id, sequence_id))[1] AS first_source,
       (array_agg(source_instance_id ORDER BY report_time DESC, source_instance_id DESC, sequence_id DESC))[1] AS last_source,
       cardinality(d.sources) AS source_count,
       coalesce((extract(epoch FROM max(step)) * 1000000)::bigint, 0) AS max_step,
       min(token_usage_spread) AS min_spread, max(token_usage_spread) AS max_spread,
       (array_agg(report_time ORDER BY token_usage_spread DESC, report_time, source_instance_id, sequence_id))[1] AS peak_time,
       d.sources, d.errors,
       string_agg(int4send((extract(epoch FROM report_time - r.minute) * 1000000)::integer)
                  || int2send(array_position(d.sources, source_instance_id)::smallint)
                  || int2send(status) || int8send(sequence_id) || float8send(token_usage_spread)
                  || int2send(coalesce(array_position(d.errors, last_error), 0)::smallint),
                  ''::bytea ORDER BY report_time, source_instance_id, sequence_id) AS entries
FROM r JOIN d ON d.worker_addr = r.worker_addr AND d.minute = r.minute
GROUP BY r.worker_addr, r.minute, d.sources, d.errors;

INSERT INTO history_minutes
SELECT worker_addr, minute, reports, unhealthy, status_mask, last_error, first_time, last_time, first_source, last_source,
       source_count, max_step, min_spread, max_spread, peak_time
FROM history_minutes_0002;

INSERT INTO history_minute_entries
SELECT worker_addr, minute, sources, errors, entries FROM history_minutes_0002;

INSERT INTO history_rank_minutes
SELECT worker_addr, date_trunc('minute', report_time, 'UTC'), dp_rank, count(*), sum(token_usage), max(token_usage),
       max(num_waiting_reqs), sum(gen_throughput), string_agg(float8send(token_usage), ''::bytea ORDER BY token_usage)
FROM history_ranks
GROUP BY worker_addr, date_trunc('minute', report_time, 'UTC'), dp_rank;

DROP TABLE history_ranks;

-- +goose Down
DROP TABLE history_rank_minutes;
DROP TABLE history_minute_entries;
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
FROM history_reports r, history_report_ranks(r.ranks) AS k;

DROP INDEX history_reports_unhealthy_time;
DROP INDEX history_reports_unhealthy;
DROP INDEX history_reports_time;
CREATE INDEX history_reports_worker_status_time ON history_reports (worker_addr, status, report_time);
CREATE INDEX history_reports_time ON history_reports (report_time, worker_addr);

ALTER TABLE history_reports DROP COLUMN ranks;
DROP FUNCTION history_report_ranks(bytea);
DROP FUNCTION history_float8(bytea, integer);
DROP FUNCTION history_int8(bytea, integer);
