// Fleet dynamics of the cluster: replica failures (at given times or drawn from MTBF/MTTR), repairs,
// stragglers, and what becomes of the requests a failed replica held (routed again and recomputed,
// or failed). Part of sim::Cluster (cluster.h); kept apart from the arrival path.
#include <algorithm>
#include <cmath>
#include <string>

#include "sim/cluster/cluster.h"
#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::sim {

void Cluster::set_faults(const FaultPlan& plan) {
  if (!plan.any()) return;
  faults_ = plan.replica_faults();
  plan_ = plan;
  link_repairs_pending_.assign(plan_.events.size(), 0);
  link_repair_at_.assign(plan_.events.size(), core::Time());
  epoch_.assign(layout_.replicas, 0);
  repair_at_.assign(layout_.replicas, std::nullopt);
  for (uint32_t k = 0; k < plan_.events.size(); ++k) {
    const FaultEvent& e = plan_.events[k];
    if (e.kind == FaultEvent::Kind::kLink || e.kind == FaultEvent::Kind::kLinkSpeed) {
      if (!network_ || e.links.empty()) throw core::Error("internal: a link failure without a network or links");
      FaultAction a;
      a.kind = e.kind == FaultEvent::Kind::kLink ? FaultAction::Kind::kLinkDown : FaultAction::Kind::kLinkSpeed;
      a.repair = e.repair;
      a.speed = e.speed;
      a.event = k;
      schedule_fault(e.at, a);
      continue;
    }
    if (e.replica >= layout_.replicas) throw core::Error("internal: a fault names a replica out of range");
    for (uint32_t w : e.with)
      if (w >= layout_.replicas) throw core::Error("internal: a fault names a replica out of range");
    FaultAction a;
    a.replica = e.replica;
    if (e.kind == FaultEvent::Kind::kFail) {
      a.kind = FaultAction::Kind::kFail;
      a.repair = e.repair;
      a.with = e.with;
    } else {
      a.kind = FaultAction::Kind::kSpeed;
      a.speed = e.speed;
    }
    schedule_fault(e.at, a);
  }
  if (plan_.node_mtbf_s > 0) {
    for (uint32_t n = 0; n < plan_.node_replicas.size(); ++n) {
      const std::vector<uint32_t>& on = plan_.node_replicas[n];
      if (on.empty()) throw core::Error("internal: a node without replicas in the node MTBF plan");
      for (uint32_t i : on)
        if (i >= layout_.replicas) throw core::Error("internal: a node names a replica out of range");
      node_fault_rngs_.emplace_back(plan_.seed, "faults/node/" + std::to_string(n));
      FaultAction a;
      a.replica = on.front();
      a.with.assign(on.begin() + 1, on.end());
      a.node = static_cast<int32_t>(n);
      schedule_fault(sim_.now() + core::Duration::from_seconds(node_fault_rngs_[n].exponential(1.0 / plan_.node_mtbf_s)), a);
    }
  }
  if (!plan_.link_mtbf.empty()) {
    if (!network_) throw core::Error("internal: drawn link failures without a network");
    drawn_link_repair_at_.assign(plan_.link_mtbf.size(), std::nullopt);
    for (uint32_t k = 0; k < plan_.link_mtbf.size(); ++k) {
      const LinkMtbf& m = plan_.link_mtbf[k];
      if (m.links.empty() || !(m.mtbf_s > 0) || !(m.mttr_s > 0)) throw core::Error("internal: a drawn link without links or rates");
      link_fault_rngs_.emplace_back(plan_.seed, "faults/link/" + m.name);
      FaultAction a;
      a.kind = FaultAction::Kind::kLinkDown;
      a.drawn_link = static_cast<int32_t>(k);
      schedule_fault(sim_.now() + core::Duration::from_seconds(link_fault_rngs_[k].exponential(1.0 / m.mtbf_s)), a);
    }
  }
  if (plan_.mtbf_s > 0) {
    for (uint32_t i = 0; i < layout_.replicas; ++i) {
      fault_rngs_.emplace_back(plan_.seed, "faults/" + std::to_string(i));
      FaultAction a;
      a.replica = i;
      a.drawn = true;
      schedule_fault(sim_.now() + core::Duration::from_seconds(fault_rngs_[i].exponential(1.0 / plan_.mtbf_s)), a);
    }
  }
}

