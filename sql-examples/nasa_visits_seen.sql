-- Visits in the NASA-HTTP log of 1 August 1995: a request starts a visit when its host made
-- no request in the 30 minutes before it. approx_window_seen answers that at every request
-- in one running frame, and is checked against the exact answer (each host's previous
-- request, by lag over a second sort per host). From the repository root:
--   windowsketch sql --hivevar nasa_log=python/windowsketch/data/nasa_http_1995-08-01.tsv.gz \
--     -f sql-examples/nasa_visits_seen.sql
SET spark.sql.session.timeZone=UTC;

CREATE TEMPORARY VIEW nasa_raw
USING csv OPTIONS (path '${nasa_log}', sep '\t', header 'true');

CREATE TEMPORARY VIEW requests AS
SELECT row_number() OVER (ORDER BY time, host, url) AS id,
       timestamp_seconds(CAST(time AS BIGINT)) AS ts, host, url
FROM nasa_raw;

-- Rows of one second are ordered by id, so both queries see the same "earlier".
CREATE TEMPORARY VIEW visits AS
SELECT id, ts, host,
       approx_window_seen(host, ts, INTERVAL 30 MINUTES) OVER (ORDER BY ts, id) AS seen,
       coalesce(lag(ts) OVER (PARTITION BY host ORDER BY ts, id)
                  >= ts - INTERVAL 30 MINUTES, false) AS seen_exactly
FROM requests;

-- Every request checked: no false negative (impossible by design) and no false positive.
SELECT count(*) AS requests, count_if(NOT seen) AS visits,
       count_if(seen AND NOT seen_exactly) AS false_positives,
       count_if(seen_exactly AND NOT seen) AS false_negatives
FROM visits;

-- Visits started per hour, the busiest five hours.
SELECT date_format(ts, 'HH:00') AS hour, count_if(NOT seen) AS visits, count(*) AS requests
FROM visits GROUP BY 1 ORDER BY visits DESC, hour LIMIT 5;

-- Hourly sketches of the hosts, merged: which of these hosts made a request in the log's
-- last hour (it ends at 18:52:01), and in its last 10 minutes?
SELECT h AS host,
       window_filter_contains(f, h) AS in_the_last_hour,
       window_filter_contains(f, h, TIMESTAMP '1995-08-01 18:52:01', INTERVAL 10 MINUTES) AS in_the_last_10_minutes
FROM (SELECT window_filter_sketch_merge(s) AS f
      FROM (SELECT window_filter_sketch(host, ts, INTERVAL 1 HOUR) AS s
            FROM requests GROUP BY hour(ts)))
LATERAL VIEW explode(array('derec', '128.173.14.37', '130.110.74.81')) AS h
ORDER BY host;
