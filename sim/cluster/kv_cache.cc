#include "sim/cluster/kv_cache.h"

namespace servesim::sim {

KvCache::KvCache(int64_t total_blocks, int64_t block_size, int64_t unit_tokens)
    : total_(total_blocks), block_size_(block_size), unit_tokens_(unit_tokens) {}

bool KvCache::try_allocate(int64_t blocks) {
  if (blocks > available()) return false;
  evict_until(blocks);
  private_ += blocks;
  return true;
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
