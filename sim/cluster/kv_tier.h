#pragma once
// A replica's host-DRAM KV tier (issue 16, first slice): prefix units (KvCache's chain-keyed units)
// kept in CPU memory below the GPU's HBM, as vLLM's KV offloading connector, LMCache's CPU backend
// and SGLang's HiCache keep them.
//
// Mechanism here, decisions in policies/kvtier/: the write policy says when a unit goes down (when
// HBM evicts it, or as soon as it is computed), the eviction policy orders the tier's own
// evictions, the load policy says whether a prefix hit found here is loaded back or recomputed.
//
// Capacity is counted in HBM blocks (a unit takes here the blocks it takes in HBM). A copy moves
// blocks x bytes per block per GPU x GPUs bytes; every GPU of the replica copies its share over its
// own PCIe link in parallel, so a copy takes bytes per GPU / link bandwidth + latency. Loads are
// on the critical path of the request that waits for them (Replica). Stores are asynchronous copies
// off the critical path (as the offloading connectors issue them on a separate stream): their bytes
// and link time are counted, but they delay nothing. Without a network that is all (they do not
// share the link with loads); on a cluster with a network (a topology), the replica puts every
// load and store on it as flows between its GPUs and their node's host (KvTierTraffic; the shared
// store's copies the same way, between its GPUs and the store's endpoint), sharing the links
// max-min fairly with PD transfers and each other (docs/kv-tiers.md).

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim/cluster/kv_cache.h"

namespace servesim::sim {

// When units are written to the host tier.
class KvTierWritePolicy {
 public:
  virtual ~KvTierWritePolicy() = default;
  // A unit HBM has just registered (its tokens are scheduled for computation).
  virtual bool store_on_compute() const = 0;
  // A unit HBM evicts (no request held it).
  virtual bool store_on_eviction() const = 0;
};

// The order in which the host tier evicts: entries sit in a queue, the head is evicted first; a
// new entry joins at the tail.
class KvTierEvictionPolicy {
 public:
  virtual ~KvTierEvictionPolicy() = default;
  // Whether an entry that is read (loaded) or written again moves to the tail (LRU) or keeps its
  // place (FIFO: the order units were first stored in).
  virtual bool refresh_on_access() const = 0;
};

// Whether a prefix hit in the host tier is loaded or recomputed.
class KvTierLoadPolicy {
 public:
  virtual ~KvTierLoadPolicy() = default;
  // `load_s`: the copy's time; `recompute_s`: the prefill time loading would save (the replica's
  // cost model; no knowledge of the future).
  virtual bool load(double load_s, double recompute_s) const = 0;
  // Whether load() weighs `load_s` (false: the replica need not estimate the copy's time).
  virtual bool weighs_copy_time() const { return true; }
};

// How long a request at the head of the waiting queue waits for the prefetch of its store units
// into host memory (started when it reached the replica) before the prefetch is cut off: the units
// that arrived are host units from then on, the rest stay where they were (SGLang HiCache's
// storage prefetch policies: best_effort, wait_complete, timeout).
class KvTierPrefetchPolicy {
 public:
  virtual ~KvTierPrefetchPolicy() = default;
  // `elapsed_s`: since the prefetch started; `remaining_s` (> 0): until its last unit arrives.
  // Returns the wait, in [0, remaining_s].
  virtual double wait_seconds(double elapsed_s, double remaining_s) const = 0;
};

// Where a tier copy goes to or comes from on the network: the replica's nodes' hosts (the host
// tier), the cluster's shared store (SharedKvStore), the replica's nodes' NVMe (NvmeKvTier), or
// the replica's GPUs themselves.
enum class KvTierEndpoint : uint8_t { kHost, kStore, kNvme, kGpu };

// Told of every unit a tier writes (a store), to put its copy on the network.
class KvTierTraffic {
 public:
  // `from`: kGpu (HBM's copy) or the tier above (kHost: what host memory evicts to NVMe).
  virtual void on_store(KvTierEndpoint from, KvTierEndpoint to, double bytes) = 0;  // the whole replica's bytes

