#pragma once
// servesim run --timeline: a Chrome / Perfetto trace-event file (JSON) of a run. Each replica is a
// process; its tracks are the iterations (one complete event per forward pass, with its prefill
// and decode tokens and batch size), the requests (one async span per request from arrival to
// finish, split into "queued+prefill" up to the first token and "decode" after it; a disaggregated
// request's prefill span is on its prefill replica and its decode span on its decode replica),
// preemptions, KV transfers and fleet events (failures, repairs, autoscaling). Open it at https://ui.perfetto.dev or chrome://tracing.
//
// Bounded: the recorder keeps at most `max_events` trace events (a completed request is 6, or 4
// when disaggregated, a rejected one 1, an iteration 1) in the order the simulation emits them and
// counts the rest; the
// file says in "otherData" how many were dropped. Memory is 64 bytes per kept record.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/core/lifecycle.h"
#include "sim/metrics/summary.h"

namespace servesim::metrics {

// How every timeline file starts: an existing file at --timeline is replaced only when it does.
inline constexpr const char* kTimelinePrefix = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"servesim";
// "a servesim timeline (--timeline)" for messages.
inline constexpr const char* kTimelineWhat = "a servesim timeline (--timeline)";

class TimelineRecorder final : public core::LifecycleObserver {
 public:
  static constexpr uint64_t kDefaultMaxEvents = 200'000;

  explicit TimelineRecorder(uint64_t max_events = kDefaultMaxEvents) : max_events_(max_events) {}

  void on_request_done(const core::RequestRecord& r) override;
  void on_preempt(uint64_t id, uint32_t replica, core::Time t) override;
  void on_iteration(const core::IterationRecord& it) override;
  void on_kv_transfer(const core::KvTransfer& transfer) override;
  // Fleet events ([faults], [autoscaler]): an instant event on the replica's fleet track.
  void on_fleet_event(const core::FleetEvent& event) override;

  uint64_t events_kept() const { return kept_; }
  uint64_t events_dropped() const { return dropped_; }

  // Writes the trace-event JSON to `out`.
  void write(std::ostream& out, const RunInfo& info) const;
  // Writes it to `path` whole or not at all (core::AtomicFile); throws core::Error naming the path
  // when it cannot, and refuses to replace a file that is not a servesim timeline.
  void write(const std::string& path, const RunInfo& info) const;

 private:
  enum class Kind : uint8_t { kIteration, kRequest, kRejected, kPreempt, kKvTransfer, kFleet };
  struct Record {
    Kind kind;
    uint8_t outcome = 0;
    uint32_t replica = 0;      // kKvTransfer: destination
    uint32_t other = 0;        // kRequest: decode replica; kKvTransfer: source; kIteration: batch
    uint32_t preemptions = 0;
    int64_t t0_ns = 0;         // start / arrival
    int64_t t1_ns = 0;         // end / first token
    int64_t t2_ns = 0;         // finish
    uint64_t id = 0;           // request id
    int64_t a = 0, b = 0;      // iteration: prefill, decode tokens; request: prompt, output tokens
  };
  bool take(uint64_t events);

  uint64_t max_events_;
  uint64_t kept_ = 0, dropped_ = 0;
  uint32_t replicas_seen_ = 0;
  std::vector<Record> records_;
};

}  // namespace servesim::metrics
