#pragma once
// The cluster: replicas (one unified pool, or a prefill pool and a decode pool), the request table,
// the arrival path (workload -> router -> replica) and, when disaggregated, the hand-off of each
// prefilled request's KV cache over the network to a decode replica.

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/cluster/autoscaling.h"
#include "sim/cluster/network.h"
#include "sim/cluster/replica.h"
#include "sim/cluster/request.h"
#include "sim/core/lifecycle.h"
#include "sim/core/rng.h"
#include "sim/engine/simulation.h"
#include "traces/arrival_source.h"

namespace servesim::sim {

// The global policy that picks a replica for each arriving request (implementations in
// policies/router/). A router sees the loads of the replicas it chooses among; routers that need
// more (prefix-cache state) get the replicas themselves once, through bind().
class Router {
 public:
  virtual ~Router() = default;
  // Called once before the first request with the replicas this router chooses among.
  virtual void bind(std::span<Replica* const> /*replicas*/, Simulation& /*sim*/) {}
  // Returns an index into `replicas`.
  virtual uint32_t route(const Request& request, std::span<const ReplicaLoad> replicas) = 0;
  // For a router whose choice depends on nothing but the order of requests (round_robin): the index
  // into `replicas` (of size `replicas`) that the next request will go to, whatever it is and
  // whatever the replicas' state; the one after it goes to the following index, and so on. -1 for
  // every other router. It lets the cluster know each replica's next arrival (Cluster: run ahead).
  virtual int64_t next_in_turn(size_t /*replicas*/) const { return -1; }
  // For a router whose choice reads nothing a replica's decode-only iterations change: only the
  // request, draws of its own stream and the loads' counts that change at arrivals, admissions,
  // prefills and completions (queued, running, prompt tokens waiting, up), never the blocks in use,
  // the tokens generated (an oracle's remaining work) or a prefix cache's contents. The next
  // request may go to any replica, but it finds each in the state it would find without any
  // replica's decodes run ahead of the clock; so the replicas may run them ahead up to the time
  // that request could reach a queue (Cluster: run ahead).
  virtual bool ignores_decode_progress() const { return false; }
};

// Admission control at the router (implementations in policies/router/admission.cc, family
// "admission"): after the router's pick, whether the request may join that replica; a request it
// refuses is shed (outcome rejected_admission) at its arrival. It sees what the router sees, the
// request's class and the replicas' step costs; never output lengths.
class Admission {
 public:
  virtual ~Admission() = default;
  // Called once before the first request: the replicas the router chooses among, and the workload's
  // request classes (empty without classes: every request is then class 0 of none).
  virtual void bind(std::span<Replica* const> /*replicas*/, std::span<const core::RequestClass> /*classes*/) {}
  // Whether `request` may join replica `target` (an index into `replicas`).
  virtual bool admit(const Request& request, std::span<const ReplicaLoad> replicas, uint32_t target) = 0;
};

struct ClusterCounters {
  uint64_t arrived = 0;
  uint64_t completed = 0;
  uint64_t rejected = 0;          // every rejection (admission control's included)
  uint64_t shed = 0;              // of those, by admission control
  uint64_t timed_out = 0;
  uint64_t failed = 0;            // lost with a failed replica (on_failure = fail, or no replica left)
  uint64_t rerouted = 0;          // times a request left a failed replica to be recomputed elsewhere
  uint64_t replica_failures = 0;
  uint64_t preemptions = 0;
  uint64_t kv_transfers = 0;
  double kv_transfer_bytes = 0;
  // pd_pull = reserve_first: pulls that waited for decode blocks (started later than their prefill
  // ended), their waits, and the most pulls waiting at once over the decode pool.
  uint64_t pull_waits = 0;
  double pull_wait_s = 0;
  double pull_wait_max_s = 0;
  int64_t pulls_waiting_peak = 0;
};

// The client's side of the engine (its frontend): what a request pays from the client's send to the
// engine's waiting queue (HTTP server, tokenisation, IPC) and each token from the end of the
// iteration that produced it to the client (detokenising, streaming). The router decides at the
// send; TTFT, TPOT and E2E are measured at the client (RequestRecord::client_*).
struct ClientPath {
  double ingress_s = 0;
  double ingress_s_per_prompt_token = 0;
  double egress_s = 0;       // every token
  double first_token_s = 0;  // extra for the first token
};

// Fault injection ([faults]): replica failures at given times or drawn from an exponential time to
// failure (mean mtbf_s) and repair (mean mttr_s), and stragglers. Every fault event is weak: a fault
// after the last request has left never stretches the run.
struct FaultEvent {
  // kLink: links fail; kLinkSpeed: they run at `speed` of their bandwidth (degraded), healed after
  // `repair` or by another kLinkSpeed of speed 1.
  enum class Kind : uint8_t { kFail, kSlow, kLink, kLinkSpeed };
  Kind kind = Kind::kFail;
  uint32_t replica = 0;
  core::Time at;
  std::optional<core::Duration> repair;  // kFail, kLink: down for this long (unset: for good); kLinkSpeed: slow for this long
  std::vector<uint32_t> with;            // kFail: replicas that fail at the same instant (the rest of a node)
  std::vector<uint32_t> links;           // kLink: the network links that fail (a cable: both directions)
  std::string link_name;                 // kLink: as the configuration names it (for errors)
  double speed = 1;                      // kSlow, kLinkSpeed: fraction of its speed from `at` on (1 = healthy again)
};

// Drawn link failures ([[faults.link_mtbf]]): each link (a cable, both directions) fails after
// exponential times of mean mtbf_s and is repaired after an exponential of mean mttr_s, from its
// own stream faults/link/<name>; its next failure is drawn from that repair.
struct LinkMtbf {
  std::vector<uint32_t> links;  // its directed links
  std::string name;             // as the topology names it (its stream's name)
  double mtbf_s = 0, mttr_s = 0;
};
struct FaultPlan {
  std::vector<FaultEvent> events;
  double mtbf_s = 0;             // > 0: every replica fails after exponential times of this mean
  double mttr_s = 0;             // ... and is repaired after exponential times of this mean
  uint64_t seed = 0;             // the MTBF/MTTR draws' stream ("faults/<replica>")
  bool recompute = true;         // lost requests are routed again and recomputed; false: they fail
  uint32_t max_reroutes = 3;     // a request lost more often than this fails (bounds the work of a run)
  // Drawn node failures: node n (its replicas node_replicas[n], every replica with a GPU on it) fails
  // after exponential times of mean node_mtbf_s (stream faults/node/<n>) and is repaired after an
  // exponential of mean node_mttr_s; its next failure is drawn from that repair.
  double node_mtbf_s = 0, node_mttr_s = 0;
  std::vector<std::vector<uint32_t>> node_replicas;
  std::vector<LinkMtbf> link_mtbf;  // drawn link failures, one per link
  bool any() const { return !events.empty() || mtbf_s > 0 || node_mtbf_s > 0 || !link_mtbf.empty(); }
  // Replica (or node) failures or stragglers (as opposed to link failures alone).
  bool replica_faults() const {
    if (mtbf_s > 0 || node_mtbf_s > 0) return true;
    for (const FaultEvent& e : events)
      if (e.kind != FaultEvent::Kind::kLink && e.kind != FaultEvent::Kind::kLinkSpeed) return true;
    return false;
  }
};

// Client retries ([retries]): a client whose request failed sends it again, as a new request, after
// a back-off: the k-th retry waits min(backoff_s x multiplier^(k-1), max_backoff_s) x (1 - jitter x U),
// U uniform in [0, 1) from the run's stream "retries", counted from when the client learns of the
// failure (its time-out, the rejection at its send, the failure of the replica). Which failures are
// retried: time-outs, sheds by admission control, requests lost with a failed replica; never a
// request that can never fit (rejected_context, rejected_kv_capacity), as a client sees a 400.
struct RetryPolicy {
  uint32_t max_attempts = 1;  // attempts per client request, the first included (1 = no retries)
  double backoff_s = 0.5;
  double multiplier = 2;
  double max_backoff_s = 8;
  double jitter = 0.25;
  bool after_timeout = true;
  bool after_shed = true;
  bool after_failure = true;
  uint64_t seed = 0;
  bool any() const { return max_attempts > 1; }
  // The delay before retry `k` (1 = the first) given the draw u in [0, 1).
  double delay_s(uint32_t k, double u) const;
};

// Disaggregation: when a prefilled request's KV moves to its decode replica.
enum class PdPull : uint8_t {
  // The decode replica reserves the blocks of the request's first decode step first and then pulls
  // the KV (vLLM's NixlConnector, SGLang, Dynamo); until it has them the request waits in that
  // replica's pull queue (FIFO) and its prefill replica keeps the KV: backpressure.
  kReserveFirst,
  // The transfer starts at once and the request queues at the decode replica for blocks (a decode
  // side with unbounded staging memory; what servesim did before pd_pull existed).
  kPush,
};

// How the replicas are used and where they sit.
struct ClusterLayout {
  size_t replicas = 0;
  size_t prefill_replicas = 0;  // 0: every replica is unified; else the first ones prefill, the rest decode
  bool layerwise_kv_transfer = false;  // stream KV layer by layer during the last prefill iteration
  PdPull pd_pull = PdPull::kReserveFirst;
  // With a network: the KV tiers' copies are flows on it (kv_tiers.copies = "flows", the default),
  // else analytic (docs/kv-tiers.md, "One fabric").
  bool tier_flows = true;
  // With a network: swap preemption's copies are flows on it too (cluster.swap_copies = "flows", the
  // default where a topology exists; Replica::set_swap_fabric), else analytic (network.pcie_gb_s).
  bool swap_flows = true;
  ClientPath client;
  // Whether replicas may run decode iterations ahead of the clock where nothing can see them
  // (Cluster::runs_ahead): the caller says no where an observer needs every replica's signals in
  // global time order (a timeline); the cluster decides from the rest.
  bool run_ahead = false;
  // The replica time series' interval (ns; 0: none). Its sample at time T shows every replica's
  // state after all signals at <= T and is written at the first state signal past T, so a replica
  // runs ahead only up to the next sample time.
  int64_t sample_interval_ns = 0;
};

class Cluster final : public EventHandler,
                      private core::LifecycleObserver,
                      private ReplicaListener,
                      private TransferListener,
                      private RunAhead {
 public:
  // `observer` receives every lifecycle signal of the cluster and its replicas. `decode_router`
  // and `network` are needed only when the layout is disaggregated.
  Cluster(Simulation& sim, traces::ArrivalSource& source, std::unique_ptr<Router> router,
          core::LifecycleObserver& observer, const ClusterLayout& layout,
          std::unique_ptr<Router> decode_router = nullptr, Network* network = nullptr);

  // Adds replica number `replicas().size()` on the given GPUs of the topology (its role follows
  // from the layout); call exactly layout.replicas times before start(). An expert-parallel
  // replica's GPUs form `attention_ranks` data-parallel ranks of consecutive GPUs: a request's KV
  // lives on one rank, so a transfer goes rank to rank.
  Replica& add_replica(const ReplicaConfig& config, const hwmodels::StepCostModel& cost,
                       std::unique_ptr<BatchScheduler> scheduler, std::vector<int64_t> gpus = {},
                       int64_t attention_ranks = 1);

  // A KV store shared by every replica ([kv_tiers.store]; unified clusters with prefix caching):
  // attached to the replicas added so far and to those added later. Owned here: replica failures
  // do not clear it.
  void set_kv_store(std::unique_ptr<SharedKvStore> store);
  // Several stores, each shared by a group of replicas ([kv_tiers.store] replicas_per_store): the
  // replicas that use a store (unified: all; disaggregated: the prefill pool), in index order, form
  // groups of `replicas_per_store` (the last may be smaller); group g's replicas use stores[g], and
  // on a topology its copies go to store endpoint g (Topology::store_endpoint). Every replica is
  // built before the run (autoscaling parks and wakes them), so a replica that enters service later
  // is in the group its index gives. Needs exactly as many stores as groups.
  void set_kv_stores(std::vector<std::unique_ptr<SharedKvStore>> stores, size_t replicas_per_store);
  const SharedKvStore* kv_store() const { return kv_stores_.empty() ? nullptr : kv_stores_[0].get(); }
  const std::vector<std::unique_ptr<SharedKvStore>>& kv_stores() const { return kv_stores_; }
  // The store group of replica `replica` (its store's index).
  size_t store_group(size_t replica) const { return replicas_per_store_ > 0 ? replica / replicas_per_store_ : 0; }

  // Fault injection; call before start().
  void set_faults(const FaultPlan& plan);
  // Admission control ([admission]) over the router's pool; before start(). None: every request
  // the replicas can hold is admitted.
  void set_admission(std::unique_ptr<Admission> admission) { admission_ = std::move(admission); }
  // Client retries (open-loop workloads); before start().
  void set_retries(const RetryPolicy& policy);
  // Autoscaling ([autoscaler]; sim/cluster/autoscaling.cc): the pool's replicas past plan.initial
  // start off; `policy` is asked every plan.interval. `role`: kUnified for the pool of a unified
  // cluster, kPrefill or kDecode for one pool of a disaggregated cluster (each pool under its own
  // autoscaler, or fixed without one). Before start().
  void set_autoscaler(std::unique_ptr<Autoscaler> policy, const AutoscalePlan& plan,
                      ReplicaRole role = ReplicaRole::kUnified);
  // Per replica (empty without an autoscaler).
  std::span<const ReplicaPhase> phases() const { return phases_; }

  // Schedules the first arrival.
  void start();
  // Whether the replicas run ahead (decided by start()): every replica's arrivals are known ahead
  // (a router that takes replicas in turn, an open-loop source) and nothing else couples them (no
  // admission control, autoscaling, faults, client time-outs or retries, disaggregation, network or
  // shared KV store), so a replica's pure decode iterations up to its next arrival are its own
  // business: it runs them in line ahead of the clock (Replica::decode_window), and its iteration
  // and state signals reach the observers ahead of other replicas' earlier ones (each replica's own
  // stay in order). Results are those of the queue's order: docs/performance.md, "Replicas run ahead".
  bool runs_ahead() const { return runs_ahead_; }
  // Payload 0: the arrival of the request read ahead from the source (the client sends it). Payload
  // slot + 1: that request reaches its replica's queue (after the client path's ingress).
  void on_event(uint64_t payload) override;
  // (Closed-loop sources and client time-outs have their own handlers: SourceWake, TimeoutTimer.)

  const std::vector<std::unique_ptr<Replica>>& replicas() const { return replicas_; }
  std::span<const ReplicaLoad> loads() const { return loads_; }
  const ClusterCounters& counters() const { return counters_; }
  size_t in_flight() const { return requests_.live(); }
  bool disaggregated() const { return layout_.prefill_replicas > 0; }

  // Throws core::Error unless every arrived request has completed, been rejected or timed out and
  // all KV blocks are back: call after the simulation ends.
  void check_drained() const;

 private:
  // A closed-loop source's next request is due (payload: the wake's version; older ones are stale).
  struct SourceWake final : EventHandler {
    Cluster* cluster = nullptr;
    void on_event(uint64_t version) override { cluster->on_wake(version); }
  };
  // The earliest client deadline has come (a weak event: it never keeps the run going).
  struct TimeoutTimer final : EventHandler {
    Cluster* cluster = nullptr;
    void on_event(uint64_t) override { cluster->on_deadline(); }
  };
  // A request's client time-out, in send order (the time-out is the same for every request, so the
  // deadlines are too): one pending timer serves them all.
  struct Deadline {
    int64_t ns = 0;
    uint64_t id = 0;
    RequestId slot;
  };

  bool read_next();
  void arrive();
  // The arrival of `spec`: a new request is routed, rejected or enqueued (after the ingress).
  // `retry`: it is a client's retry (attempt >= 1) of a request that failed on `retry->replica`.
  struct Retry {  // a client's next attempt: what it sends again, and when it first sent it
    traces::RequestSpec spec;  // arrival: the attempt's send
    uint32_t attempt = 0;
    core::Time first_sent;
    uint32_t replica = 0;      // where the previous attempt failed
    // Closed loop: which of the source's sends the client request is (its id for request_done), and
    // whether the client has been told of this attempt's end (client_free) and retries it.
    uint64_t sent = 0;
    bool told = false;
    bool retries = false;
  };
  void admit(const traces::RequestSpec& spec, const Retry* retry = nullptr);
  void reject(const Request& r, uint32_t replica, core::RequestOutcome why);
  // Closed loop: (re)schedules the wake for the source's earliest due request.
  void poll_source();
  void on_wake(uint64_t version);
  // Client time-outs.
  void on_deadline();
  void time_out(RequestId id);
  // Counts a timed-out request and fills its client times, then signals it.
  void signal_timed_out(core::RequestRecord& rec);
  // LifecycleObserver: counts, then forwards to the user's observer.
  void on_arrival(uint64_t id, core::Time t) override { observer_.on_arrival(id, t); }
  void on_request_done(const core::RequestRecord& r) override;
  void on_preempt(uint64_t id, uint32_t replica, core::Time t) override;
  // The replicas send these four straight to observer_ (Replica::set_signals): forwarded unchanged.
  void on_iteration(const core::IterationRecord& it) override { observer_.on_iteration(it); }
  void on_token_gaps(std::span<const core::GapRun> runs) override { observer_.on_token_gaps(runs); }
  void on_replica_state(const core::ReplicaState& s) override { observer_.on_replica_state(s); }
  void on_decode_steps(const core::IterationRecord& base, const core::ReplicaState& state,
                       std::span<const core::DecodeStep> steps) override {
    observer_.on_decode_steps(base, state, steps);
  }
  void on_prefix_lookup(const core::PrefixLookup& l) override { observer_.on_prefix_lookup(l); }
  void on_kv_transfer(const core::KvTransfer& t) override { observer_.on_kv_transfer(t); }
  // ReplicaListener: a prefill replica's request is ready to move.
  void on_prefill_done(Replica& replica, RequestId id) override;
  // TransferListener: its KV has arrived.
  void on_transfer_done(uint64_t tag) override;
  // ReplicaListener: a decode replica may have room for the pulls waiting for it.
  void on_kv_freed(Replica& replica) override { start_pulls(replica.index()); }
  // Starts the pulls waiting for decode replica `to` that fit, in order, up to the first that does not.
  void start_pulls(uint32_t to);
  // Starts the transfer of request `id` (transfers_[id.slot] says from where to where); `overlap`:
  // its prefill has just ended, so layer-wise streaming overlaps the last iteration.
  void start_transfer(RequestId id, bool overlap);
  // ReplicaListener: an expert-parallel iteration's cross-node all-to-all, as flows on the network
  // (each GPU to the GPU of the same local rank on the replica's next node, so that every GPU's
  // links carry its share, as DeepEP's rail-aligned RDMA does).
  double exchange_seconds(Replica& replica, double bytes) override;
  // ReplicaListener: a host KV tier's load or store as flows between each of the replica's GPUs and
  // its node's host (sim/cluster/network.h, Topology::host_endpoint).
  void tier_copy(Replica& replica, KvTierEndpoint from, KvTierEndpoint to, double bytes, uint64_t tag,
                 TransferListener* done) override;
  double cancel_tier_copy(Replica& replica, uint64_t tag, const TransferListener* done, double bytes) override;
  // ReplicaListener: the load policy's estimate of such a copy on the network as it is now
  // (Network::transfer_seconds_now over the same endpoint pairs).
  double tier_copy_seconds(Replica& replica, KvTierEndpoint from, KvTierEndpoint to, double bytes) override;

  // ---- fleet dynamics (sim/cluster/faults.cc) ----
  struct FaultTimer final : EventHandler {  // payload: index into fault_actions_
    Cluster* cluster = nullptr;
    void on_event(uint64_t index) override { cluster->on_fault(index); }
  };
  struct ParkTimer final : EventHandler {  // keeps the run going while requests wait for a repair
    Cluster* cluster = nullptr;
    void on_event(uint64_t) override { cluster->on_park_timer(); }
  };
  struct DecodeWake final : EventHandler {  // the same for prefilled requests waiting for a decode replica
    Cluster* cluster = nullptr;
    void on_event(uint64_t) override { cluster->wake_decode_waiting(true); }
  };
  struct FaultAction {
    enum class Kind : uint8_t { kFail, kRepair, kSpeed, kLinkDown, kLinkUp, kLinkSpeed } kind = Kind::kFail;
    uint32_t replica = 0;
    bool drawn = false;                    // part of the replica's MTBF process
    uint64_t epoch = 0;                    // kRepair: the failure it ends
    std::optional<core::Duration> repair;  // kFail
    double speed = 1;                      // kSpeed
    std::vector<uint32_t> with;            // kFail: replicas that go down with it (a node)
    int32_t node = -1;                     // kFail: a drawn node failure (FaultPlan::node_mtbf_s)
    uint32_t event = 0;                    // kLinkDown, kLinkUp, kLinkSpeed: the link event (plan_.events)
    int32_t drawn_link = -1;               // kLinkDown, kLinkUp: a drawn link failure (plan_.link_mtbf)
  };
  // Takes `links` down (or up) once more: a link failed by several causes at once comes back when
  // the last of them is repaired.
  void count_links(const std::vector<uint32_t>& links, bool down);
  // After a link change or a transfer: a flow cut off for good (no repair of a link pending) is an error.
  void check_cut_off();
  void schedule_fault(core::Time t, const FaultAction& a);
  void on_fault(uint64_t index);
  // Takes replica i down (its requests into lost_) and schedules its repair.
  void take_down(uint32_t i, bool drawn, std::optional<core::Duration> repair);
  // Routes again (or fails) the requests in lost_, in arrival order.
  void handle_lost();
  void repair_replica(uint32_t i);
  // A request without a replica (lost, or routed to one that went down): routed again among the
  // replicas that are up (disaggregated: the prefill pool's), parked when none is but one will be
  // repaired, failed otherwise.
  void route_again(RequestId id);
  // The first replica up from `pick` on (ring order) in the router's pool (disaggregated: the
  // prefill pool); replicas_.size() when none is.
  uint32_t up_from(uint32_t pick) const { return up_in(pick, 0, router_pool()); }
  // The same within replicas [first, first + count).
  uint32_t up_in(uint32_t pick, size_t first, size_t count) const;
  size_t router_pool() const { return disaggregated() ? layout_.prefill_replicas : replicas_.size(); }
  // When a replica of the pool [first, end) may next be up: its first repair or, autoscaled, a start
  // under way or the next evaluation that can provision one; unset when none will.
  std::optional<core::Time> next_up(size_t first, size_t end) const;
  // Repairs of replicas in [first, end) due now whose weak events have not fired yet: done now.
  void repair_due(size_t first, size_t end);
  // Disaggregated: the hand-offs from or to replica i, which fails now (from: before its requests
  // are dropped, so that its KV is freed first; to: after): KV transfers under way are called off
  // (their flows leave the network at once), pulls waiting are taken out of their queue, and their
  // requests join lost_ (or leave, timed out).
  void drop_handoffs(uint32_t i);
  bool failing(uint32_t i) const { return !failing_.empty() && failing_[i]; }
  // Disaggregated: prefilled request `id` on prefill replica `from` goes to a decode replica up
  // (picked by the decode router); `overlap`: its prefill has just ended. With none up it waits
  // (decode_waiting_), holding its KV on `from`, for a decode replica's repair.
  void hand_off(RequestId id, uint32_t from, bool overlap, core::Time ready);
  // The prefilled requests waiting for a decode replica: handed off when one is up, failed when
  // none will be repaired.
  // `timer`: the wake it scheduled (not a repair or a readiness), which counts a wait for an
  // autoscaled decode pool's replica that did not come.
  void wake_decode_waiting(bool timer = false);
  void schedule_decode_wake(core::Time t);
  void fail_request(RequestId id);
  void park(RequestId id);
  void on_park_timer();
  void unpark();
  void fleet_event(core::FleetEventKind kind, uint32_t replica, uint64_t request = 0, double value = 0);

  // ---- client retries (sim/cluster/retries.cc) ----
  struct RetryTimer final : EventHandler {  // payload: index into retries_
    Cluster* cluster = nullptr;
    void on_event(uint64_t index) override { cluster->on_retry(index); }
  };
  // Every record of a request that has left goes through here to the observer: with retries, it
  // says which attempt it was and schedules the next one when the client will retry.
  void client_done(core::RequestRecord& rec);
  void on_retry(uint64_t index);
  // Closed loop: attempt `id` ended for its client at `t` with `outcome`. The client is free (the
  // source's request_done) unless it retries this attempt; then it stays busy until its retry ends.
  void client_free(uint64_t id, core::Time t, core::RequestOutcome outcome);
  // Whether the client retries an attempt (0 = its first send) that ended with `outcome`.
  bool retried(uint32_t attempt, core::RequestOutcome outcome) const;
  // ---- autoscaling (sim/cluster/autoscaling.cc) ----
  // Payload 0: an evaluation of pool `pool`; else a readiness, (generation << 32) | (replica + 1).
  struct ScaleTimer final : EventHandler {
    Cluster* cluster = nullptr;
    uint32_t pool = 0;
    void on_event(uint64_t payload) override { cluster->on_scale_timer(pool, payload); }
  };
  // One elastic pool: replicas [first, first + plan.max_replicas) under one policy (the unified
  // cluster's only pool, or the prefill or decode pool of a disaggregated one).
  struct ScalePool {
    uint32_t first = 0;
    std::unique_ptr<Autoscaler> policy;
    AutoscalePlan plan;
    ScaleTimer timer;
    std::deque<std::pair<core::Time, uint32_t>> wanted;  // evaluations within the stabilisation window
    std::optional<core::Time> last_scaling;
    uint64_t evaluations = 0;
    uint32_t end() const { return first + plan.max_replicas; }
  };
  // A request left a draining replica: is it empty now? (Payload: the replica.)
  struct DrainCheck final : EventHandler {
    Cluster* cluster = nullptr;
    void on_event(uint64_t replica) override { cluster->switch_off_if_empty(static_cast<uint32_t>(replica)); }
  };
  void start_autoscaling();
  void on_scale_timer(uint32_t pool, uint64_t payload);
  void evaluate_autoscaler(ScalePool& pool);
  void scale_to(ScalePool& pool, uint32_t target);
  void set_phase(uint32_t i, ReplicaPhase phase, core::FleetEventKind kind);
  void switch_off_if_empty(uint32_t i);
  void after_departure(uint32_t i) {
    if (phases_[i] == ReplicaPhase::kDraining) sim_.schedule_after(core::Duration(), &drain_check_, i);
  }

  struct PendingTransfer {
    uint32_t from = 0, to = 0;
    core::Time ready;  // the prefill ended
    core::Time start;
    double bytes = 0;
    int64_t blocks = 0;  // reserve_first: reserved on the decode replica
  };

  Simulation& sim_;
  traces::ArrivalSource& source_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<Admission> admission_;
  std::unique_ptr<Router> decode_router_;
  Network* network_;
  std::vector<std::pair<int64_t, int64_t>> host_pairs_;  // scratch of tier_copy
  // Fills host_pairs_ with the replica's per-GPU (from, to) endpoint pairs of a tier copy.
  void tier_pairs(Replica& replica, KvTierEndpoint from, KvTierEndpoint to);
  // A copy to or from the replica's store: the store's access latency (kv_tiers.store.latency_us),
  // before its bytes move on the fabric; 0 for other copies.
  double store_latency(const Replica& replica, KvTierEndpoint from, KvTierEndpoint to) const;
  core::LifecycleObserver& observer_;
  ClusterLayout layout_;
  RequestTable requests_;
  std::vector<ReplicaLoad> loads_;  // sized once: replicas hold references into it
  std::vector<std::unique_ptr<SharedKvStore>> kv_stores_;  // before replicas_: they point into them
  size_t replicas_per_store_ = 0;                          // 0: one store for every replica
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<std::vector<int64_t>> gpus_;  // per replica
  std::vector<int64_t> ranks_;              // per replica: attention data-parallel ranks
  std::vector<std::vector<std::pair<int64_t, int64_t>>> exchange_pairs_;  // per replica; empty: one node
  std::vector<PendingTransfer> transfers_;  // by request slot
  std::vector<std::deque<RequestId>> pulls_;  // reserve_first: per decode replica, pulls waiting (FIFO)
  int64_t pulls_waiting_ = 0;                 // over the decode pool
  traces::RequestSpec next_;
  bool has_next_ = false;
  // Run ahead: the requests read from the source after next_, in order (at most one per replica),
  // whether the source has ended, and per replica the times its requests on the client path reach
  // its queue.
  bool runs_ahead_ = false;
  std::deque<traces::RequestSpec> ahead_;
  bool source_done_ = false;
  std::vector<std::vector<int64_t>> ingress_due_;
  // RunAhead: the time (ns) the replica's next request reaches its queue, INT64_MAX when none will.
  int64_t horizon_ns(uint32_t replica) override;
  // When a request sent now of `prompt_tokens` reaches its replica's queue: the client path's ingress.
  double ingress_seconds(int64_t prompt_tokens) const {
    return layout_.client.ingress_s + layout_.client.ingress_s_per_prompt_token * static_cast<double>(prompt_tokens);
  }
  bool closed_loop_ = false;
  std::vector<int32_t> class_priority_;  // per request class (empty without classes)
  std::vector<uint16_t> class_tenant_;   // per request class: its tenant's number (empty without classes)
  SourceWake wake_;
  uint64_t wake_version_ = 0;
  bool wake_pending_ = false;
  core::Time wake_at_;
  std::optional<core::Duration> timeout_;  // the clients' time-out, if any
  TimeoutTimer timer_;
  std::deque<Deadline> deadlines_;
  bool timer_pending_ = false;
  ClusterCounters counters_;
  bool faults_ = false;
  FaultPlan plan_;
  FaultTimer fault_timer_;
  ParkTimer park_timer_;
  std::vector<FaultAction> fault_actions_;
  std::vector<core::Rng> fault_rngs_;        // per replica (MTBF)
  std::vector<core::Rng> node_fault_rngs_;   // per node (node MTBF)
  std::vector<uint64_t> epoch_;              // per replica: failures so far
  std::vector<std::optional<core::Time>> repair_at_;  // per replica while down: when it comes back
  std::deque<RequestId> parked_;
  // Disaggregated: prefilled requests waiting for a decode replica to be up (none is), in order; their
  // prefill replica holds their KV (state kAwaitingPull, transfers_[slot].to = kNoDecode).
  std::deque<RequestId> decode_waiting_;
  static constexpr uint32_t kNoDecode = UINT32_MAX;
  DecodeWake decode_wake_;
  std::optional<core::Time> decode_wake_at_;
  std::vector<RequestId> dropped_;           // scratch of drop_handoffs
  // Disaggregated, during a node failure: the replicas going down at this instant (none of them may
  // start an iteration with the room a called-off hand-off frees); empty otherwise.
  std::vector<uint8_t> failing_;
  // Slots of KV transfers called off after their bytes had drained (only their path latency left):
  // their completion still comes and is ignored (Network::cancel_transfer).
  std::vector<uint32_t> stale_transfers_;
  std::vector<int> link_repairs_pending_;    // per link event: repairs scheduled and not yet done
  std::vector<core::Time> link_repair_at_;   // per link event: when its latest repair comes
  std::vector<core::Rng> link_fault_rngs_;   // per drawn link (plan_.link_mtbf)
  std::vector<std::optional<core::Time>> drawn_link_repair_at_;  // per drawn link while down
  std::vector<int> link_down_count_;         // per directed link: failures not yet repaired
  std::vector<uint64_t> link_speed_epoch_;   // per directed link: speed changes so far (a stale heal is skipped)
  std::vector<uint32_t> changed_links_;      // count_links's scratch
  struct KeepAlive final : EventHandler {    // a strong no-op: the run waits for a link repair
    void on_event(uint64_t) override {}
  };
  KeepAlive keep_alive_;
  int links_down_ = 0;                       // link events whose links are down now
  bool park_timer_pending_ = false;
  bool autoscaler_ = false;                   // a pool is autoscaled (scale_pools_ not empty)
  std::vector<std::unique_ptr<ScalePool>> scale_pools_;  // by pool: one unified, or prefill and/or decode
  ScaleTimer scale_timer_;                    // readiness events
  DrainCheck drain_check_;
  std::vector<ReplicaPhase> phases_;          // per replica
  std::vector<uint32_t> phase_generation_;    // per replica: provisions so far (stale readiness events)
  std::vector<core::Time> ready_at_;          // per replica while starting: when its cold start ends
  std::vector<int64_t> pushes_to_;            // per replica: pd_pull = push transfers in flight to it
  // With [faults]: when the next replica of the pool starting at replica `first` can be up without a
  // repair (a start under way, or an off replica the next evaluation can provision); unset when none
  // can or the pool is not autoscaled.
  std::optional<core::Time> next_scale_up(size_t first) const;
  const ScalePool* scale_pool_at(size_t first) const;  // the autoscaled pool starting there, or null
  // Replica i is up again (ready, or its drain called off): the requests waiting for one go to it.
  void came_up(uint32_t i);
  uint32_t provisioned_ = 0;                  // starting + up + draining
  std::vector<RequestId> lost_;              // scratch: requests lost with failing replicas ...
  std::vector<uint32_t> lost_from_;          // ... and the replica each was lost with
  std::vector<size_t> order_;                // scratch
  std::vector<std::pair<int64_t, int64_t>> pairs_;  // scratch
  RetryPolicy retry_;
  core::Rng retry_rng_{0, "retries"};
  RetryTimer retry_timer_;
  std::unordered_map<uint64_t, Retry> attempts_;  // with retries: per request in flight, what its client sends again
  std::vector<Retry> retries_;                    // retries waiting for their send, by slot
  std::vector<uint64_t> free_retries_;            // free slots of retries_
  uint64_t source_sends_ = 0;                     // closed loop with retries: requests the source has sent
};

}  // namespace servesim::sim
