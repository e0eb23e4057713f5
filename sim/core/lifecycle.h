#pragma once
// Lifecycle signals: what the cluster tells observers (metrics collectors, result sinks, checkers).
// Observers watch and never steer; the records are plain values so observers need nothing from
// the cluster's headers.

#include <cstdint>
#include <span>
#include <string_view>

#include "sim/core/time.h"

namespace servesim::core {

enum class RequestOutcome : uint8_t {
  kCompleted,
  kRejectedContext,     // prompt + output longer than the model's context
  kRejectedKvCapacity,  // the request could never fit in the replica's KV cache
  kTimedOut,            // its client gave up (the workload's client time-out) before the last token
  kFailed,              // its replica failed and [faults] on_failure = "fail" (no recompute elsewhere)
  kRejectedAdmission,   // shed at the router by admission control ([admission]): the load was over its limit
};
std::string_view outcome_name(RequestOutcome outcome);  // "completed", "rejected_context", ..., "timed_out"

// A request that has left the system: completed, rejected, or timed out.
struct RequestRecord {
  uint64_t id = 0;            // arrival order, from 0
  uint32_t replica = 0;       // the replica it was routed to
  RequestOutcome outcome = RequestOutcome::kCompleted;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // requested (and, when completed, produced)
  Time arrival;               // the client sends it (the workload's arrival time)
  Time first_token;           // the iteration that produced the first token ends (== arrival when rejected;
                              // == finish when timed out before any token)
  Time finish;                // completed: the iteration that produced the last token ends; rejected: ==
                              // arrival; timed out: the engine let go of it (aborted, KV freed)
  // When the client has them: the engine's streaming path added (== first_token and finish without
  // an engine frontend). TTFT, TPOT and E2E are measured here, where a client measures them. Timed
  // out: client_finish is when the client gave up (arrival + the time-out), client_first_token the
  // first token's arrival at the client if that came before, else client_finish.
  Time client_first_token;
  Time client_finish;
  int64_t generated_tokens = 0;  // output tokens the engine produced (== output_tokens when completed)
  uint32_t stage = 0;            // the workload's load stage that sent it (0 without stages)
  uint16_t request_class = 0;    // index into the workload's request classes (0 without classes)
  uint32_t preemptions = 0;
  int64_t cached_tokens = 0;  // prompt tokens a prefix-cache hit spared
  double kv_transfer_bytes = 0;  // moved from a prefill to a decode replica
  uint32_t decode_replica = 0;   // where it decoded (== replica unless disaggregated)
  // Client retries ([retries]): each attempt is a request of its own. `attempt` counts from 0 (the
  // client's first send), `first_sent` is that first send (before the arrival of a retry; a first
  // attempt's is its arrival, which the cluster fills in and readers take from `arrival`), and
  // `retried` says the client sent another attempt after this one failed (so this one is not its
  // client's last word).
  uint32_t attempt = 0;
  bool retried = false;
  Time first_sent;
};

// One iteration (forward pass) of one replica.
struct IterationRecord {
  uint32_t replica = 0;
  Time start;
  Duration duration;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  int64_t batch_size = 0;        // sequences in the iteration
  double flops = 0;              // whole TP group
  double bytes = 0;              // whole TP group
  double peak_flop_seconds = 0;  // GPU-seconds those FLOPs take at the peak of their precision
  // Speculative decoding: of the decode_tokens decoding sequences, those that verified draft
  // tokens, the drafts they verified, how many the target accepted, and the tokens the decodes
  // emitted beyond one each (the accepted drafts that fit the requests' outputs).
  int64_t verify_seqs = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  int64_t extra_decode_tokens = 0;
};

// The prefix-cache lookup of a request's first admission to a replica; or, with a KV tier
// (`reload`), of its admission again after its KV was dropped (a recompute preemption, a failover),
// when its HBM and tier hits are decided again (docs/kv-tiers.md, "Preemption").
struct PrefixLookup {
  uint64_t id = 0;             // the request's number (its arrival order)
  uint32_t replica = 0;
  int64_t prompt_units = 0;    // prefix units (hash blocks) covering the prompt
  int64_t matched_units = 0;   // of those, the longest cached chain
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;      // prompt tokens whose prefill the hit skipped
  double saved_flops = 0;      // prefill FLOPs (whole TP group) the hit skipped
  int64_t host_hit_tokens = 0; // of hit_tokens, those loaded from a host KV tier (0 without one)
  int64_t store_hit_tokens = 0; // of hit_tokens, those loaded from the shared KV store (0 without one)
  int64_t nvme_hit_tokens = 0;  // of hit_tokens, those loaded from a local NVMe KV tier (0 without one)
  bool reload = false;          // a re-admission's lookup: not a first lookup (its hits are not the
                                // run's hit rates; the cached tokens of the record are the first's);
                                // its prompt_tokens are the prefill target (prompt + generated), whose
                                // cached units (generated ones too) it may hit
};

// A request's KV cache moved from a prefill replica to a decode replica.
struct KvTransfer {
  uint64_t id = 0;
  uint32_t from_replica = 0;
  uint32_t to_replica = 0;
  double bytes = 0;
  Time ready;  // the prefill was done and the KV ready to move; < start when the pull waited for decode blocks
  Time start;
  Time end;
};

// Fleet dynamics ([faults]): a replica went down or came back, started running slow, or a request
// lost its KV with a failed replica and was routed again, or a network link failed or came back;
// [autoscaler]: a replica was provisioned, became ready, started draining or went off.
enum class FleetEventKind : uint8_t {
  kReplicaDown,      // value: requests it held (queued + running)
  kReplicaUp,        // repaired: it takes traffic again
  kReplicaSpeed,     // value: the fraction of its speed it runs at from now on (1 = healthy)
  kRequestRerouted,  // request `request` left failed replica `replica` to be recomputed elsewhere
  kRequestRetried,   // request `request` is a client's retry (value: its attempt, 1 = the first retry) of
                     // an attempt that failed on replica `replica` ([retries])
  // Autoscaling ([autoscaler]; value: the replicas provisioned after the event, starting + up +
  // draining, i.e. those that cost GPU time):
  kReplicaProvision,  // off -> starting: it costs from now on, takes traffic only once ready
  kReplicaReady,      // starting -> up after its cold start (or draining -> up: the drain is called off)
  kReplicaDrain,      // up -> draining: routers stop sending to it; what it holds finishes there
  kReplicaOff,        // draining (now empty) or starting -> off: it stops costing
  // Link failures ([faults] kind = "link"; value: the link's number in the Topology, replica 0):
  kLinkDown,  // a network link failed: flows over it are re-routed or wait for its repair
  kLinkUp,    // it is back
  kLinkSpeed,  // a link runs at `value` of its bandwidth from now on (1 = healed); request: the link's number
};
std::string_view fleet_event_name(FleetEventKind kind);  // "replica_down", ...
struct FleetEvent {
  FleetEventKind kind = FleetEventKind::kReplicaDown;
  uint32_t replica = 0;
  Time time;
  uint64_t request = 0;  // kRequestRerouted only
  double value = 0;
};

// A replica's state after something changed it.
struct ReplicaState {
  uint32_t replica = 0;
  Time time;
  int64_t queued = 0;            // waiting requests
  int64_t running = 0;           // requests holding KV blocks
  int64_t kv_blocks_used = 0;    // blocks running requests need (private + referenced prefix units)
  int64_t kv_blocks_total = 0;
  int64_t pulls_waiting = 0;     // disaggregated decode replica: pulls waiting for its blocks (pd_pull)
};

// `count` consecutive inter-token gaps of `gap_ns` each, each delivering `tokens` tokens at once: a
// client receives a speculative decode's accepted tokens in one streamed chunk, so it sees one gap
// shared by them (as `vllm bench serve` records ITL, one entry per chunk).
struct GapRun {
  int64_t gap_ns = 0;
  int64_t count = 0;
  int64_t tokens = 1;
};

// One iteration of a run of decode-only iterations on one replica (Replica::decode_window): what
// differs from the run's other iterations. See LifecycleObserver::on_decode_steps.
struct DecodeStep {
  Time start;
  Duration duration;
  double flops = 0, bytes = 0, peak_flop_seconds = 0;  // as IterationRecord's
  int64_t kv_blocks_used = -1;  // >= 0: the replica's state changed in that alone, at `start`
  bool emits = true;            // its end emitted a token per sequence, one gap of `duration` each
};

class LifecycleObserver {
 public:
  virtual ~LifecycleObserver() = default;
  virtual void on_arrival(uint64_t /*id*/, Time /*t*/) {}
  virtual void on_request_done(const RequestRecord& /*record*/) {}
  virtual void on_preempt(uint64_t /*id*/, uint32_t /*replica*/, Time /*t*/) {}
  virtual void on_iteration(const IterationRecord& /*it*/) {}
  // Inter-token gaps of the tokens one iteration emitted after each request's first token, as runs
  // of equal gaps (most sequences of an iteration also decoded in the one before); a gap may deliver
  // several tokens (speculative decoding).
  virtual void on_token_gaps(std::span<const GapRun> /*runs*/) {}
  virtual void on_replica_state(const ReplicaState& /*state*/) {}
  // Consecutive iterations of one replica's decode-only batch, told at once: for each step in
  // order, on_iteration(`base` with the step's start, duration and costs), then, where
  // kv_blocks_used >= 0, on_replica_state(`state` with the step's start and blocks), then, where it
  // emits, on_token_gaps({{duration, base.decode_tokens, 1}}). This default makes exactly those
  // calls; an observer may do the same work faster (MetricsCollector), never differently.
  virtual void on_decode_steps(const IterationRecord& base, const ReplicaState& state, std::span<const DecodeStep> steps);
  virtual void on_prefix_lookup(const PrefixLookup& /*lookup*/) {}
  virtual void on_kv_transfer(const KvTransfer& /*transfer*/) {}
  virtual void on_fleet_event(const FleetEvent& /*event*/) {}
};

}  // namespace servesim::core
