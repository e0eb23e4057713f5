#include "sim/cluster/kv_tier.h"

#include <string>

#include "sim/core/error.h"

namespace servesim::sim {

void KvTierStats::add(const KvTierStats& o) {
  loads += o.loads;
  loaded_units += o.loaded_units;
  loaded_tokens += o.loaded_tokens;
  load_bytes += o.load_bytes;
  load_seconds += o.load_seconds;
  saved_prefill_seconds += o.saved_prefill_seconds;
  saved_flops += o.saved_flops;
  declined += o.declined;
  declined_tokens += o.declined_tokens;
  stores += o.stores;
  store_bytes += o.store_bytes;
  store_seconds += o.store_seconds;
  evictions += o.evictions;
  dropped += o.dropped;
}

HostKvTier::HostKvTier(HostTierSpec spec) : spec_(std::move(spec)) {
  if (!spec_.write || !spec_.eviction || !spec_.load || spec_.capacity_blocks < 0 || !(spec_.link_bytes_per_s > 0) ||
      !(spec_.block_bytes_per_gpu > 0) || spec_.gpus < 1)
    throw core::Error("internal: host KV tier built without policies, bandwidth or block size");
}

int64_t HostKvTier::blocks_of(uint64_t key) const {
  auto it = index_.find(key);
  return it == index_.end() ? -1 : entries_[it->second].blocks;
}

std::vector<uint64_t> HostKvTier::eviction_order() const {
  std::vector<uint64_t> out;
  for (uint32_t e = head_; e != kNone; e = entries_[e].next) out.push_back(entries_[e].key);
  return out;
}

void HostKvTier::touch(uint64_t key) {
  if (!spec_.eviction->refresh_on_access()) return;
  auto it = index_.find(key);
  if (it == index_.end()) return;
  unlink(it->second);
  push_back(it->second);
}

void HostKvTier::store(uint64_t key, int64_t blocks) {
  if (!insert(key, blocks)) return;
  ++stats_.stores;
  stats_.store_bytes += copy_bytes(blocks);
  stats_.store_seconds += copy_seconds(blocks);
  if (traffic_) traffic_->on_store(KvTierEndpoint::kGpu, KvTierEndpoint::kHost, copy_bytes(blocks));
}

bool HostKvTier::land(uint64_t key, int64_t blocks) { return insert(key, blocks); }

bool HostKvTier::insert(uint64_t key, int64_t blocks) {
  if (auto it = index_.find(key); it != index_.end()) {
    if (spec_.eviction->refresh_on_access()) {
      unlink(it->second);
      push_back(it->second);
    }
    return false;
  }
  if (blocks > spec_.capacity_blocks) {
    ++stats_.dropped;
    return false;
  }
  while (used_ + blocks > spec_.capacity_blocks) {
    const uint32_t victim = head_;
    Entry& v = entries_[victim];
    unlink(victim);
    used_ -= v.blocks;
    index_.erase(v.key);
    v.live = false;
    free_slots_.push_back(victim);
    ++stats_.evictions;
    if (below_) below_->on_tier_evict(v.key, v.blocks);
  }
  uint32_t e;
  if (!free_slots_.empty()) {
    e = free_slots_.back();
    free_slots_.pop_back();
  } else {
    e = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  entries_[e] = Entry{key, blocks, kNone, kNone, true};
  push_back(e);
  index_[key] = e;
  used_ += blocks;
  return true;
}

void HostKvTier::clear() {
  entries_.clear();
  free_slots_.clear();
  index_.clear();
  head_ = tail_ = kNone;
  used_ = 0;
}

void HostKvTier::push_back(uint32_t e) {
  Entry& entry = entries_[e];
  entry.prev = tail_;
  entry.next = kNone;
  if (tail_ != kNone) entries_[tail_].next = e; else head_ = e;
  tail_ = e;
}

void HostKvTier::unlink(uint32_t e) {
  Entry& entry = entries_[e];
  if (entry.prev != kNone) entries_[entry.prev].next = entry.next; else head_ = entry.next;
  if (entry.next != kNone) entries_[entry.next].prev = entry.prev; else tail_ = entry.prev;
  entry.prev = entry.next = kNone;
}

void HostKvTier::check() const {
  int64_t used = 0;
  size_t live = 0, queued = 0;
  for (const Entry& e : entries_)
    if (e.live) {
      ++live;
      used += e.blocks;
      if (e.blocks <= 0) throw core::Error("invariant: host KV tier entry of " + std::to_string(e.blocks) + " blocks");
    }
  for (uint32_t e = head_; e != kNone && queued <= live; e = entries_[e].next) ++queued;
  if (used != used_ || live != index_.size() || queued != live)
    throw core::Error("invariant: host KV tier counts disagree with its entries (used " + std::to_string(used_) +
                      " vs " + std::to_string(used) + " blocks, " + std::to_string(index_.size()) + " indexed vs " +
                      std::to_string(live) + " live vs " + std::to_string(queued) + " queued units)");
  if (used_ > spec_.capacity_blocks)
    throw core::Error("invariant: host KV tier holds " + std::to_string(used_) + " blocks, capacity " +
                      std::to_string(spec_.capacity_blocks));
}

}  // namespace servesim::sim
