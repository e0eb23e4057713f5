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
  wake_.cluster = this;
  timer_.cluster = this;
  fault_timer_.cluster = this;
  park_timer_.cluster = this;
  decode_wake_.cluster = this;
  retry_timer_.cluster = this;
  scale_timer_.cluster = this;
  drain_check_.cluster = this;
  closed_loop_ = source_.closed_loop();
  timeout_ = source_.client_timeout();
  if (layout_.prefill_replicas > 0 &&
      (layout_.prefill_replicas >= layout_.replicas || !decode_router_ || !network_))
    throw core::Error("internal: a disaggregated cluster needs prefill and decode replicas, a decode router and a network");
  replicas_.reserve(layout_.replicas);
}

Replica& Cluster::add_replica(const ReplicaConfig& config, const hwmodels::StepCostModel& cost,
                              std::unique_ptr<BatchScheduler> scheduler, std::vector<int64_t> gpus,
                              int64_t attention_ranks) {
  const size_t i = replicas_.size();
  if (i >= loads_.size()) throw core::Error("internal: more replicas added than declared");
  ReplicaConfig c = config;
  c.index = static_cast<uint32_t>(i);
  c.role = !disaggregated() ? ReplicaRole::kUnified
           : i < layout_.prefill_replicas ? ReplicaRole::kPrefill
                                          : ReplicaRole::kDecode;
  if (disaggregated() && gpus.empty()) throw core::Error("internal: disaggregated replicas need GPU placements");
  if (attention_ranks < 1 || (!gpus.empty() && gpus.size() % static_cast<size_t>(attention_ranks) != 0))
    throw core::Error("internal: a replica's GPUs must split into whole attention ranks");
  if (!gpus.empty()) c.gpus_per_rank = static_cast<int64_t>(gpus.size()) / attention_ranks;  // its swaps' GPUs
  replicas_.push_back(std::make_unique<Replica>(c, sim_, requests_, cost, std::move(scheduler),
                                                static_cast<core::LifecycleObserver&>(*this), loads_[i],
                                                static_cast<ReplicaListener*>(this)));
  replicas_.back()->set_signals(observer_);  // the cluster forwards them unchanged (cluster.h)
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (network_ && !gpus.empty()) {
    const Topology& topo = network_->topology();
    size_t per_node = 0;
    while (per_node < gpus.size() && topo.node_of(gpus[per_node]) == topo.node_of(gpus[0])) ++per_node;
    if (per_node < gpus.size())
      for (size_t g = 0; g < gpus.size(); ++g) pairs.emplace_back(gpus[g], gpus[(g + per_node) % gpus.size()]);
  }
  exchange_pairs_.push_back(std::move(pairs));
  ranks_.push_back(attention_ranks);
  if (network_ && !gpus.empty() && layout_.tier_flows) replicas_.back()->set_tier_fabric();  // used only with a tier
  if (network_ && !gpus.empty() && layout_.swap_flows && c.preemption == PreemptionMode::kSwap)
    replicas_.back()->set_swap_fabric();
  gpus_.push_back(std::move(gpus));
  if (!kv_stores_.empty() && c.role != ReplicaRole::kDecode) {
    if (store_group(i) >= kv_stores_.size()) throw core::Error("internal: a replica past the last store group");
    replicas_.back()->attach_store(kv_stores_[store_group(i)].get());
  }
  return *replicas_.back();
}

void Cluster::tier_pairs(Replica& replica, KvTierEndpoint from, KvTierEndpoint to) {
  const Topology& topo = network_->topology();
  if ((from == KvTierEndpoint::kStore || to == KvTierEndpoint::kStore) && !topo.has_store())
    throw core::Error("internal: a KV store copy on a topology without the store");
  const auto store = static_cast<int64_t>(store_group(replica.index()));
  if ((from == KvTierEndpoint::kStore || to == KvTierEndpoint::kStore) && store >= topo.num_stores())
    throw core::Error("internal: a replica's store group has no store on the topology");
  auto endpoint = [&topo, store](KvTierEndpoint e, int64_t g) {
    switch (e) {
      case KvTierEndpoint::kHost: return topo.host_endpoint(topo.node_of(g));
      case KvTierEndpoint::kStore: return topo.store_endpoint(store);
      case KvTierEndpoint::kNvme: return topo.nvme_endpoint(topo.node_of(g));
      case KvTierEndpoint::kGpu: break;
    }
    return g;
  };
  host_pairs_.clear();
  for (int64_t g : gpus_[replica.index()]) host_pairs_.emplace_back(endpoint(from, g), endpoint(to, g));
}

