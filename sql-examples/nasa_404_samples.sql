-- Five of the 404 requests of the last 10 minutes, at every request of the NASA-HTTP log of
-- 1 August 1995, drawn uniformly at random from the window's 404s and checked against
-- exact counts; then per host, in a running frame and with GROUP BY. From the repository
-- root:
--   windowsketch sql --hivevar nasa_log=python/windowsketch/data/nasa_http_1995-08-01.tsv.gz \
--     -f sql-examples/nasa_404_samples.sql
SET spark.sql.session.timeZone=UTC;

CREATE TEMPORARY VIEW nasa_raw
USING csv OPTIONS (path '${nasa_log}', sep '\t', header 'true');

CREATE TEMPORARY VIEW requests AS
SELECT row_number() OVER (ORDER BY time, host, url) AS id,
       timestamp_seconds(CAST(time AS BIGINT)) AS ts, host, url,
       CAST(response AS INT) AS status
FROM nasa_raw;

-- A 404 is the whole request as a struct; other requests are NULL, which the sample skips.
CREATE TEMPORARY VIEW sampled AS
SELECT id, ts,
       approx_window_sample(CASE WHEN status = 404 THEN named_struct('id', id, 'ts', ts,
                              'host', host, 'url', url) END,
                            ts, INTERVAL 10 MINUTES, 5) OVER (ORDER BY ts) AS some_404s,
       count_if(status = 404)
         OVER (ORDER BY ts RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING AND CURRENT ROW) AS exact_404s
FROM requests;

-- Five of the 404s of the 10 minutes with the most of them.
SELECT r.ts, r.host, r.url
FROM (SELECT some_404s FROM sampled ORDER BY exact_404s DESC, ts, id LIMIT 1)
LATERAL VIEW explode(some_404s) AS r;

-- What can be checked on every row: each sampled request is a 404 of the row's window,
-- none twice, and there are min(5, the window's 404s) of them.
SELECT count(*) AS requests,
       bool_and(size(some_404s) = least(5, exact_404s)) AS sizes_held,
       bool_and(size(array_distinct(transform(some_404s, r -> r.id))) = size(some_404s)) AS distinct_rows,
       bool_and(forall(some_404s, r -> r.ts >= ts - INTERVAL 10 MINUTES AND r.ts <= ts)) AS inside_windows
FROM sampled;

-- Per host: five of its own 404s of the last 10 minutes, at its moment with the most of
-- them, for the three hosts with the most.
SELECT host, ts, exact_404s, transform(some_404s, r -> concat(date_format(r.ts, 'HH:mm:ss'), ' ', r.url)) AS some_404s
FROM (SELECT host, ts, id, exact_404s, some_404s,
             row_number() OVER (PARTITION BY host ORDER BY exact_404s DESC, ts, id) AS busiest
      FROM (SELECT id, ts, host,
                   approx_window_sample(CASE WHEN status = 404 THEN named_struct('ts', ts, 'url', url) END,
                                        ts, INTERVAL 10 MINUTES, 5)
                     OVER (PARTITION BY host ORDER BY ts) AS some_404s,
                   count_if(status = 404) OVER (PARTITION BY host ORDER BY ts
                     RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING AND CURRENT ROW) AS exact_404s
            FROM requests))
WHERE busiest = 1 ORDER BY exact_404s DESC, host LIMIT 3;

-- Per host, three of its 404s of the day (GROUP BY draws what a running frame's last row
-- would), for the hosts with the most 404s.
SELECT host, count_if(status = 404) AS not_found,
       transform(approx_window_sample(CASE WHEN status = 404 THEN named_struct('ts', ts, 'url', url) END,
                                      ts, INTERVAL 1 DAY, 3),
                 r -> concat(date_format(r.ts, 'HH:mm:ss'), ' ', r.url)) AS some_404s
FROM requests GROUP BY host ORDER BY not_found DESC, host LIMIT 3;