void Cluster::schedule_fault(core::Time t, const FaultAction& a) {
  fault_actions_.push_back(a);
  sim_.schedule_weak_at(t, &fault_timer_, fault_actions_.size() - 1);
}

void Cluster::fleet_event(core::FleetEventKind kind, uint32_t replica, uint64_t request, double value) {
  core::FleetEvent e;
  e.kind = kind;
  e.replica = replica;
  e.time = sim_.now();
  e.request = request;
  e.value = value;
  observer_.on_fleet_event(e);
}

void Cluster::on_fault(uint64_t index) {
  FaultAction a = fault_actions_[index];
  switch (a.kind) {
    case FaultAction::Kind::kFail: {
      lost_.clear();
      if (a.node >= 0) {
        // A drawn node failure: its repair time, then the next failure an exponential after it.
        core::Rng& rng = node_fault_rngs_[static_cast<size_t>(a.node)];
        a.repair = core::Duration::from_seconds(rng.exponential(1.0 / plan_.node_mttr_s));
        const FaultAction next = fault_actions_[index];
        schedule_fault(sim_.now() + *a.repair + core::Duration::from_seconds(rng.exponential(1.0 / plan_.node_mtbf_s)),
                       next);
      }
      // Under an autoscaler a replica that is off runs nothing that could fail.
      auto out_of_service = [&](uint32_t i) {
        return replicas_[i]->down() || (autoscaler_ && phases_[i] == ReplicaPhase::kOff);
      };
      if (disaggregated() && !a.with.empty()) {
        failing_.assign(replicas_.size(), 0);
        failing_[a.replica] = 1;
        for (uint32_t w : a.with) failing_[w] = 1;
      }
      if (out_of_service(a.replica)) {
        // Already down (an explicit failure overlapping the drawn ones), or off: the MTBF clock restarts.
        if (a.drawn) {
          FaultAction next = a;
          schedule_fault(sim_.now() + core::Duration::from_seconds(
                                          fault_rngs_[a.replica].exponential(1.0 / plan_.mtbf_s)),
                         next);
        }
      } else {
        take_down(a.replica, a.drawn, a.repair);
      }
      // A node: every replica on it goes down before any lost request is routed again, so that
      // none is sent to a replica about to fail with it.
      for (uint32_t w : a.with)
        if (!out_of_service(w)) take_down(w, false, a.repair);
      failing_.clear();
      handle_lost();
      break;
    }
    case FaultAction::Kind::kRepair:
      if (!replicas_[a.replica]->down() || epoch_[a.replica] != a.epoch) return;  // repaired already
      repair_replica(a.replica);
      break;
    case FaultAction::Kind::kSpeed:
      replicas_[a.replica]->set_speed(a.speed);
      fleet_event(core::FleetEventKind::kReplicaSpeed, a.replica, 0, a.speed);
      break;
    case FaultAction::Kind::kLinkDown:
    case FaultAction::Kind::kLinkUp: {
      const bool down = a.kind == FaultAction::Kind::kLinkDown;
      const std::vector<uint32_t>& links =
          a.drawn_link >= 0 ? plan_.link_mtbf[static_cast<size_t>(a.drawn_link)].links : plan_.events[a.event].links;
      if (a.drawn_link >= 0) {
        // A drawn link failure: its repair an exponential of mean mttr_s later, the next failure an
        // exponential of mean mtbf_s after the repair (the stream's draws in that order).
        const auto k = static_cast<size_t>(a.drawn_link);
        const LinkMtbf& m = plan_.link_mtbf[k];
        FaultAction next = a;
        next.kind = down ? FaultAction::Kind::kLinkUp : FaultAction::Kind::kLinkDown;
        const double mean = down ? m.mttr_s : m.mtbf_s;
        const core::Time at = sim_.now() + core::Duration::from_seconds(link_fault_rngs_[k].exponential(1.0 / mean));
        if (down) drawn_link_repair_at_[k] = at;
        else drawn_link_repair_at_[k].reset();
        schedule_fault(at, next);
      } else if (down && a.repair) {
        FaultAction up = a;
        up.kind = FaultAction::Kind::kLinkUp;
        ++link_repairs_pending_[a.event];
        link_repair_at_[a.event] = sim_.now() + *a.repair;
        schedule_fault(link_repair_at_[a.event], up);
      } else if (!down) {
        --link_repairs_pending_[a.event];
      }
      links_down_ += down ? 1 : -1;
      count_links(links, down);
      fleet_event(down ? core::FleetEventKind::kLinkDown : core::FleetEventKind::kLinkUp, 0, 0,
                  static_cast<double>(links.front()));
      check_cut_off();
      break;
    }
    case FaultAction::Kind::kLinkSpeed: {
      const std::vector<uint32_t>& links = plan_.events[a.event].links;
      if (link_speed_epoch_.empty()) link_speed_epoch_.assign(network_->topology().num_links(), 0);
      // A heal (epoch > 0) that a later speed change of the link superseded does nothing.
      if (a.epoch > 0 && link_speed_epoch_[links.front()] != a.epoch) return;
      for (uint32_t l : links) ++link_speed_epoch_[l];
      network_->set_links_speed(links, a.speed);
      core::FleetEvent e;
      e.kind = core::FleetEventKind::kLinkSpeed;
      e.time = sim_.now();
      e.request = links.front();
      e.value = a.speed;
      observer_.on_fleet_event(e);
      if (a.repair && a.epoch == 0) {
        FaultAction heal = a;
        heal.speed = 1;
        heal.repair.reset();
        heal.epoch = link_speed_epoch_[links.front()];
        schedule_fault(sim_.now() + *a.repair, heal);
      }
      break;
    }
  }
}