double Cluster::store_latency(const Replica& replica, KvTierEndpoint from, KvTierEndpoint to) const {
  if (from != KvTierEndpoint::kStore && to != KvTierEndpoint::kStore) return 0;
  const size_t group = store_group(replica.index());
  return group < kv_stores_.size() ? kv_stores_[group]->spec().latency_s : 0;
}

void Cluster::tier_copy(Replica& replica, KvTierEndpoint from, KvTierEndpoint to, double bytes, uint64_t tag,
                        TransferListener* done) {
  tier_pairs(replica, from, to);
  // A store copy starts moving bytes after the store's own access latency (its lookup).
  network_->start_transfer(tag, host_pairs_, bytes, done, store_latency(replica, from, to));
  if (links_down_ > 0) check_cut_off();
}

double Cluster::cancel_tier_copy(Replica& replica, uint64_t tag, const TransferListener* done, double bytes) {
  const std::optional<double> left = network_->cancel_transfer(tag, done);  // of one GPU's share (tier_copy)
  const double share = bytes / static_cast<double>(gpus_[replica.index()].size());
  return !left || !(share > 0) ? 1.0 : std::clamp(1.0 - *left / share, 0.0, 1.0);
}

double Cluster::tier_copy_seconds(Replica& replica, KvTierEndpoint from, KvTierEndpoint to, double bytes) {
  tier_pairs(replica, from, to);
  return store_latency(replica, from, to) + network_->transfer_seconds_now(host_pairs_, bytes);
}

void Cluster::set_kv_store(std::unique_ptr<SharedKvStore> store) {
  std::vector<std::unique_ptr<SharedKvStore>> one;
  one.push_back(std::move(store));
  set_kv_stores(std::move(one), 0);
}

void Cluster::set_kv_stores(std::vector<std::unique_ptr<SharedKvStore>> stores, size_t replicas_per_store) {
  // Disaggregated: the prefill replicas' (they look prefixes up; decode replicas do not).
  const size_t users = disaggregated() ? layout_.prefill_replicas : layout_.replicas;
  const size_t groups = replicas_per_store > 0 ? (users + replicas_per_store - 1) / replicas_per_store : 1;
  if (stores.size() != groups) throw core::Error("internal: one store per group of replicas");
  kv_stores_ = std::move(stores);
  replicas_per_store_ = replicas_per_store;
  for (auto& r : replicas_)
    if (r->role() != ReplicaRole::kDecode) r->attach_store(kv_stores_[store_group(r->index())].get());
}

double Cluster::exchange_seconds(Replica& replica, double bytes) {
  const auto& pairs = exchange_pairs_[replica.index()];
  if (pairs.empty()) return -1.0;
  return network_->start_exchange(pairs, bytes);
}

void Cluster::start() {
  if (replicas_.size() != loads_.size()) throw core::Error("internal: cluster started before all replicas were added");
  std::vector<Replica*> all;
  for (auto& r : replicas_) all.push_back(r.get());
  const size_t p = disaggregated() ? layout_.prefill_replicas : all.size();
  router_->bind(std::span<Replica* const>(all.data(), p), sim_);
  if (decode_router_) decode_router_->bind(std::span<Replica* const>(all.data() + p, all.size() - p), sim_);
  if (admission_) admission_->bind(std::span<Replica* const>(all.data(), p), source_.classes());
  for (const core::RequestClass& c : source_.classes()) class_priority_.push_back(static_cast<int32_t>(c.priority));
  class_tenant_ = core::class_tenants(source_.classes());
  for (auto& r : replicas_) {
    core::ReplicaState s;
    s.replica = r->index();
    s.time = sim_.now();
    s.kv_blocks_total = r->kv().total();
    observer_.on_replica_state(s);
  }
  if (autoscaler_) start_autoscaling();
  // Run ahead where every replica's arrivals are known ahead and nothing else couples the replicas
  // (runs_ahead()). Pending time-outs, retries, faults and the rest put events in the queue that
  // reach a replica; an admission policy or autoscaler reads the replicas' state.
  // Schedulers sharing state across replicas (a cluster-wide fair counter) read it in time order.
  const bool shared_scheduling = std::any_of(replicas_.begin(), replicas_.end(), [](const auto& r) {
    return r->scheduler().shares_state_across_replicas();
  });
  runs_ahead_ = layout_.run_ahead && !shared_scheduling && !disaggregated() && !admission_ && !autoscaler_ &&
                !faults_ && !timeout_ && !retry_.any() && !closed_loop_ && network_ == nullptr && kv_stores_.empty() &&
                (router_->next_in_turn(replicas_.size()) >= 0 || router_->ignores_decode_progress());
  if (runs_ahead_) {
    ingress_due_.assign(replicas_.size(), {});
    for (auto& r : replicas_) r->set_run_ahead(this);
  }
  if (closed_loop_) {
    poll_source();
  } else if (read_next()) {
    sim_.schedule_at(next_.arrival, this);
  }
}

