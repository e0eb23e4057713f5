#pragma once
// A replica: one copy of the model on a tensor-parallel group of GPUs, with its waiting queue,
// running set and paged KV cache (with an optional prefix cache). The replica owns the mechanism
// (blocks, prefix units, token bookkeeping, swapping, iteration timing); a BatchScheduler (a policy,
// policies/scheduler/) decides what each iteration contains. Per-token work is counter updates
// inside one event per iteration.
//
// Roles: a unified replica prefills and decodes; in prefill/decode disaggregation a prefill replica
// hands each request to its ReplicaListener (the cluster) once its prefill has produced the first
// token, keeping the KV blocks until the transfer to a decode replica ends; a decode replica
// receives requests whose KV is already computed and only decodes them (it recomputes locally a
// request it had to preempt).

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hwmodels/cost_model.h"
#include "hwmodels/engine/engine_model.h"
#include "sim/cluster/kv_cache.h"
#include "sim/cluster/kv_store.h"
#include "sim/cluster/kv_nvme.h"
#include "sim/cluster/kv_tier.h"
#include "sim/cluster/network.h"
#include "sim/cluster/request.h"
#include "sim/cluster/speculator.h"
#include "sim/core/lifecycle.h"
#include "sim/core/rng.h"
#include "sim/engine/simulation.h"

