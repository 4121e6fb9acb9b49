-- Rank statistics within 200 ms over a long window (issue 14).
--
-- history_rank_minutes had a row per worker, minute and rank, each with
-- every token_usage of the minute (usage, 8 bytes a value, about 500 bytes
-- a row), so rank statistics over many minutes read every value and
-- aggregated eight rows a minute. It is replaced by two tables:
--
--   history_minute_ranks: a row per worker and minute, its ranks' sums and
--     bounds packed in ranks (below), so a long window reads a narrow row a
--     minute; history_minute_rank_stats(ranks) unpacks them in SQL;
--   history_rank_minute_usage: a row per worker, minute and rank with its
--     values (usage, packed as 0002 packed it: float8, ascending), read
--     only for the minutes whose bounds cannot settle the 95th percentile,
--     which stays exact.
--
-- ranks, 48 bytes a rank, ordered by dp_rank: dp_rank int4, reports int4,
-- usage_sum, usage_min, usage_max float8, waiting_max int8, gen_sum float8,
-- big-endian (the bytes of int4send, int8send, float8send).
--
-- Both tables are partitioned by day like the others (<table>_pYYYYMMDD, a
-- default partition), so retention drops them with the reports; their keys
-- start with worker_addr and include minute. Existing rank minutes are
-- carried over and history_rank_minutes is dropped (Down rebuilds it).

-- +goose Up
CREATE TABLE history_minute_ranks (
    worker_addr text COLLATE "C" NOT NULL,
    minute      timestamptz      NOT NULL,
    ranks       bytea            NOT NULL, -- per rank, packed (see above)
    PRIMARY KEY (worker_addr, minute)
) PARTITION BY RANGE (minute);
CREATE INDEX history_minute_ranks_minute ON history_minute_ranks USING brin (minute);

CREATE TABLE history_minute_ranks_default PARTITION OF history_minute_ranks DEFAULT;

CREATE TABLE history_rank_minute_usage (
    worker_addr text COLLATE "C" NOT NULL,
    minute      timestamptz      NOT NULL,
    dp_rank     integer          NOT NULL,
    usage       bytea            NOT NULL, -- every token_usage of the minute, float8 ascending
    PRIMARY KEY (worker_addr, minute, dp_rank)
) PARTITION BY RANGE (minute);

CREATE TABLE history_rank_minute_usage_default PARTITION OF history_rank_minute_usage DEFAULT;

-- +goose StatementBegin
CREATE FUNCTION history_minute_rank_stats(ranks bytea)
RETURNS TABLE (dp_rank integer, reports integer, usage_sum double precision, usage_min double precision,
               usage_max double precision, waiting_max bigint, gen_sum double precision)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
BEGIN ATOMIC
    SELECT ('x' || encode(substring(ranks FROM o + 1 FOR 4), 'hex'))::bit(32)::integer,
           ('x' || encode(substring(ranks FROM o + 5 FOR 4), 'hex'))::bit(32)::integer,
           history_float8(ranks, o + 8), history_float8(ranks, o + 16), history_float8(ranks, o + 24),
           history_int8(ranks, o + 32), history_float8(ranks, o + 40)
    FROM generate_series(0, length(ranks) - 48, 48) AS o
    ORDER BY o;
END;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    day text;
    t text;
BEGIN
    FOR day IN
        SELECT substring(c.relname FROM '^history_reports_p([0-9]{8})$')
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'history_reports'::regclass AND c.relname ~ '^history_reports_p[0-9]{8}$'
    LOOP
        FOREACH t IN ARRAY ARRAY['history_minute_ranks', 'history_rank_minute_usage'] LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                t || '_p' || day, t, to_date(day, 'YYYYMMDD')::text || ' 00:00:00+00',
                (to_date(day, 'YYYYMMDD') + 1)::text || ' 00:00:00+00');
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd

INSERT INTO history_minute_ranks
SELECT worker_addr, minute,
       string_agg(int4send(dp_rank) || int4send(reports) || float8send(usage_sum) || float8send(history_float8(usage, 0))
                  || float8send(usage_max) || int8send(waiting_max) || float8send(gen_sum), ''::bytea ORDER BY dp_rank)
FROM history_rank_minutes
GROUP BY worker_addr, minute;

INSERT INTO history_rank_minute_usage
SELECT worker_addr, minute, dp_rank, usage FROM history_rank_minutes;

DROP TABLE history_rank_minutes;

-- +goose Down
CREATE TABLE history_rank_minutes (
    worker_addr text COLLATE "C" NOT NULL,
    minute      timestamptz      NOT NULL,
    dp_rank     integer          NOT NULL,
    reports     integer          NOT NULL,
    usage_sum   double precision NOT NULL,
    usage_max   double precision NOT NULL,
    waiting_max bigint           NOT NULL,
    gen_sum     double precision NOT NULL,
    usage       bytea            NOT NULL,
    PRIMARY KEY (worker_addr, minute, dp_rank)
) PARTITION BY RANGE (minute);
CREATE INDEX history_rank_minutes_minute ON history_rank_minutes USING brin (minute);

CREATE TABLE history_rank_minutes_default PARTITION OF history_rank_minutes DEFAULT;

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
        EXECUTE format('CREATE TABLE %I PARTITION OF history_rank_minutes FOR VALUES FROM (%L) TO (%L)',
            'history_rank_minutes_p' || day, to_date(day, 'YYYYMMDD')::text || ' 00:00:00+00',
            (to_date(day, 'YYYYMMDD') + 1)::text || ' 00:00:00+00');
    END LOOP;
END
$$;
-- +goose StatementEnd

INSERT INTO history_rank_minutes
SELECT m.worker_addr, m.minute, k.dp_rank, k.reports, k.usage_sum, k.usage_max, k.waiting_max, k.gen_sum, u.usage
FROM history_minute_ranks m, history_minute_rank_stats(m.ranks) AS k, history_rank_minute_usage u
WHERE u.worker_addr = m.worker_addr AND u.minute = m.minute AND u.dp_rank = k.dp_rank;

DROP FUNCTION history_minute_rank_stats(bytea);
DROP TABLE history_rank_minute_usage;
DROP TABLE history_minute_ranks;