void Cluster::poll_source() {
  const std::optional<core::Time> t = source_.due();
  if (!t) return;
  if (*t < sim_.now()) throw core::Error("internal: a closed-loop workload made a request due in the past");
  if (wake_pending_ && wake_at_ <= *t) return;  // an earlier wake will ask again
  wake_pending_ = true;
  wake_at_ = *t;
  sim_.schedule_at(*t, &wake_, ++wake_version_);
}

void Cluster::on_wake(uint64_t version) {
  if (version != wake_version_) return;  // superseded by an earlier wake
  wake_pending_ = false;
  for (std::optional<core::Time> t = source_.due(); t && *t <= sim_.now(); t = source_.due()) {
    if (!source_.next(next_) || next_.arrival != sim_.now())
      throw core::Error("internal: a closed-loop workload's due request did not come at its time");
    admit(next_);
  }
  poll_source();
}

bool Cluster::read_next() {
  if (!ahead_.empty()) {  // read ahead (horizon_ns)
    std::swap(next_, ahead_.front());
    ahead_.pop_front();
    has_next_ = true;
  } else {
    has_next_ = !source_done_ && source_.next(next_);
  }
  return has_next_;
}

int64_t Cluster::horizon_ns(uint32_t replica) {
  int64_t h = INT64_MAX;
  if (const int64_t interval = layout_.sample_interval_ns; interval > 0) {
    // State signals up to the next sample time T (>= now) and not past it: the signals at <= T come
    // before the one that writes T's sample. A signal comes at an iteration's start, and an iteration
    // handled in line ends before the horizon: T + 1.
    const int64_t now = sim_.now().ns();
    const int64_t next = now % interval == 0 ? now : (now / interval + 1) * interval;
    if (next < INT64_MAX) h = next + 1;
  }
  for (const int64_t t : ingress_due_[replica]) h = std::min(h, t);  // on the client path to it now
  if (!has_next_) return h;
  // No request sent at or after `s` reaches a queue before s's arrival plus the fixed part of the
  // client path's ingress (as admit() schedules it, rounded the same way): a later request with a
  // shorter prompt may reach its queue before `s` does, never before that.
  const auto soonest_ns = [&](const traces::RequestSpec& s) {
    int64_t t = s.arrival.ns();
    if (layout_.client.ingress_s > 0) t += core::Duration::from_seconds(layout_.client.ingress_s).ns();
    return t;
  };
  const size_t n = replicas_.size();
  const int64_t turn = router_->next_in_turn(n);
  // A router that ignores decode progress may send the next request anywhere: every replica stops
  // where it, or one after it, could reach a queue.
  if (turn < 0) return std::min(h, soonest_ns(next_));
  // The router takes the replicas in turn: the next request (next_) goes to `first`, the k-th after
  // it to first + k, whatever happens to them (a rejected one too has had its turn); none after that
  // one comes to this replica before it is sent.
  const auto first = static_cast<size_t>(turn);
  const size_t k = (replica + n - first) % n;
  while (ahead_.size() < k && !source_done_) {
    ahead_.emplace_back();
    if (!source_.next(ahead_.back())) {
      ahead_.pop_back();
      source_done_ = true;
    }
  }
  if (k > ahead_.size()) return h;  // no request will come to it
  return std::min(h, soonest_ns(k == 0 ? next_ : ahead_[k - 1]));
}

void Cluster::reject(const Request& r, uint32_t replica, core::RequestOutcome why) {
  core::RequestRecord rec;
  rec.id = r.id;
  rec.replica = rec.decode_replica = replica;
  rec.outcome = why;
  rec.prompt_tokens = r.prompt_tokens;
  rec.output_tokens = r.output_tokens;
  rec.arrival = rec.first_token = rec.finish = rec.client_first_token = rec.client_finish = r.arrival;
  rec.stage = r.stage;
  rec.request_class = r.request_class;
  ++counters_.rejected;
  if (closed_loop_) client_free(r.id, sim_.now(), why);  // the client has its error at once
  client_done(rec);
}

