-- Moving sums and averages over the UCI Online Retail log (2010-12 to 2011-12): revenue in
-- the last 7 days per country and the average value of an invoice line, approximate and
-- exact side by side. From the repository root, with the project's shared data beside it:
--   windowsketch sql --hivevar retail_log=../shared/data/online_retail_2010-2011.csv.gz \
--     -f sql-examples/retail_moving_sums.sql
SET spark.sql.session.timeZone=UTC;

CREATE TEMPORARY VIEW retail_raw
USING csv OPTIONS (path '${retail_log}', header 'true');

-- Sums need integers: revenue in pence. Cancellations (invoices starting with C) and
-- returns (negative quantities) are left out.
CREATE TEMPORARY VIEW sales AS
SELECT Country AS country, to_timestamp(InvoiceDate) AS ts,
       CAST(round(CAST(Quantity AS INT) * CAST(UnitPrice AS DOUBLE) * 100) AS BIGINT) AS pence
FROM retail_raw
WHERE InvoiceNo NOT LIKE 'C%' AND CAST(Quantity AS INT) > 0 AND CAST(UnitPrice AS DOUBLE) > 0;

CREATE TEMPORARY VIEW moving AS
SELECT country, ts,
       approx_window_sum(pence, ts, INTERVAL 7 DAYS, 0.01)
         OVER (PARTITION BY country ORDER BY ts) AS approx_pence,
       sum(pence) OVER (PARTITION BY country ORDER BY ts
                        RANGE BETWEEN INTERVAL 7 DAYS PRECEDING AND CURRENT ROW) AS exact_pence,
       approx_window_count(true, ts, INTERVAL 7 DAYS, 0.01)
         OVER (PARTITION BY country ORDER BY ts) AS approx_lines,
       count(*) OVER (PARTITION BY country ORDER BY ts
                      RANGE BETWEEN INTERVAL 7 DAYS PRECEDING AND CURRENT ROW) AS exact_lines
FROM sales;

-- The last 7 days of the log in three countries: revenue and average line value.
SELECT country, ts,
       round(approx_pence / 100, 2) AS revenue_7d, round(exact_pence / 100, 2) AS exact_revenue_7d,
       round(approx_pence / approx_lines / 100, 2) AS avg_line_7d,
       round(exact_pence / exact_lines / 100, 2) AS exact_avg_line_7d
FROM (SELECT *, row_number() OVER (PARTITION BY country ORDER BY ts DESC) AS newest FROM moving)
WHERE newest = 1 AND country IN ('France', 'Germany', 'United Kingdom')
ORDER BY country;

-- The guarantee on every row: |approx - exact| <= 0.01 * exact, for sums and counts.
SELECT count(*) AS lines,
       max(abs(approx_pence - exact_pence) - 0.01 * exact_pence) <= 0 AS sum_bound_held,
       max(abs(approx_lines - exact_lines) - 0.01 * exact_lines) <= 0 AS count_bound_held,
       round(max(abs(approx_pence - exact_pence) / exact_pence), 4) AS worst_sum_error
FROM moving;
