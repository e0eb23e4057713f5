#pragma once
// Requests in flight, stored in a table indexed by a strong id. A slot is recycled when its request
// leaves, so memory is O(requests in flight), not O(requests in the trace).

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/core/lifecycle.h"
#include "sim/core/recycled_storage.h"
#include "sim/core/time.h"

namespace servesim::sim {

// Index into the RequestTable; valid while the request is in flight.
struct RequestId {
  uint32_t slot = 0;
  friend bool operator==(RequestId, RequestId) = default;
};

enum class RequestState : uint8_t {
  kIngress,       // sent, on its way through the engine's frontend to a replica's queue
  kWaiting,       // in a replica's waiting queue
  kRunning,       // in a replica's running set, holding KV blocks
  kTransferring,  // prefilled on a prefill replica, its KV on the way to a decode replica
  kAwaitingPull,  // prefilled, its KV held by its prefill replica until its decode replica has the
                  // blocks to pull it (ClusterLayout::pd_pull = reserve_first)
  kParked,        // at the cluster: every replica is down ([faults]); routed when one comes back
  kDone,
};

struct Request {
  uint64_t id = 0;              // arrival order from 0; also the scheduling priority (FCFS)
  core::Time arrival;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;    // tokens to generate, >= 1
  int64_t generated = 0;        // output tokens emitted so far
  int64_t kv_tokens = 0;        // tokens whose K/V are computed (on the GPU, or on the host when swapped)
  int64_t kv_blocks = 0;        // private KV blocks held (prefix units are counted by the cache)
  bool decoding = false;        // its prefill has produced a token; each iteration now adds one
  bool swapped = false;         // preempted by swapping: its KV waits in host memory
  // (The two class fields sit in the padding after the flags above: sizeof(Request) is unchanged,
  // and with it the table's index arithmetic on the hot path.)
  uint16_t request_class = 0;   // index into the workload's classes (0 without classes)
  int32_t priority = 0;         // its class's priority (lower = more important; 0 without classes):
                                // what a priority scheduler orders by, with the id breaking ties
  // Prefix cache: units held, covering tokens [0, shared_tokens); the key of the last one.
  std::vector<uint32_t> units;
  int64_t shared_tokens = 0;
  uint64_t last_unit_key = 0;
  int64_t hashed_tokens = 0;    // tokens block_hashes cover (the last block may be partial)
  int64_t cached_tokens = 0;    // prompt tokens a prefix-cache hit spared (first admission)
  bool looked_up = false;       // the first admission's prefix lookup has been counted
  uint16_t tenant = 0;          // who pays for it: its class's tenant, numbered from 0 (a class without
                                // one is its own tenant; 0 without classes); fair scheduling shares by it
                                // (in padding: sizeof(Request) is unchanged)
  uint64_t kv_bytes_transferred = 0;  // prefill -> decode KV transfer
  core::Time first_token;
  core::Time last_token;
  uint32_t replica = 0;         // where it is now
  uint32_t routed_replica = 0;  // where the router sent it (the prefill replica when disaggregated)
  uint32_t preemptions = 0;
  // Speculative decoding: draft tokens proposed for this request's next decode, which verifies them
  // (schedulers reserve KV and budget for 1 + drafts tokens); the workload's repetitiveness of its
  // output (prompt-lookup drafting), < 0 when the workload says nothing.
  int64_t drafts = 0;
  double repetition = -1;
  uint32_t failovers = 0;       // times a replica failure sent it elsewhere to be recomputed
  uint32_t waits = 0;           // autoscaled: times the replica it was parked for did not come
  RequestState state = RequestState::kWaiting;
  // KV tiers (all three in the padding before `session`: sizeof(Request) is unchanged).
  bool tier_checked = false;    // its tier answer is held: a load for its current admission has started
                                // (until then it is asked again each time the scheduler considers it)
  bool tier_redecide = false;   // its KV was dropped after its first admission (a recompute preemption,
                                // a failover): its next admission's lookup is reported as a reload
  uint32_t host_hit_tokens = 0; // prompt tokens loaded from host for it
  uint64_t session = 0;
  uint32_t stage = 0;           // the workload's load stage
  bool timed_out = false;       // its client gave up: it leaves as soon as the engine can let go of it
  std::vector<uint64_t> block_hashes;  // prefix block ids from the workload, if any

