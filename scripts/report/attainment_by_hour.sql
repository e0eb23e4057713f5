-- SLO attainment per hour of arrival, per run, from a servesim results database (docs/fleet.md,
-- "Example: a day of diurnal load"):
--
--   sqlite3 -header -column RESULTS.db < scripts/report/attainment_by_hour.sql
--
-- One row per run and hour (hour = floor(arrival / 3600 s); a run's requests keep the hour they
-- arrived in, however late they finish): the point's label (sweeps), the requests that arrived, those
-- meeting the SLO and their share, and the mean number of replicas provisioned over the hour (GPU
-- time paid for: starting, up or draining; a replica's GPUs are `tensor_parallel` of them).
--
-- Attainment here is the runs table's slo_attainment restricted to the hour: every request counts
-- (rejected, timed-out and failed ones miss), and requests.meets_slo is 1 only for a completed
-- request within every limit of [slo] (or of its class). Weighted by `requests`, the hours' figures
-- give back the run's slo_attainment exactly.
--
-- Replicas: with an autoscaler, fleet_events' value is the count provisioned after each event
-- (replica_provision, replica_ready, replica_drain, replica_off); the count holds until the next
-- event (or the run's end), and each hour takes the part of every such span that falls in it. A
-- run without fleet events (a fixed pool) has every replica it built (replica_stats) provisioned
-- throughout. An hour past the run's end (the last hour's tail) counts only the part before it.
WITH RECURSIVE
  hours(run_id, hour) AS (
    SELECT run_id, arrival_ns / 3600000000000 FROM requests GROUP BY run_id, arrival_ns / 3600000000000),
  counts AS (
    SELECT run_id, arrival_ns / 3600000000000 AS hour, COUNT(*) AS requests, SUM(meets_slo) AS meeting
    FROM requests GROUP BY run_id, hour),
  ends AS (SELECT run_id, CAST(ROUND(sim_seconds * 1e9) AS INTEGER) AS end_ns FROM runs),
  spans AS (
    SELECT e.run_id, e.time_ns AS t0,
           LEAD(e.time_ns, 1, ends.end_ns) OVER (PARTITION BY e.run_id ORDER BY e.time_ns, e.rowid) AS t1,
           e.value AS replicas
    FROM fleet_events e JOIN ends USING (run_id)
    WHERE e.kind IN ('replica_provision', 'replica_ready', 'replica_drain', 'replica_off')),
  scaled AS (
    SELECT h.run_id, h.hour,
           SUM(MAX(0, MIN(s.t1, (h.hour + 1) * 3600000000000) - MAX(s.t0, h.hour * 3600000000000)) * s.replicas)
             / 3600000000000.0 AS replicas
    FROM hours h JOIN spans s ON s.run_id = h.run_id
    GROUP BY h.run_id, h.hour),
  built AS (SELECT run_id, COUNT(*) AS replicas FROM replica_stats GROUP BY run_id)
SELECT c.run_id AS run, p.label AS point, c.hour AS hour, c.requests AS requests, c.meeting AS meeting_slo,
       ROUND(100.0 * c.meeting / c.requests, 1) AS attainment_pct,
       ROUND(COALESCE(sc.replicas,
                      b.replicas * (MIN(ends.end_ns, (c.hour + 1) * 3600000000000) - c.hour * 3600000000000)
                        / 3600000000000.0), 2) AS replicas
FROM counts c
  JOIN ends ON ends.run_id = c.run_id
  LEFT JOIN scaled sc ON sc.run_id = c.run_id AND sc.hour = c.hour
  LEFT JOIN built b ON b.run_id = c.run_id
  LEFT JOIN points p ON p.run_id = c.run_id
ORDER BY c.run_id, c.hour;