namespace servesim::sim {

class Replica;

// One prefill chunk of an iteration: `tokens` new tokens of request `id`, whose first
// `request.kv_tokens` tokens are already computed (cached).
struct PlannedPrefill {
  RequestId id;
  int64_t tokens = 0;
};

// What one iteration processes. Buffers are reused from iteration to iteration. Decodes go in
// through add_decode, which keeps the attention context the cost model needs as a running sum.
struct IterationPlan {
  std::vector<PlannedPrefill> prefills;
  std::vector<RequestId> decodes;
  // The decodes that verify draft tokens (speculative decoding): their index in `decodes` and drafts.
  struct Verify {
    uint32_t decode = 0;
    int64_t drafts = 0;
  };
  std::vector<Verify> verifies;
  int64_t decode_context_tokens = 0;  // sum over decodes of the tokens their attention reads
  int64_t decode_extra_tokens = 0;    // sum of the verifies' drafts
  int64_t decode_extra_pairs = 0;     // the query-key pairs the drafts add (BatchShape::decode_extra_pairs)
  // The model's caps on the keys a query reads (sliding window, sparse top-k; set by the replica,
  // kept across clear()) and the decodes' capped contexts summed under them (BatchShape's).
  hwmodels::AttentionLimits limits;
  int64_t decode_window_context_tokens = 0;
  int64_t decode_sparse_context_tokens = 0;
  int64_t decode_extra_window_pairs = 0;  // the drafts' pairs under the window cap
  int64_t decode_extra_sparse_pairs = 0;  // and under the top-k cap
  // Request `id` decodes one token, attending over `context_tokens` (its kv_tokens + 1), and
  // verifies `drafts` draft tokens after it (speculative decoding; at most request.drafts).
  void add_decode(RequestId id, int64_t context_tokens, int64_t drafts = 0) {
    decodes.push_back(id);
    decode_context_tokens += context_tokens;
    if (limits.window > 0) decode_window_context_tokens += std::min(context_tokens, limits.window);
    if (limits.topk > 0) decode_sparse_context_tokens += std::min(context_tokens, limits.topk);
    if (drafts > 0) [[unlikely]] add_drafts(context_tokens, drafts);
  }
  // The last decode added verifies `drafts` draft tokens (out of line: the hot path is a plain decode).
  void add_drafts(int64_t context_tokens, int64_t drafts);
  // The tokens the decodes process, which a token budget counts: one each, plus the drafts they verify.
  int64_t decode_tokens() const { return static_cast<int64_t>(decodes.size()) + decode_extra_tokens; }
  void clear() {
    prefills.clear();
    decodes.clear();
    verifies.clear();
    decode_context_tokens = 0;
    decode_extra_tokens = 0;
    decode_extra_pairs = 0;
    decode_window_context_tokens = 0;
    decode_sparse_context_tokens = 0;
    decode_extra_window_pairs = 0;
    decode_extra_sparse_pairs = 0;
  }
  bool empty() const { return prefills.empty() && decodes.empty(); }
};

// The policy that forms iterations (implementations in policies/scheduler/).
class BatchScheduler {
 public:
  virtual ~BatchScheduler() = default;
  // Fills `plan` with the next iteration's work, admitting waiting requests (Replica::admit_front),
  // growing running ones (Replica::reserve) and preempting (Replica::preempt) as the policy says.
  // Leaves the plan empty when there is nothing to run.
  virtual void plan(Replica& replica, IterationPlan& plan) = 0;
  // Blocks the policy keeps free when admitting (vLLM's watermark); a request that needs more than
  // total - reserved blocks can never run and is rejected on arrival.
  virtual int64_t reserved_blocks(const KvCache& /*kv*/) const { return 0; }
  // Whether plan() is exactly policies::decode_running (each running request, in order, reserving
  // its next token, the newest preempted when a block runs out) whenever the waiting queue is empty,
  // every running request decodes and they are no more than decodes_running_limit(). The replica then repeats its last
  // decodes without asking while nothing but token counts changed (Replica::repeat_decodes).
  virtual bool decodes_running_when_nothing_waits() const { return false; }
  // The most running requests for which that holds: a token budget that takes one token per decode
  // caps them (chunked: max_num_batched_tokens); with more, the replica asks for every plan.
  virtual int64_t decodes_running_limit() const { return std::numeric_limits<int64_t>::max(); }
  // Whether it reads state that other replicas' schedulers write (fair_scope = "cluster": one set
  // of tenant counters): the cluster then keeps every replica on the event queue's clock
  // (Cluster::runs_ahead is off), so that each plan reads the counters as of its own time.
  virtual bool shares_state_across_replicas() const { return false; }
};

// What routers see of a replica; kept current by the replica. Everything but the last field is
// what a real router can observe (the engine's reported queue, batch and KV use, and the prompts
// it sent there that are not prefilled yet).
struct ReplicaLoad {
  int64_t queued = 0;                  // waiting requests
  int64_t running = 0;                 // requests holding KV blocks
  int64_t prefill_tokens_waiting = 0;  // prompt (and recompute) tokens not yet prefilled
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_total = 0;
  // False while the replica is down ([faults]): it takes no requests. Load-comparing routers rank
  // it last; the cluster moves any pick of a down replica to the next one up.
  bool up = true;
  // Disaggregation with pd_pull = reserve_first, on a decode replica: prefilled requests routed here
  // whose pull waits for blocks (their KV still held by their prefill replica), and the blocks
  // reserved for the pulls under way. `queued` counts both the waiting pulls and the pulls under
  // way (requests routed here and not yet in the engine's queue, as `incoming` ones are).
  int64_t pulls_waiting = 0;
  int64_t pull_blocks_reserved = 0;
  // Oracle: prefill tokens waiting + output tokens not yet generated. It needs every request's
  // output length, which no real router knows; only routers asked for an oracle upper bound read it.
  int64_t oracle_remaining_tokens = 0;
};

enum class ReplicaRole : uint8_t { kUnified, kPrefill, kDecode };
enum class PreemptionMode : uint8_t { kRecompute, kSwap };

struct ReplicaConfig {
  uint32_t index = 0;
  ReplicaRole role = ReplicaRole::kUnified;
  int64_t kv_blocks = 0;     // capacity of the paged KV cache
  int64_t block_size = 16;   // tokens per block
  int64_t max_context = 0;   // the model's context window (prompt + output)
  int64_t prefix_unit_tokens = 0;  // tokens per prefix-cache unit; 0 = no prefix caching
  PreemptionMode preemption = PreemptionMode::kRecompute;
  double swap_capacity_bytes = 0;       // host memory for swapped KV, per GPU
  // The GPUs holding one request's KV: one attention rank's (its tensor-parallel GPUs, each with a
  // share of the heads). A swap moves kv_bytes_per_gpu from each of them, and its figures
  // (swap_stats) count them all, analytic copies as flows. Cluster::add_replica sets it from the
  // replica's GPUs over its attention ranks.
  int64_t gpus_per_rank = 1;
  double host_link_bytes_per_s = 0;     // GPU <-> host copy bandwidth, per GPU
  double kv_bytes_per_token_per_gpu = 0;
  // The cache by layer group (hybrid models: window and linear-attention layers); default: every
  // layer full, kv_bytes_per_token_per_gpu per token.
  KvLayout kv_layout;
  // The serving engine: how iterations are launched and the host time around them (not owned;
  // null = none: every kernel eager, no host time).
  const hwmodels::EngineModel* engine = nullptr;
  // Speculative decoding (not owned; null = none) and the seed of the replica's stream of its
  // random draws (acceptances, n-gram matches).
  const Speculator* speculator = nullptr;
  uint64_t seed = 0;
  // A host-DRAM KV tier below HBM (null = none; needs prefix caching, unified role).
  std::shared_ptr<const HostTierSpec> host_tier;
  // A local NVMe KV tier below host DRAM (or below HBM without a host tier); null = none.
  std::shared_ptr<const NvmeTierSpec> nvme_tier;
};

// Who knows a replica's next arrival ahead of time (the cluster, where it runs ahead): the time (ns)
// the replica's next request reaches its queue, INT64_MAX when none will. Nothing else can reach
// the replica before then, so its decode iterations up to then are its own (Replica::decode_window).
class RunAhead {
 public:
  virtual ~RunAhead() = default;
  virtual int64_t horizon_ns(uint32_t replica) = 0;
};

class ReplicaListener {
 public:
  // A prefill replica's request has its first token; move its KV to a decode replica and call
  // Replica::finish_handoff when the transfer is over.
  virtual void on_prefill_done(Replica& replica, RequestId id) = 0;
  // Expert parallelism: the replica's iteration moves `bytes` per GPU across nodes (its MoE
  // all-to-alls). Returns how long that takes on the network now, sharing links with the other
  // traffic; negative when there is no network (the cost model's uncontended time stands).
  virtual double exchange_seconds(Replica& /*replica*/, double /*bytes*/) { return -1.0; }
  // The KV tiers on the network (Replica::set_tier_fabric): moves `bytes` (the whole replica's;
  // each GPU its share) from one endpoint to another as one flow per GPU of the replica (kGpu: that
  // GPU; kHost, kNvme: its node's host or NVMe; kStore: the shared store): tier -> kGpu for a load,
  // kGpu -> tier for a store, kHost -> kNvme for what host memory evicts to NVMe; and tells `done`
  // with `tag` when the last one has arrived (null: nobody).
  virtual void tier_copy(Replica& /*replica*/, KvTierEndpoint /*from*/, KvTierEndpoint /*to*/, double /*bytes*/,
                         uint64_t /*tag*/, TransferListener* /*done*/) {}
  // The load policy's estimate of a tier_copy started now: how long it would take on the network as
  // it is now (what the replica can know of its links' use); negative without a network.
  virtual double tier_copy_seconds(Replica& /*replica*/, KvTierEndpoint /*from*/, KvTierEndpoint /*to*/,
                                   double /*bytes*/) {
    return -1.0;
  }
  // Stops the tier copy `tag` of `done` (of `bytes`, started by tier_copy for `replica`) still under
  // way (a prefetch cut off): Network::cancel_transfer. Returns the share of its bytes that every
  // one of its flows had delivered, in [0, 1] (1: its flows had drained, only their latency left).
  virtual double cancel_tier_copy(Replica& /*replica*/, uint64_t /*tag*/, const TransferListener* /*done*/,
                                  double /*bytes*/) {
    return 0;
  }
  // A decode replica with pulls waiting (Replica::pull_queued) may have blocks free now: an iteration
  // has ended (requests finished or were preempted, the next one is planned) or a request was aborted.
  virtual void on_kv_freed(Replica& /*replica*/) {}