 protected:
  ~KvTierTraffic() = default;
};

// How a replica's tier copies split over its GPUs (the host tier's, the NVMe tier's and the
// store's specs: block_bytes_per_gpu and gpus). A block (KvLayout::block_bytes per GPU) sits on one
// attention rank of `tp` GPUs, so a copy of it moves block_bytes x tp bytes. Without expert
// parallelism (ranks = 1) each of the tp GPUs copies its own block_bytes over its own link. An
// expert-parallel replica of `ranks` data-parallel attention ranks keeps one KV pool, not one per
// rank, so its copies are spread evenly: each of its ranks x tp GPUs carries 1 / ranks of every
// block's bytes over its own links (to its own node's host or NVMe), the bytes unchanged. A real
// DP-attention engine copies a request's KV over its rank's links alone: the spread is the average
// of many copies, optimistic (up to `ranks` times) for one large copy on an idle fabric
// (docs/kv-tiers.md, "Expert parallelism").
struct TierCopyShare {
  double block_bytes_per_gpu = 0;
  int64_t gpus = 1;
};
inline TierCopyShare tier_copy_share(double block_bytes, int64_t tp, int64_t ranks) {
  return {block_bytes / static_cast<double>(ranks), tp * ranks};
}

struct HostTierSpec {
  int64_t capacity_blocks = 0;     // per replica
  double block_bytes_per_gpu = 0;  // a block's bytes each GPU's copy carries (KvLayout::block_bytes; TierCopyShare)
  int64_t gpus = 1;                // GPUs of the replica that carry every copy (TierCopyShare)
  double link_bytes_per_s = 0;     // GPU <-> host, one direction, per GPU
  double latency_s = 0;            // per copy
  std::shared_ptr<const KvTierWritePolicy> write;
  std::shared_ptr<const KvTierEvictionPolicy> eviction;
  std::shared_ptr<const KvTierLoadPolicy> load;
};

struct KvTierStats {
  uint64_t loads = 0;           // prefix hits loaded from host (one copy each)
  int64_t loaded_units = 0;
  int64_t loaded_tokens = 0;    // prompt tokens whose prefill the loads spare
  double load_bytes = 0;        // whole replica
  double load_seconds = 0;      // summed over loads (requests waiting)
  double saved_prefill_seconds = 0;  // the cost model's prefill time the loads spare
  double saved_flops = 0;       // prefill FLOPs the loads spare (whole TP group)
  uint64_t declined = 0;        // host hits the load policy chose to recompute
  int64_t declined_tokens = 0;
  uint64_t stores = 0;          // units written to host
  double store_bytes = 0;
  double store_seconds = 0;     // link time of the stores (off the critical path)
  uint64_t evictions = 0;       // units the host tier evicted
  uint64_t dropped = 0;         // units too large for the whole tier, not stored
  void add(const KvTierStats& o);
};

class HostKvTier final : public KvTierSink {
 public:
  explicit HostKvTier(HostTierSpec spec);

  const HostTierSpec& spec() const { return spec_; }
  int64_t capacity() const { return spec_.capacity_blocks; }
  int64_t used() const { return used_; }
  size_t units() const { return index_.size(); }
  bool contains(uint64_t key) const { return index_.count(key) > 0; }
  // Blocks of the entry with this key, or -1.
  int64_t blocks_of(uint64_t key) const;
  // The keys in eviction order (head first); for tests.
  std::vector<uint64_t> eviction_order() const;

  // Bytes a copy of `blocks` blocks moves (every GPU's share) and how long it takes.
  double copy_bytes(int64_t blocks) const {
    return static_cast<double>(blocks) * spec_.block_bytes_per_gpu * static_cast<double>(spec_.gpus);
  }
  double copy_seconds(int64_t blocks) const {
    return static_cast<double>(blocks) * spec_.block_bytes_per_gpu / spec_.link_bytes_per_s + spec_.latency_s;
  }
  bool should_load(double load_s, double recompute_s) const { return spec_.load->load(load_s, recompute_s); }
  bool weighs_copy_time() const { return spec_.load->weighs_copy_time(); }
  // A load read this entry (LRU refresh).
  void touch(uint64_t key);
  // Writes a unit down (a no-op but for the refresh when it is already here); evicts by policy to
  // make room.
  void store(uint64_t key, int64_t blocks);
  // A unit that arrives from below (a prefetch from the shared store): placed as store() places it
  // (evicting by policy), but it is no write, so no store is counted and nothing goes on the
  // network. Returns whether it was new here.
  bool land(uint64_t key, int64_t blocks);
  // Forgets everything (a failed replica's host memory is gone too; nothing is written below).
  void clear();
  // Where stores go as traffic (null: nowhere, their time is analytic).
  void set_traffic(KvTierTraffic* traffic) { traffic_ = traffic; }
  // Told of every unit this tier evicts (the shared store below it; null = none).
  void set_below(KvTierSink* below) { below_ = below; }

  KvTierStats& stats() { return stats_; }
  const KvTierStats& stats() const { return stats_; }
  // Throws core::Error when the counts disagree with the entries or exceed the capacity.
  void check() const;

  // KvTierSink
  void on_hbm_insert(uint64_t key, int64_t blocks) override {
    if (spec_.write->store_on_compute()) store(key, blocks);
  }
  void on_hbm_evict(uint64_t key, int64_t blocks) override {
    if (spec_.write->store_on_eviction()) store(key, blocks);
  }

 private:
  static constexpr uint32_t kNone = KvCache::kNone;
  struct Entry {
    uint64_t key = 0;
    int64_t blocks = 0;
    uint32_t prev = kNone, next = kNone;
    bool live = false;
  };
  void push_back(uint32_t e);
  void unlink(uint32_t e);
  bool insert(uint64_t key, int64_t blocks);  // see land()

  HostTierSpec spec_;
  int64_t used_ = 0;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_slots_;
  std::unordered_map<uint64_t, uint32_t> index_;
  uint32_t head_ = kNone, tail_ = kNone;
  KvTierStats stats_;
  KvTierTraffic* traffic_ = nullptr;
  KvTierSink* below_ = nullptr;
};

}  // namespace servesim::sim
