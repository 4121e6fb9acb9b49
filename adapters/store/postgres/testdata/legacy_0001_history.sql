-- History of load reports (SPEC §5).
--
-- Both tables are range-partitioned by report_time into daily partitions
-- named <table>_pYYYYMMDD (UTC days). The service creates the partitions
-- it writes to ahead of writing, and retention drops whole partitions. The
-- default partitions are a safety net for rows written by anything else.
--
-- Primary keys start with worker_addr and include report_time, so the same
-- tables work unchanged as TimescaleDB hypertables (on report_time) or as
-- Citus tables distributed by worker_addr. A report is identified by
-- (source_instance_id, sequence_id); worker_addr and report_time are fixed
-- for a given report, so a retried insert hits the primary key and is
-- skipped (ON CONFLICT DO NOTHING). Text keys use the "C" collation: byte
-- order, the same in every database and in Go, and cheaper to compare.

CREATE TABLE history_reports (
    worker_addr        text COLLATE "C" NOT NULL,
    report_time        timestamptz NOT NULL,
    source_instance_id text COLLATE "C" NOT NULL,
    sequence_id        bigint      NOT NULL,
    status             smallint    NOT NULL, -- 1 HEALTHY, 2 STALE, 3 UNREACHABLE
    last_error         text,                 -- NULL when HEALTHY
    worker_type        smallint    NOT NULL, -- 0 unspecified, 1 regular, 2 prefill, 3 decode
    model              text,
    zone               text,
    -- max − min token_usage across the report's ranks (0 with fewer than
    -- two), kept with the report so imbalance queries read reports only.
    token_usage_spread double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (worker_addr, report_time, source_instance_id, sequence_id)
) PARTITION BY RANGE (report_time);

-- Reports of one worker with one status (e.g. every UNREACHABLE report of
-- worker X last night).
CREATE INDEX history_reports_worker_status_time
    ON history_reports (worker_addr, status, report_time);
-- Fleet-wide windows and pages ordered by time.
CREATE INDEX history_reports_time
    ON history_reports (report_time, worker_addr);

CREATE TABLE history_reports_default PARTITION OF history_reports DEFAULT;

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

-- Fleet-wide per-rank statistics over a time window; BRIN stays tiny on
-- append-mostly, time-ordered rows.
CREATE INDEX history_ranks_time_brin ON history_ranks USING brin (report_time);

CREATE TABLE history_ranks_default PARTITION OF history_ranks DEFAULT;