 protected:
  ~ReplicaListener() = default;
};

class Replica final : public EventHandler {
 public:
  Replica(const ReplicaConfig& config, Simulation& sim, RequestTable& requests,
          const hwmodels::StepCostModel& cost, std::unique_ptr<BatchScheduler> scheduler,
          core::LifecycleObserver& observer, ReplicaLoad& load, ReplicaListener* listener = nullptr);

  uint32_t index() const { return index_; }
  ReplicaRole role() const { return role_; }
  const hwmodels::StepCostModel& cost_model() const { return cost_; }
  // The GPU time of an iteration that prefills one fresh chunk of `tokens` tokens and nothing else
  // (the cost model's step, no engine overheads): what admission control predicts latencies from.
  double prefill_seconds(int64_t tokens) const;
  // The GPU time of an iteration of `seqs` decodes of `context` tokens each and nothing else (the
  // cost model's step, no engine overheads): what the tpot autoscaler predicts step times from.
  double decode_seconds(int64_t seqs, int64_t context) const;
  // Whether the replica runs speculative decoding (requests may carry drafts).
  bool speculating() const { return speculator_ != nullptr; }

  // ---- cluster side ----
  // Why this replica can never serve `r` (too long for the context or for the KV cache), if so.
  std::optional<core::RequestOutcome> rejection(const Request& r) const;
  // Takes a request into the waiting queue (new, or arriving with its KV from a prefill replica)
  // and starts an iteration if idle.
  // A request routed here that is still on the client path (API server, tokenisation), +1 when it
  // is routed and -1 if its client gives up before it arrives (enqueue() takes it over). The load
  // the routers see counts it, as a load balancer counts the requests it has sent; the engine's
  // queue (the replica state the metrics sample) does not.
  void incoming(const Request& r, int64_t sign) {
    incoming_ += sign;
    account(r, sign);
    load_.queued += sign;
  }
  void enqueue(RequestId id);
  // The KV transfer of a handed-off request is over: free its blocks here.
  void finish_handoff(RequestId id);
  // The client of request `id`, waiting or running here, has given up (the cluster has set
  // Request::timed_out). It leaves with outcome timed_out, its blocks, prefix-unit references and
  // swap space freed: now, or, when an iteration is in progress, once that iteration ends (the
  // engine aborts between steps; the iteration's tokens are computed and thrown away).
  void abort(RequestId id);
  core::Duration last_iteration() const { return last_duration_; }
  // ---- fleet dynamics ([faults]) ----
  // The replica fails now: the iteration in progress is lost, every request it holds (running,
  // waiting, arriving) loses its KV (GPU and swapped) and is appended to `lost` in arrival order,
  // reset to be prefilled again from scratch (its prompt and the tokens it already produced); a
  // request whose client had given up leaves as timed out. Its prefix cache is emptied, and it
  // reports itself down (ReplicaLoad::up) until repair().
  // A decode replica's pulls (reserved or waiting) are the cluster's to call off (cancel_pull,
  // pull_queued); a prefill replica must have no hand-off left (drop_handoff).
  void fail(std::vector<RequestId>& lost);
  // Disaggregated, on a prefill replica: the hand-off of `id` is called off (this replica or its
  // decode replica failed): its KV here is freed and it is reset to be prefilled again from scratch
  // (state kWaiting). `resume`: this replica stays up and may start an iteration with the room.
  void drop_handoff(RequestId id, bool resume);
  // Back in service (no earlier than the lost iteration's end: available_at()).
  void repair();
  bool down() const { return down_; }
  core::Time available_at() const { return lost_iteration_end_; }
  // A straggler runs every iteration at `fraction` of its speed (1 = healthy; iterations take 1/fraction
  // as long).
  void set_speed(double fraction) { speed_ = fraction; }
  double speed() const { return speed_; }
  // KV bytes one token occupies on each of its GPUs (a share of the heads, or a whole MLA latent).
  double kv_bytes_per_token_per_gpu() const { return kv_bytes_per_token_per_gpu_; }
  // KV bytes a request of `tokens` tokens holds on each GPU (the window and state of a hybrid model).
  double kv_bytes_per_gpu(int64_t tokens) const {
    return kv_.hybrid() ? kv_.request_bytes(tokens) : static_cast<double>(tokens) * kv_bytes_per_token_per_gpu_;
  }
  bool idle() const {
    return !busy_ && waiting_.empty() && arriving_.empty() && running_.empty() && transferring_ == 0 &&
           loading_.empty() && pulls_waiting_ == 0 && pulls_in_flight_ == 0;
  }
  // ---- disaggregation, decode side: pulls (ClusterLayout::pd_pull = reserve_first) ----
  // A prefilled request routed here is pulled (its KV moved from its prefill replica) only once this
  // replica has reserved the blocks its first decode step needs, as vLLM's NixlConnector, SGLang and
  // Dynamo allocate on the decode side before reading the KV. The blocks it reserves are the ones
  // the request holds when it arrives (adopt_pull).
  // Blocks the pull of `id` (kv_tokens computed, none held here) reserves: its first decode step's.
  int64_t pull_blocks(RequestId id) const;
  // Whether the pull of `id` can ever start here (its blocks fit the cache less the scheduler's
  // reserve, which an empty replica has free).
  bool pull_fits(RequestId id) const { return pull_blocks(id) <= kv_.total() - scheduler_->reserved_blocks(kv_); }
  // +1: a pull waits for room here (the cluster keeps the queue); -1: it leaves that wait (it
  // starts, or its client gave up).
  void pull_queued(int64_t sign) {
    pulls_waiting_ += sign;
    load_.pulls_waiting += sign;
    publish_state();
  }
  int64_t pulls_waiting() const { return pulls_waiting_; }
  // Signals the replica's state now (a prefill replica whose hand-offs are under way has not since
  // its iteration ended: its requests must be seen gone before a decode replica reports them).
  void report_state() { publish_state(); }
  // Decode runs handled in line (decode_window): on by default; off only in tests that check them
  // against the same run through the event queue. in_line_iterations() counts the iterations
  // they handled.
  void set_decode_windows(bool on) { windows_ = on; }
  // Runs ahead of the clock (Cluster::runs_ahead): decode runs go on past other replicas' events,
  // up to `ahead`'s horizon for this replica instead of the next queued event. Null: off.
  void set_run_ahead(RunAhead* ahead) { ahead_ = ahead; }
  // Where the iteration, token-gap and replica-state signals go when the observer given at
  // construction only forwards them (the cluster's own observer): one call instead of two.
  void set_signals(core::LifecycleObserver& signals) { signals_ = &signals; }
  uint64_t in_line_iterations() const { return in_line_iterations_; }
  // Reserves the blocks of the pull of `id` when the cache has them beyond the scheduler's reserve
  // (what admitting a request asks) and returns how many; -1 (nothing taken) when it has not.
  int64_t reserve_pull(RequestId id);
  // The KV of `id` has arrived (its prefill replica has let go of it): it takes over the `blocks`
  // reserved for it and joins the running set (it decodes from the next iteration on; it is not
  // held back by max_num_seqs, which only admissions from the waiting queue obey).
  void adopt_pull(RequestId id, int64_t blocks);
  // A pull under way whose client gave up (or whose transfer a failure called off): the `blocks`
  // reserved for it are freed. `resume`: the replica may start an iteration with the room (false for
  // one failing or about to fail at this instant).
  void cancel_pull(int64_t blocks, bool resume = true);
  KvCache& kv_cache() { return kv_; }
  // The host KV tier (null = none) and the requests waiting for a load from it.
  const HostKvTier* host_tier() const { return host_.get(); }
  // The local NVMe KV tier (null = none).
  const NvmeKvTier* nvme_tier() const { return nvme_.get(); }
  // The cluster has a network with this replica's GPUs on it: the host tier's and the shared
  // store's and the NVMe tier's loads and stores become flows on it (ReplicaListener::tier_copy)
  // instead of taking their analytic time (a no-op without a listener; the store may be attached
  // after). With an NVMe tier the topology must give the replica's nodes their NVMe vertex.
  void set_tier_fabric();
  // The cluster's shared KV store (null = none; not owned): HBM and host evictions are written to
  // it by its write policy, and start_loads() loads hits from it.
  void attach_store(SharedKvStore* store);
  const SharedKvStore* kv_store() const { return store_; }
  size_t loading() const { return loading_.size(); }
  // Swap preemption on the network (cluster.swap_copies = "flows", docs/policies.md): each swap-out
  // and swap-in is a flow per GPU of the replica, that GPU's share of the request's
  // KV (kv_bytes_per_gpu) between it and its node's host (ReplicaListener::tier_copy, kGpu <-> kHost:
  // the GPU's PCIe link and the switch uplink, shared max-min fairly with tier copies and PD
  // transfers). The iteration planned with them computes once they have all drained (vLLM v0 runs
  // swap_out / swap_in before the model step), in place of network.pcie_gb_s's analytic time added
  // to it. An expert-parallel replica of several attention ranks keeps one KV pool, so a request's
  // KV (kv_bytes_per_gpu on each of a rank's ReplicaConfig::gpus_per_rank GPUs) is spread evenly over
  // all the replica's GPUs' links, each carrying 1 / ranks of a rank GPU's share, as its tier copies are
  // (sim::tier_copy_share; docs/kv-tiers.md, "Expert parallelism"). A no-op without a listener.
  void set_swap_fabric();
  bool swap_on_fabric() const { return swap_fabric_ != nullptr; }
  // Swap preemption's traffic over the run (both models): copies, bytes (the whole replica's, every
  // GPU's share) and the time they held iterations: on the network, from the plan until the copies
  // had drained; analytic, the bytes / host link time added to iterations (the same where the copy
  // is alone on an idle fabric, less its path latency).
  struct SwapStats {
    uint64_t swap_outs = 0, swap_ins = 0;
    double out_bytes = 0, in_bytes = 0;
    double wait_seconds = 0;
  };
  const SwapStats& swap_stats() const { return swap_stats_; }
  size_t swap_copies_in_flight() const { return swap_copies_.size(); }
  double swap_used_bytes() const { return swap_used_bytes_; }  // per GPU

