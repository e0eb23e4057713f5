-- Replicas provisioned per hour, per run (the mean over the hour of the replicas paid for: starting,
-- up or draining; GPUs = replicas x tensor_parallel), from a results database with a fleet_events
-- table (one written by a run with [autoscaler] or [faults]; without one, no replica ever changed
-- and every replica built was provisioned throughout). docs/fleet.md, "Example: a day of diurnal
-- load, fixed fleets against autoscaled ones":
--
--   sqlite3 -header -column RESULTS.db < scripts/report/replicas_by_hour.sql
--
-- With an autoscaler, fleet_events' value is the count provisioned after each event
-- (replica_provision, replica_ready, replica_drain, replica_off); the count holds until the next
-- event (or the run's end), and each hour takes the part of every such span that falls in it. A run
-- without such events (a fixed pool, min_replicas = max_replicas) has every replica it built
-- (replica_stats) in every hour. The hours are those in which requests arrived; the part of the
-- run after the last of them (the last requests' tail) is in no hour.
WITH
  hours AS (SELECT DISTINCT run_id, arrival_ns / 3600000000000 AS hour FROM requests),
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
SELECT h.run_id AS run, h.hour AS hour,
       ROUND(COALESCE(sc.replicas,
                      b.replicas * (MIN(ends.end_ns, (h.hour + 1) * 3600000000000) - h.hour * 3600000000000)
                        / 3600000000000.0), 2) AS replicas
FROM hours h
  JOIN ends ON ends.run_id = h.run_id
  LEFT JOIN scaled sc ON sc.run_id = h.run_id AND sc.hour = h.hour
  LEFT JOIN built b ON b.run_id = h.run_id
ORDER BY h.run_id, h.hour;