void Cluster::count_links(const std::vector<uint32_t>& links, bool down) {
  if (link_down_count_.empty()) link_down_count_.assign(network_->topology().num_links(), 0);
  changed_links_.clear();
  for (uint32_t l : links) {
    int& n = link_down_count_[l];
    if (!down && n == 0) throw core::Error("internal: a link repaired more often than it failed");
    n += down ? 1 : -1;
    if (n == (down ? 1 : 0)) changed_links_.push_back(l);
  }
  if (!changed_links_.empty()) network_->set_links_down(changed_links_, down);
}

void Cluster::check_cut_off() {
  if (network_->stalled_flows() == 0) return;
  // They wait for the first repair (a weak event: a strong one at its time keeps the run going).
  // When that repair leaves the link down (it failed twice), the link change calls this again and
  // the next repair keeps the run going.
  std::optional<core::Time> first;
  for (size_t k = 0; k < link_repairs_pending_.size(); ++k)
    if (link_repairs_pending_[k] > 0 && (!first || link_repair_at_[k] < *first)) first = link_repair_at_[k];
  for (const auto& at : drawn_link_repair_at_)
    if (at && (!first || *at < *first)) first = *at;
  if (first) {
    sim_.schedule_at(*first, &keep_alive_);
    return;
  }
  std::string names;
  for (size_t k = 0; k < plan_.events.size(); ++k)
    if (plan_.events[k].kind == FaultEvent::Kind::kLink && network_->topology().link_down(plan_.events[k].links.front()))
      names += (names.empty() ? "'" : ", '") + plan_.events[k].link_name + "'";
  throw core::Error("link " + names + " failed for good and a KV transfer at " + core::format_double(std::round(sim_.now().seconds() * 1000) / 1000) +
                    " s has no other path (its GPUs' nodes are cut off from each other); give the failure a repair_s, "
                    "or fail a link that has an alternative path");
}

void Cluster::take_down(uint32_t i, bool drawn, std::optional<core::Duration> repair) {
  Replica& replica = *replicas_[i];
  const uint64_t held = static_cast<uint64_t>(loads_[i].queued + loads_[i].running);
  ++counters_.replica_failures;
  ++epoch_[i];
  // Disaggregated: a prefill replica's hand-offs go first (its KV is freed before the replica drops
  // the rest), a decode replica's pulls after it has dropped what it holds.
  const bool prefill = disaggregated() && i < layout_.prefill_replicas;
  if (prefill) drop_handoffs(i);
  replica.fail(lost_);  // appends
  lost_from_.resize(lost_.size(), i);
  if (disaggregated() && !prefill) drop_handoffs(i);
  fleet_event(core::FleetEventKind::kReplicaDown, i, 0, static_cast<double>(held));
  if (autoscaler_) {
    // It leaves the pool: it stops costing, a start under way is called off, and the autoscaler's
    // next evaluation sees one replica fewer and provisions a replacement (with its cold start).
    ++phase_generation_[i];
    set_phase(i, ReplicaPhase::kOff, core::FleetEventKind::kReplicaOff);
  }
  if (drawn) repair = core::Duration::from_seconds(fault_rngs_[i].exponential(1.0 / plan_.mttr_s));
  if (repair) {
    // Back no earlier than the end of the iteration it lost (whose time the GPU has spent).
    const core::Time at = std::max(sim_.now() + *repair, replica.available_at());
    repair_at_[i] = at;
    FaultAction a;
    a.kind = FaultAction::Kind::kRepair;
    a.replica = i;
    a.drawn = drawn;
    a.epoch = epoch_[i];
    schedule_fault(at, a);
  } else {
    repair_at_[i].reset();
  }
}