  // ---- scheduler side: the mechanism policies use ----
  // Called by a scheduler before it considers the head of the waiting queue for admission (each
  // time, as vLLM V1 asks its KV connector about each waiting request it considers): with KV tiers
  // below HBM, a fresh prefill whose prefix continues in host memory or the store is decided there
  // (load or recompute, once per request); a load takes it out of the queue until the copy ends,
  // and the next request is decided in turn. Returns true when the head's load waits for HBM
  // blocks: the scheduler admits nothing more this step (as vLLM's scheduler stops when it cannot
  // allocate a waiting request's external tokens), so no request is admitted before its tier hit
  // is decided. Without tiers it does nothing.
  bool settle_tier_hits() {
    if (host_ || store_ || nvme_) [[unlikely]] return start_loads();
    return false;
  }
  const BatchScheduler& scheduler() const { return *scheduler_; }
  const std::deque<RequestId>& waiting() const { return waiting_; }
  const std::vector<RequestId>& running() const { return running_; }  // in arrival order
  Request& request(RequestId id) { return requests_[id]; }
  const KvCache& kv() const { return kv_; }
  // A waiting request whose KV is already computed (transferred in, or swapped out): admitting it
  // needs blocks only, and it decodes in the same iteration.
  bool resumable(const Request& r) const { return r.decoding; }
  // Prompt tokens the prefix cache would spare the request at the head of the waiting queue: the
  // longest run of cached full units, leaving at least one token to compute.
  int64_t prefix_hit_tokens(RequestId id) const;
  // Blocks of kv().available() that admitting the head of the queue with `kv_tokens` computed
  // tokens after this iteration would take.
  int64_t admission_blocks(int64_t kv_tokens) const;
  // Moves the head of the waiting queue into the running set: uses its prefix-cache hit (if any),
  // takes the blocks for `kv_tokens` tokens, and swaps a swapped-out request back in. False (and
  // nothing changes) when the blocks are not available.
  bool admit_front(int64_t kv_tokens);
  // Blocks of kv().available() growing request `id` to `kv_tokens` tokens would take (negative
  // when growth moves tokens into already cached units).
  int64_t growth_blocks(RequestId id, int64_t kv_tokens) const;
  // Takes the blocks needed for request `id` to hold `kv_tokens` tokens (registering the prefix
  // units those tokens complete), and `speculative` more draft tokens in private blocks (freed
  // again when the drafts are rejected); false (nothing taken) when not available.
  bool reserve(RequestId id, int64_t kv_tokens, int64_t speculative = 0) {
    Request& r = requests_[id];
    // The common case (every decode step without prefix caching): the blocks held already suffice.
    if (!kv_.prefix_caching() && !kv_.hybrid() && kv_tokens + speculative <= r.kv_blocks * kv_.block_size())
      return true;
    return reserve_slow(r, kv_tokens, speculative);
  }
  // Priority scheduling: orders the waiting queue by (Request::priority, id), lower first, as vLLM's
  // priority queue orders (priority, arrival time); stable, so it costs one pass when it is sorted.
  void order_waiting_by_priority();
  // Fair scheduling: puts the waiting queue in `order`, which must hold exactly its requests.
  void order_waiting(const std::vector<RequestId>& order);
  // Preempts a running request: by swapping its KV to host memory when the mode is swap, there is
  // room and it is decoding, otherwise by recompute (blocks freed; its prompt and generated tokens
  // are prefilled again when readmitted). It goes back to the front of the waiting queue.
  void preempt(RequestId id);