void Cluster::on_event(uint64_t payload) {
  if (payload == 0) {
    arrive();
  } else {  // past the client path: into the replica's queue
    const RequestId id{static_cast<uint32_t>(payload - 1)};
    if (requests_[id].timed_out) {  // its client gave up on the way (and it has been signalled)
      requests_.erase(id);
      return;
    }
    // Its replica failed while it was on the way, or (autoscaled, sent while none was up) is not in
    // service: routed again now.
    const uint32_t to = requests_[id].routed_replica;
    if (replicas_[to]->down() ||
        (autoscaler_ && (phases_[to] == ReplicaPhase::kOff || phases_[to] == ReplicaPhase::kStarting))) {
      Request& r = requests_[id];
      replicas_[r.routed_replica]->incoming(r, -1);  // no longer coming there
      r.state = RequestState::kWaiting;
      route_again(id);
      return;
    }
    if (runs_ahead_) {
      std::vector<int64_t>& due = ingress_due_[to];
      const auto it = std::find(due.begin(), due.end(), sim_.now().ns());
      if (it == due.end()) throw core::Error("internal: a request reached its replica at a time not on record");
      due.erase(it);
    }
    replicas_[to]->enqueue(id);
  }
}

void Cluster::arrive() {
  admit(next_);
  if (read_next()) {
    if (next_.arrival < sim_.now())
      throw core::Error("internal: workload produced an arrival before the previous one");
    sim_.schedule_at(next_.arrival, this);
  }
}

void Cluster::admit(const traces::RequestSpec& spec, const Retry* retry) {
  Request r;
  r.id = counters_.arrived++;
  r.arrival = spec.arrival;
  r.prompt_tokens = spec.prompt_tokens;
  r.output_tokens = spec.output_tokens;
  r.session = spec.session;
  r.stage = spec.stage;
  r.request_class = static_cast<uint16_t>(spec.request_class);
  if (!class_priority_.empty()) {
    r.priority = class_priority_.at(r.request_class);
    r.tenant = class_tenant_.at(r.request_class);
  }
  r.repetition = spec.repetition;
  r.hashed_tokens = spec.hashed_tokens;
  r.block_hashes = spec.block_hashes;
  observer_.on_arrival(r.id, r.arrival);
  if (retry_.any()) {
    if (retry) fleet_event(core::FleetEventKind::kRequestRetried, retry->replica, r.id, retry->attempt);
    Retry& next = attempts_[r.id];
    next.spec = spec;
    next.attempt = retry ? retry->attempt : 0;
    next.first_sent = retry ? retry->first_sent : spec.arrival;
    if (closed_loop_) next.sent = retry ? retry->sent : source_sends_++;
  }

  const size_t pool = disaggregated() ? layout_.prefill_replicas : replicas_.size();
  uint32_t target = router_->route(r, std::span<const ReplicaLoad>(loads_.data(), pool));
  if (target >= pool)
    throw core::Error("internal: router chose replica " + std::to_string(target) + " of " + std::to_string(pool));
  const bool gaps = faults_ || autoscaler_;  // replicas may be out of service (down, off, draining)
  const bool none_up = gaps && !loads_[target].up && up_from(target) == replicas_.size();
  if (gaps && !none_up) target = up_from(target);
  r.routed_replica = target;
  if (admission_ && !admission_->admit(r, std::span<const ReplicaLoad>(loads_.data(), pool), target)) {
    ++counters_.shed;
    reject(r, target, core::RequestOutcome::kRejectedAdmission);
    return;
  }
  Replica& replica = *replicas_[target];
  std::optional<core::RequestOutcome> why = replica.rejection(r);
  // Disaggregated: the decode pool must be able to hold the whole sequence too.
  if (!why && disaggregated() && r.output_tokens > 1) why = replicas_[pool]->rejection(r);
  if (why) {
    reject(r, target, *why);
    return;
  }
  const double ingress_s = ingress_seconds(r.prompt_tokens);
  const uint64_t number = r.id;
  int64_t deadline = 0;
  if (timeout_ && __builtin_add_overflow(r.arrival.ns(), timeout_->ns(), &deadline))
    throw core::Error("client time-out of request " + std::to_string(number) +
                      " is beyond the int64 nanosecond clock (292 years)");
  if (ingress_s > 0) {
    r.state = RequestState::kIngress;
    replica.incoming(r, +1);  // the routers see it from now on
  }
  const RequestId id = requests_.insert(std::move(r));
  if (timeout_) {
    deadlines_.push_back({deadline, number, id});
    if (!timer_pending_) {
      timer_pending_ = true;
      sim_.schedule_weak_at(core::Time::from_ns(deadline), &timer_);
    }
  }
  if (ingress_s > 0) {
    const core::Duration ingress = core::Duration::from_seconds(ingress_s);
    sim_.schedule_after(ingress, this, uint64_t{id.slot} + 1);
    if (runs_ahead_) ingress_due_[target].push_back((sim_.now() + ingress).ns());
  } else if (none_up) {
    route_again(id);  // parked until a repair, or failed
  } else {
    replica.enqueue(id);
  }
}

