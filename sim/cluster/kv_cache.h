#pragma once
// A replica's paged KV cache, counted in blocks of `block_size` tokens, with an optional prefix cache.
//
// Without prefix caching every block is private to one request: taken as the sequence grows,
// returned when it finishes or is preempted.
//
// With prefix caching, a request's tokens are grouped in prefix units of `unit_tokens` tokens (the
// workload's hash-block size: 512 for Mooncake traces), each identified by a chain key,
// key_i = mix(key_{i-1}, id_i), so a unit matches only when its whole prefix matches. A unit whose
// tokens have been scheduled for computation is registered in the cache and shared: requests hold
// references to the units covering their prefix; a unit nobody references stays cached and is
// evicted least-recently-released first when blocks are needed. Units are registered when their
// computation is scheduled (as vLLM v1 does), so a request admitted later in the same iteration
// already sees them.
//
// The counts can never go below zero or above the capacity (a violation is a bug and throws).
//
// Hybrid models (KvLayout::hybrid(): sliding-window or linear-attention layers) account per layer
// group. A block is then a fixed number of bytes per GPU, block_size tokens of every layer that
// keeps per-token KV (full, sparse and window layers), and a request holds, in blocks rounded up:
// full-layer pages for its tokens; window-layer pages only for the tokens the next step still
// attends to (from computed - window + 1 on, as vLLM's sliding-window manager frees the blocks
// that fall out of the window); and its linear-attention state, whatever its context. A prefix unit
// caches its tokens' full-layer KV, the window layers' KV of its last window - 1 tokens (what a hit
// at its end needs) and one state snapshot at its end: a hit resumes only at a unit boundary, where
// a snapshot exists, as engines cache recurrent states at block boundaries.

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/core/error.h"

namespace servesim::sim {

// Told when units enter or leave a cache (routers that learn cache state from events listen).
class CacheListener {
 public:
  virtual void on_unit_cached(uint32_t replica, uint64_t key) = 0;
  virtual void on_unit_evicted(uint32_t replica, uint64_t key) = 0;

 protected:
  ~CacheListener() = default;
};

// Told when HBM registers or evicts a prefix unit, for a KV tier below it (sim/cluster/kv_tier.h).
// Null when no tier is configured: the cache then calls nothing.
class KvTierSink {
 public:
  virtual void on_hbm_insert(uint64_t key, int64_t blocks) = 0;
  virtual void on_hbm_evict(uint64_t key, int64_t blocks) = 0;
  // A host tier above the sink evicted a unit (the shared store's on_eviction writes; kv_store.h).
  virtual void on_tier_evict(uint64_t, int64_t) {}

 protected:
  ~KvTierSink() = default;
};

// The cache of one request on one GPU, by layer group (hwmodels::KvGroups, as plain numbers).
struct KvLayout {
  double full_bytes_per_token = 0;    // full and sparse attention layers
  double window_bytes_per_token = 0;  // sliding-window layers
  int64_t window = 0;                 // the window, tokens (0 = no window layers)
  double state_bytes = 0;             // linear-attention layers' state, per request
  bool hybrid() const { return window_bytes_per_token > 0 || state_bytes > 0; }
  // Bytes per GPU of one block of `block_size` tokens: of every per-token layer, or one state when
  // there are none.
  double block_bytes(int64_t block_size) const;
};

class KvCache {
 public:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  KvCache() = default;
  // `unit_tokens` = 0 disables prefix caching.
  KvCache(int64_t total_blocks, int64_t block_size, int64_t unit_tokens = 0, KvLayout layout = {});

  int64_t total() const { return total_; }
  int64_t block_size() const { return block_size_; }
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  bool prefix_caching() const { return unit_tokens_ > 0; }
  int64_t unit_tokens() const { return unit_tokens_; }
  bool hybrid() const { return layout_.hybrid(); }
  const KvLayout& layout() const { return layout_; }

