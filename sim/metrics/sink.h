#pragma once
// Where results go. A sink receives one run's rows and makes them visible all at once in end_run;
// a sink destroyed before end_run leaves nothing of the run behind.
//
// Committing is two-phase, so that outputs of one run agree: stage() writes everything that can
// fail (a full disk) without making it visible, end_run() makes it visible. A run stages every
// output before it ends any, so a failure anywhere leaves every output as it was; and the database
// commits first, so a run is in the database once it is anywhere.

#include <cstdint>

#include "sim/core/lifecycle.h"
#include "sim/metrics/summary.h"

namespace servesim::metrics {

struct ReplicaSample {
  uint32_t replica = 0;
  int64_t time_ns = 0;
  int64_t queued = 0;
  int64_t running = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_total = 0;
};

class ResultSink {
 public:
  virtual ~ResultSink() = default;
  // Starts the run. A sink that numbers runs sets info.run_id when it is 0, and otherwise uses the
  // number already chosen (sinks are begun in order, so the database numbers the CSV rows too).
  virtual void begin_run(RunInfo& info) = 0;
  virtual void add_request(const core::RequestRecord& record, const RequestMetrics& metrics) = 0;
  virtual void add_sample(const ReplicaSample& sample) = 0;
  // A fleet-dynamics event ([faults]), as it happens.
  virtual void add_fleet_event(const core::FleetEvent& /*event*/) {}
  // Per-replica results, once per replica just before end_run.
  virtual void add_replica_stats(const ReplicaStats& /*stats*/) {}
  // Writes the run where it is not yet visible; throws when that fails. end_run() stages first
  // when stage() was not called.
  virtual void stage(const RunSummary& /*summary*/) {}
  virtual void end_run(const RunSummary& summary) = 0;
};

}  // namespace servesim::metrics