void Cluster::handle_lost() {
  // In arrival order across the replicas that failed together (each hands its own back in order).
  order_.clear();
  for (size_t k = 0; k < lost_.size(); ++k) order_.push_back(k);
  if (disaggregated() || (lost_from_.size() > 1 && lost_from_.front() != lost_from_.back()))
    std::stable_sort(order_.begin(), order_.end(),
                     [&](size_t a, size_t b) { return requests_[lost_[a]].id < requests_[lost_[b]].id; });
  for (size_t k : order_) {
    const RequestId id = lost_[k];
    Request& r = requests_[id];
    if (plan_.recompute && r.failovers < plan_.max_reroutes) {
      ++r.failovers;
      ++counters_.rerouted;
      fleet_event(core::FleetEventKind::kRequestRerouted, lost_from_[k], r.id);
      route_again(id);
    } else {
      fail_request(id);
    }
  }
  lost_.clear();
  lost_from_.clear();
  // Disaggregated: pulls called off freed decode blocks (and their queues' heads may have left).
  if (disaggregated() && !pulls_.empty())
    for (uint32_t d = static_cast<uint32_t>(layout_.prefill_replicas); d < replicas_.size(); ++d)
      if (!replicas_[d]->down()) start_pulls(d);
}

void Cluster::drop_handoffs(uint32_t i) {
  const bool prefill = i < layout_.prefill_replicas;
  dropped_.clear();
  for (uint32_t s = 0; s < requests_.capacity() && s < transfers_.size(); ++s) {
    const Request& r = requests_[RequestId{s}];
    if (r.state != RequestState::kTransferring && r.state != RequestState::kAwaitingPull) continue;
    const PendingTransfer& t = transfers_[s];
    if (t.from == i || (!prefill && t.to == i)) dropped_.push_back(RequestId{s});
  }
  std::sort(dropped_.begin(), dropped_.end(),
            [&](RequestId a, RequestId b) { return requests_[a].id < requests_[b].id; });
  for (const RequestId id : dropped_) {
    Request& r = requests_[id];
    const PendingTransfer t = transfers_[id.slot];
    const bool pushing = r.state == RequestState::kTransferring && layout_.pd_pull == PdPull::kPush;
    if (r.state == RequestState::kTransferring) {
      // Its flows leave the network now (the others' rates are filled again at once); one whose bytes
      // had drained completes in its latency, and that completion is ignored.
      if (!network_->cancel_transfer(id.slot, this)) stale_transfers_.push_back(id.slot);
      if (layout_.pd_pull == PdPull::kReserveFirst)
        replicas_[t.to]->cancel_pull(t.blocks, t.to != i && !replicas_[t.to]->down() && !failing(t.to));
    } else if (t.to == kNoDecode) {
      decode_waiting_.erase(std::find(decode_waiting_.begin(), decode_waiting_.end(), id));
    } else {  // a pull waiting for blocks
      std::deque<RequestId>& q = pulls_[t.to];
      q.erase(std::find(q.begin(), q.end(), id));
      --pulls_waiting_;
      replicas_[t.to]->pull_queued(-1);
    }
    // Its prefill replica frees its KV (and, when it is not the one failing, goes on with the room).
    replicas_[t.from]->drop_handoff(id, t.from != i && !failing(t.from));
    if (autoscaler_) {
      // A push called off is no longer on its way to its decode replica; a draining replica on
      // either end may hold nothing now (the failing one goes off in take_down).
      if (pushing) --pushes_to_[t.to];
      after_departure(t.from);
      if (t.to != kNoDecode) after_departure(t.to);
    }
    if (r.timed_out) {  // its client had given up: it leaves now
      core::RequestRecord rec = r.timed_out_record(sim_.now(), t.from, t.from);
      requests_.erase(id);
      signal_timed_out(rec);
      continue;
    }
    lost_.push_back(id);
    lost_from_.push_back(i);
  }
}