  // Private blocks of a request whose first `shared` tokens are in prefix units, `computed` tokens
  // are computed and `target` tokens are to be held (target >= computed >= shared, or target >= shared
  // for a request not yet admitted): blocks_for(target - shared) unless hybrid.
  int64_t request_blocks(int64_t shared, int64_t computed, int64_t target) const {
    if (!hybrid()) return blocks_for(target - shared);
    return hybrid_request_blocks(shared, computed, target);
  }
  // Of those, the window layers' pages (block_size tokens each): the tokens from
  // max(shared, computed - window + 1) to target. For tests and reports.
  int64_t window_pages(int64_t shared, int64_t computed, int64_t target) const;
  // Blocks of a prefix unit of `tokens` tokens: blocks_for(tokens) unless hybrid.
  int64_t unit_blocks_for(int64_t tokens) const;
  // Bytes per GPU of a request's KV at `tokens` tokens (PD transfers, swapping): full x tokens +
  // window x min(tokens, window) + state (hybrid layouts only).
  double request_bytes(int64_t tokens) const;

  // Blocks holding data: private blocks plus every cached unit, referenced or not.
  int64_t used() const { return private_ + cached_; }
  // Blocks that cannot be reclaimed: private plus referenced units.
  int64_t in_use() const { return private_ + cached_ - evictable_; }
  // Blocks an allocation can get: free plus evictable.
  int64_t available() const { return total_ - in_use(); }
  int64_t free() const { return total_ - used(); }
  int64_t cached_blocks() const { return cached_; }
  int64_t evictable_blocks() const { return evictable_; }
  uint64_t evictions() const { return evictions_; }

  // Private blocks; evicts unreferenced units as needed. False (and nothing changes) when fewer
  // than `blocks` are available.
  // Inline (every decode block of every request comes through here); the eviction is the slow path.
  bool try_allocate(int64_t blocks) {
    if (blocks > available()) return false;
    if (free() < blocks) evict_until(blocks);
    private_ += blocks;
    return true;
  }
  void release(int64_t blocks);

  // ---- prefix units ----
  static uint64_t chain(uint64_t parent_key, uint64_t id);
  // The cached unit with this key, or kNone.
  uint32_t find(uint64_t key) const;
  int64_t unit_blocks(uint32_t unit) const { return units_[unit].blocks; }
  bool referenced(uint32_t unit) const { return units_[unit].refs > 0; }
  // Takes a reference on a cached unit.
  void acquire(uint32_t unit);
  // Caches a new unit of `blocks` blocks holding one reference; the caller has checked that
  // `blocks` are available. Returns its slot.
  uint32_t insert(uint64_t key, int64_t blocks);
  // Drops a reference; an unreferenced unit becomes the most recently used evictable one.
  void unref(uint32_t unit);

  void set_listener(CacheListener* listener, uint32_t replica) {
    listener_ = listener;
    replica_ = replica;
  }

  // The tier below HBM (null = none).
  void set_tier(KvTierSink* tier) { tier_ = tier; }
  KvTierSink* tier() const { return tier_; }

  // Throws core::Error when the counts disagree with the units (tests and --check).
  void check() const;
  // Evicts every cached prefix unit no request holds (a failed replica's memory is gone).
  void drop_unreferenced() { evict_until(total_ + 1); }

 private:
  struct Unit {
    uint64_t key = 0;
    int64_t blocks = 0;
    int64_t refs = 0;
    uint32_t prev = kNone, next = kNone;  // LRU list of unreferenced units
    bool live = false;
  };
  int64_t hybrid_request_blocks(int64_t shared, int64_t computed, int64_t target) const;
  // Blocks of `full_pages` full-layer pages, `window_pages` window-layer pages and `states` states.
  int64_t hybrid_blocks(int64_t full_pages, int64_t window_pages, int64_t states) const;
  void lru_push_back(uint32_t u);
  void lru_remove(uint32_t u);
  void evict_until(int64_t free_blocks_needed);

  int64_t total_ = 0;
  int64_t block_size_ = 16;
  int64_t unit_tokens_ = 0;
  KvLayout layout_;
  // Hybrid: the share of a block one full-layer page, one window-layer page and one state take.
  double full_share_ = 1, window_share_ = 0, state_share_ = 0;
  int64_t private_ = 0;
  int64_t cached_ = 0;
  int64_t evictable_ = 0;
  uint64_t evictions_ = 0;
  std::vector<Unit> units_;
  std::vector<uint32_t> free_slots_;
  std::unordered_map<uint64_t, uint32_t> index_;
  uint32_t lru_head_ = kNone, lru_tail_ = kNone;
  CacheListener* listener_ = nullptr;
  KvTierSink* tier_ = nullptr;
  uint32_t replica_ = 0;
};

}  // namespace servesim::sim
