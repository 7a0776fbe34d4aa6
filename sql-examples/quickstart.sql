-- windowsketch quickstart: run with `windowsketch sql -f sql-examples/quickstart.sql`.
SET spark.sql.session.timeZone=UTC;

CREATE TEMPORARY VIEW logs AS SELECT * FROM VALUES
  ('web1', TIMESTAMP'2025-06-01 10:00:00', 404),
  ('web1', TIMESTAMP'2025-06-01 10:03:00', 200),
  ('web1', TIMESTAMP'2025-06-01 10:04:00', 404),
  ('web2', TIMESTAMP'2025-06-01 10:05:00', 404),
  ('web1', TIMESTAMP'2025-06-01 10:10:00', 404),
  ('web1', TIMESTAMP'2025-06-01 10:14:30', 500),
  ('web2', TIMESTAMP'2025-06-01 10:20:00', 200)
  AS t(host, ts, status);

-- 404s per host in the 10 minutes up to each request, [ts - 10 minutes, ts].
SELECT host, ts, status,
       approx_window_count(status = 404, ts, INTERVAL 10 MINUTES, 0.01)
         OVER (PARTITION BY host ORDER BY ts) AS recent_404s
FROM logs
ORDER BY host, ts;

-- Count-based window: 404s among each host's last 3 requests. Number the rows first and
-- use the number as ts: the window is the last 3 positions.
SELECT host, ts, status,
       approx_window_count(status = 404, n, 3)
         OVER (PARTITION BY host ORDER BY n) AS in_last_3
FROM (SELECT *, row_number() OVER (PARTITION BY host ORDER BY ts) AS n FROM logs)
ORDER BY host, ts;