void Cluster::on_deadline() {
  timer_pending_ = false;
  const int64_t now = sim_.now().ns();
  auto live = [&](const Deadline& d) { return requests_.holds(d.slot, d.id) && !requests_[d.slot].timed_out; };
  while (!deadlines_.empty() && deadlines_.front().ns <= now) {
    const Deadline d = deadlines_.front();
    deadlines_.pop_front();
    if (live(d)) time_out(d.slot);
  }
  // Requests that completed in time need no timer.
  while (!deadlines_.empty() && !live(deadlines_.front())) deadlines_.pop_front();
  if (!deadlines_.empty()) {
    timer_pending_ = true;
    sim_.schedule_weak_at(core::Time::from_ns(deadlines_.front().ns), &timer_);
  }
  if (closed_loop_) poll_source();
}

void Cluster::time_out(RequestId id) {
  Request& r = requests_[id];
  r.timed_out = true;
  // The client is free now, whatever the engine still does with the request.
  if (closed_loop_) client_free(r.id, sim_.now(), core::RequestOutcome::kTimedOut);
  switch (r.state) {
    case RequestState::kIngress: {
      // Not in a queue yet: it leaves now; its slot waits for the ingress event (which is how the
      // engine would see a request whose connection is already closed).
      replicas_[r.routed_replica]->incoming(r, -1);
      core::RequestRecord rec = r.timed_out_record(sim_.now(), r.routed_replica, r.routed_replica);
      signal_timed_out(rec);
      break;
    }
    case RequestState::kWaiting:
    case RequestState::kRunning:
      replicas_[r.replica]->abort(id);  // signals it, through on_request_done
      break;
    case RequestState::kTransferring:
      break;  // its KV is on the wire: it leaves when the transfer ends (on_transfer_done)
    case RequestState::kAwaitingPull: {  // its prefill replica lets go of its KV now
      const PendingTransfer t = transfers_[id.slot];
      if (t.to == kNoDecode) {  // waiting for a decode replica to come back
        decode_waiting_.erase(std::find(decode_waiting_.begin(), decode_waiting_.end(), id));
        core::RequestRecord rec = r.timed_out_record(sim_.now(), t.from, t.from);
        replicas_[t.from]->finish_handoff(id);
        requests_.erase(id);
        signal_timed_out(rec);
        break;
      }
      std::deque<RequestId>& q = pulls_[t.to];
      q.erase(std::find(q.begin(), q.end(), id));
      --pulls_waiting_;
      replicas_[t.to]->pull_queued(-1);
      core::RequestRecord rec = r.timed_out_record(sim_.now(), t.from, t.from);
      replicas_[t.from]->finish_handoff(id);
      requests_.erase(id);
      signal_timed_out(rec);
      start_pulls(t.to);  // the head may have left
      if (autoscaler_) {  // the last request a draining replica held may have gone
        after_departure(t.from);
        after_departure(t.to);
      }
      break;
    }
    case RequestState::kParked: {  // waiting at the cluster for a replica to come back
      parked_.erase(std::find(parked_.begin(), parked_.end(), id));
      core::RequestRecord rec = r.timed_out_record(sim_.now(), r.routed_replica, r.routed_replica);
      requests_.erase(id);
      signal_timed_out(rec);
      break;
    }
    case RequestState::kDone:
      throw core::Error("internal: timing out a request that has left");
  }
}

