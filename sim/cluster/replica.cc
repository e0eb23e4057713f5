#include "sim/cluster/replica.h"

#include <span>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "sim/core/error.h"

namespace servesim::sim {

Replica::Replica(const ReplicaConfig& config, Simulation& sim, RequestTable& requests,
                 const hwmodels::StepCostModel& cost, std::unique_ptr<BatchScheduler> scheduler,
                 core::LifecycleObserver& observer, ReplicaLoad& load, ReplicaListener* listener)
    : index_(config.index),
      role_(config.role),
      max_context_(config.max_context),
      preemption_(config.preemption),
      swap_capacity_bytes_(config.swap_capacity_bytes),
      host_link_bytes_per_s_(config.host_link_bytes_per_s),
      kv_bytes_per_token_per_gpu_(config.kv_bytes_per_token_per_gpu),
      engine_(config.engine),
      speculator_(config.speculator),
      spec_rng_(config.seed, "speculation/replica/" + std::to_string(config.index)),
      sim_(sim),
      requests_(requests),
      cost_(cost),
      scheduler_(std::move(scheduler)),
      observer_(observer),
      load_(load),
      listener_(listener),
      kv_(config.kv_blocks, config.block_size, config.role == ReplicaRole::kDecode ? 0 : config.prefix_unit_tokens,
          config.kv_layout) {
  plan_.limits = cost_.model().attention_limits();
  repeat_limit_ = scheduler_->decodes_running_limit();
  repeats_ = scheduler_->decodes_running_when_nothing_waits() && !speculator_ && !kv_.prefix_caching() &&
             !kv_.hybrid() && plan_.limits.window == 0 && plan_.limits.topk == 0;
  if (role_ == ReplicaRole::kPrefill && !listener_)
    throw core::Error("internal: a prefill replica needs a listener to hand requests to");
  if (config.gpus_per_rank < 1) throw core::Error("internal: a replica's attention rank needs a GPU");
  swap_gpus_ = config.gpus_per_rank;
  load_ = ReplicaLoad{};
  load_.kv_blocks_total = kv_.total();
  if (engine_) first_token_delay_ns_ = std::llround(engine_->first_token_s * 1e9);
  load_done_.replica = this;
  prefetch_done_.replica = this;
  if (config.host_tier) {
    if (!kv_.prefix_caching() || role_ == ReplicaRole::kDecode)
      throw core::Error("internal: a host KV tier needs prefix caching on a unified or prefill replica");
    host_ = std::make_unique<HostKvTier>(*config.host_tier);
    kv_.set_tier(host_.get());
  }
  if (config.nvme_tier) {
    if (!kv_.prefix_caching() || role_ == ReplicaRole::kDecode)
      throw core::Error("internal: an NVMe KV tier needs prefix caching on a unified or prefill replica");
    nvme_ = std::make_unique<NvmeKvTier>(*config.nvme_tier);
    if (host_) {  // below host memory: what it evicts goes down (HBM's evictions go to host)
      host_->set_below(nvme_.get());
      local_tiers_ = std::make_unique<LocalKvTiers>(*host_, *nvme_);
      kv_.set_tier(local_tiers_.get());
    } else {
      kv_.set_tier(nvme_.get());
    }
  }
}

void Replica::attach_store(SharedKvStore* store) {
  if (!kv_.prefix_caching() || role_ == ReplicaRole::kDecode)
    throw core::Error("internal: a shared KV store needs prefix caching on unified or prefill replicas");
  store_ = store;
  store_->stats(index_);
  store_writer_ = std::make_unique<StoreWriter>(*store_, index_, kv_.tier());  // the local tiers, if any
  if (tier_fabric_) store_writer_->set_traffic(tier_fabric_.get());
  kv_.set_tier(store_writer_.get());
  if (nvme_) nvme_->set_below(store_writer_.get());  // the lowest local tier writes to the store
  else if (host_) host_->set_below(store_writer_.get());
}

static size_t hashed_units(const Request& r, int64_t unit_tokens);

std::optional<core::RequestOutcome> Replica::rejection(const Request& r) const {
  // Written so that no sum can overflow, whatever lengths a trace holds (both are >= 1).
  if (r.prompt_tokens > max_context_ - r.output_tokens) return core::RequestOutcome::kRejectedContext;
  // A prefill replica holds the prompt (and the first token's recompute) only. A speculative decode
  // reserves its drafts too, and the engine does not know which step is a request's last.
  const int64_t peak = role_ == ReplicaRole::kPrefill
                           ? r.prefill_target()  // the prompt (and, recomputed after a failover, what it produced)
                           : r.peak_kv_tokens() + (speculator_ ? speculator_->max_draft_tokens() : 0);
  // With prefix caching a partial last unit and the private blocks after it may each start a
  // block: at most one more block than the tokens need.
  int64_t blocks = kv_.blocks_for(peak) + (kv_.prefix_caching() ? 1 : 0);
  if (kv_.hybrid()) {
    // The most a hybrid request can hold: its whole prompt's window pages at once (a prefill in one
    // chunk), and with prefix caching every unit of its prompt (window tails and state snapshots).
    int64_t shared = 0;
    blocks = 0;
    if (kv_.prefix_caching()) {
      for (size_t j = 0; j < hashed_units(r, kv_.unit_tokens()); ++j) {
        const int64_t end = std::min(unit_end(r, j), peak);
        if (end <= shared) break;
        blocks += kv_.unit_blocks_for(end - shared);
        shared = end;
      }
    }
    blocks += kv_.request_blocks(shared, shared, peak) + (kv_.prefix_caching() ? 1 : 0);
  }
  if (blocks > kv_.total() - scheduler_->reserved_blocks(kv_)) return core::RequestOutcome::kRejectedKvCapacity;
  return std::nullopt;
}

void Replica::enqueue(RequestId id) {
  Request& r = requests_[id];
  r.replica = index_;
  const bool was_incoming = r.state == RequestState::kIngress;
  r.state = RequestState::kWaiting;
  // Behind earlier arrivals the scheduler has not seen yet, whatever the replica is doing.
  if (engine_ && engine_->async_scheduling && (busy_ || !arriving_.empty()))
    arriving_.emplace_back(id, sim_.now());
  else
    waiting_.push_back(id);
  if (was_incoming)
    --incoming_;  // counted since it was routed
  else
    account(r, +1);
  if (store_ && host_ && store_->prefetch()) [[unlikely]] start_prefetch(id);
  if (busy_) {
    publish_state();
    return;
  }
  try_start_iteration();
}

// ---- prefix units -------------------------------------------------------------------------------

int64_t Replica::unit_end(const Request& r, size_t j) const {
  const int64_t covered = r.hashed_tokens > 0 ? r.hashed_tokens : r.prompt_tokens;
  return std::min(static_cast<int64_t>(j + 1) * kv_.unit_tokens(), covered);
}

static size_t hashed_units(const Request& r, int64_t unit_tokens) {
  if (unit_tokens <= 0) return 0;
  const int64_t covered = r.hashed_tokens > 0 ? r.hashed_tokens : r.prompt_tokens;
  const size_t needed = static_cast<size_t>((covered + unit_tokens - 1) / unit_tokens);
  return std::min(r.block_hashes.size(), needed);
}

Replica::Lookup Replica::lookup(const Request& r) const {
  Lookup out;
  if (!kv_.prefix_caching()) return out;
  const int64_t u_tokens = kv_.unit_tokens();
  const size_t n = hashed_units(r, u_tokens);
  out.prompt_units = std::min<int64_t>(static_cast<int64_t>(n), (r.prompt_tokens + u_tokens - 1) / u_tokens);
  // A hit may spare full units only, and at least one token must be computed to produce logits.
  const int64_t limit = r.prefill_target() - 1;
  uint64_t key = 0;
  bool usable_run = true;
  for (size_t j = 0; j < n; ++j) {
    const bool in_prompt = static_cast<int64_t>(j) < out.prompt_units;
    const int64_t end = unit_end(r, j);
    const bool can_use = usable_run && end - static_cast<int64_t>(j) * u_tokens == u_tokens && end <= limit;
    if (!in_prompt && !can_use) break;
    key = KvCache::chain(key, r.block_hashes[j]);
    if (kv_.find(key) == KvCache::kNone) break;
    if (in_prompt) ++out.matched_units;
    if (can_use) {
      ++out.usable_units;
      out.usable_tokens = end;
    } else {
      usable_run = false;
    }
  }
  return out;
}

int64_t Replica::prefix_hit_tokens(RequestId id) const {
  const Request& r = requests_[id];
  if (r.decoding || r.kv_tokens > 0) return 0;
  return lookup(r).usable_tokens;
}

Replica::Growth Replica::plan_growth(const Request& r, const Held& from, int64_t kv_tokens) const {
  Growth g;
  g.shared_after = from.shared_tokens;
  g.units_after = from.units;
  if (kv_.prefix_caching()) {
    const size_t n = hashed_units(r, kv_.unit_tokens());
    uint64_t key = from.last_unit_key;
    for (size_t j = from.units; j < n; ++j) {
      const int64_t end = unit_end(r, j);
      if (end > kv_tokens) break;
      key = KvCache::chain(key, r.block_hashes[j]);
      const uint32_t u = kv_.find(key);
      if (u == KvCache::kNone) {
        g.unit_blocks += kv_.unit_blocks_for(end - static_cast<int64_t>(j) * kv_.unit_tokens());
      } else if (!kv_.referenced(u)) {
        g.unit_blocks += kv_.unit_blocks(u);
      }
      g.shared_after = end;
      g.units_after = j + 1;
    }
  }
  // Window layers keep the pages the next step attends to from the tokens computed by then.
  g.private_delta = kv_.request_blocks(g.shared_after, std::max(r.kv_tokens, g.shared_after), kv_tokens) - from.kv_blocks;
  return g;
}

void Replica::apply_growth(Request& r, int64_t kv_tokens) {
  const Growth g = plan_growth(r, held(r), kv_tokens);
  if (g.private_delta < 0) {
    kv_.release(-g.private_delta);
    r.kv_blocks += g.private_delta;
  }
  if (g.units_after > r.units.size()) {
    // Acquire every unit already cached before inserting new ones, so that making room for a new
    // unit never evicts one this request is about to use.
    const size_t first = r.units.size();
    std::vector<uint64_t>& keys = unit_keys_;
    keys.clear();
    uint64_t key = r.last_unit_key;
    for (size_t j = first; j < g.units_after; ++j) {
      key = KvCache::chain(key, r.block_hashes[j]);
      keys.push_back(key);
      const uint32_t u = kv_.find(key);
      if (u != KvCache::kNone) kv_.acquire(u);
      r.units.push_back(u);
    }
    for (size_t j = first; j < g.units_after; ++j) {
      if (r.units[j] != KvCache::kNone) continue;
      const int64_t end = unit_end(r, j);
      r.units[j] = kv_.insert(keys[j - first], kv_.unit_blocks_for(end - static_cast<int64_t>(j) * kv_.unit_tokens()));
    }
    r.last_unit_key = key;
    r.shared_tokens = g.shared_after;
  }
  if (g.private_delta > 0) {
    if (!kv_.try_allocate(g.private_delta)) throw core::Error("internal: KV growth planned without room");
    r.kv_blocks += g.private_delta;
  }
}

int64_t Replica::growth_blocks(RequestId id, int64_t kv_tokens) const {
  const Request& r = requests_[id];
  const Growth g = plan_growth(r, held(r), kv_tokens);
  return g.unit_blocks + g.private_delta;
}

bool Replica::reserve_slow(Request& r, int64_t kv_tokens, int64_t speculative) {
  if (!kv_.prefix_caching()) {
    const int64_t need = kv_.request_blocks(0, r.kv_tokens, kv_tokens + speculative) - r.kv_blocks;
    if (need <= 0) {
      // A hybrid request gives back the window pages its window has left behind.
      if (need < 0 && kv_.hybrid()) {
        kv_.release(-need);
        r.kv_blocks += need;
      }
      return true;
    }
    if (!kv_.try_allocate(need)) return false;
    r.kv_blocks += need;
    return true;
  }
  // Most decode steps neither complete a prefix unit nor need another block: nothing changes
  // (what plan_growth would find, without walking the unit chain).
  if (const size_t j = r.units.size();
      speculative == 0 && !kv_.hybrid() && (j >= hashed_units(r, kv_.unit_tokens()) || unit_end(r, j) > kv_tokens)) {
    const int64_t tokens = kv_tokens - r.shared_tokens, bs = kv_.block_size();
    if (tokens > (r.kv_blocks - 1) * bs && tokens <= r.kv_blocks * bs) return true;
  }
  const Growth g = plan_growth(r, held(r), kv_tokens);
  // Draft tokens are not final: they go into private blocks past the units, never into a unit
  // (the prefix cache shares only tokens the target has accepted).
  const int64_t spec_blocks =
      speculative > 0
          ? std::max<int64_t>(0, kv_.request_blocks(g.shared_after, std::max(r.kv_tokens, g.shared_after),
                                                    kv_tokens + speculative) -
                                     (r.kv_blocks + g.private_delta))
          : 0;
  if (g.unit_blocks + g.private_delta + spec_blocks > kv_.available()) return false;
  apply_growth(r, kv_tokens);
  if (spec_blocks > 0) {
    if (!kv_.try_allocate(spec_blocks)) throw core::Error("internal: speculative KV planned without room");
    r.kv_blocks += spec_blocks;
  }
  return true;
}

void IterationPlan::add_drafts(int64_t context_tokens, int64_t drafts) {
  verifies.push_back({static_cast<uint32_t>(decodes.size() - 1), drafts});
  decode_extra_tokens += drafts;
  decode_extra_pairs += drafts * context_tokens + drafts * (drafts + 1) / 2;
  if (limits.window > 0) decode_extra_window_pairs += hwmodels::capped_pairs(context_tokens, drafts, limits.window);
  if (limits.topk > 0) decode_extra_sparse_pairs += hwmodels::capped_pairs(context_tokens, drafts, limits.topk);
}

int64_t Replica::settle_decode(Request& r, size_t i) {
  // The input token and the accepted drafts are now in the cache (the bonus token the target
  // sampled after them is the next step's input); the request stops at its output length.
  const int64_t tokens = std::min(1 + accepted_[i], r.output_tokens - r.generated);
  r.kv_tokens += tokens;
  if (verified_[i] > 0) trim_kv(r);
  r.drafts = proposed_[i];
  return tokens;
}

double Replica::prefill_seconds(int64_t tokens) const {
  hwmodels::BatchShape shape;
  hwmodels::add_prefill_chunk(shape, plan_.limits, 0, tokens, true);
  return cost_.step(shape).seconds;
}

double Replica::decode_seconds(int64_t seqs, int64_t context) const {
  hwmodels::BatchShape shape;
  hwmodels::add_decodes(shape, plan_.limits, seqs, context);
  return cost_.step(shape).seconds;
}

void Replica::trim_kv(Request& r) {
  const int64_t keep = kv_.request_blocks(r.shared_tokens, r.kv_tokens, r.kv_tokens);
  if (r.kv_blocks > keep) {
    kv_.release(r.kv_blocks - keep);
    r.kv_blocks = keep;
  }
}

int64_t Replica::admission_blocks(int64_t kv_tokens) const {
  const Request& r = requests_[waiting_.front()];
  if (resumable(r) || !kv_.prefix_caching()) {
    const Growth g = plan_growth(r, held(r), kv_tokens);
    return g.unit_blocks + g.private_delta;
  }
  // Acquiring the hit's units takes the evictable ones out of the available pool; growing past
  // them is what plan_growth counts from the hit onward.
  const Lookup hit = lookup(r);
  int64_t blocks = 0;
  uint64_t key = 0;
  for (int64_t j = 0; j < hit.usable_units; ++j) {
    key = KvCache::chain(key, r.block_hashes[static_cast<size_t>(j)]);
    const uint32_t u = kv_.find(key);
    if (!kv_.referenced(u)) blocks += kv_.unit_blocks(u);
  }
  const Held after_hit{static_cast<size_t>(hit.usable_units), hit.usable_tokens, key, 0};
  const Growth g = plan_growth(r, after_hit, kv_tokens);
  return blocks + g.unit_blocks + g.private_delta;
}

bool Replica::admit_front(int64_t kv_tokens) {
  const RequestId id = waiting_.front();
  Request& r = requests_[id];
  if (admission_blocks(kv_tokens) > kv_.available()) return false;
  if (!resumable(r) && kv_.prefix_caching()) {
    const Lookup hit = lookup(r);
    uint64_t key = 0;
    for (int64_t j = 0; j < hit.usable_units; ++j) {
      key = KvCache::chain(key, r.block_hashes[static_cast<size_t>(j)]);
      const uint32_t u = kv_.find(key);
      kv_.acquire(u);
      r.units.push_back(u);
    }
    r.last_unit_key = key;
    r.shared_tokens = hit.usable_tokens;
    r.kv_tokens = hit.usable_tokens;
    if (!r.looked_up || r.tier_redecide) {
      // The first admission's lookup; with a KV tier, also the lookup of an admission again after
      // the request's KV was dropped (preempt, fail): its hits were decided again (a reload).
      const bool reload = r.looked_up;
      r.tier_redecide = false;
      r.looked_up = true;
      if (!reload) {
        r.cached_tokens = hit.usable_tokens;
        // The declines of the answer its tier hits were last asked on (start_loads), once.
        if (asked_.request == r.id) [[unlikely]] {
          count_declines(asked_);
          asked_.request = kNoAsk;
        }
      }
      core::PrefixLookup rec;
      rec.id = r.id;
      rec.reload = reload;
      rec.replica = index_;
      rec.prompt_units = hit.prompt_units;
      rec.matched_units = hit.matched_units;
      rec.prompt_tokens = reload ? r.prefill_target() : r.prompt_tokens;  // a reload's may hit generated tokens
      rec.hit_tokens = hit.usable_tokens;
      rec.host_hit_tokens = std::min<int64_t>(r.host_hit_tokens, hit.usable_tokens);
      if (!store_hits_.empty()) [[unlikely]]
        if (auto s = store_hits_.find(r.id); s != store_hits_.end()) {
          rec.store_hit_tokens = std::min<int64_t>(s->second, hit.usable_tokens - rec.host_hit_tokens);
          store_hits_.erase(s);
        }
      if (!nvme_hits_.empty()) [[unlikely]]
        if (auto s = nvme_hits_.find(r.id); s != nvme_hits_.end()) {
          rec.nvme_hit_tokens =
              std::min<int64_t>(s->second, hit.usable_tokens - rec.host_hit_tokens - rec.store_hit_tokens);
          nvme_hits_.erase(s);
        }
      if (hit.usable_tokens > 0) {
        hwmodels::BatchShape skipped;
        hwmodels::add_prefill_chunk(skipped, plan_.limits, 0, hit.usable_tokens, false);
        rec.saved_flops = cost_.step(skipped).flops;
      }
      observer_.on_prefix_lookup(rec);
    }
    load_.oracle_remaining_tokens -= hit.usable_tokens;
    load_.prefill_tokens_waiting -= hit.usable_tokens;
  }
  apply_growth(r, kv_tokens);
  if (r.swapped) {
    const double bytes = kv_bytes_per_gpu(r.kv_tokens);
    swap_copy(false, bytes);
    swap_used_bytes_ -= bytes;
    r.swapped = false;
  }
  waiting_.pop_front();
  r.state = RequestState::kRunning;
  // Keep the running set in arrival order (the FCFS priority); a readmitted preempted request is
  // older than most of the set, a new one is the newest.
  auto pos = std::upper_bound(running_.begin(), running_.end(), r.id,
                              [this](uint64_t rid, RequestId other) { return rid < requests_[other].id; });
  running_.insert(pos, id);
  return true;
}

void Replica::release_kv(Request& r) {
  for (uint32_t u : r.units) kv_.unref(u);
  r.units.clear();
  r.shared_tokens = 0;
  r.last_unit_key = 0;
  kv_.release(r.kv_blocks);
  r.kv_blocks = 0;
}

void Replica::order_waiting_by_priority() {
  const auto before = [this](RequestId a, RequestId b) {
    const Request& x = requests_[a];
    const Request& y = requests_[b];
    return x.priority != y.priority ? x.priority < y.priority : x.id < y.id;
  };
  if (!std::is_sorted(waiting_.begin(), waiting_.end(), before))
    std::stable_sort(waiting_.begin(), waiting_.end(), before);
}

void Replica::order_waiting(const std::vector<RequestId>& order) {
  if (order.size() != waiting_.size())
    throw core::Error("internal: a waiting order of " + std::to_string(order.size()) + " requests for a queue of " +
                      std::to_string(waiting_.size()) + " on replica " + std::to_string(index_));
  std::copy(order.begin(), order.end(), waiting_.begin());
}

void Replica::preempt(RequestId id) {
  Request& r = requests_[id];
  auto it = std::find(running_.begin(), running_.end(), id);
  if (it == running_.end()) throw core::Error("internal: preempting a request that is not running");
  running_.erase(it);
  account(r, -1);
  const double swap_bytes = kv_bytes_per_gpu(r.kv_tokens);
  release_kv(r);
  if (preemption_ == PreemptionMode::kSwap && r.decoding && host_link_bytes_per_s_ > 0 &&
      swap_used_bytes_ + swap_bytes <= swap_capacity_bytes_) {
    // The KV goes to host memory and comes back on readmission; both copies delay an iteration.
    r.swapped = true;
    swap_used_bytes_ += swap_bytes;
    swap_copy(true, swap_bytes);  // the step being planned waits for it
  } else {
    r.kv_tokens = 0;
    r.decoding = false;
    if (host_ || store_ || nvme_) [[unlikely]] {
      // Recomputed: its prefix may now be in a tier (HBM evicted it, or wrote it down): its HBM and
      // tier hits are decided again when it next reaches the head of the queue, as vLLM V1 asks its
      // KV connector again about a preempted request (num_computed_tokens = 0).
      r.tier_checked = false;
      r.tier_redecide = true;
      r.host_hit_tokens = 0;
    }
  }
  account(r, +1);
  r.state = RequestState::kWaiting;
  r.drafts = 0;  // its drafts are dropped with it
  ++r.preemptions;
  waiting_.push_front(id);
  observer_.on_preempt(r.id, index_, sim_.now());
}

void Replica::abort(RequestId id) {
  Request& r = requests_[id];
  if (r.state == RequestState::kWaiting) {
    // In the waiting queue, or (async scheduling) among the arrivals the scheduler has not seen yet.
    auto it = std::find(waiting_.begin(), waiting_.end(), id);
    auto l = std::find_if(loading_.begin(), loading_.end(), [id](const Loading& e) { return e.id == id; });
    if (!prefetches_.empty()) [[unlikely]] drop_prefetch(id);
    if (it != waiting_.end()) {
      waiting_.erase(it);
    } else if (l != loading_.end()) {
      if (tier_fabric_ && !l->prefetch) cancel_load_copies(l->seq);
      loading_.erase(l);  // its load's completion finds nothing
      release_kv(r);
      if (store_) store_hits_.erase(r.id);
      if (nvme_) nvme_hits_.erase(r.id);
    } else {
      auto a = std::find_if(arriving_.begin(), arriving_.end(), [id](const auto& e) { return e.first == id; });
      if (a == arriving_.end()) throw core::Error("internal: aborting a request that is not in the waiting queue");
      arriving_.erase(a);
    }
    account(r, -1);
    if (r.swapped) {
      swap_used_bytes_ -= kv_bytes_per_gpu(r.kv_tokens);  // what preempt() took (a hybrid model's window and state)
      r.swapped = false;
    }
    leave_timed_out(id);
  } else if (r.state == RequestState::kRunning) {
    if (busy_) {  // on_event lets it go when the iteration ends
      ++aborts_pending_;
      return;
    }
    auto it = std::find(running_.begin(), running_.end(), id);
    if (it == running_.end()) throw core::Error("internal: aborting a request that is not running");
    running_.erase(it);
    account(r, -1);
    release_kv(r);
    leave_timed_out(id);
  } else {
    throw core::Error("internal: aborting a request that is neither waiting nor running on replica " +
                      std::to_string(index_));
  }
  if (!busy_) try_start_iteration(); else publish_state();
  if (pulls_waiting_ > 0 && listener_) listener_->on_kv_freed(*this);
}

void Replica::leave_timed_out(RequestId id) {
  observer_.on_request_done(requests_[id].timed_out_record(sim_.now(), requests_[id].routed_replica, index_));
  requests_.erase(id);
}

void Replica::finish_handoff(RequestId id) {
  Request& r = requests_[id];
  release_kv(r);
  --transferring_;
  if (!busy_) try_start_iteration(); else publish_state();
}

int64_t Replica::pull_blocks(RequestId id) const {
  const Request& r = requests_[id];
  const Growth g = plan_growth(r, Held{}, r.kv_tokens + 1);
  return g.unit_blocks + g.private_delta;
}

int64_t Replica::reserve_pull(RequestId id) {
  const int64_t blocks = pull_blocks(id);
  if (kv_.available() - blocks < scheduler_->reserved_blocks(kv_) || !kv_.try_allocate(blocks)) return -1;
  ++pulls_in_flight_;
  load_.queued += 1;
  load_.pull_blocks_reserved += blocks;
  publish_state();
  return blocks;
}

void Replica::adopt_pull(RequestId id, int64_t blocks) {
  --pulls_in_flight_;
  load_.queued -= 1;
  load_.pull_blocks_reserved -= blocks;
  // It joins the running set at once, holding its blocks: a request that holds blocks is always
  // one the scheduler can preempt (in the waiting queue, behind a preempted request it could not be
  // admitted, and would keep its blocks from everyone).
  Request& r = requests_[id];
  r.replica = index_;
  r.kv_blocks = blocks;
  r.state = RequestState::kRunning;
  account(r, +1);
  auto pos = std::upper_bound(running_.begin(), running_.end(), r.id,
                              [this](uint64_t rid, RequestId other) { return rid < requests_[other].id; });
  running_.insert(pos, id);
  if (busy_) publish_state(); else try_start_iteration();
}

void Replica::cancel_pull(int64_t blocks, bool resume) {
  --pulls_in_flight_;
  load_.queued -= 1;
  load_.pull_blocks_reserved -= blocks;
  kv_.release(blocks);
  if (resume && !busy_) try_start_iteration(); else publish_state();
}

// ---- fleet dynamics -----------------------------------------------------------------------------

void Replica::reset_lost(Request& r) const {
  r.kv_tokens = 0;
  r.decoding = false;
  r.swapped = false;
  r.tier_checked = false;
  r.tier_redecide = host_ || store_ || nvme_;  // decided again where it goes next (a reload if admitted here)
  r.host_hit_tokens = 0;
}

void Replica::drop_handoff(RequestId id, bool resume) {
  Request& r = requests_[id];
  release_kv(r);
  --transferring_;
  reset_lost(r);
  r.state = RequestState::kWaiting;
  if (!resume) return;
  if (!busy_) try_start_iteration(); else publish_state();
}

void Replica::fail(std::vector<RequestId>& lost) {
  // (Disaggregated: the cluster has dropped this prefill replica's hand-offs first, drop_handoff.)
  if (transferring_ > 0) throw core::Error("internal: a prefill replica failed with hand-offs under way");
  if (busy_) {
    // An iteration still waiting for its swap copies has not started computing: nothing to wait for.
    lost_iteration_end_ = swap_waiting_ ? sim_.now() : last_start_ + last_duration_;
    ++iteration_;  // its completion event is stale now
    busy_ = false;
  }
  // Swap copies under way stop where they are (the process that copies is gone); the host memory
  // they were filling or draining is lost with the rest (swap_used_bytes_ = 0 below).
  for (uint64_t tag : swap_copies_) listener_->cancel_tier_copy(*this, tag, swap_fabric_.get(), 0);
  swap_copies_.clear();
  swap_waiting_ = false;
  plan_.clear();
  aborts_pending_ = 0;
  chained_ = false;
  const size_t first = lost.size();
  auto lose = [&](RequestId id) {
    Request& r = requests_[id];
    account(r, -1);
    release_kv(r);
    reset_lost(r);
    if (r.timed_out) {
      leave_timed_out(id);
      return;
    }
    lost.push_back(id);
  };
  for (RequestId id : running_) lose(id);
  for (RequestId id : waiting_) lose(id);
  for (const auto& a : arriving_) lose(a.first);
  for (const Loading& l : loading_) {
    if (tier_fabric_ && !l.prefetch) cancel_load_copies(l.seq);
    lose(l.id);
  }
  loading_.clear();
  running_.clear();
  waiting_.clear();
  arriving_.clear();
  repeat_ = false;
  std::sort(lost.begin() + static_cast<std::ptrdiff_t>(first), lost.end(),
            [this](RequestId a, RequestId b) { return requests_[a].id < requests_[b].id; });
  swap_used_bytes_ = 0;
  pending_swap_seconds_ = 0;
  KvTierSink* const sink = kv_.tier();
  kv_.set_tier(nullptr);  // nothing is written down: the host memory is lost with the rest
  kv_.drop_unreferenced();
  if (host_) host_->clear();  // (a shared store keeps what the replica wrote to it, the NVMe tier its files)
  kv_.set_tier(sink);
  store_hits_.clear();
  nvme_hits_.clear();
  if (tier_fabric_)
    for (const Prefetch& p : prefetches_)
      if (p.end_ns == std::numeric_limits<int64_t>::max())
        listener_->cancel_tier_copy(*this, p.seq * 4 + 3, tier_fabric_.get(), 0);
  prefetches_.clear();  // their completions find nothing; what was on the way is lost with the host
  prefetching_.clear();
  down_ = true;
  load_.up = false;
  publish_state();
}

void Replica::repair() {
  if (!down_) throw core::Error("internal: repairing a replica that is up");
  down_ = false;
  load_.up = true;
  publish_state();
}

// ---- iterations ---------------------------------------------------------------------------------

void Replica::admit_arrivals(bool chained) {
  // The iteration about to start was planned when the previous one started: what arrived after
  // that waits for the next one. With nothing else to run, the engine's loop sees it at once.
  const core::Time cutoff = chained ? last_start_ : sim_.now();
  while (!arriving_.empty() && arriving_.front().second <= cutoff) {
    waiting_.push_back(arriving_.front().first);
    arriving_.pop_front();
  }
  if (waiting_.empty() && running_.empty()) {
    for (const auto& [id, t] : arriving_) waiting_.push_back(id);
    arriving_.clear();
  }
}

// Without a waiting request, and with the running set the last iteration's decodes in the same
// order (so every running request decodes), the scheduler's plan is decode_running's: every decode
// again, reserving its next token in running order. That is done here without the plan's rebuild.
// When a reserve fails, decode_running would preempt: the scheduler plans instead, and the
// reserves made here are no-ops to it (the blocks held then suffice: without prefix caching or a
// hybrid layout, reserve only tests and grows r.kv_blocks; a failed one changes nothing).
bool Replica::repeat_decodes() {
  const size_t n = plan_.decodes.size();
  // (Past decodes_running_limit the scheduler's budget caps the decodes: it plans.)
  if (n != running_.size() || static_cast<int64_t>(n) > repeat_limit_) return false;
  const RequestId* decodes = plan_.decodes.data();
  const RequestId* running = running_.data();
  int64_t context = 0;
  for (size_t i = 0; i < n; ++i) {
    const RequestId id = decodes[i];
    if (id != running[i]) return false;  // (the reserves before are decode_running's own first ones)
    const int64_t need = requests_[id].kv_tokens + 1;
    if (!reserve(id, need)) return false;
    context += need;
  }
  plan_.decode_context_tokens = context;
  return true;
}

void Replica::try_start_iteration() {
  if (busy_) return;
  // With async scheduling the host prepares an iteration while the GPU runs the previous one; the
  // first after an idle spell has nothing to overlap with.
  const bool after_idle = !chained_;
  chained_ = false;
  if (!arriving_.empty()) admit_arrivals(!after_idle);
  const bool repeat = repeat_;
  repeat_ = false;
  if (waiting_.empty() && running_.empty()) {
    publish_state();
    return;
  }
  if (!repeat || !waiting_.empty() || !repeat_decodes()) {
    plan_.clear();
    scheduler_->plan(*this, plan_);
  }
  if (plan_.empty()) {
    // With nothing running or in transfer, every waiting request fits alone (rejection() saw to
    // that), so a policy that schedules nothing would stall the replica forever: a bug.
    if (running_.empty() && transferring_ == 0 && loading_.empty() && pulls_in_flight_ == 0)
      throw core::Error("internal: scheduler planned nothing on replica " + std::to_string(index_) +
                        " with " + std::to_string(waiting_.size()) + " requests waiting and none running");
    publish_state();
    return;
  }

  hwmodels::BatchShape shape;
  for (const auto& p : plan_.prefills) {
    const Request& r = requests_[p.id];
    hwmodels::add_prefill_chunk(shape, plan_.limits, r.kv_tokens, p.tokens, r.kv_tokens + p.tokens == r.prefill_target());
  }
  shape.decode_seqs = static_cast<int64_t>(plan_.decodes.size());
  shape.decode_context_tokens = plan_.decode_context_tokens;
  shape.decode_window_context_tokens = plan_.decode_window_context_tokens;
  shape.decode_sparse_context_tokens = plan_.decode_sparse_context_tokens;
  core::IterationRecord rec;
  if (speculator_) [[unlikely]] {
    shape.decode_extra_tokens = plan_.decode_extra_tokens;
    shape.decode_extra_pairs = plan_.decode_extra_pairs;
    shape.decode_extra_window_pairs = plan_.decode_extra_window_pairs;
    shape.decode_extra_sparse_pairs = plan_.decode_extra_sparse_pairs;
    speculate(shape, rec);
  }
#ifndef NDEBUG
  {
    int64_t context = 0;
    for (RequestId id : plan_.decodes) context += requests_[id].kv_tokens + 1;
    if (context != plan_.decode_context_tokens)
      throw core::Error("internal: a scheduler added decodes without IterationPlan::add_decode");
  }
#endif
  const double seconds = iteration_seconds(shape, after_idle, rec) + pending_swap_seconds_;
  pending_swap_seconds_ = 0;

  busy_ = true;
  last_start_ = sim_.now();
  if (!swap_copies_.empty()) [[unlikely]] {
    // Swap copies on the network: the model step runs once they have drained (swap_copy_done).
    swap_waiting_ = true;
    swap_wait_compute_s_ = seconds;
    swap_wait_rec_ = rec;
    publish_state();
    return;
  }
  run_iteration(seconds, rec);
}

[[gnu::always_inline]] inline double Replica::iteration_seconds(hwmodels::BatchShape& shape, bool after_idle,
                                                                core::IterationRecord& rec) {
  hwmodels::EngineModel::IterationTerms engine_terms;
  if (engine_) engine_terms = engine_->launch(shape, cost_.model().num_layers);
  return step_seconds(cost_.step(shape), engine_terms, shape, after_idle, rec);
}

[[gnu::always_inline]] inline double Replica::step_seconds(const hwmodels::StepCost& cost,
                                                           const hwmodels::EngineModel::IterationTerms& engine_terms,
                                                           const hwmodels::BatchShape& shape, bool after_idle,
                                                           core::IterationRecord& rec) {
  if (!(cost.seconds > 0) || !std::isfinite(cost.seconds))
    throw core::Error("internal: cost model returned a non-positive iteration time");
  double gpu_s = cost.seconds;
  if (cost.all_to_all.scaleout_bytes > 0 && listener_)
    if (const double network_s = listener_->exchange_seconds(*this, cost.all_to_all.scaleout_bytes); network_s >= 0)
      gpu_s = hwmodels::all_to_all_step_seconds(cost.all_to_all, network_s);
  const double iteration_s = engine_ ? engine_->iteration_seconds(gpu_s, engine_terms, after_idle) : gpu_s;
  rec.replica = index_;
  rec.prefill_tokens = shape.prefill_tokens;
  rec.decode_tokens = shape.decode_seqs;
  rec.batch_size = shape.prefill_seqs + shape.decode_seqs;
  rec.flops = cost.flops;
  rec.bytes = cost.bytes;
  rec.peak_flop_seconds = cost.peak_flop_seconds;
  return speed_ == 1.0 ? iteration_s : iteration_s / speed_;
}

// A run of decode iterations handled here, one after another, without the event queue or a walk
// over the batch per iteration. Entered where try_start_iteration would repeat the decodes
// (repeat_decodes: nothing waits, the running set is the last iteration's decodes, or every running
// request decodes after prefills that completed their prompts: on_event), it runs each
// next iteration in line (Simulation::advance_in_line) while that iteration is the next event of the
// whole simulation - nothing else (an arrival, another replica, a sample, a timer) comes before its
// end, so nothing can look at this replica in between - or, running ahead (set_run_ahead), while it
// ends before the replica's next arrival; it starts the iteration in which a request finishes (K
// below) but leaves its end to the queue, and stops before the cache would run out of blocks. Every
// iteration computes its time exactly as try_start_iteration does (same shape, same terms, same order: the same bits) and
// tells the observers the same records at the same simulated times; what it saves is each request's
// per-token bookkeeping, done once for the run:
//   - iteration j of the run (j = 0, 1, ...) decodes every running request r at context
//     kv_tokens + j + 1 (batch context C0 + n j), and emits its token at the iteration's end: one
//     gap run {that iteration's duration, n requests} (from j = 1 every request's last token was
//     the previous iteration's end and none is at its second token, whose gap the first-token
//     delay shortens; at j = 0, when that is not so ("uneven": after a prefill iteration), the
//     gaps are told request by request, as on_event tells them);
//   - r needs a block in iteration j when kv_tokens + j + 1 passes its blocks' tokens: first at
//     j0 = kv_blocks x B - kv_tokens, then every B iterations, so the blocks taken in iteration j are
//     the requests with j0 = j mod B (all j0 < B, or the run is not entered);
//   - no request finishes before iteration K = min(output - generated - 1).
// When the run stops, each request is brought up to date (flush_window) and the replica goes on as
// it would have: the iteration whose end is not handled in line (not the next event, past the
// horizon, K's, or, running ahead, the last before the blocks run out) is scheduled with the number
// it would have had; one that would run out of blocks is planned by try_start_iteration (never
// after an iteration handled ahead of the clock).
// Returns false, having changed nothing, when the run cannot start.
[[gnu::noinline]] bool Replica::decode_window(int64_t horizon) {
  const size_t n = running_.size();
  const core::Time t0 = sim_.now();
  if (n == 0 || n != plan_.decodes.size() || !arriving_.empty() || !waiting_.empty() || aborts_pending_ > 0 ||
      pulls_waiting_ > 0 || !swap_copies_.empty() || pending_swap_seconds_ != 0 || !plan_.prefills.empty() ||
      static_cast<int64_t>(n) > repeat_limit_)
    return false;
  const int64_t bs = kv_.block_size();
  if (window_blocks_.size() != static_cast<size_t>(bs)) window_blocks_.assign(static_cast<size_t>(bs), 0);
  int64_t k = INT64_MAX, c0 = 0;
  const RequestId* running = running_.data();
  const RequestId* decodes = plan_.decodes.data();
  // Whether some request's last token was not the last iteration's (it sat out a prefill iteration)
  // or was its first (its next gap is shortened by the first-token delay): then the first
  // iteration's gaps are told request by request, and every later one's are all the same.
  bool uneven = false;
  size_t i = 0;
  for (; i < n; ++i) {
    const Request& r = requests_[running[i]];
    const int64_t j0 = r.kv_blocks * bs - r.kv_tokens;
    if (running[i] != decodes[i] || r.generated < 1 || j0 < 0 || j0 >= bs) break;
    uneven = uneven || r.last_token != t0 || r.generated < 2;
    k = std::min(k, r.output_tokens - r.generated - 1);
    c0 += r.kv_tokens + 1;
    ++window_blocks_[static_cast<size_t>(j0)];
  }
  if (i < n || k <= 0) {
    for (size_t m = 0; m < i; ++m) {
      const Request& r = requests_[running[m]];
      window_blocks_[static_cast<size_t>(r.kv_blocks * bs - r.kv_tokens)] = 0;
    }
    return false;
  }
  // Each iteration's shape as try_start_iteration builds it. One shape serves the run: the engine's
  // launch() writes only its launch fields, which for a decode-only batch follow from decode_seqs
  // alone (EngineModel::launch_and_remember), the same in every iteration of the run. Likewise one
  // record: iteration_seconds() and the loop set every field a decode-only iteration has.
  hwmodels::BatchShape shape;
  shape.decode_seqs = static_cast<int64_t>(n);
  shape.decode_window_context_tokens = plan_.decode_window_context_tokens;
  shape.decode_sparse_context_tokens = plan_.decode_sparse_context_tokens;
  core::IterationRecord rec;
  const auto seqs = static_cast<int64_t>(n);
  hwmodels::EngineModel::IterationTerms engine_terms;
  if (engine_) engine_terms = engine_->launch(shape, cost_.model().num_layers);
  // The step costs of the next few iterations (window_costs_), asked of the cost model together
  // (StepCostModel::decode_steps: the same bits as one step() each): as many as are likely to run,
  // from the last iteration's duration and the horizon, at most kMaxDecodeSteps and never past K's.
  int costs_next = 0, costs_have = 0;
  // Running ahead (set_run_ahead), `horizon` (window_worth_trying) is the replica's next arrival:
  // the run goes on past other replicas' events, with the replica's time (`prev`) ahead of the
  // clock, and ends with an iteration through the queue (so that the next plan is made at its
  // time), never in line. Otherwise the queue's horizon is asked again at every iteration: an
  // iteration's time may itself queue events (an expert-parallel exchange's flows on the network).
  core::Time prev = t0;
  int64_t j = 0;
  size_t phase = 0;  // j mod B
  // The signals of iterations 1, 2, ... go to the observers together (on_decode_steps: the same
  // calls in the same order, told before the run returns, so before anything else is told), up to
  // kRunSteps at a time; iteration 0's, which publishes the state the iteration before left and may
  // tell its gaps request by request, are told one by one.
  constexpr size_t kRunSteps = 32;
  static thread_local std::array<core::DecodeStep, kRunSteps> steps;
  size_t told = 0;  // steps[0 .. told) not told yet
  const auto tell = [&] {
    if (told > 0) signals_->on_decode_steps(rec, published_state_, std::span<const core::DecodeStep>(steps.data(), told));
    told = 0;
  };
  // Iterations 0 .. k: the ends of 0 .. k - 1 may be handled in line; k's (a request emits its last
  // token) always goes through the queue, but the run starts it as try_start_iteration would have
  // (the same decodes, the same blocks: nothing can have come between).
  for (; j <= k; ++j, phase = phase + 1 == static_cast<size_t>(bs) ? 0 : phase + 1) {
    const int64_t blocks = window_blocks_[phase];
    if (blocks > kv_.available()) break;  // a reserve fails: the scheduler's plan (decode_running preempts)
    shape.decode_context_tokens = c0 + seqs * j;
    if (costs_next == costs_have) {
      const int64_t limit = ahead_ ? horizon : sim_.in_line_horizon_ns();
      const int64_t step_ns = std::clamp<int64_t>(last_duration_.ns(), 1, INT64_MAX / 8);  // the last iteration's
      // (Counted up rather than divided: a 64-bit division takes longer than the few steps.)
      const int64_t room = limit - prev.ns(), most = std::min<int64_t>(k - j + 1, hwmodels::StepCostModel::kMaxDecodeSteps);
      int64_t likely = 1;
      while (likely < most && likely * step_ns <= room) ++likely;
      costs_have = static_cast<int>(likely);
      costs_next = 0;
      cost_.decode_steps(shape, seqs, costs_have, window_costs_);
    }
    const double seconds = step_seconds(window_costs_[costs_next++], engine_terms, shape, false, rec);
    if (blocks > 0 && !kv_.try_allocate(blocks)) throw core::Error("internal: decode blocks checked but not allocated");
    plan_.decode_context_tokens = shape.decode_context_tokens;
    const core::Duration duration = step_duration(seconds);
    const core::Time now = prev;
    // From here on as try_start_iteration and run_iteration: the replica busy, its iteration
    // numbered, the event's sequence number taken, then the observers told.
    busy_ = true;
    chained_ = false;
    repeat_ = false;
    last_start_ = now;
    last_duration_ = duration;
    ++iteration_;
    if (duration.ns() > INT64_MAX - now.ns()) [[unlikely]] {
      tell();
      flush_window(j, j + 1, now);
      sim_.clock_limit_from(now, duration);  // throws, as schedule_after(duration) at `now` would
    }
    const core::Time end = now + duration;
    const uint64_t seq = sim_.reserve_seq();
    // Without a new block nothing publish_state() reports has changed since the run's first
    // iteration (the queue, the running set and the cache are as they were): it would tell the
    // observers nothing. The first one publishes what the iteration before changed (requests that
    // completed: the running set and the cache), as run_iteration does.
    if (j == 0) {
      rec.start = now;
      rec.duration = duration;
      signals_->on_iteration(rec);
      publish_state_at(now);
    } else {
      core::DecodeStep& step = steps[told++];
      step.start = now;
      step.duration = duration;
      step.flops = rec.flops;
      step.bytes = rec.bytes;
      step.peak_flop_seconds = rec.peak_flop_seconds;
      step.kv_blocks_used = -1;
      step.emits = false;
      if (blocks > 0) {
        // What publish_state_at would publish: since the first iteration published (or found
        // equal) the queue, the running set, the pulls and the cache's size, nothing but the blocks
        // in use has changed, and they have (more are taken), so the state differs in that alone.
        load_.kv_blocks_used = kv_.in_use();
        published_state_.time = now;
        published_state_.kv_blocks_used = load_.kv_blocks_used;
        step.kv_blocks_used = load_.kv_blocks_used;
      }
    }
    const bool queued =
        j == k || (ahead_ ? end.ns() >= horizon ||
                                window_blocks_[phase + 1 == static_cast<size_t>(bs) ? 0 : phase + 1] > kv_.available()
                          : end.ns() >= sim_.in_line_horizon_ns());
    if (queued) {
      // Not the next event (or, running ahead, not one the replica may handle before its time):
      // it goes into the queue with the number it has, its end handled by on_event.
      tell();
      flush_window(j, j + 1, now);
      sim_.schedule_reserved(end, seq, this, iteration_);
      return true;
    }
    if (ahead_)
      sim_.count_ahead();
    else
      sim_.advance_in_line(end);
    ++in_line_iterations_;
    // The iteration's end (on_event): every request emits one token, one gap after its last (the
    // first iteration's, when uneven, each its own, in running order as on_event tells them).
    busy_ = false;
    chained_ = true;
    if (j > 0) {
      steps[told - 1].emits = true;  // one gap of the iteration's duration (end - prev) per request
      if (told == kRunSteps) tell();
    } else {
      gaps_.clear();
      if (uneven) [[unlikely]] {
        for (size_t m = 0; m < n; ++m) add_gap(token_gap(requests_[running[m]], end), 1);
      } else {
        gaps_.push_back({(end - prev).ns(), seqs, 1});
      }
      signals_->on_token_gaps(gaps_);
    }
    load_.oracle_remaining_tokens -= seqs;
    prev = end;
  }
  tell();
  flush_window(j, j, prev);
  repeat_ = true;
  try_start_iteration();
  return true;
}

// Brings every running request up to date after `tokens` iterations of a decode run, and gives it
// the blocks the run's first `block_iterations` iterations took for it; clears the block counts.
void Replica::flush_window(int64_t tokens, int64_t block_iterations, core::Time now) {
  const int64_t bs = kv_.block_size();
  for (const RequestId id : running_) {
    Request& r = requests_[id];
    const int64_t j0 = r.kv_blocks * bs - r.kv_tokens;
    window_blocks_[static_cast<size_t>(j0)] = 0;
    if (block_iterations > j0) r.kv_blocks += (block_iterations - 1 - j0) / bs + 1;
    r.kv_tokens += tokens;
    r.generated += tokens;
    if (tokens > 0) r.last_token = now;
  }
}

[[gnu::always_inline]] inline void Replica::run_iteration(double seconds, core::IterationRecord& rec) {
  const core::Duration duration = step_duration(seconds);
  // From the plan (last_start_) to the step's end: a wait for swap copies, then the compute.
  last_duration_ = (sim_.now() - last_start_) + duration;
  sim_.schedule_after(duration, this, ++iteration_);
  rec.start = sim_.now();
  rec.duration = duration;
  signals_->on_iteration(rec);
  publish_state();
}

// ---- swap copies on the network -----------------------------------------------------------------

void Replica::set_swap_fabric() {
  if (!listener_) return;
  swap_fabric_ = std::make_unique<SwapFabric>();
  swap_fabric_->replica = this;
}

void Replica::swap_copy(bool out, double bytes) {
  // Both models move `bytes` from (to) each of the swap_gpus_ GPUs of the request's attention rank.
  const double total = bytes * static_cast<double>(swap_gpus_);
  if (out) {
    ++swap_stats_.swap_outs;
    swap_stats_.out_bytes += total;
  } else {
    ++swap_stats_.swap_ins;
    swap_stats_.in_bytes += total;
  }
  if (!swap_fabric_) [[likely]] {  // analytic: each GPU over its own link, in parallel: bytes / link
    pending_swap_seconds_ += bytes / host_link_bytes_per_s_;
    swap_stats_.wait_seconds += bytes / host_link_bytes_per_s_;
    return;
  }
  const uint64_t tag = ++swap_seq_;
  swap_copies_.push_back(tag);
  constexpr KvTierEndpoint gpu = KvTierEndpoint::kGpu, host = KvTierEndpoint::kHost;
  // Cluster::tier_copy spreads the request's bytes over all the replica's GPUs (one flow each).
  listener_->tier_copy(*this, out ? gpu : host, out ? host : gpu, total, tag, swap_fabric_.get());
}

void Replica::swap_copy_done(uint64_t tag) {
  auto it = std::find(swap_copies_.begin(), swap_copies_.end(), tag);
  if (it == swap_copies_.end()) return;  // cancelled by a failure (only its latency was left)
  swap_copies_.erase(it);
  if (!swap_copies_.empty()) return;
  if (!swap_waiting_) {  // copies of a plan that ran nothing: the swapped requests may go on now
    if (!busy_ && !down_) try_start_iteration();
    return;
  }
  swap_waiting_ = false;
  swap_stats_.wait_seconds += (sim_.now() - last_start_).seconds();
  run_iteration(swap_wait_compute_s_, swap_wait_rec_);
}

void Replica::speculate(hwmodels::BatchShape& shape, core::IterationRecord& rec) {
  const Speculator& spec = *speculator_;
  const size_t decodes = plan_.decodes.size();
  // Verification: how many of each decode's drafts the target accepts, drawn now (in plan order)
  // because the drafter's first pass, in this same iteration, runs over the accepted tokens.
  verified_.assign(decodes, 0);
  accepted_.assign(decodes, 0);
  int64_t catchup = 0, catchup_pairs = 0;
  for (const IterationPlan::Verify& v : plan_.verifies) {
    const size_t i = v.decode;
    const int64_t drafts = v.drafts;
    verified_[i] = drafts;
    const Request& r = requests_[plan_.decodes[i]];
    const int64_t a = std::clamp<int64_t>(spec.accept(r, drafts, spec_rng_), 0, drafts);
    accepted_[i] = a;
    ++rec.verify_seqs;
    rec.draft_tokens += drafts;
    rec.accepted_tokens += a;
    rec.extra_decode_tokens += std::min(a, r.output_tokens - r.generated - 1);
    if (spec.catches_up()) {
      const int64_t context = r.kv_tokens + 1;
      catchup += a;
      catchup_pairs += a * context + a * (a + 1) / 2;
    }
  }
  // Proposals for the next iteration: every decode, and every prompt this iteration completes (a
  // prefill replica's go to a decode replica, which drafts from its first decode on). The engine
  // does not know which requests end now, so it drafts for them too. A sequence never drafts past
  // the model's context.
  const int64_t k = role_ == ReplicaRole::kPrefill ? 0 : spec.draft_tokens(static_cast<int64_t>(running_.size()));
  proposed_.assign(decodes + plan_.prefills.size(), 0);
  int64_t seqs = 0, context = 0, passes = 0;
  auto propose = [&](size_t slot, const Request& r, int64_t kv_after) {
    if (k <= 0) return;
    const int64_t p = std::min(spec.propose(r, k, spec_rng_), std::max<int64_t>(0, max_context_ - kv_after - 1));
    proposed_[slot] = std::max<int64_t>(0, p);
    if (p <= 0) return;
    ++seqs;
    context += kv_after + 1;
    passes = std::max(passes, p);
  };
  for (size_t i = 0; i < decodes; ++i) {
    const Request& r = requests_[plan_.decodes[i]];
    propose(i, r, r.kv_tokens + 1 + accepted_[i]);
  }
  for (size_t j = 0; j < plan_.prefills.size(); ++j) {
    const Request& r = requests_[plan_.prefills[j].id];
    if (r.kv_tokens + plan_.prefills[j].tokens == r.prefill_target()) propose(decodes + j, r, r.prefill_target());
  }
  if (!spec.drafter_runs()) return;
  // The drafter sees every token the target made final, to keep its own KV (pass 1), even in an
  // iteration that proposes nothing.
  shape.draft_passes = std::max<int64_t>(1, passes);
  shape.draft_seqs = seqs;
  shape.draft_context_tokens = context;
  shape.draft_catchup_tokens = catchup;
  shape.draft_catchup_pairs = catchup_pairs;
}

void Replica::on_event(uint64_t payload) {
  if (payload != iteration_) return;  // the iteration of a replica that has failed since
  busy_ = false;
  const core::Time now = sim_.now();
  gaps_.clear();
  // Whether a request finished or (on a prefill replica) became ready to hand off: only then does
  // the running set change.
  bool leaving = false;
  for (const auto& p : plan_.prefills) {
    Request& r = requests_[p.id];
    account(r, -1);
    r.kv_tokens += p.tokens;
    if (r.kv_tokens == r.prefill_target()) {
      emit_token(r, now);
      r.decoding = true;
      if (speculator_) r.drafts = proposed_[plan_.decodes.size() + static_cast<size_t>(&p - plan_.prefills.data())];
      leaving = leaving || role_ == ReplicaRole::kPrefill || r.generated >= r.output_tokens;
    }
    account(r, +1);
  }
  int64_t emitted = 0;
  if (!speculator_) [[likely]] {
    for (RequestId id : plan_.decodes) {
      Request& r = requests_[id];
      r.kv_tokens += 1;
      emit_token(r, now);
      leaving = leaving || r.generated >= r.output_tokens;
    }
  } else {
    for (size_t i = 0; i < plan_.decodes.size(); ++i) {
      Request& r = requests_[plan_.decodes[i]];
      const int64_t tokens = settle_decode(r, i);
      emit_token(r, now, tokens);
      emitted += tokens - 1;
      leaving = leaving || r.generated >= r.output_tokens;
    }
  }
  load_.oracle_remaining_tokens -= static_cast<int64_t>(plan_.decodes.size()) + emitted;

  // Finished requests leave the running set (order of the rest is kept); so do prefilled ones on
  // a prefill replica, whose KV now moves to a decode replica.
  size_t kept = 0;
  std::vector<RequestId>& handoffs = handoffs_;
  handoffs.clear();
  // Whether every request that leaves has completed and every one that stays decoded in this
  // iteration (in running order): then the plan, less the completed ones, is still every running
  // request's decode, which a scheduler that decodes the running ones when nothing waits repeats.
  // (Checked only when a request leaves: the walk over the batch would cost every iteration.)
  bool completions_only = leaving && repeats_ && plan_.prefills.empty() && aborts_pending_ == 0 &&
                          plan_.decodes.size() == running_.size() &&
                          std::equal(running_.begin(), running_.end(), plan_.decodes.begin());
  leaving = leaving || aborts_pending_ > 0;
  if (!leaving) kept = running_.size();
  for (RequestId id : leaving ? std::span<const RequestId>(running_) : std::span<const RequestId>()) {
    Request& r = requests_[id];
    if (r.timed_out) {  // its client gave up during the iteration
      completions_only = false;
      --aborts_pending_;
      account(r, -1);
      release_kv(r);
      leave_timed_out(id);
    } else if (r.generated >= r.output_tokens) {
      release_kv(r);
      core::RequestRecord rec;
      rec.id = r.id;
      rec.replica = r.routed_replica;
      rec.decode_replica = index_;
      rec.outcome = core::RequestOutcome::kCompleted;
      rec.prompt_tokens = r.prompt_tokens;
      rec.output_tokens = r.output_tokens;
      rec.arrival = r.arrival;
      rec.first_token = r.first_token;
      rec.finish = now;
      rec.preemptions = r.preemptions;
      rec.cached_tokens = r.cached_tokens;
      rec.kv_transfer_bytes = static_cast<double>(r.kv_bytes_transferred);
      rec.generated_tokens = r.generated;
      rec.stage = r.stage;
      rec.request_class = r.request_class;
      observer_.on_request_done(rec);
      requests_.erase(id);
    } else if (role_ == ReplicaRole::kPrefill && r.decoding) {
      completions_only = false;
      r.state = RequestState::kTransferring;
      account(r, -1);
      ++transferring_;
      handoffs.push_back(id);
    } else {
      running_[kept++] = id;
    }
  }
  running_.resize(kept);
  if (!gaps_.empty()) signals_->on_token_gaps(gaps_);
  // Nothing but token counts changed, or requests completed out of an all-decode plan: the plan
  // keeps its decodes (the running ones) for try_start_iteration to repeat or decode_window to run.
  // So too after prefills that all completed their prompts, with nobody leaving: every running
  // request now decodes, which is the plan such a scheduler makes when nothing waits (and
  // try_start_iteration asks it when something does).
  const bool after_prefill = repeats_ && !plan_.prefills.empty() && !leaving &&
                             std::all_of(running_.begin(), running_.end(),
                                         [&](RequestId id) { return requests_[id].decoding; });
  repeat_ = (repeats_ && plan_.prefills.empty() && (!leaving || completions_only)) || after_prefill;
  if (!repeat_) {
    plan_.clear();
  } else if (after_prefill) {
    plan_.clear();
    plan_.decodes.assign(running_.begin(), running_.end());
  } else if (leaving) {
    plan_.decodes.assign(running_.begin(), running_.end());
  }
  for (RequestId id : handoffs) listener_->on_prefill_done(*this, id);
  handoffs.clear();
  chained_ = true;
  int64_t horizon = 0;
  if (!repeat_ || !window_worth_trying(horizon, after_prefill) || !decode_window(horizon)) try_start_iteration();
  // Pulls waiting for room get what the next iteration has left (vLLM's scheduler allocates for
  // its running requests first, then for the waiting ones, remote-KV ones included).
  if (pulls_waiting_ > 0) [[unlikely]] listener_->on_kv_freed(*this);
}

// ---- host KV tier -------------------------------------------------------------------------------

void Replica::set_tier_fabric() {
  if (!listener_ || role_ == ReplicaRole::kDecode) return;  // decode replicas have no tier
  tier_fabric_ = std::make_unique<TierFabric>();
  tier_fabric_->replica = this;
  if (host_) host_->set_traffic(tier_fabric_.get());
  if (nvme_) nvme_->set_traffic(tier_fabric_.get());
  if (store_writer_) store_writer_->set_traffic(tier_fabric_.get());
}

bool Replica::start_loads() {
  const int64_t u_tokens = kv_.unit_tokens();
  while (!waiting_.empty()) {
    const RequestId id = waiting_.front();
    Request& r = requests_[id];
    if (r.decoding || r.kv_tokens > 0 || r.tier_checked) return false;
    if (!prefetches_.empty()) [[unlikely]] {
      // Its prefetch (if any): wait for it as the policy says (out of the queue), then cut it off;
      // the units that arrived are host units for the lookup below.
      auto p = std::find_if(prefetches_.begin(), prefetches_.end(), [id](const Prefetch& e) { return e.id == id; });
      if (p != prefetches_.end()) {
        const int64_t elapsed = (sim_.now() - p->start).ns(), remaining = p->end_ns - elapsed;
        if (remaining > 0 && !p->waited) {
          // On the network (end_ns unknown: its flows' arrival ends it) the policy is told the
          // remaining time is unbounded: wait_complete waits for the flows, timeout for its timer.
          const double wait = store_->prefetch()->wait_seconds(
              static_cast<double>(elapsed) * 1e-9,
              tier_fabric_ ? std::numeric_limits<double>::infinity() : static_cast<double>(remaining) * 1e-9);
          const bool until_arrival = tier_fabric_ && std::isinf(wait);
          const int64_t wait_ns = until_arrival ? remaining : std::min<int64_t>(remaining, std::llround(wait * 1e9));
          if (wait_ns > 0) {
            p->waited = true;
            StoreStats& st = store_->stats(index_);
            ++st.prefetch_waits;
            if (!tier_fabric_) st.prefetch_wait_seconds += static_cast<double>(wait_ns) * 1e-9;  // else finish_load
            waiting_.pop_front();
            loading_.push_back({id, ++load_seq_, sim_.now(), 1, true});
            if (!until_arrival) sim_.schedule_after(core::Duration::from_ns(wait_ns), &load_done_, load_seq_);
            continue;
          }
        }
        end_prefetch(*p);
        prefetches_.erase(p);
      }
    }
    const Lookup hbm = lookup(r);
    // Continue the chain past HBM's hit: full units before the last prompt token, each in HBM
    // (a unit whose parent was evicted), in the host tier, in the NVMe tier, or in the shared store
    // (that order).
    const size_t n = hashed_units(r, u_tokens);
    const int64_t limit = r.prefill_target() - 1;
    uint64_t key = 0;
    int64_t need = 0;  // blocks the units take from kv_.available()
    for (int64_t j = 0; j < hbm.usable_units; ++j) {
      key = KvCache::chain(key, r.block_hashes[static_cast<size_t>(j)]);
      const uint32_t u = kv_.find(key);
      if (!kv_.referenced(u)) need += kv_.unit_blocks(u);
    }
    int64_t end_tokens = hbm.usable_tokens, host_blocks = 0, host_tokens = 0, store_blocks = 0, store_tokens = 0;
    int64_t nvme_blocks = 0, nvme_tokens = 0;
    size_t end_units = static_cast<size_t>(hbm.usable_units);
    std::vector<uint64_t>& keys = unit_keys_;
    std::vector<uint64_t>& skeys = store_keys_;
    std::vector<uint64_t>& nkeys = nvme_keys_;
    keys.clear();
    skeys.clear();
    nkeys.clear();
    // Where the chain stood before its first store unit (`cut`) and before its first NVMe unit
    // (`nvme_cut`): what a declined store or NVMe load falls back to.
    struct Cut {
      int64_t tokens, need, host_blocks, host_tokens, nvme_blocks, nvme_tokens;
      size_t units, host_keys, nvme_keys;
    } cut{}, nvme_cut{};
    auto here = [&] {
      return Cut{end_tokens, need, host_blocks, host_tokens, nvme_blocks, nvme_tokens, end_units, keys.size(),
                 nkeys.size()};
    };
    auto restore = [&](const Cut& c) {
      end_tokens = c.tokens;
      need = c.need;
      host_blocks = c.host_blocks;
      host_tokens = c.host_tokens;
      nvme_blocks = c.nvme_blocks;
      nvme_tokens = c.nvme_tokens;
      end_units = c.units;
      keys.resize(c.host_keys);
      nkeys.resize(c.nvme_keys);
    };
    for (size_t j = end_units; j < n; ++j) {
      const int64_t end = unit_end(r, j);
      if (end - static_cast<int64_t>(j) * u_tokens != u_tokens || end > limit) break;
      const uint64_t next = KvCache::chain(key, r.block_hashes[j]);
      const uint32_t u = kv_.find(next);
      if (u != KvCache::kNone) {
        if (!kv_.referenced(u)) need += kv_.unit_blocks(u);
        keys.push_back(next);
      } else if (const int64_t b = host_ ? host_->blocks_of(next) : -1; b > 0) {
        need += b;
        host_blocks += b;
        host_tokens += u_tokens;
        keys.push_back(next);
      } else if (const int64_t nb = nvme_ ? nvme_->blocks_of(next) : -1; nb > 0) {
        if (nvme_tokens == 0) nvme_cut = here();
        need += nb;
        nvme_blocks += nb;
        nvme_tokens += u_tokens;
        nkeys.push_back(next);
      } else if (const int64_t sb = store_ ? store_->blocks_of(next) : -1; sb > 0) {
        if (store_tokens == 0) cut = here();
        need += sb;
        store_blocks += sb;
        store_tokens += u_tokens;
        skeys.push_back(next);
      } else {
        break;
      }
      key = next;
      end_tokens = end;
      end_units = j + 1;
    }
    if (host_tokens == 0 && store_tokens == 0 && nvme_tokens == 0) {
      // Nothing in the tiers. The answer is not held: until the request is admitted or a load for
      // it starts, it is asked again each time it is considered (as vLLM V1 asks its prefix cache
      // and its KV connector about a waiting request at every step): while it waits for blocks, HBM
      // may evict its units to a tier, or another replica write them to the store.
      asked_.request = kNoAsk;
      return false;
    }
    // Load or recompute: the copy's time against the prefill time the hit saves, the cost model's
    // prefill of the rest of the prompt from HBM's hit less that from the end of the loaded units.
    hwmodels::BatchShape all;
    hwmodels::add_prefill_chunk(all, plan_.limits, hbm.usable_tokens, r.prefill_target() - hbm.usable_tokens, true);
    const hwmodels::StepCost all_cost = cost_.step(all);
    auto saved = [&](int64_t end) {
      hwmodels::BatchShape rest;
      hwmodels::add_prefill_chunk(rest, plan_.limits, end, r.prefill_target() - end, true);
      const hwmodels::StepCost c = cost_.step(rest);
      return std::pair<double, double>{all_cost.seconds - c.seconds, all_cost.flops - c.flops};
    };
    double load_s = 0;
    std::pair<double, double> save{0, 0};
    int64_t declined_store_tokens = 0, declined_nvme_tokens = 0;
    // An answer without a load is not held (the request is asked again each time it is considered
    // until it is admitted): its declines are counted when the request's first admission follows
    // it (admit_front), so a request asked at every step counts the declines of one answer, the
    // one it was admitted on. A reload's (the request was admitted before) are not counted.
    auto answer = [&](int64_t declined_host_tokens) {
      asked_ = {r.id, declined_host_tokens, declined_nvme_tokens, declined_store_tokens};
    };
    // The local units' copy (host memory and NVMe share the GPU's PCIe link: kv_nvme.h).
    // On the network: the copies on the fabric as it is now (ReplicaListener::tier_copy_seconds), the
    // longest of them; computed only for a policy that weighs the time (`cost`).
    auto fabric_s = [&](KvTierEndpoint from, double bytes) {
      return listener_->tier_copy_seconds(*this, from, KvTierEndpoint::kGpu, bytes);
    };
    auto local_s = [&] {
      if (tier_fabric_)
        return std::max(host_tokens > 0 ? fabric_s(KvTierEndpoint::kHost, host_->copy_bytes(host_blocks)) : 0.0,
                        nvme_tokens > 0 ? fabric_s(KvTierEndpoint::kNvme, nvme_->copy_bytes(nvme_blocks)) : 0.0);
      if (nvme_tokens == 0) return host_tokens > 0 ? host_->copy_seconds(host_blocks) : 0.0;
      return nvme_->local_copy_seconds(nvme_blocks, host_blocks, host_ ? host_->spec().latency_s : 0.0);
    };
    if (store_tokens > 0) {
      // A store hit: the store's load policy decides for the whole chain (local and store units:
      // one wait, tier_load_seconds); declined, the units before the first store unit are decided
      // as without a store (NVMe's policy if there are NVMe units among them, else host's).
      if (!tier_fabric_)
        load_s = tier_load_seconds(local_s(), store_->copy_seconds(store_blocks));
      else if (store_->weighs_copy_time())
        load_s = tier_load_seconds(local_s(), fabric_s(KvTierEndpoint::kStore, store_->copy_bytes(store_blocks)));
      save = saved(end_tokens);
      if (!store_->should_load(load_s, save.first)) {
        declined_store_tokens = store_tokens;
        restore(cut);
        store_blocks = store_tokens = 0;
        skeys.clear();
      }
    }
    if (store_tokens == 0 && nvme_tokens > 0) {
      // An NVMe hit (no store units): the NVMe tier's policy decides for the chain (host and NVMe
      // units: one local copy); declined, the host units before the first NVMe unit are decided on
      // their own by the host's policy.
      load_s = !tier_fabric_ || nvme_->weighs_copy_time() ? local_s() : 0.0;
      save = saved(end_tokens);
      if (!nvme_->should_load(load_s, save.first)) {
        declined_nvme_tokens = nvme_tokens;
        restore(nvme_cut);
      }
    }
    if (host_tokens == 0 && store_tokens == 0 && nvme_tokens == 0) {
      answer(0);
      return false;
    }
    if (store_tokens == 0 && nvme_tokens == 0) {
      load_s = !tier_fabric_                 ? host_->copy_seconds(host_blocks)
               : host_->weighs_copy_time() ? fabric_s(KvTierEndpoint::kHost, host_->copy_bytes(host_blocks))
                                           : 0.0;
      save = saved(end_tokens);
      if (!host_->should_load(load_s, save.first)) {
        answer(host_tokens);
        return false;
      }
    }
    if (need > kv_.available() - scheduler_->reserved_blocks(kv_)) return true;  // tried again when blocks free up
    // A load starts: a fresh request's answer is held from here on (as vLLM holds a request whose
    // KV is on the way, WAITING_FOR_REMOTE_KVS, and then its computed tokens); one deciding again
    // (a reload) is asked again when it is back (its loaded units unreferenced until its admission,
    // HBM may evict them). The declines in the answer (a store or NVMe hit declined, the units
    // before it loaded) are counted now, for a first admission.
    r.tier_checked = !r.tier_redecide;
    asked_.request = kNoAsk;
    if (!r.looked_up) count_declines({r.id, 0, declined_nvme_tokens, declined_store_tokens});
    // Pin what HBM holds, then bring in the tiers' units (inserting may evict other units).
    uint64_t k = 0;
    for (size_t j = 0; j < end_units; ++j) {
      k = KvCache::chain(k, r.block_hashes[j]);
      const uint32_t u = kv_.find(k);
      if (u != KvCache::kNone) kv_.acquire(u);
      r.units.push_back(u);
    }
    if (host_)
      for (uint64_t hk : keys) host_->touch(hk);
    for (uint64_t nk : nkeys) nvme_->touch(nk);
    int64_t cross_tokens = 0;
    for (uint64_t sk : skeys) {
      store_->touch(sk);
      if (store_->writer_of(sk) != static_cast<int64_t>(index_)) cross_tokens += u_tokens;
    }
    k = 0;
    for (size_t j = 0; j < end_units; ++j) {
      k = KvCache::chain(k, r.block_hashes[j]);
      if (r.units[j] == KvCache::kNone) r.units[j] = kv_.insert(k, kv_.unit_blocks_for(u_tokens));
    }
    r.last_unit_key = k;
    r.shared_tokens = end_tokens;
    r.host_hit_tokens = static_cast<uint32_t>(host_tokens);
    // Each tier counts its own units, bytes and link time (its copy alone); the prefill time and
    // FLOPs saved are shared between them in proportion to their tokens.
    const double host_share =
        static_cast<double>(host_tokens) / static_cast<double>(host_tokens + nvme_tokens + store_tokens);
    const double nvme_share =
        static_cast<double>(nvme_tokens) / static_cast<double>(host_tokens + nvme_tokens + store_tokens);
    // One tier's share of the load: its units, bytes and analytic copy time (on the network the
    // flows' time, finish_tier_copy), and `share` of the prefill time and FLOPs saved.
    auto count_load = [&](KvTierStats& st, int64_t tokens, double bytes, double seconds, double share) {
      ++st.loads;
      st.loaded_units += tokens / u_tokens;
      st.loaded_tokens += tokens;
      st.load_bytes += bytes;
      if (!tier_fabric_) st.load_seconds += seconds;
      st.saved_prefill_seconds += save.first * share;
      st.saved_flops += save.second * share;
    };
    if (host_tokens > 0)
      count_load(host_->stats(), host_tokens, host_->copy_bytes(host_blocks), host_->copy_seconds(host_blocks),
                 host_share);
    if (store_tokens > 0) {
      StoreStats& st = store_->stats(index_);
      count_load(st, store_tokens, store_->copy_bytes(store_blocks), store_->copy_seconds(store_blocks),
                 1 - host_share - nvme_share);
      if (cross_tokens > 0) ++st.cross_loads;
      st.cross_tokens += cross_tokens;
      store_hits_[r.id] = static_cast<uint32_t>(store_tokens);
    }
    if (nvme_tokens > 0) {
      count_load(nvme_->stats(), nvme_tokens, nvme_->copy_bytes(nvme_blocks), nvme_->copy_seconds(nvme_blocks),
                 nvme_share);
      nvme_hits_[r.id] = static_cast<uint32_t>(nvme_tokens);
    }
    waiting_.pop_front();
    loading_.push_back({id, ++load_seq_, sim_.now(),
                        (host_tokens > 0 ? 1 : 0) + (store_tokens > 0 ? 1 : 0) + (nvme_tokens > 0 ? 1 : 0), false});
    if (tier_fabric_) {  // flows tier -> each GPU, sharing the links with everything else on them
      constexpr KvTierEndpoint gpu = KvTierEndpoint::kGpu;
      if (host_tokens > 0)
        listener_->tier_copy(*this, KvTierEndpoint::kHost, gpu, host_->copy_bytes(host_blocks), load_seq_ * 4,
                             tier_fabric_.get());
      if (store_tokens > 0)
        listener_->tier_copy(*this, KvTierEndpoint::kStore, gpu, store_->copy_bytes(store_blocks), load_seq_ * 4 + 1,
                             tier_fabric_.get());
      if (nvme_tokens > 0)  // through the host (its bounce buffer), sharing the GPU's PCIe link with the host's copy
        listener_->tier_copy(*this, KvTierEndpoint::kNvme, gpu, nvme_->copy_bytes(nvme_blocks), load_seq_ * 4 + 2,
                             tier_fabric_.get());
    } else
      sim_.schedule_after(
          core::Duration::from_ns(std::max<int64_t>(1, core::Duration::from_seconds(load_s).ns())), &load_done_,
          load_seq_);
  }
  return false;
}

void Replica::count_declines(const Asked& a) {
  if (a.host_tokens > 0) {
    ++host_->stats().declined;
    host_->stats().declined_tokens += a.host_tokens;
  }
  if (a.nvme_tokens > 0) {
    ++nvme_->stats().declined;
    nvme_->stats().declined_tokens += a.nvme_tokens;
  }
  if (a.store_tokens > 0) {
    StoreStats& st = store_->stats(index_);
    ++st.declined;
    st.declined_tokens += a.store_tokens;
  }
}

void Replica::finish_load(uint64_t seq) {
  auto it = std::find_if(loading_.begin(), loading_.end(), [seq](const Loading& l) { return l.seq == seq; });
  if (it == loading_.end()) return;  // its request timed out, or the replica failed
  const RequestId id = it->id;
  const bool prefetch = it->prefetch;
  if (prefetch && tier_fabric_) store_->stats(index_).prefetch_wait_seconds += (sim_.now() - it->start).seconds();
  loading_.erase(it);
  if (!prefetch) release_kv(requests_[id]);
  waiting_.push_front(id);
  if (!busy_) try_start_iteration(); else publish_state();
}

void Replica::finish_tier_copy(uint64_t tag) {
  if (tag % 4 == 3) return prefetch_arrived(tag / 4);
  const uint64_t seq = tag / 4;
  auto it = std::find_if(loading_.begin(), loading_.end(), [seq](const Loading& l) { return l.seq == seq; });
  if (it == loading_.end()) return;  // its request timed out, or the replica failed
  const double took = (sim_.now() - it->start).seconds();
  if (tag % 4 == 1)
    store_->stats(index_).load_seconds += took;
  else if (tag % 4 == 2)
    nvme_->stats().load_seconds += took;
  else
    host_->stats().load_seconds += took;
  if (--it->copies == 0) finish_load(seq);  // a mixed load waits for the longest of its copies
}

void Replica::cancel_load_copies(uint64_t seq) {
  for (uint64_t copy = 0; copy < 3; ++copy) listener_->cancel_tier_copy(*this, seq * 4 + copy, tier_fabric_.get(), 0);
}

// ---- prefetch from the shared store into the host tier -----------------------------------------

void Replica::start_prefetch(RequestId id) {
  const Request& r = requests_[id];
  if (r.decoding || r.kv_tokens > 0 || r.tier_checked) return;
  // The chain as start_loads() follows it (full units before the last prompt token), past the
  // units HBM, the host tier or a prefetch under way holds, up to the first unit found nowhere;
  // the store units on the way are copied.
  const int64_t u_tokens = kv_.unit_tokens();
  const size_t n = hashed_units(r, u_tokens);
  const int64_t limit = r.prefill_target() - 1;
  Prefetch p{id, 0, sim_.now(), 0, {}, {}, false};
  int64_t blocks = 0;
  uint64_t key = 0;
  for (size_t j = 0; j < n; ++j) {
    const int64_t end = unit_end(r, j);
    if (end - static_cast<int64_t>(j) * u_tokens != u_tokens || end > limit) break;
    key = KvCache::chain(key, r.block_hashes[j]);
    if (kv_.find(key) != KvCache::kNone || host_->contains(key) || prefetching_.count(key) > 0) continue;
    const int64_t b = store_->blocks_of(key);
    if (b <= 0) break;
    p.units.emplace_back(key, 0);
    p.blocks.push_back(b);
    blocks += b;
  }
  if (p.units.empty()) return;
  if (tier_fabric_) {
    // On the network: one flow per GPU, store -> its node's host; every unit lands when the flows
    // have all arrived (prefetch_arrived); cut off before, the units whose bytes every flow had
    // delivered land (end_prefetch).
    for (auto& u : p.units) {
      u.second = std::numeric_limits<int64_t>::max();
      prefetching_.insert(u.first);
      store_->touch(u.first);
    }
    p.end_ns = std::numeric_limits<int64_t>::max();
    p.seq = ++prefetch_seq_;
    ++store_->stats(index_).prefetches;
    listener_->tier_copy(*this, KvTierEndpoint::kStore, KvTierEndpoint::kHost, store_->copy_bytes(blocks),
                         p.seq * 4 + 3, tier_fabric_.get());
    prefetches_.push_back(std::move(p));
    return;
  }
  // One copy of all the units (SharedKvStore::copy_seconds: the latency, then the bytes at the
  // copy's rate); unit i has arrived when the bytes of units 0..i have.
  const double latency = store_->spec().latency_s;
  const double stream = store_->copy_seconds(blocks) - latency;
  int64_t sum = 0;
  for (size_t i = 0; i < p.units.size(); ++i) {
    sum += p.blocks[i];
    p.units[i].second = std::max<int64_t>(
        1, std::llround((latency + stream * static_cast<double>(sum) / static_cast<double>(blocks)) * 1e9));
    prefetching_.insert(p.units[i].first);
    store_->touch(p.units[i].first);
  }
  p.end_ns = p.units.back().second;
  p.seq = ++prefetch_seq_;
  ++store_->stats(index_).prefetches;
  sim_.schedule_after(core::Duration::from_ns(p.end_ns), &prefetch_done_, p.seq);
  prefetches_.push_back(std::move(p));
}

void Replica::end_prefetch(Prefetch& p) {
  const int64_t elapsed = (sim_.now() - p.start).ns();
  // On the network, cut off before its flows arrived: they stop (what they have not moved is not
  // sent). Each flow carries its GPU's share of every unit in chain order, so unit i has arrived
  // when every flow has delivered the share of units 0..i: those land, the rest are cut off.
  if (tier_fabric_ && p.end_ns == std::numeric_limits<int64_t>::max()) {
    int64_t total = 0;
    for (int64_t b : p.blocks) total += b;
    const double arrived =
        listener_->cancel_tier_copy(*this, p.seq * 4 + 3, tier_fabric_.get(), store_->copy_bytes(total)) *
        static_cast<double>(total);  // in blocks
    int64_t sum = 0;
    for (size_t i = 0; i < p.units.size(); ++i) {
      sum += p.blocks[i];
      if (static_cast<double>(sum) - arrived > 1e-9 * static_cast<double>(total)) break;
      p.units[i].second = elapsed;
    }
  }
  StoreStats& st = store_->stats(index_);
  const int64_t u_tokens = kv_.unit_tokens();
  for (size_t i = 0; i < p.units.size(); ++i) {
    const uint64_t key = p.units[i].first;
    prefetching_.erase(key);
    if (p.units[i].second <= elapsed) {
      host_->land(key, p.blocks[i]);
      st.prefetched_tokens += u_tokens;
      st.prefetch_bytes += store_->copy_bytes(p.blocks[i]);
    } else {
      st.prefetch_cut_tokens += u_tokens;
    }
  }
}

void Replica::finish_prefetch(uint64_t seq) {
  auto p = std::find_if(prefetches_.begin(), prefetches_.end(), [seq](const Prefetch& e) { return e.seq == seq; });
  if (p == prefetches_.end()) return;  // cut off at the head of the queue, or the replica failed
  end_prefetch(*p);
  prefetches_.erase(p);
}

void Replica::prefetch_arrived(uint64_t seq) {
  auto p = std::find_if(prefetches_.begin(), prefetches_.end(), [seq](const Prefetch& e) { return e.seq == seq; });
  if (p == prefetches_.end()) return;  // cut off at the head of the queue, or the replica failed
  const RequestId id = p->id;
  const int64_t elapsed = (sim_.now() - p->start).ns();
  for (auto& u : p->units) u.second = elapsed;  // all arrived now
  p->end_ns = elapsed;
  end_prefetch(*p);
  prefetches_.erase(p);
  // Its request waiting for it (out of the queue) goes on at once.
  auto l = std::find_if(loading_.begin(), loading_.end(), [id](const Loading& e) { return e.prefetch && e.id == id; });
  if (l != loading_.end()) finish_load(l->seq);
}

void Replica::drop_prefetch(RequestId id) {
  auto p = std::find_if(prefetches_.begin(), prefetches_.end(), [id](const Prefetch& e) { return e.id == id; });
  if (p == prefetches_.end()) return;
  end_prefetch(*p);
  prefetches_.erase(p);
}

void Replica::publish_state_at(core::Time t) {
  const auto engine_queue = static_cast<int64_t>(waiting_.size() + arriving_.size() + loading_.size());
  load_.queued = engine_queue + incoming_ + pulls_waiting_ + pulls_in_flight_;
  load_.running = static_cast<int64_t>(running_.size());
  load_.kv_blocks_used = kv_.in_use();
  // The observers integrate the state over time (exactly: integer block-nanoseconds), so a state
  // equal to the last one published tells them nothing; most decode steps change only the tokens.
  if (published_ && engine_queue == published_state_.queued && load_.running == published_state_.running &&
      load_.kv_blocks_used == published_state_.kv_blocks_used && pulls_waiting_ == published_state_.pulls_waiting &&
      kv_.total() == published_state_.kv_blocks_total)
    return;
  core::ReplicaState& s = published_state_;
  published_ = true;
  s.replica = index_;
  s.time = t;
  s.queued = engine_queue;
  s.running = load_.running;
  s.kv_blocks_used = load_.kv_blocks_used;
  s.kv_blocks_total = kv_.total();
  s.pulls_waiting = pulls_waiting_;
  signals_->on_replica_state(s);
}

}  // namespace servesim::sim
