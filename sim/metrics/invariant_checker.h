#pragma once
// The invariant checker: an observer that checks, from the lifecycle signals alone, what must hold in
// every run, and throws core::Error naming the invariant, the simulated time, the replica and the
// request the moment one breaks. It sits in front of another observer (the metrics collector) and
// forwards each signal after checking it, so nothing downstream sees a signal that broke a rule.
// Always on in the tests; `servesim run --check` turns it on for users.
//
// What it checks (the lifecycle contract the cluster keeps):
//   clock       every signal's time (arrival, finish, preemption, iteration start, state) is >= the
//               previous signal's: simulated time never goes back. With replicas running ahead
//               (set_replicas_run_ahead), iteration and replica-state signals against their
//               replica's own previous ones instead, and a replica never signals past its own
//               failure, speed change or going off.
//   requests    ids arrive once each, in order 0, 1, 2, ...; a request finishes (completed or
//               rejected) exactly once and only after it arrived; arrived = completed + rejected + in
//               flight at every signal, and the replicas' queued + running never exceed the requests
//               in flight; at the end nothing is in flight and every replica is empty.
//   KV blocks   each replica's blocks in use stay in [0, capacity], and its capacity never changes.
//   iterations  a replica runs one iteration at a time (the next starts no earlier than the last
//               ended), each lasts > 0 ns, its prefill/decode counts are consistent (every sequence
//               prefills >= 1 token or decodes 1), FLOPs and bytes are finite and >= 0.
//   a request   rejected: first token = finish = arrival, never preempted; completed: arrival < first
//               token <= finish, finish is the end of its replica's last iteration, finish - first
//               token >= output tokens - 1 ns, its preemption count equals the preemption signals it
//               got, prompt and output tokens >= 1; timed out (its client gave up): arrival <= finish
//               (when the engine let go), the client gave up after it sent the request (arrival <
//               client finish), it produced 0 to output tokens, and arrival < first token <= finish
//               when it produced any (first token = finish when none).
//   tokens      every token after a request's first arrives after an inter-token gap (> 0 ns), alone
//               or with others in one chunk (speculative decoding): tokens the gaps deliver = sum over
//               completed requests of (output tokens - 1) + sum over timed-out ones of (tokens
//               produced - 1, when any); decode output <= those tokens <= decode output +
//               preemptions, and decode steps <= gaps <= decode steps + preemptions (a recompute
//               prefill emits a token too); a verifying decode has >= 1 draft, accepts at most its
//               drafts and emits at most what it accepts; prefilled tokens >= the completed requests'
//               prompt tokens.
//
//   prefix      a lookup matches at most the prompt's units and tokens, and its tier hits are part
//               of its hit; a request signals one first lookup at most (one asked again while it
//               waits is counted at its admission only), and its record's cached tokens are that
//               lookup's hit (0 without one); so the hits of all first lookups add up to the cached
//               tokens the requests' records report; a reload lookup (an admission again with its
//               tier hits decided again, sim/core/lifecycle.h) follows a preemption or a failover
//               (reloads <= preemptions + failovers); prefilled tokens >= prompt tokens - cached
//               tokens - the reloads' hits (a request's last admission prefills all but that
//               admission's hit).
//   transfers   a KV transfer moves a request in flight between two different known replicas,
//               ends no earlier than it starts, moves a finite, non-negative number of bytes; the
//               bytes of a request's transfers add up to what its record reports; neither replica
//               failed while it was in flight (a failure calls it off) nor is down at its end.
//   fleet       a failed replica holds nothing (no request queued or running, no KV block) at its
//               failure and in every state it reports until its repair.
//
// Checks that need data the signals do not carry are not made: per-unit prefix-cache reference
// counts (the cache's own accounting, checked inside sim/cluster/kv_cache), and the bytes of a
// transfer against the model's KV size (the signals carry no model). docs/architecture.md lists
// them.

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/core/lifecycle.h"

namespace servesim::metrics {

class InvariantChecker final : public core::LifecycleObserver {
 public:
  // Running totals of what the checker has seen (for reports and tests).
  struct Totals {
    uint64_t arrived = 0;
    uint64_t completed = 0;
    uint64_t rejected = 0;
    uint64_t timed_out = 0;
    int64_t timed_out_gaps = 0;  // inter-token gaps of the timed-out requests' tokens
    uint64_t preemptions = 0;
    uint64_t iterations = 0;
    uint64_t token_gaps = 0;
    int64_t gap_tokens = 0;      // tokens the gaps delivered (several per gap with speculative decoding)
    int64_t decode_tokens = 0;   // decode steps (one sequence, one iteration)
    int64_t decode_output = 0;   // tokens they emitted
    int64_t prefill_tokens = 0;
    int64_t completed_prompt_tokens = 0;
    int64_t completed_output_tokens = 0;
    uint64_t prefix_lookups = 0;
    int64_t prefix_hit_tokens = 0;       // summed over the lookups
    int64_t cached_tokens = 0;           // summed over the requests' records
    uint64_t reloads = 0;                // reload lookups
    int64_t reload_hit_tokens = 0;       // summed over them
    uint64_t kv_transfers = 0;
    double kv_transfer_bytes = 0;        // summed over the transfers
    uint64_t failed = 0;                 // lost with a failed replica ([faults] on_failure = fail)
    uint64_t reroutes = 0;               // requests moved off a failed replica
    uint64_t replica_failures = 0;
    int64_t lost_decodes = 0;            // decode tokens of iterations a failure interrupted
    int64_t lost_output = 0;             // the tokens those would have emitted
    uint64_t checks = 0;  // individual conditions evaluated
  };