  // Tokens a (re)prefill must process: the prompt plus everything generated before a preemption.
  int64_t prefill_target() const { return prompt_tokens + generated; }
  // The largest KV footprint over the request's life: the last decode step caches P + N - 1 tokens.
  int64_t peak_kv_tokens() const { return prompt_tokens + output_tokens - 1; }
  // Prompt (or recompute) tokens not yet computed: what a router can see waiting.
  int64_t pending_prefill_tokens() const { return decoding ? 0 : prefill_target() - kv_tokens; }
  // Work still to do, in tokens: pending prefill + outputs not emitted. Needs the output length,
  // which no real router or scheduler knows: for oracle policies only.
  int64_t outstanding_tokens() const { return pending_prefill_tokens() + (output_tokens - generated); }
  // Its record when it leaves at `now` because its client gave up (outcome timed_out): the tokens
  // it had streamed stay counted, and a request that never had its first token has it at `now`.
  core::RequestRecord timed_out_record(core::Time now, uint32_t replica, uint32_t decode_replica) const {
    core::RequestRecord rec;
    rec.id = id;
    rec.replica = replica;
    rec.decode_replica = decode_replica;
    rec.outcome = core::RequestOutcome::kTimedOut;
    rec.prompt_tokens = prompt_tokens;
    rec.output_tokens = output_tokens;
    rec.generated_tokens = generated;
    rec.arrival = arrival;
    rec.finish = now;
    rec.first_token = generated > 0 ? first_token : now;
    rec.preemptions = preemptions;
    rec.cached_tokens = cached_tokens;
    rec.kv_transfer_bytes = static_cast<double>(kv_bytes_transferred);
    rec.stage = stage;
    rec.request_class = request_class;
    return rec;
  }
};

// The table's two vectors take their storage from the thread's pool and give it back when the
// table dies (sim/core/recycled_storage.h): a sweep worker's next point reuses the pages this one
// grew, never their contents (both start empty).
class RequestTable {
 public:
  RequestTable() : slots_(core::RecycledStorage<Request>::take()), free_(core::RecycledStorage<uint32_t>::take()) {}
  ~RequestTable() {
    core::RecycledStorage<Request>::give_back(std::move(slots_));
    core::RecycledStorage<uint32_t>::give_back(std::move(free_));
  }
  RequestTable(const RequestTable&) = delete;
  RequestTable& operator=(const RequestTable&) = delete;

  RequestId insert(Request r) {
    ++live_;
    if (!free_.empty()) {
      RequestId id{free_.back()};
      free_.pop_back();
      slots_[id.slot] = std::move(r);
      return id;
    }
    slots_.push_back(std::move(r));
    return RequestId{static_cast<uint32_t>(slots_.size() - 1)};
  }
  void erase(RequestId id) {
    slots_[id.slot].state = RequestState::kDone;
    slots_[id.slot].block_hashes = {};
    free_.push_back(id.slot);
    --live_;
  }
  // Whether slot `id` holds request number `request` (still in flight).
  bool holds(RequestId id, uint64_t request) const {
    return id.slot < slots_.size() && slots_[id.slot].state != RequestState::kDone && slots_[id.slot].id == request;
  }
  Request& operator[](RequestId id) { return slots_[id.slot]; }
  const Request& operator[](RequestId id) const { return slots_[id.slot]; }
  size_t live() const { return live_; }
  size_t capacity() const { return slots_.size(); }

 private:
  std::vector<Request> slots_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace servesim::sim