  // Iteration completion.
  void on_event(uint64_t payload) override;

 private:
  struct Growth {
    int64_t unit_blocks = 0;     // blocks taken by acquiring or inserting units
    int64_t private_delta = 0;   // change of the request's private blocks
    int64_t shared_after = 0;
    size_t units_after = 0;
  };
  // The prefix units and private blocks a request holds (or would hold after a prefix hit).
  struct Held {
    size_t units = 0;
    int64_t shared_tokens = 0;
    uint64_t last_unit_key = 0;
    int64_t kv_blocks = 0;
  };
  static Held held(const Request& r) { return {r.units.size(), r.shared_tokens, r.last_unit_key, r.kv_blocks}; }
  Growth plan_growth(const Request& r, const Held& from, int64_t kv_tokens) const;
  void apply_growth(Request& r, int64_t kv_tokens);
  // The units a lookup from scratch matches: (units matched over the prompt, full units usable).
  struct Lookup {
    int64_t prompt_units = 0;
    int64_t matched_units = 0;
    int64_t usable_units = 0;
    int64_t usable_tokens = 0;
  };
  Lookup lookup(const Request& r) const;
  int64_t unit_end(const Request& r, size_t j) const;
  void release_kv(Request& r);
  // Signals that the timed-out request `id` has left and frees its slot.
  void leave_timed_out(RequestId id);
  // A request whose KV is lost with a failure: to be prefilled again from scratch.
  void reset_lost(Request& r) const;
  void try_start_iteration();
  // Moves the requests the scheduler can see now from arriving_ into the waiting queue.
  void admit_arrivals(bool chained);
  // Plans the next iteration as the last one's decodes again, each one token longer, when that is
  // what the scheduler would plan (see BatchScheduler::decodes_running_when_nothing_waits): false,
  // and the scheduler plans, when the running set is not the last decodes or a block runs out.
  bool repeat_decodes();
  // Runs the next decode iterations in line while nothing else can happen in between (see
  // replica.cc); false when it cannot start (then nothing changed).
  bool decode_window(int64_t horizon);
  // Whether to try decode_window() at all: only when the next iteration is likely to be the next
  // event, i.e. one as long as the last would end before the next queued event (with several
  // replicas another replica's iteration usually comes first). A guess that keeps the attempt off
  // the hot path, not a rule: decode_window checks every iteration exactly.
  // `horizon`: set to the time the run must end before (running ahead: the replica's own horizon).
  // After a prefill the last iteration's length says nothing of a decode's: only the horizon counts.
  bool window_worth_trying(int64_t& horizon, bool after_prefill) const {
    if (!windows_) return false;
    horizon = ahead_ ? ahead_->horizon_ns(index_) : sim_.in_line_horizon_ns();
    const int64_t now = sim_.now().ns();
    return horizon > now && (after_prefill || last_duration_.ns() < horizon - now);
  }
  // `last_token`: when the run's last token came (the time the replica has reached).
  void flush_window(int64_t tokens, int64_t block_iterations, core::Time last_token);
  // The time of an iteration of `shape` (s, at the replica's speed) from the engine's and the cost
  // model's terms; fills `rec`'s figures.
  double iteration_seconds(hwmodels::BatchShape& shape, bool after_idle, core::IterationRecord& rec);
  // The same from the step's cost and the engine's terms for `shape` (its launch() already made).
  double step_seconds(const hwmodels::StepCost& cost, const hwmodels::EngineModel::IterationTerms& engine_terms,
                      const hwmodels::BatchShape& shape, bool after_idle, core::IterationRecord& rec);
  // An iteration of `seconds` on the clock: rounded to the nanosecond, at least one.
  static core::Duration step_duration(double seconds) {
    return core::Duration::from_ns(std::max<int64_t>(1, core::Duration::from_seconds(seconds).ns()));
  }
  bool reserve_slow(Request& r, int64_t kv_tokens, int64_t speculative);
  // Emits `tokens` tokens of `r` at once (one streamed chunk: one inter-token gap).
  void emit_token(Request& r, core::Time now, int64_t tokens = 1) {
    if (r.generated == 0) {
      r.first_token = now;
    } else {
      add_gap(token_gap(r, now), tokens);
    }
    r.last_token = now;
    r.generated += tokens;
  }
  // The gap before `r`'s next token at `now`, as the client sees it: its first token reached it
  // first_token_s late (the engine's first chunk), which shortens the gap to the second.
  int64_t token_gap(const Request& r, core::Time now) const {
    int64_t gap = (now - r.last_token).ns();
    if (r.generated == 1 && first_token_delay_ns_ > 0) gap = std::max<int64_t>(0, gap - first_token_delay_ns_);
    return gap;
  }
  // One more gap of `tokens` tokens into gaps_ (equal ones in a row make one run).
  void add_gap(int64_t gap, int64_t tokens) {
    if (!gaps_.empty() && gaps_.back().gap_ns == gap && gaps_.back().tokens == tokens) {
      ++gaps_.back().count;
    } else {
      gaps_.push_back({gap, 1, tokens});
    }
  }
  // Speculative decoding at the start of an iteration: draws how many of each decode's drafts the
  // target accepts, proposes the next drafts, and puts the verification and the drafter's passes
  // into `shape`; fills `rec`'s speculation counts.
  void speculate(hwmodels::BatchShape& shape, core::IterationRecord& rec);
  // Frees the private blocks beyond what `r`'s kv_tokens need (the rejected drafts').
  void trim_kv(Request& r);
  // The end of the speculative decode plan_.decodes[i]: its input and accepted drafts are now
  // cached, the rejected drafts' KV is freed, its next drafts are taken; returns the tokens it emits
  // (1 + accepted, never past its output).
  int64_t settle_decode(Request& r, size_t i);
  void publish_state() { publish_state_at(sim_.now()); }
  // As of time t (a replica running ahead publishes at its own time, past the clock).
  void publish_state_at(core::Time t);
  // Host KV tier: while the request at the head of the waiting queue is a fresh prefill whose prefix
  // chain continues past HBM's hit in the host tier and the load policy says load, takes HBM blocks
  // for the units (the hit's pinned, the loaded ones inserted), and parks it until the copy ends.
  bool start_loads();  // see settle_tier_hits()
  // The last answer start_loads() gave without a load (the request at the head of the queue then):
  // the tokens of the tier hits the load policies declined in it, counted (count_declines) when the
  // request's first admission follows that answer.
  static constexpr uint64_t kNoAsk = std::numeric_limits<uint64_t>::max();
  struct Asked {
    uint64_t request = kNoAsk;  // Request::id
    int64_t host_tokens = 0, nvme_tokens = 0, store_tokens = 0;
  };
  Asked asked_;
  void count_declines(const Asked& a);
  // The load numbered `seq` is over: its request goes back to the front of the waiting queue, its
  // units left cached (unreferenced, most recently used) for its admission to hit in HBM.
  void finish_load(uint64_t seq);
  struct LoadDone final : EventHandler {
    Replica* replica = nullptr;
    void on_event(uint64_t payload) override { replica->finish_load(payload); }
  };
  // ---- prefetch of store units into the host tier while requests are queued ----
  // A fresh prefill that reaches the replica starts one copy of the store units its prefix chain
  // continues with (past what HBM, the host tier or another prefetch hold): the latency, then the
  // units stream in chain order at the copy's rate, each landing in the host tier when its last
  // byte arrives. At the head of the queue the store's prefetch policy says how long the request
  // waits for the rest (out of the queue, as for a load); then the prefetch is cut off.
  struct Prefetch {
    RequestId id;
    uint64_t seq = 0;
    core::Time start;
    int64_t end_ns = 0;                                // from start: the last unit's arrival
    std::vector<std::pair<uint64_t, int64_t>> units;   // key, its arrival (ns from start)
    std::vector<int64_t> blocks;                       // of each unit
    bool waited = false;                               // its request has waited for it once
  };
  void start_prefetch(RequestId id);
  // The units of `p` that have arrived by now land in the host tier, the rest are cut off; `p`
  // is then over (the caller erases it).
  void end_prefetch(Prefetch& p);
  void finish_prefetch(uint64_t seq);  // the prefetch numbered `seq` has arrived in full
  // On the network: the flows of the prefetch numbered `seq` have all arrived; its units land, and
  // its request, if waiting for it, goes on.
  void prefetch_arrived(uint64_t seq);
  // Ends the prefetch of `id` (if any) as end_prefetch does.
  void drop_prefetch(RequestId id);
  struct PrefetchDone final : EventHandler {
    Replica* replica = nullptr;
    void on_event(uint64_t payload) override { replica->finish_prefetch(payload); }
  };
  std::vector<Prefetch> prefetches_;            // in flight, in the order they started
  std::unordered_set<uint64_t> prefetching_;    // keys of the units on the way (each in one prefetch)
  uint64_t prefetch_seq_ = 0;
  PrefetchDone prefetch_done_;
  // The tiers on the network: one of a load's copies has arrived (tag: its seq x 4, + 0 for the
  // host's copy, 1 the store's, 2 the NVMe's; a prefetch's flows: its seq x 4 + 3); a store goes
  // out to its tier.
  struct TierFabric final : TransferListener, KvTierTraffic {
    Replica* replica = nullptr;
    void on_transfer_done(uint64_t tag) override { replica->finish_tier_copy(tag); }
    void on_store(KvTierEndpoint from, KvTierEndpoint to, double bytes) override {
      replica->listener_->tier_copy(*replica, from, to, bytes, 0, nullptr);
    }
  };
  // A load's copy on the network is over: its tier counts the time it took, and the load is over
  // when its last copy is.
  void finish_tier_copy(uint64_t tag);
  // On the network, a load's copies (not a prefetch wait's) stop where they are: its request was
  // aborted, or the replica failed (the copying process is gone).
  void cancel_load_copies(uint64_t seq);
  std::unique_ptr<TierFabric> tier_fabric_;
  // ---- swap copies on the network (set_swap_fabric) ----
  struct SwapFabric final : TransferListener {
    Replica* replica = nullptr;
    void on_transfer_done(uint64_t tag) override { replica->swap_copy_done(tag); }
  };
  // A swap copy of `bytes` per GPU, out (GPU -> host) or in (host -> GPU), counted in swap_stats_:
  // on the network a flow (the next iteration waits for it), else its analytic time is added to
  // the next iteration.
  void swap_copy(bool out, double bytes);
  // A swap copy has arrived; the last one of the step starts the iteration that waited for it.
  void swap_copy_done(uint64_t tag);
  // Starts the iteration planned at last_start_: `seconds` of compute from now, `rec` its record.
  void run_iteration(double seconds, core::IterationRecord& rec);
  std::unique_ptr<SwapFabric> swap_fabric_;
  int64_t swap_gpus_ = 1;  // the GPUs holding one request's KV (ReplicaConfig::gpus_per_rank)
  std::vector<uint64_t> swap_copies_;  // the tags of the swap copies still moving
  uint64_t swap_seq_ = 0;
  bool swap_waiting_ = false;          // the planned iteration waits for swap_copies_ to drain
  double swap_wait_compute_s_ = 0;     // its compute time then
  core::IterationRecord swap_wait_rec_;  // and its record
  SwapStats swap_stats_;
  // Adds to the replica's load what `r` adds now (sign +1) or removes what it added (-1): call with
  // -1 before changing a request's token counts and +1 after.
  int64_t incoming_ = 0;  // routed here, still on the client path (see incoming())
  void account(const Request& r, int64_t sign) {
    load_.oracle_remaining_tokens += sign * r.outstanding_tokens();
    load_.prefill_tokens_waiting += sign * r.pending_prefill_tokens();
  }

