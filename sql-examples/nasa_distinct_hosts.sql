-- Distinct client hosts in the last 10 minutes at every request of the NASA-HTTP log of
-- 1 August 1995: the sliding HyperLogLog next to Spark's approx_count_distinct and an exact
-- count over the same sliding frame. From the repository root:
--   windowsketch sql --hivevar nasa_log=python/windowsketch/data/nasa_http_1995-08-01.tsv.gz \
--     -f sql-examples/nasa_distinct_hosts.sql
SET spark.sql.session.timeZone=UTC;

CREATE TEMPORARY VIEW nasa_raw
USING csv OPTIONS (path '${nasa_log}', sep '\t', header 'true');

CREATE TEMPORARY VIEW hosts AS
SELECT ts, host,
       approx_window_count_distinct(host, ts, INTERVAL 10 MINUTES)
         OVER (ORDER BY ts) AS approx_hosts,
       approx_count_distinct(host)
         OVER (ORDER BY ts RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING AND CURRENT ROW) AS spark_hll,
       size(collect_set(host)
         OVER (ORDER BY ts RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING AND CURRENT ROW)) AS exact_hosts
FROM (SELECT timestamp_seconds(CAST(time AS BIGINT)) AS ts, host FROM nasa_raw);

-- The five moments with the most distinct hosts in the preceding 10 minutes.
SELECT ts, approx_hosts, exact_hosts FROM hosts
ORDER BY exact_hosts DESC, ts, host LIMIT 5;

-- On every row: the same answer as approx_count_distinct re-aggregating the frame, and
-- HyperLogLog's error against the exact count (a distribution, rsd 0.05).
SELECT count(*) AS requests,
       bool_and(approx_hosts = spark_hll) AS equals_approx_count_distinct,
       round(percentile(abs(approx_hosts - exact_hosts) / exact_hosts, 0.5), 4) AS median_error,
       round(percentile(abs(approx_hosts - exact_hosts) / exact_hosts, 0.99), 4) AS p99_error,
       round(max(abs(approx_hosts - exact_hosts) / exact_hosts), 4) AS worst_error,
       round(avg(CAST(abs(approx_hosts - exact_hosts) <= 0.1 * exact_hosts AS INT)), 4)
         AS within_2_rsd
FROM hosts;