  // `next` (may be null) receives every signal once it has passed the checks.
  explicit InvariantChecker(core::LifecycleObserver* next = nullptr) : next_(next) {}

  void on_arrival(uint64_t id, core::Time t) override;
  void on_request_done(const core::RequestRecord& r) override;
  void on_preempt(uint64_t id, uint32_t replica, core::Time t) override;
  void on_iteration(const core::IterationRecord& it) override;
  void on_token_gaps(std::span<const core::GapRun> runs) override;
  void on_replica_state(const core::ReplicaState& s) override;
  void on_prefix_lookup(const core::PrefixLookup& lookup) override;
  void on_kv_transfer(const core::KvTransfer& transfer) override;
  void on_fleet_event(const core::FleetEvent& event) override;

  // The end-of-run checks: call once the event loop has finished. Throws like the others.
  void check_drained();

  // Replicas may run ahead of the global clock (issue 18): their iteration and replica-state
  // signals then reach the observers out of global time order across replicas, each replica's own
  // in its own time order. On: those signals are checked against their replica's own clock (a
  // replica's iteration or state signal is never before its previous one) and leave the global
  // clock alone; a completed request's finish must be the end of *some* iteration of its decode
  // replica not yet behind the global clock (that replica's later iterations may have arrived); and
  // a replica's signals never pass its failure, speed change or going off (it must not have run
  // ahead across them). Request-level signals keep the global check. Off (the default): as above.
  void set_replicas_run_ahead(bool on) { run_ahead_ = on; }

  const Totals& totals() const { return totals_; }
  uint64_t in_flight() const { return in_flight_.size(); }

 private:
  struct Pending {
    core::Time arrival;
    uint32_t preemptions = 0;
    double kv_transfer_bytes = 0;
    bool looked_up = false;  // its first lookup has been signalled
    int64_t first_hit = 0;   // and hit this many tokens
  };
  struct ReplicaView {
    bool seen = false;  // has reported its state (the cluster reports every replica before the run)
    core::ReplicaState state;
    core::Time iteration_end;  // end of the last iteration started
    bool iterated = false;
    int64_t last_decodes = 0;  // decode tokens of that iteration
    int64_t last_output = 0;   // and the tokens they emitted (accepted drafts included)
    bool down = false;         // failed ([faults]) and not repaired yet
    core::Time failed_at;      // its last failure (when it has failed)
    bool failed = false;
    // Replicas running ahead only: the time of its last iteration or state signal, and the ends of
    // its iterations not yet behind the global clock, in order (a completion ends one of them).
    core::Time clock;
    std::deque<int64_t> ends;
    // [autoscaler]: in service (up or draining) unless off or starting.
    enum class Phase : uint8_t { kUp, kOff, kStarting, kDraining } phase = Phase::kUp;
  };

  [[noreturn]] void fail(const std::string& invariant, const std::string& what, core::Time t) const;
  // `what` builds the message only when the check fails: formatting text at every signal would cost
  // ten times the simulation itself.
  template <class What>
  void check(bool ok, const char* invariant, core::Time t, What&& what) {
    ++totals_.checks;
    if (!ok) fail(invariant, what(), t);
  }
  void advance_clock(core::Time t, const char* signal);
  // Run ahead: the replica's own clock instead of the global one.
  void advance_replica_clock(ReplicaView& rv, uint32_t index, core::Time t, const char* signal);
  ReplicaView& replica(uint32_t index, const char* signal, core::Time t);
  Pending& pending(uint64_t id, const char* signal, core::Time t);

  core::LifecycleObserver* next_;
  Totals totals_;
  core::Time now_;
  std::unordered_map<uint64_t, Pending> in_flight_;
  std::vector<ReplicaView> replicas_;
  int64_t replica_queued_running_ = 0;  // sum over replicas of the last reported queued + running
  bool run_ahead_ = false;              // set_replicas_run_ahead
};

}  // namespace servesim::metrics