  uint32_t index_;
  ReplicaRole role_;
  int64_t max_context_;
  PreemptionMode preemption_;
  double swap_capacity_bytes_, host_link_bytes_per_s_, kv_bytes_per_token_per_gpu_;
  const hwmodels::EngineModel* engine_;
  const Speculator* speculator_;
  core::Rng spec_rng_;
  // Per iteration, parallel to plan_.decodes: drafts verified and accepted; then to decodes +
  // prefills: drafts proposed for the next iteration.
  std::vector<int64_t> verified_, accepted_, proposed_;
  int64_t first_token_delay_ns_ = 0;
  double swap_used_bytes_ = 0;
  double pending_swap_seconds_ = 0;  // swap traffic the next iteration carries
  Simulation& sim_;
  RequestTable& requests_;
  const hwmodels::StepCostModel& cost_;
  std::unique_ptr<BatchScheduler> scheduler_;
  core::LifecycleObserver& observer_;
  core::LifecycleObserver* signals_ = &observer_;  // set_signals
  ReplicaLoad& load_;
  core::ReplicaState published_state_;  // the last state told to the observers
  bool published_ = false;
  ReplicaListener* listener_;
  KvCache kv_;
  std::unique_ptr<HostKvTier> host_;
  std::unique_ptr<NvmeKvTier> nvme_;
  std::unique_ptr<LocalKvTiers> local_tiers_;  // host + NVMe: HBM's sink fanning out to both
  std::vector<uint64_t> nvme_keys_;  // scratch of start_loads
  // NVMe tokens loaded for a request (by request number), until its admission's lookup takes them.
  std::unordered_map<uint64_t, uint32_t> nvme_hits_;
  SharedKvStore* store_ = nullptr;
  std::unique_ptr<StoreWriter> store_writer_;
  std::vector<uint64_t> store_keys_;  // scratch of start_loads
  // Store tokens loaded for a request (by request number), until its admission's lookup takes them.
  std::unordered_map<uint64_t, uint32_t> store_hits_;
  struct Loading {
    RequestId id;
    uint64_t seq = 0;
    core::Time start;
    int copies = 1;  // on the network: the copies (host, NVMe, store) still under way
    bool prefetch = false;  // waiting for its prefetch (holds no blocks), not for a load
  };
  std::vector<Loading> loading_;  // in the order the loads started
  uint64_t load_seq_ = 0;
  LoadDone load_done_;