void Cluster::signal_timed_out(core::RequestRecord& rec) {
  ++counters_.timed_out;
  const core::Time gave_up = rec.arrival + *timeout_;
  rec.client_finish = gave_up;
  rec.client_first_token = gave_up;
  if (rec.generated_tokens > 0) {
    const core::Time first = rec.first_token + core::Duration::from_seconds(layout_.client.egress_s) +
                             core::Duration::from_seconds(layout_.client.first_token_s);
    rec.client_first_token = std::min(first, gave_up);
  }
  client_done(rec);
}

void Cluster::on_prefill_done(Replica& replica, RequestId id) { hand_off(id, replica.index(), true, sim_.now()); }

void Cluster::hand_off(RequestId id, uint32_t from, bool overlap, core::Time ready) {
  Request& r = requests_[id];
  r.state = RequestState::kTransferring;
  Replica& replica = *replicas_[from];
  const size_t first = layout_.prefill_replicas;
  const uint32_t pick = decode_router_->route(
      r, std::span<const ReplicaLoad>(loads_.data() + first, loads_.size() - first));
  if (pick >= loads_.size() - first) throw core::Error("internal: decode router chose a replica out of range");
  uint32_t to = static_cast<uint32_t>(first + pick);
  if (transfers_.size() <= id.slot) transfers_.resize(id.slot + 1);
  // Around a decode replica that is not up (down under [faults]; off, starting or draining under an
  // autoscaler), to the next one up in the pool (ring order).
  if ((faults_ || autoscaler_) && !loads_[to].up) {
    to = up_in(to, first, replicas_.size() - first);
    if (to == replicas_.size()) {
      // Without replica faults an autoscaled pool always keeps one replica up (min_replicas >= 1).
      if (!faults_) throw core::Error("internal: no decode replica up");
      // None is up: it waits, its prefill replica holding its KV (as a pull waiting for blocks), for
      // the first decode replica's repair or, autoscaled, one provisioned; it fails if none is coming
      // (wake_decode_waiting).
      transfers_[id.slot] = PendingTransfer{from, kNoDecode, ready, ready, 0, 0};
      r.state = RequestState::kAwaitingPull;
      decode_waiting_.push_back(id);
      const std::optional<core::Time> at = next_up(first, replicas_.size());
      schedule_decode_wake(at ? std::max(*at, sim_.now()) : sim_.now());
      return;
    }
  }
  // A hybrid model moves each layer group's share (the window's tokens, the states). Every GPU of
  // the decode replica's rank receives the KV it will hold (see start_transfer).
  const size_t dst_gpus = gpus_[to].size() / static_cast<size_t>(ranks_[to]);
  const double bytes = replicas_[to]->kv().hybrid()
                           ? replicas_[to]->kv_bytes_per_gpu(r.kv_tokens) * static_cast<double>(dst_gpus)
                           : replicas_[to]->kv_bytes_per_token_per_gpu() * static_cast<double>(dst_gpus) *
                                 static_cast<double>(r.kv_tokens);
  transfers_[id.slot] = PendingTransfer{from, to, ready, sim_.now(), bytes, 0};
  if (layout_.pd_pull == PdPull::kPush) {
    if (autoscaler_) ++pushes_to_[to];  // a draining decode replica waits for it (switch_off_if_empty)
    start_transfer(id, overlap);
    return;
  }
  replica.report_state();  // the decode replica signals now; the prefill one must have first
  Replica& decode = *replicas_[to];
  // The arrival check (Cluster::admit) asks the decode pool's first replica; the pool is uniform,
  // so this holds unless a replica differs: then the request could never move, and says so.
  if (!decode.pull_fits(id))
    throw core::Error("request " + std::to_string(r.id) + " needs " + std::to_string(decode.pull_blocks(id)) +
                      " KV blocks for its first decode step, more than decode replica " + std::to_string(to) +
                      " can ever reserve (" + std::to_string(decode.kv().total()) +
                      " blocks, less its scheduler's reserve): its KV could never be pulled");
  if (pulls_.empty()) pulls_.resize(replicas_.size());
  // Behind the pulls already waiting there (FIFO), or at once when its blocks are free.
  if (pulls_[to].empty()) {
    if (const int64_t blocks = decode.reserve_pull(id); blocks >= 0) {
      transfers_[id.slot].blocks = blocks;
      start_transfer(id, overlap);
      return;
    }
  }
  r.state = RequestState::kAwaitingPull;
  pulls_[to].push_back(id);
  decode.pull_queued(+1);
  counters_.pulls_waiting_peak = std::max(counters_.pulls_waiting_peak, ++pulls_waiting_);
}

