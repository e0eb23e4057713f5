#include "sim/cluster/cluster.h"

#include <string>

#include "sim/core/error.h"

namespace servesim::sim {

Cluster::Cluster(Simulation& sim, traces::ArrivalSource& source, std::unique_ptr<Router> router,
                 core::LifecycleObserver& observer, size_t num_replicas)
    : sim_(sim), source_(source), router_(std::move(router)), observer_(observer), loads_(num_replicas) {
  replicas_.reserve(num_replicas);
}

Replica& Cluster::add_replica(const ReplicaConfig& config, const hwmodels::StepCostModel& cost,
                              std::unique_ptr<BatchScheduler> scheduler) {
  const size_t i = replicas_.size();
  if (i >= loads_.size()) throw core::Error("internal: more replicas added than declared");
  ReplicaConfig c = config;
  c.index = static_cast<uint32_t>(i);
  replicas_.push_back(std::make_unique<Replica>(c, sim_, requests_, cost, std::move(scheduler),
                                                static_cast<core::LifecycleObserver&>(*this), loads_[i]));
  return *replicas_.back();
}

void Cluster::start() {
  if (replicas_.size() != loads_.size()) throw core::Error("internal: cluster started before all replicas were added");
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

void Cluster::on_event(uint64_t /*payload*/) {
  Request r;
  r.id = counters_.arrived++;
  r.arrival = next_.arrival;
  r.prompt_tokens = next_.prompt_tokens;
  r.output_tokens = next_.output_tokens;
  r.session = next_.session;
  r.block_hashes = next_.block_hashes;
  observer_.on_arrival(r.id, r.arrival);

  const uint32_t target = router_->route(r, loads_);
  if (target >= replicas_.size())
    throw core::Error("internal: router chose replica " + std::to_string(target) + " of " +
                      std::to_string(replicas_.size()));
  Replica& replica = *replicas_[target];
  if (auto why = replica.rejection(r)) {
    core::RequestRecord rec;
    rec.id = r.id;
    rec.replica = target;
    rec.outcome = *why;
    rec.prompt_tokens = r.prompt_tokens;
    rec.output_tokens = r.output_tokens;
    rec.arrival = rec.first_token = rec.finish = r.arrival;
    ++counters_.rejected;
    observer_.on_request_done(rec);
  } else {
    replica.enqueue(requests_.insert(std::move(r)));
  }

  if (read_next()) {
    if (next_.arrival < sim_.now())
      throw core::Error("internal: workload produced an arrival before the previous one");
    sim_.schedule_at(next_.arrival, this);
  }
}

void Cluster::on_request_done(const core::RequestRecord& r) {
  ++counters_.completed;
  observer_.on_request_done(r);
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
  for (const auto& r : replicas_)
    if (r->kv().used() != 0 || !r->idle())
      throw core::Error("internal: replica " + std::to_string(r->index()) + " still holds " +
                        std::to_string(r->kv().used()) + " KV blocks after the run");
}

}  // namespace servesim::sim
