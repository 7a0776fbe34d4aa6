-- 404s in the last 10 minutes over the NASA-HTTP log of 1 August 1995, approximate and
-- exact side by side. From the repository root:
--   windowsketch sql --hivevar nasa_log=python/windowsketch/data/nasa_http_1995-08-01.tsv.gz \
--     -f sql-examples/nasa_404s.sql
SET spark.sql.session.timeZone=UTC;

CREATE TEMPORARY VIEW nasa_raw
USING csv OPTIONS (path '${nasa_log}', sep '\t', header 'true');

CREATE TEMPORARY VIEW counted AS
SELECT ts, host,
       approx_window_count(status = 404, ts, INTERVAL 10 MINUTES, 0.01)
         OVER (ORDER BY ts) AS approx_404s,
       count_if(status = 404)
         OVER (ORDER BY ts RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING AND CURRENT ROW) AS exact_404s,
       approx_window_count(true, ts, INTERVAL 10 MINUTES, 0.01)
         OVER (ORDER BY ts) AS approx_requests,
       count(*)
         OVER (ORDER BY ts RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING AND CURRENT ROW) AS exact_requests
FROM (SELECT timestamp_seconds(CAST(time AS BIGINT)) AS ts, host,
             CAST(response AS INT) AS status
      FROM nasa_raw);

-- The five moments with the most 404s in the preceding 10 minutes.
SELECT ts, approx_404s, exact_404s FROM counted
ORDER BY exact_404s DESC, ts, host LIMIT 5;

-- The guarantee, checked on every row: |approx - exact| <= 0.01 * exact.
SELECT count(*) AS requests,
       max(abs(approx_404s - exact_404s) - 0.01 * exact_404s) <= 0 AS bound_held_404s,
       max(abs(approx_requests - exact_requests) - 0.01 * exact_requests) <= 0 AS bound_held_requests,
       round(max(abs(approx_requests - exact_requests) / exact_requests), 4) AS worst_error_requests
FROM counted;