  std::deque<RequestId> waiting_;
  // With async scheduling, the scheduler plans iteration k+1 when iteration k starts: requests that
  // reach the replica while k runs are not in k+1 and wait here (in arrival order, with the time
  // they arrived) until the scheduling point after it.
  std::deque<std::pair<RequestId, core::Time>> arriving_;
  core::Time last_start_;  // the start of the iteration in flight (or the last one)
  std::vector<RequestId> running_;
  int64_t transferring_ = 0;
  int64_t pulls_waiting_ = 0;    // see pull_queued()
  int64_t pulls_in_flight_ = 0;  // pulls reserved here whose KV is on the wire
  int64_t aborts_pending_ = 0;  // running requests timed out during the iteration in progress
  IterationPlan plan_;
  std::vector<core::GapRun> gaps_;
  std::vector<RequestId> handoffs_;   // scratch of on_event
  std::vector<uint64_t> unit_keys_;   // scratch of apply_growth
  bool busy_ = false;
  bool chained_ = false;  // the iteration about to start follows the previous one without a gap
  // The decode fast path (repeat_decodes): possible on this replica at all (the scheduler declares
  // it; no speculation, prefix caching, hybrid layout or attention caps), and, after an iteration,
  // whether plan_ still holds its decodes because nothing but token counts changed.
  bool repeats_ = false;
  bool repeat_ = false;
  int64_t repeat_limit_ = 0;  // BatchScheduler::decodes_running_limit
  // Decode runs handled in line (decode_window); off only to check them against the queue's way.
  bool windows_ = true;
  uint64_t in_line_iterations_ = 0;
  hwmodels::StepCost window_costs_[hwmodels::StepCostModel::kMaxDecodeSteps];  // decode_window's next steps
  std::vector<int64_t> window_blocks_;  // decode_window: requests by the iteration (mod B) they take a block
  RunAhead* ahead_ = nullptr;           // set_run_ahead
  bool down_ = false;
  double speed_ = 1.0;
  core::Time lost_iteration_end_;  // when the iteration a failure interrupted would have ended
  uint64_t iteration_ = 0;  // the payload of the pending iteration event (a failure makes it stale)
  core::Duration last_duration_;
};

}  // namespace servesim::sim