std::optional<core::Time> Cluster::next_up(size_t first, size_t end) const {
  std::optional<core::Time> at = autoscaler_ ? next_scale_up(first) : std::nullopt;
  for (size_t i = first; i < end; ++i)
    if (repair_at_[i] && (!at || *repair_at_[i] < *at)) at = repair_at_[i];
  return at;
}

void Cluster::repair_due(size_t first, size_t end) {
  for (size_t i = first; i < end; ++i)
    if (replicas_[i]->down() && repair_at_[i] && *repair_at_[i] <= sim_.now()) repair_replica(static_cast<uint32_t>(i));
}

void Cluster::schedule_decode_wake(core::Time t) {
  if (decode_wake_at_ && *decode_wake_at_ <= t) return;  // an earlier wake will look again
  decode_wake_at_ = t;
  sim_.schedule_at(t, &decode_wake_);  // strong: it keeps the run going for the waiting requests
}

void Cluster::wake_decode_waiting(bool timer) {
  if (decode_wake_at_ && *decode_wake_at_ <= sim_.now()) decode_wake_at_.reset();
  const size_t first = layout_.prefill_replicas, count = replicas_.size() - first;
  repair_due(first, replicas_.size());  // each hands the waiting requests off
  if (decode_waiting_.empty()) return;
  const bool up = up_in(static_cast<uint32_t>(first), first, count) < replicas_.size();
  std::deque<RequestId> waiting;
  if (!up) {
    if (const std::optional<core::Time> at = next_up(first, replicas_.size())) {
      // Autoscaled, the replica they waited for did not come (the evaluation did not provision, or
      // the repaired one is off until provisioned): more than max_reroutes such waits fail a request
      // (as a parked one), so that failures faster than a cold start cannot keep it waiting for ever.
      if (timer && scale_pool_at(first)) {
        waiting.swap(decode_waiting_);
        for (const RequestId id : waiting) {
          if (++requests_[id].waits <= plan_.max_reroutes) {
            decode_waiting_.push_back(id);
            continue;
          }
          const uint32_t from = transfers_[id.slot].from;
          replicas_[from]->finish_handoff(id);
          fail_request(id);
          after_departure(from);
        }
        if (decode_waiting_.empty()) return;
      }
      schedule_decode_wake(std::max(*at, sim_.now()));
      return;
    }
  }
  waiting.clear();
  waiting.swap(decode_waiting_);
  for (const RequestId id : waiting) {
    const PendingTransfer t = transfers_[id.slot];
    if (up) {
      hand_off(id, t.from, false, t.ready);
      continue;
    }
    // No decode replica will come back: it fails, with the token its prefill produced.
    replicas_[t.from]->finish_handoff(id);
    fail_request(id);
    if (autoscaler_) after_departure(t.from);
  }
}

void Cluster::repair_replica(uint32_t i) {
  if (!replicas_[i]->down()) return;  // repaired already (a wake for its due repair came first)
  replicas_[i]->repair();
  repair_at_[i].reset();
  fleet_event(core::FleetEventKind::kReplicaUp, i);
  // Under an autoscaler the repaired machine is off: the autoscaler may provision it again.
  if (autoscaler_) loads_[i].up = phases_[i] == ReplicaPhase::kUp;
  if (plan_.mtbf_s > 0) {
    FaultAction a;
    a.replica = i;
    a.drawn = true;
    schedule_fault(sim_.now() + core::Duration::from_seconds(fault_rngs_[i].exponential(1.0 / plan_.mtbf_s)), a);
  }
  unpark();
  if (!decode_waiting_.empty() && i >= layout_.prefill_replicas) wake_decode_waiting();
}

uint32_t Cluster::up_in(uint32_t pick, size_t first, size_t count) const {
  for (size_t k = 0; k < count; ++k) {
    const auto i = static_cast<uint32_t>(first + (pick - first + k) % count);
    if (loads_[i].up) return i;
  }
  return static_cast<uint32_t>(replicas_.size());
}

