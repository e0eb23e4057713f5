-- SLO attainment per hour of arrival, per run, from any servesim results database (docs/fleet.md,
-- "Example: a day of diurnal load, fixed fleets against autoscaled ones"):
--
--   sqlite3 -header -column RESULTS.db < scripts/report/attainment_by_hour.sql
--
-- One row per run and hour (hour = floor(arrival / 3600 s); a request keeps the hour it arrived
-- in, however late it finishes): the requests that arrived, those meeting the SLO and their share.
-- In a sweep's database a run is a point: run_id = point + 1 (the points table has their labels).
--
-- Attainment here is the runs table's slo_attainment restricted to the hour: every request counts
-- (rejected, timed-out and failed ones miss), and requests.meets_slo is 1 only for a completed
-- request within every limit of [slo] (or of its class). Weighted by `requests`, the hours' figures
-- give back the run's slo_attainment exactly. For another bin, replace 3600000000000 (an hour in ns).
SELECT run_id AS run, arrival_ns / 3600000000000 AS hour, COUNT(*) AS requests, SUM(meets_slo) AS meeting_slo,
       ROUND(100.0 * SUM(meets_slo) / COUNT(*), 1) AS attainment_pct
FROM requests
GROUP BY run, hour
ORDER BY run, hour;
