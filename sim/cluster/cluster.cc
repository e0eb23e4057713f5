#include "sim/cluster/cluster.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"

namespace servesim::sim {

Cluster::Cluster(Simulation& sim, traces::ArrivalSource& source, std::unique_ptr<Router> router,
                 core::LifecycleObserver& observer, const ClusterLayout& layout,
                 std::unique_ptr<Router> decode_router, Network* network)
    : sim_(sim),
      source_(source),
      router_(std::move(router)),
      decode_router_(std::move(decode_router)),
      network_(network),
      observer_(observer),
      layout_(layout),
      loads_(layout.replicas) {
  if (layout_.prefill_replicas > 0 &&
      (layout_.prefill_replicas >= layout_.replicas || !decode_router_ || !network_))
    throw core::Error("internal: a disaggregated cluster needs prefill and decode replicas, a decode router and a network");
  replicas_.reserve(layout_.replicas);
}

Replica& Cluster::add_replica(const ReplicaConfig& config, const hwmodels::StepCostModel& cost,
                              std::unique_ptr<BatchScheduler> scheduler, std::vector<int64_t> gpus) {
  const size_t i = replicas_.size();
  if (i >= loads_.size()) throw core::Error("internal: more replicas added than declared");
  ReplicaConfig c = config;
  c.index = static_cast<uint32_t>(i);
  c.role = !disaggregated() ? ReplicaRole::kUnified
           : i < layout_.prefill_replicas ? ReplicaRole::kPrefill
                                          : ReplicaRole::kDecode;
  if (disaggregated() && gpus.empty()) throw core::Error("internal: disaggregated replicas need GPU placements");
  replicas_.push_back(std::make_unique<Replica>(c, sim_, requests_, cost, std::move(scheduler),
                                                static_cast<core::LifecycleObserver&>(*this), loads_[i],
                                                static_cast<ReplicaListener*>(this)));
  gpus_.push_back(std::move(gpus));
  return *replicas_.back();
}

void Cluster::start() {
  if (replicas_.size() != loads_.size()) throw core::Error("internal: cluster started before all replicas were added");
  std::vector<Replica*> all;
  for (auto& r : replicas_) all.push_back(r.get());
  const size_t p = disaggregated() ? layout_.prefill_replicas : all.size();
  router_->bind(std::span<Replica* const>(all.data(), p), sim_);
  if (decode_router_) decode_router_->bind(std::span<Replica* const>(all.data() + p, all.size() - p), sim_);
  for (auto& r : replicas_) {
    core::ReplicaState s;
    s.replica = r->index();
    s.time = sim_.now();
    s.kv_blocks_total = r->kv().total();
    observer_.on_replica_state(s);
  }
  if (read_next()) sim_.schedule_at(next_.arrival, this);
}

bool Cluster::read_next() {
  has_next_ = source_.next(next_);
  return has_next_;
}

void Cluster::reject(const Request& r, uint32_t replica, core::RequestOutcome why) {
  core::RequestRecord rec;
  rec.id = r.id;
  rec.replica = rec.decode_replica = replica;
  rec.outcome = why;
  rec.prompt_tokens = r.prompt_tokens;
  rec.output_tokens = r.output_tokens;
  rec.arrival = rec.first_token = rec.finish = rec.client_first_token = rec.client_finish = r.arrival;
  ++counters_.rejected;
  observer_.on_request_done(rec);
}

void Cluster::on_event(uint64_t payload) {
  if (payload == 0) {
    arrive();
  } else {  // past the client path: into the replica's queue
    const RequestId id{static_cast<uint32_t>(payload - 1)};
    replicas_[requests_[id].routed_replica]->enqueue(id);
  }
}

void Cluster::arrive() {
  Request r;
  r.id = counters_.arrived++;
  r.arrival = next_.arrival;
  r.prompt_tokens = next_.prompt_tokens;
  r.output_tokens = next_.output_tokens;
  r.session = next_.session;
  r.repetition = next_.repetition;
  r.hashed_tokens = next_.hashed_tokens;
  r.block_hashes = next_.block_hashes;
  observer_.on_arrival(r.id, r.arrival);

  const size_t pool = disaggregated() ? layout_.prefill_replicas : replicas_.size();
  const uint32_t target = router_->route(r, std::span<const ReplicaLoad>(loads_.data(), pool));
  if (target >= pool)
    throw core::Error("internal: router chose replica " + std::to_string(target) + " of " + std::to_string(pool));
  r.routed_replica = target;
  Replica& replica = *replicas_[target];
  std::optional<core::RequestOutcome> why = replica.rejection(r);
  // Disaggregated: the decode pool must be able to hold the whole sequence too.
  if (!why && disaggregated() && r.output_tokens > 1) why = replicas_[pool]->rejection(r);
  if (why) {
    reject(r, target, *why);
  } else {
    const double ingress_s =
        layout_.client.ingress_s + layout_.client.ingress_s_per_prompt_token * static_cast<double>(r.prompt_tokens);
    const RequestId id = requests_.insert(std::move(r));
    if (ingress_s > 0)
      sim_.schedule_after(core::Duration::from_seconds(ingress_s), this, uint64_t{id.slot} + 1);
    else
      replica.enqueue(id);
  }

  if (read_next()) {
    if (next_.arrival < sim_.now())
      throw core::Error("internal: workload produced an arrival before the previous one");
    sim_.schedule_at(next_.arrival, this);
  }
}

void Cluster::on_prefill_done(Replica& replica, RequestId id) {
  Request& r = requests_[id];
  const size_t first = layout_.prefill_replicas;
  const uint32_t pick = decode_router_->route(
      r, std::span<const ReplicaLoad>(loads_.data() + first, loads_.size() - first));
  if (pick >= loads_.size() - first) throw core::Error("internal: decode router chose a replica out of range");
  const uint32_t to = static_cast<uint32_t>(first + pick);
  const auto& src = gpus_[replica.index()];
  const auto& dst = gpus_[to];
  // Every GPU of the decode replica receives the KV it will hold: its share of the heads, or all of
  // a latent (MLA) or of a replicated KV head that each GPU keeps whole. The pairs below split the
  // total evenly, so each destination GPU gets exactly its own bytes.
  // A hybrid model moves each layer group's share (the window's tokens, the states).
  const double bytes = replicas_[to]->kv().hybrid()
                           ? replicas_[to]->kv_bytes_per_gpu(r.kv_tokens) * static_cast<double>(dst.size())
                           : replicas_[to]->kv_bytes_per_token_per_gpu() * static_cast<double>(dst.size()) *
                                 static_cast<double>(r.kv_tokens);
  pairs_.clear();
  const size_t k = std::max(src.size(), dst.size());
  for (size_t i = 0; i < k; ++i) pairs_.emplace_back(src[i % src.size()], dst[i % dst.size()]);

  double to_move = bytes;
  if (layout_.layerwise_kv_transfer) {
    // Layer-wise streaming: each layer's KV leaves as soon as that layer of the last prefill
    // iteration is computed, so the transfer overlaps that iteration; at least the last layer's
    // share is left when it ends. Each pair carries bytes / k and, during the overlap, sends at its
    // path's bottleneck; the slowest pair decides what is left of the (evenly split) transfer.
    // (Contention during the overlap is not modelled.)
    const double per_pair = bytes / static_cast<double>(k);
    const double overlap_s = replica.last_iteration().seconds();
    const double layers = static_cast<double>(std::max<int64_t>(1, replica.cost_model().model().num_layers));
    double left = per_pair / layers;
    for (const auto& [a, b] : pairs_)
      left = std::max(left, per_pair - overlap_s * network_->topology().path(a, b).bottleneck_bytes_per_s);
    to_move = left * static_cast<double>(k);
  }
  if (transfers_.size() <= id.slot) transfers_.resize(id.slot + 1);
  transfers_[id.slot] = PendingTransfer{replica.index(), to, sim_.now(), bytes};
  network_->start_transfer(id.slot, pairs_, to_move, this);
}

void Cluster::on_transfer_done(uint64_t tag) {
  const RequestId id{static_cast<uint32_t>(tag)};
  const PendingTransfer t = transfers_[id.slot];
  Request& r = requests_[id];
  replicas_[t.from]->finish_handoff(id);
  r.kv_bytes_transferred += static_cast<uint64_t>(t.bytes);
  ++counters_.kv_transfers;
  counters_.kv_transfer_bytes += t.bytes;
  core::KvTransfer rec;
  rec.id = r.id;
  rec.from_replica = t.from;
  rec.to_replica = t.to;
  rec.bytes = t.bytes;
  rec.start = t.start;
  rec.end = sim_.now();
  observer_.on_kv_transfer(rec);
  replicas_[t.to]->enqueue(id);
}

void Cluster::on_request_done(const core::RequestRecord& r) {
  ++counters_.completed;
  core::RequestRecord rec = r;
  // The client has each token egress_s after the iteration that produced it, the first one
  // first_token_s later still.
  const core::Duration egress = core::Duration::from_seconds(layout_.client.egress_s);
  rec.client_first_token = r.first_token + egress + core::Duration::from_seconds(layout_.client.first_token_s);
  rec.client_finish = std::max(r.finish + egress, rec.client_first_token);
  observer_.on_request_done(rec);
}

void Cluster::on_preempt(uint64_t id, uint32_t replica, core::Time t) {
  ++counters_.preemptions;
  observer_.on_preempt(id, replica, t);
}

void Cluster::check_drained() const {
  if (has_next_ || counters_.arrived != counters_.completed + counters_.rejected || requests_.live() != 0)
    throw core::Error("internal: requests not conserved: arrived " + std::to_string(counters_.arrived) +
                      ", completed " + std::to_string(counters_.completed) + ", rejected " +
                      std::to_string(counters_.rejected) + ", still in flight " +
                      std::to_string(requests_.live()));
  for (size_t i = 0; i < loads_.size(); ++i)
    if (loads_[i].oracle_remaining_tokens != 0 || loads_[i].prefill_tokens_waiting != 0)
      throw core::Error("internal: replica " + std::to_string(i) + " ends with " +
                        std::to_string(loads_[i].oracle_remaining_tokens) + " remaining and " +
                        std::to_string(loads_[i].prefill_tokens_waiting) +
                        " prefill tokens waiting (load accounting drifted)");
  for (const auto& r : replicas_) {
    r->kv().check();
    if (r->kv().in_use() != 0 || !r->idle())
      throw core::Error("internal: replica " + std::to_string(r->index()) + " still holds " +
                        std::to_string(r->kv().in_use()) + " KV blocks after the run");
  }
}

}  // namespace servesim::sim
