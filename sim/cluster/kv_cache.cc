#include "sim/cluster/kv_cache.h"

#include <algorithm>
#include <cmath>

namespace servesim::sim {

double KvLayout::block_bytes(int64_t block_size) const {
  const double per_token = full_bytes_per_token + window_bytes_per_token;
  return per_token > 0 ? per_token * static_cast<double>(block_size) : state_bytes;
}

KvCache::KvCache(int64_t total_blocks, int64_t block_size, int64_t unit_tokens, KvLayout layout)
    : total_(total_blocks), block_size_(block_size), unit_tokens_(unit_tokens), layout_(layout) {
  if (hybrid()) {
    const double block = layout_.block_bytes(block_size_);
    const double bs = static_cast<double>(block_size_);
    full_share_ = layout_.full_bytes_per_token * bs / block;
    window_share_ = layout_.window_bytes_per_token * bs / block;
    state_share_ = layout_.state_bytes / block;
  }
}

int64_t KvCache::hybrid_blocks(int64_t full_pages, int64_t window_pages, int64_t states) const {
  // Rounded up, less a hair so that pages that fill whole blocks are not charged one more for
  // rounding (shares are ratios of doubles).
  const double blocks = static_cast<double>(full_pages) * full_share_ + static_cast<double>(window_pages) * window_share_ +
                        static_cast<double>(states) * state_share_;
  return static_cast<int64_t>(std::ceil(blocks - 1e-9));
}

int64_t KvCache::window_pages(int64_t shared, int64_t computed, int64_t target) const {
  if (layout_.window_bytes_per_token <= 0 || target <= shared) return 0;
  const int64_t start = std::max(shared, computed - layout_.window + 1);
  if (target <= start) return 0;
  // Pages are laid out from `shared` on, as the full layers' are.
  return blocks_for(target - shared) - (start - shared) / block_size_;
}

int64_t KvCache::hybrid_request_blocks(int64_t shared, int64_t computed, int64_t target) const {
  if (target <= 0) return 0;
  const int64_t full = layout_.full_bytes_per_token > 0 ? blocks_for(std::max<int64_t>(0, target - shared)) : 0;
  return hybrid_blocks(full, window_pages(shared, computed, target), layout_.state_bytes > 0 ? 1 : 0);
}

int64_t KvCache::unit_blocks_for(int64_t tokens) const {
  if (!hybrid()) return blocks_for(tokens);
  const int64_t full = layout_.full_bytes_per_token > 0 ? blocks_for(tokens) : 0;
  const int64_t window =
      layout_.window_bytes_per_token > 0 ? blocks_for(std::min(tokens, std::max<int64_t>(0, layout_.window - 1))) : 0;
  return hybrid_blocks(full, window, layout_.state_bytes > 0 ? 1 : 0);
}

double KvCache::request_bytes(int64_t tokens) const {
  const double t = static_cast<double>(tokens);
  const double w = layout_.window > 0 ? std::min(t, static_cast<double>(layout_.window)) : 0.0;
  return layout_.full_bytes_per_token * t + layout_.window_bytes_per_token * w + layout_.state_bytes;
}

void KvCache::release(int64_t blocks) {
  if (blocks < 0 || blocks > private_)
    throw core::Error("internal: KV release of " + std::to_string(blocks) + " blocks with " +
                      std::to_string(private_) + " private blocks in use");
  private_ -= blocks;
}

uint64_t KvCache::chain(uint64_t parent_key, uint64_t id) {
  // splitmix64 finaliser over the pair: a unit's key depends on its whole prefix.
  uint64_t z = parent_key * 0x9e3779b97f4a7c15ULL + id + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint32_t KvCache::find(uint64_t key) const {
  auto it = index_.find(key);
  return it == index_.end() ? kNone : it->second;
}

void KvCache::acquire(uint32_t u) {
  Unit& unit = units_[u];
  if (unit.refs++ == 0) {
    lru_remove(u);
    evictable_ -= unit.blocks;
  }
}

uint32_t KvCache::insert(uint64_t key, int64_t blocks) {
  if (blocks > available()) throw core::Error("internal: prefix unit inserted without room");
  evict_until(blocks);
  uint32_t u;
  if (!free_slots_.empty()) {
    u = free_slots_.back();
    free_slots_.pop_back();
  } else {
    u = static_cast<uint32_t>(units_.size());
    units_.emplace_back();
  }
  Unit& unit = units_[u];
  unit = Unit{};
  unit.key = key;
  unit.blocks = blocks;
  unit.refs = 1;
  unit.live = true;
  cached_ += blocks;
  index_[key] = u;
  if (listener_) listener_->on_unit_cached(replica_, key);
  if (tier_) tier_->on_hbm_insert(key, blocks);
  return u;
}

void KvCache::unref(uint32_t u) {
  Unit& unit = units_[u];
  if (unit.refs <= 0) throw core::Error("internal: prefix unit released more often than acquired");
  if (--unit.refs == 0) {
    lru_push_back(u);
    evictable_ += unit.blocks;
  }
}

void KvCache::evict_until(int64_t free_blocks_needed) {
  while (free() < free_blocks_needed && lru_head_ != kNone) {
    const uint32_t u = lru_head_;
    Unit& unit = units_[u];
    lru_remove(u);
    evictable_ -= unit.blocks;
    cached_ -= unit.blocks;
    index_.erase(unit.key);
    unit.live = false;
    free_slots_.push_back(u);
    ++evictions_;
    if (listener_) listener_->on_unit_evicted(replica_, unit.key);
    if (tier_) tier_->on_hbm_evict(unit.key, unit.blocks);
  }
}

void KvCache::lru_push_back(uint32_t u) {
  Unit& unit = units_[u];
  unit.prev = lru_tail_;
  unit.next = kNone;
  if (lru_tail_ != kNone) units_[lru_tail_].next = u; else lru_head_ = u;
  lru_tail_ = u;
}

void KvCache::lru_remove(uint32_t u) {
  Unit& unit = units_[u];
  if (unit.prev != kNone) units_[unit.prev].next = unit.next; else lru_head_ = unit.next;
  if (unit.next != kNone) units_[unit.next].prev = unit.prev; else lru_tail_ = unit.prev;
  unit.prev = unit.next = kNone;
}

void KvCache::check() const {
  int64_t cached = 0, evictable = 0;
  size_t live = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    const Unit& unit = units_[u];
    if (!unit.live) continue;
    ++live;
    if (unit.refs < 0) throw core::Error("invariant: prefix unit with a negative reference count");
    cached += unit.blocks;
    if (unit.refs == 0) evictable += unit.blocks;
  }
  if (cached != cached_ || evictable != evictable_ || live != index_.size())
    throw core::Error("invariant: prefix cache counts disagree with its units (cached " + std::to_string(cached_) +
                      " vs " + std::to_string(cached) + ", evictable " + std::to_string(evictable_) + " vs " +
                      std::to_string(evictable) + ")");
  if (private_ < 0 || used() > total_)
    throw core::Error("invariant: KV blocks in use " + std::to_string(used()) + " outside [0, " +
                      std::to_string(total_) + "]");
}

}  // namespace servesim::sim
