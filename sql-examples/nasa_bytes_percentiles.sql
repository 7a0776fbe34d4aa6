-- p50 and p99 of the response bytes of the last 10 minutes, at every request of the
-- NASA-HTTP log of 1 August 1995, checked on every row against the exact answer: the
-- value at rank ceil(p * n) of the frame's sorted values (percentile_approx's definition).
-- Responses without a size ('-') are NULL and skipped. From the repository root:
--   windowsketch sql --hivevar nasa_log=python/windowsketch/data/nasa_http_1995-08-01.tsv.gz \
--     -f sql-examples/nasa_bytes_percentiles.sql
SET spark.sql.session.timeZone=UTC;

CREATE TEMPORARY VIEW nasa_raw
USING csv OPTIONS (path '${nasa_log}', sep '\t', header 'true');

CREATE TEMPORARY VIEW sizes AS
SELECT ts, host, b,
       approx_window_percentile(b, ts, INTERVAL 10 MINUTES, array(0.5, 0.99))
         OVER (ORDER BY ts) AS approx,
       sort_array(collect_list(b)
         OVER (ORDER BY ts RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING AND CURRENT ROW)) AS frame
FROM (SELECT timestamp_seconds(CAST(time AS BIGINT)) AS ts, host,
             CAST(bytes AS BIGINT) AS b FROM nasa_raw);

CREATE TEMPORARY VIEW checked AS
SELECT ts, host, approx[0] AS p50, approx[1] AS p99,
       element_at(frame, greatest(CAST(ceil(0.5 * size(frame)) AS INT), 1)) AS exact_p50,
       element_at(frame, greatest(CAST(ceil(0.99 * size(frame)) AS INT), 1)) AS exact_p99
FROM sizes;

-- The five moments with the largest p99 of the last 10 minutes.
SELECT ts, p50, p99 FROM checked ORDER BY p99 DESC, ts, host LIMIT 5;

-- On every row, both percentiles equal the exact ones (rank error 0 in exact mode).
SELECT count(*) AS requests,
       bool_and(p50 <=> exact_p50) AS p50_exact_on_every_row,
       bool_and(p99 <=> exact_p99) AS p99_exact_on_every_row,
       min(p50) AS lowest_p50, max(p99) AS highest_p99
FROM checked;