void Cluster::start_pulls(uint32_t to) {
  if (pulls_.empty()) return;
  std::deque<RequestId>& q = pulls_[to];
  Replica& decode = *replicas_[to];
  while (!q.empty()) {
    const RequestId id = q.front();
    const int64_t blocks = decode.reserve_pull(id);
    if (blocks < 0) break;
    q.pop_front();
    --pulls_waiting_;
    decode.pull_queued(-1);
    PendingTransfer& t = transfers_[id.slot];
    t.blocks = blocks;
    const double wait_s = (sim_.now() - t.ready).seconds();
    if (wait_s > 0) {
      ++counters_.pull_waits;
      counters_.pull_wait_s += wait_s;
      counters_.pull_wait_max_s = std::max(counters_.pull_wait_max_s, wait_s);
    }
    requests_[id].state = RequestState::kTransferring;
    start_transfer(id, sim_.now() == t.ready);
  }
}

void Cluster::start_transfer(RequestId id, bool overlap) {
  const Request& r = requests_[id];
  PendingTransfer& t = transfers_[id.slot];
  t.start = sim_.now();
  // The request's KV sits on one attention rank of each replica (the whole replica without data
  // parallelism); ranks are taken by request id.
  auto rank_gpus = [&](uint32_t replica_index) {
    const auto& all = gpus_[replica_index];
    const size_t ranks = static_cast<size_t>(ranks_[replica_index]);
    const size_t per = all.size() / ranks;
    return std::span<const int64_t>(all.data() + static_cast<size_t>(r.id % ranks) * per, per);
  };
  const std::span<const int64_t> src = rank_gpus(t.from);
  const std::span<const int64_t> dst = rank_gpus(t.to);
  // Every GPU of the decode replica receives the KV it will hold: its share of the heads, or all of
  // a latent (MLA) or of a replicated KV head that each GPU keeps whole. The pairs below split the
  // total evenly, so each destination GPU gets exactly its own bytes.
  const double bytes = t.bytes;
  pairs_.clear();
  const size_t k = std::max(src.size(), dst.size());
  for (size_t i = 0; i < k; ++i) pairs_.emplace_back(src[i % src.size()], dst[i % dst.size()]);

  double to_move = bytes;
  if (layout_.layerwise_kv_transfer && overlap) {
    // Layer-wise streaming: each layer's KV leaves as soon as that layer of the last prefill
    // iteration is computed, so the transfer overlaps that iteration; at least the last layer's
    // share is left when it ends. Each pair carries bytes / k and, during the overlap, sends at its
    // path's bottleneck; the slowest pair decides what is left of the (evenly split) transfer.
    // (Contention during the overlap is not modelled.) A pull that waited for decode blocks had
    // nowhere to stream to: it moves everything after.
    const Replica& replica = *replicas_[t.from];
    const double per_pair = bytes / static_cast<double>(k);
    const double overlap_s = replica.last_iteration().seconds();
    const double layers = static_cast<double>(std::max<int64_t>(1, replica.cost_model().model().num_layers));
    double left = per_pair / layers;
    for (const auto& [a, b] : pairs_)
      left = std::max(left, per_pair - overlap_s * network_->topology().path(a, b).bottleneck_bytes_per_s);
    to_move = left * static_cast<double>(k);
  }
  network_->start_transfer(id.slot, pairs_, to_move, this);
  if (links_down_ > 0) check_cut_off();
}

void Cluster::on_transfer_done(uint64_t tag) {
  const RequestId id{static_cast<uint32_t>(tag)};
  if (!stale_transfers_.empty()) [[unlikely]] {
    const auto it = std::find(stale_transfers_.begin(), stale_transfers_.end(), id.slot);
    if (it != stale_transfers_.end()) {  // called off in its latency (drop_handoffs)
      stale_transfers_.erase(it);
      return;
    }
  }
  const PendingTransfer t = transfers_[id.slot];
  Request& r = requests_[id];
  replicas_[t.from]->finish_handoff(id);
  if (autoscaler_) after_departure(t.from);  // a draining prefill replica waits for its last transfer
  r.kv_bytes_transferred += static_cast<uint64_t>(t.bytes);
  ++counters_.kv_transfers;
  counters_.kv_transfer_bytes += t.bytes;
  core::KvTransfer rec;
  rec.id = r.id;
  rec.from_replica = t.from;
  rec.to_replica = t.to;
  rec.bytes = t.bytes;
  rec.ready = t.ready;
  rec.start = t.start;
  rec.end = sim_.now();
  observer_.on_kv_transfer(rec);
  const bool reserved = layout_.pd_pull == PdPull::kReserveFirst;
  if (autoscaler_ && !reserved) --pushes_to_[t.to];
  if (r.timed_out) {  // its client gave up while the KV was on the wire: the prefill replica let go above
    core::RequestRecord done = r.timed_out_record(sim_.now(), t.from, t.from);
    requests_.erase(id);
    signal_timed_out(done);
    if (reserved) {  // and the decode replica lets go of the blocks it reserved
      replicas_[t.to]->cancel_pull(t.blocks);
      start_pulls(t.to);
    }
    if (autoscaler_) after_departure(t.to);
    return;
  }
  if (reserved)
    replicas_[t.to]->adopt_pull(id, t.blocks);
  else
    replicas_[t.to]->enqueue(id);
}

