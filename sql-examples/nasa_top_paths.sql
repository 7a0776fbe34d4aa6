-- The most requested paths and the most frequent 404 path of the last hour, at every
-- request of the NASA-HTTP log of 1 August 1995, checked against exact counts. In this
-- running frame the counts are exact while an hour holds fewer than 1,407 rows (eps 0.01:
-- the hour's 404s), else certified bounds in memory set by eps (the hour's requests); a
-- GROUP BY answers with certified bounds too (last query). From the repository root:
--   windowsketch sql --hivevar nasa_log=python/windowsketch/data/nasa_http_1995-08-01.tsv.gz \
--     -f sql-examples/nasa_top_paths.sql
SET spark.sql.session.timeZone=UTC;

CREATE TEMPORARY VIEW nasa_raw
USING csv OPTIONS (path '${nasa_log}', sep '\t', header 'true');

CREATE TEMPORARY VIEW requests AS
SELECT row_number() OVER (ORDER BY time, host, url) AS id,
       timestamp_seconds(CAST(time AS BIGINT)) AS ts, host, url,
       CASE WHEN response = '404' THEN url END AS url_404
FROM nasa_raw;

CREATE TEMPORARY VIEW tops AS
SELECT id, ts, host,
       approx_window_top_k(url, ts, INTERVAL 1 HOUR, 3) OVER (ORDER BY ts) AS top_paths,
       approx_window_top_k(url_404, ts, INTERVAL 1 HOUR, 1) OVER (ORDER BY ts) AS top_404,
       collect_list(url_404) OVER (ORDER BY ts RANGE BETWEEN INTERVAL 1 HOUR PRECEDING
                                   AND CURRENT ROW) AS urls_404
FROM requests;

-- The busiest paths of the last hour at the day's last request.
SELECT ts, top.item AS path, top.count AS requests
FROM (SELECT ts, top_paths FROM tops ORDER BY ts DESC, host LIMIT 1)
LATERAL VIEW explode(top_paths) AS top;

-- The exact 404 leader of each row's hour (most 404s, ties by the path, as the function
-- orders them by the path's UTF-8 bytes), and the exact count of every listed path.
CREATE TEMPORARY VIEW exact_404 AS
SELECT id, top_404,
       slice(array_sort(transform(array_distinct(urls_404), u -> named_struct(
               'n', size(filter(urls_404, v -> v = u)), 'url', u)),
             (a, b) -> CASE WHEN a.n <> b.n THEN b.n - a.n
                            WHEN a.url < b.url THEN -1 WHEN a.url > b.url THEN 1 ELSE 0 END),
             1, 1) AS leader
FROM tops;

-- Each listed path's exact count in its row's hour: the listed paths placed among the
-- requests of the same path, each counting the requests of [ts - 1 hour, ts] (a join on
-- the path and the hour would pair each listing with every request of its path).
CREATE TEMPORARY VIEW listed_counts AS
SELECT id, path, lower, upper, exact
FROM (SELECT id, path, lower, upper,
             count(request) OVER (PARTITION BY path ORDER BY ts
                                  RANGE BETWEEN INTERVAL 1 HOUR PRECEDING AND CURRENT ROW) AS exact
      FROM (SELECT id, ts, top.item AS path, top.lower, top.upper, NULL AS request
            FROM (SELECT id, ts, explode(top_paths) AS top FROM tops)
            UNION ALL
            SELECT NULL, ts, url, NULL, NULL, 1 FROM requests))
WHERE id IS NOT NULL;

-- On every row: the 404 leader equals the exact one, and every listed path's bounds
-- bracket its exact count.
SELECT (SELECT count(*) FROM tops) AS requests,
       (SELECT bool_and(transform(top_404, t -> named_struct('n', CAST(t.count AS INT), 'url', t.item))
                        = leader) FROM exact_404) AS top_404_exact_on_every_row,
       (SELECT count(*) FROM listed_counts) AS listed_paths,
       (SELECT bool_and(lower <= exact AND exact <= upper) FROM listed_counts) AS listed_counts_bracketed,
       (SELECT max(get(top_404, 0).count) FROM tops) AS most_404s_of_one_path_in_an_hour;

-- Each hour's top 404 paths from a GROUP BY over 4 partitions: counts with certified
-- bounds (at most eps = 0.05 of the hour's 404s apart), each bracketing the exact count
-- (an hour's few 404s fit the sketch whole, so here the bounds meet).
SELECT t.hour, t.top.item AS path, t.top.count, t.top.lower, t.top.upper,
       t.top.lower <= e.exact AND e.exact <= t.top.upper AS bracketed
FROM (SELECT hour, explode(approx_window_top_k(url_404, ts, INTERVAL 59 MINUTES 59 SECONDS, 2,
                                                0.05)) AS top
      FROM (SELECT /*+ REPARTITION(4) */ date_trunc('HOUR', ts) AS hour, ts, url_404
            FROM requests)
      GROUP BY hour) t
JOIN (SELECT date_trunc('HOUR', ts) AS hour, url_404 AS path, count(*) AS exact FROM requests
      WHERE url_404 IS NOT NULL GROUP BY 1, 2) e
  ON t.hour = e.hour AND t.top.item = e.path
ORDER BY t.hour, t.top.count DESC, path LIMIT 8;