void Cluster::route_again(RequestId id) {
  Request& r = requests_[id];
  const size_t pool = router_pool();
  const uint32_t pick = router_->route(r, std::span<const ReplicaLoad>(loads_.data(), pool));
  if (pick >= pool)
    throw core::Error("internal: router chose replica " + std::to_string(pick) + " of " + std::to_string(pool));
  const uint32_t to = up_from(pick);
  if (to < replicas_.size()) {
    // A request that never reached a replica (parked, or its replica failed while it was on the
    // way) is routed for the first time now; a lost one keeps the replica it was first routed to.
    if (r.failovers == 0) r.routed_replica = to;
    // Disaggregated, a lost request is prefilled again with the tokens it produced: a prefill
    // replica that could never hold them all fails it (as one too long for it is rejected).
    if (disaggregated() && r.generated > 0 && replicas_[to]->rejection(r)) [[unlikely]] {
      fail_request(id);
      return;
    }
    replicas_[to]->enqueue(id);
    return;
  }
  // No replica is up (disaggregated: no prefill replica): wait for the first repair (or, autoscaled,
  // a replica provisioned), or fail when none will come.
  if (next_up(0, pool)) {
    park(id);
  } else {
    fail_request(id);
  }
}

void Cluster::park(RequestId id) {
  requests_[id].state = RequestState::kParked;
  parked_.push_back(id);
  if (park_timer_pending_) return;
  // Repairs (and autoscaling's evaluations and starts) are weak events: a strong one at the first
  // keeps the run going for the parked.
  const std::optional<core::Time> first = next_up(0, router_pool());  // disaggregated: the prefill pool
  if (!first) throw core::Error("internal: a request parked with no repair or scale-up to wait for");
  park_timer_pending_ = true;
  sim_.schedule_at(*first, &park_timer_);
}

void Cluster::on_park_timer() {
  park_timer_pending_ = false;
  repair_due(0, replicas_.size());  // their weak events may come after this one
  unpark();
  if (parked_.empty()) return;
  // Still none up (a repair moved to its lost iteration's end, or repaired and failed again): park
  // again until the next repair, or fail when none is coming.
  std::deque<RequestId> parked;
  parked.swap(parked_);
  for (RequestId id : parked) {
    // Autoscaled, the replica it waited for did not come (its start failed, or the evaluation did not
    // provision): more than max_reroutes such waits fail it, so that failures faster than a cold
    // start cannot keep it waiting for ever.
    if (autoscaler_ && scale_pool_at(0) && ++requests_[id].waits > plan_.max_reroutes) {
      fail_request(id);
      continue;
    }
    route_again(id);
  }
}

void Cluster::unpark() {
  if (up_from(0) == replicas_.size()) return;
  std::deque<RequestId> parked;
  parked.swap(parked_);
  for (RequestId id : parked) {
    requests_[id].state = RequestState::kWaiting;
    route_again(id);
  }
}

void Cluster::fail_request(RequestId id) {
  Request& r = requests_[id];
  core::RequestRecord rec;
  rec.id = r.id;
  rec.replica = r.routed_replica;
  rec.decode_replica = r.replica;
  rec.outcome = core::RequestOutcome::kFailed;
  rec.prompt_tokens = r.prompt_tokens;
  rec.output_tokens = r.output_tokens;
  rec.generated_tokens = r.generated;
  rec.arrival = r.arrival;
  rec.finish = sim_.now();
  rec.first_token = r.generated > 0 ? r.first_token : rec.finish;
  rec.client_finish = rec.finish;
  rec.client_first_token = r.generated > 0
                               ? std::min(rec.finish, r.first_token + core::Duration::from_seconds(layout_.client.egress_s) +
                                                          core::Duration::from_seconds(layout_.client.first_token_s))
                               : rec.finish;
  rec.preemptions = r.preemptions;
  rec.cached_tokens = r.cached_tokens;
  rec.kv_transfer_bytes = static_cast<double>(r.kv_bytes_transferred);  // disaggregated: the transfers it completed
  rec.stage = r.stage;
  rec.request_class = r.request_class;
  requests_.erase(id);
  ++counters_.failed;
  if (closed_loop_) client_free(rec.id, sim_.now(), core::RequestOutcome::kFailed);
  client_done(rec);
  if (closed_loop_) poll_source();
}

}  // namespace servesim::sim