void Cluster::on_request_done(const core::RequestRecord& r) {
  if (autoscaler_) {
    after_departure(r.decode_replica);
    if (r.replica != r.decode_replica) after_departure(r.replica);
  }
  core::RequestRecord rec = r;
  if (r.outcome == core::RequestOutcome::kTimedOut) {  // a replica let go of a request whose client gave up
    signal_timed_out(rec);
    return;
  }
  // The client has each token egress_s after the iteration that produced it, the first one
  // first_token_s later still.
  const core::Duration egress = core::Duration::from_seconds(layout_.client.egress_s);
  rec.client_first_token = r.first_token + egress + core::Duration::from_seconds(layout_.client.first_token_s);
  rec.client_finish = std::max(r.finish + egress, rec.client_first_token);
  if (timeout_ && rec.client_finish > r.arrival + *timeout_) {
    // The engine finished, but the last token would reach the client after it gave up.
    rec.outcome = core::RequestOutcome::kTimedOut;
    if (closed_loop_) client_free(rec.id, r.arrival + *timeout_, core::RequestOutcome::kTimedOut);
    signal_timed_out(rec);
  } else {
    ++counters_.completed;
    if (closed_loop_) client_free(rec.id, rec.client_finish, rec.outcome);
    client_done(rec);
  }
  if (closed_loop_) poll_source();
}

void Cluster::on_preempt(uint64_t id, uint32_t replica, core::Time t) {
  ++counters_.preemptions;
  observer_.on_preempt(id, replica, t);
}

void Cluster::check_drained() const {
  if (has_next_ || (closed_loop_ && source_.due()) ||
      counters_.arrived != counters_.completed + counters_.rejected + counters_.timed_out + counters_.failed ||
      requests_.live() != 0 || !parked_.empty() || !decode_waiting_.empty())
    throw core::Error("internal: requests not conserved: arrived " + std::to_string(counters_.arrived) +
                      ", completed " + std::to_string(counters_.completed) + ", rejected " +
                      std::to_string(counters_.rejected) + ", timed out " + std::to_string(counters_.timed_out) +
                      ", failed " + std::to_string(counters_.failed) + ", parked " + std::to_string(parked_.size()) +
                      ", still in flight " + std::to_string(requests_.live()) +
                      (closed_loop_ && source_.due() ? ", and the closed-loop workload has a request due" : ""));
  for (size_t i = 0; i < loads_.size(); ++i)
    if (loads_[i].oracle_remaining_tokens != 0 || loads_[i].prefill_tokens_waiting != 0)
      throw core::Error("internal: replica " + std::to_string(i) + " ends with " +
                        std::to_string(loads_[i].oracle_remaining_tokens) + " remaining and " +
                        std::to_string(loads_[i].prefill_tokens_waiting) +
                        " prefill tokens waiting (load accounting drifted)");
  // Autoscaled push hand-offs: every push counted to its decode replica ended or was called off.
  for (size_t i = 0; i < pushes_to_.size(); ++i)
    if (pushes_to_[i] != 0)
      throw core::Error("internal: replica " + std::to_string(i) + " ends with " + std::to_string(pushes_to_[i]) +
                        " KV pushes counted on their way to it");
  for (const auto& r : replicas_) {
    r->kv().check();
    if (r->kv().in_use() != 0 || !r->idle())
      throw core::Error("internal: replica " + std::to_string(r->index()) + " still holds " +
                        std::to_string(r->kv().in_use()) + " KV blocks after the run");
  }
}

}  // namespace servesim::sim
