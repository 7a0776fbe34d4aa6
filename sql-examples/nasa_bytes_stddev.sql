-- The mean and standard deviation of the response bytes of the last 10 minutes, at every
-- request of the NASA-HTTP log of 1 August 1995, checked on every row against Spark's own
-- avg and stddev over the same RANGE frame (which re-aggregates the frame per row).
-- Responses without a size ('-') are NULL and skipped. From the repository root:
--   windowsketch sql --hivevar nasa_log=python/windowsketch/data/nasa_http_1995-08-01.tsv.gz \
--     -f sql-examples/nasa_bytes_stddev.sql
SET spark.sql.session.timeZone=UTC;

CREATE TEMPORARY VIEW nasa_raw
USING csv OPTIONS (path '${nasa_log}', sep '\t', header 'true');

CREATE TEMPORARY VIEW spread AS
SELECT ts, host, b,
       approx_window_avg(b, ts, INTERVAL 10 MINUTES) OVER running AS mean_b,
       approx_window_stddev_bounds(b, ts, INTERVAL 10 MINUTES) OVER running AS sd,
       avg(b) OVER last_10_minutes AS exact_mean,
       stddev(b) OVER last_10_minutes AS exact_sd,
       stddev_pop(b) OVER last_10_minutes AS exact_sd_pop
FROM (SELECT timestamp_seconds(CAST(time AS BIGINT)) AS ts, host,
             CAST(bytes AS BIGINT) AS b FROM nasa_raw)
WINDOW running AS (ORDER BY ts),
       last_10_minutes AS (ORDER BY ts RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING AND CURRENT ROW);

-- The five moments with the widest spread of response sizes in the last 10 minutes.
SELECT ts, round(mean_b) AS mean_bytes, round(sd.estimate) AS stddev_bytes
FROM spread ORDER BY sd.estimate DESC, ts, host LIMIT 5;

-- On every row: the standard deviation within eps / 2 = 0.005 of Spark's stddev over the
-- same rows and inside its certified bounds, the mean within eps = 0.01 standard deviations.
SELECT count(*) AS requests,
       bool_and(CASE WHEN exact_sd IS NULL THEN sd IS NULL
                     ELSE abs(sd.estimate - exact_sd) <= 0.005 * exact_sd + 1e-9 END)
         AS stddev_within_eps_on_every_row,
       bool_and(CASE WHEN exact_sd IS NULL THEN sd IS NULL
                     ELSE sd.lower <= exact_sd * (1 + 1e-12) AND exact_sd * (1 - 1e-12) <= sd.upper END)
         AS bounds_hold_on_every_row,
       bool_and(CASE WHEN exact_mean IS NULL THEN mean_b IS NULL
                     ELSE abs(mean_b - exact_mean) <= 0.01 * exact_sd_pop + 1e-6 END)
         AS mean_within_eps_on_every_row,
       count_if(sd.lower < sd.upper) AS rows_with_a_straddling_group
FROM spread;
