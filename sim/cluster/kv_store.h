#pragma once
// A remote KV store shared by the replicas of a cluster (issue 16, second slice): a Mooncake-store /
// LMCache-server style pool on the network. A prefix unit a replica writes there can be loaded by
// any replica: the units are KvCache's chain-keyed units, and the keys are workload-global (a chain
// of the workload's block hashes), so the same prefix has the same key on every replica.
//
// Mechanism here, decisions in policies/kvtier/ (the host tier's three families, reused): the write
// policy says when a unit goes to the store (when the lowest local tier evicts it - host memory if
// the replica has a host tier, else HBM - or as soon as HBM computes it), the eviction policy orders
// the store's evictions, the load policy says whether a store hit is loaded or recomputed.
//
// With kv_tiers.store.replicas_per_store a cluster has one store per group of replicas (Cluster::
// set_kv_stores), each a SharedKvStore of the same spec; nothing here knows of the others.
//
// The store is owned by the Cluster and outlives replica failures (a failed replica's HBM and host
// memory are lost; what it wrote to the store stays). Capacity is counted in HBM blocks of the
// replicas (every replica of a unified cluster has the same block). The unit queue is a HostKvTier
// (the same LRU / FIFO mechanism), with a record of which replica wrote each unit, for the
// cross-replica hits.
//
// Copy time without a network topology (unified clusters), analytic and computed in ONE place
// (SharedKvStore::copy_seconds; the combined wait of a request's host and store units in
// tier_load_seconds): every GPU of the replica pulls its share of the bytes over its own path (its
// NIC share) in parallel, so a copy takes max(bytes per GPU / path bandwidth, bytes / total store
// bandwidth) + latency, and concurrent loads do not slow each other. On a cluster with a topology
// (prefill/decode disaggregation) the store is an endpoint of it (Topology::store_endpoint) and the
// replica puts its loads and writes on it as flows (StoreWriter's KvTierTraffic, Replica's tier
// fabric); copy_seconds is then only the load policy's estimate and the writes' counted link time.

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim/cluster/kv_tier.h"

namespace servesim::sim {

struct StoreSpec {
  int64_t capacity_blocks = 0;     // the whole store
  double block_bytes_per_gpu = 0;  // a block's bytes per GPU of a copy (KvLayout::block_bytes; tier_copy_share)
  int64_t gpus = 1;                // GPUs per replica that carry every copy (tier_copy_share)
  double link_bytes_per_s = 0;     // a GPU's path to the store (its NIC share), one direction
  double total_bytes_per_s = 0;    // the store's own bandwidth for one copy; 0 = no limit
  double latency_s = 0;            // per copy
  std::shared_ptr<const KvTierWritePolicy> write;
  std::shared_ptr<const KvTierEvictionPolicy> eviction;
  std::shared_ptr<const KvTierLoadPolicy> load;
  // Null: no prefetch (a store hit is copied when its request is at the head of the queue).
  std::shared_ptr<const KvTierPrefetchPolicy> prefetch;
};

// One replica's traffic with the store. `stores`/`store_bytes`/`store_seconds` count the units it
// wrote; `evictions`/`dropped` stay 0 (the store's own, in SharedKvStore::totals()).
struct StoreStats : KvTierStats {
  uint64_t cross_loads = 0;         // loads that took at least one unit another replica wrote
  int64_t cross_tokens = 0;         // loaded tokens of units another replica wrote
  // Prefetch into the replica's host tier while requests are queued ([kv_tiers.store.prefetch]).
  uint64_t prefetches = 0;          // requests whose store units a prefetch copied
  int64_t prefetched_tokens = 0;    // tokens of the units that arrived in host memory
  double prefetch_bytes = 0;        // bytes of those units (whole replica)
  int64_t prefetch_cut_tokens = 0;  // tokens of units still on the way when their prefetch was cut off
  uint64_t prefetch_waits = 0;      // requests that waited at the head of the queue for their prefetch
  double prefetch_wait_seconds = 0; // summed over those waits
  void add(const StoreStats& o) {
    KvTierStats::add(o);
    cross_loads += o.cross_loads;
    cross_tokens += o.cross_tokens;
    prefetches += o.prefetches;
    prefetched_tokens += o.prefetched_tokens;
    prefetch_bytes += o.prefetch_bytes;
    prefetch_cut_tokens += o.prefetch_cut_tokens;
    prefetch_waits += o.prefetch_waits;
    prefetch_wait_seconds += o.prefetch_wait_seconds;
  }
};

class SharedKvStore final : private KvTierSink {
 public:
  explicit SharedKvStore(StoreSpec spec);

  const StoreSpec& spec() const { return spec_; }
  int64_t capacity() const { return units_.capacity(); }
  int64_t used() const { return units_.used(); }
  size_t units() const { return units_.units(); }
  bool contains(uint64_t key) const { return units_.contains(key); }
  int64_t blocks_of(uint64_t key) const { return units_.blocks_of(key); }
  // The replica that wrote the unit with this key (first stored), or -1.
  int64_t writer_of(uint64_t key) const;
  std::vector<uint64_t> eviction_order() const { return units_.eviction_order(); }

  double copy_bytes(int64_t blocks) const {
    return static_cast<double>(blocks) * spec_.block_bytes_per_gpu * static_cast<double>(spec_.gpus);
  }
  // The one place a store copy is timed (see the header comment).
  double copy_seconds(int64_t blocks) const;
  bool should_load(double load_s, double recompute_s) const { return spec_.load->load(load_s, recompute_s); }
  bool weighs_copy_time() const { return spec_.load->weighs_copy_time(); }
  bool store_on_compute() const { return spec_.write->store_on_compute(); }
  bool store_on_eviction() const { return spec_.write->store_on_eviction(); }
  const KvTierPrefetchPolicy* prefetch() const { return spec_.prefetch.get(); }

  // A load read this unit (LRU refresh).
  void touch(uint64_t key) { units_.touch(key); }
  // `replica` writes a unit (a refresh when it is here already); evicts by policy to make room.
  // Returns whether the unit was written (false: here already, or larger than the whole store).
  bool store(uint64_t key, int64_t blocks, uint32_t replica);

  // Per replica (the replica's loads and writes); grows as replicas are attached.
  StoreStats& stats(uint32_t replica);
  const std::vector<StoreStats>& per_replica() const { return per_replica_; }
  // The store's own counts: stores, store bytes and seconds, evictions, dropped (units larger than
  // the whole store).
  const KvTierStats& totals() const { return units_.stats(); }
  // Throws core::Error when the counts disagree with the entries or exceed the capacity.
  void check() const;

 private:
  void on_hbm_insert(uint64_t, int64_t) override {}
  void on_hbm_evict(uint64_t, int64_t) override {}
  void on_tier_evict(uint64_t key, int64_t) override { writer_.erase(key); }

  StoreSpec spec_;
  HostKvTier units_;
  std::unordered_map<uint64_t, uint32_t> writer_;
  std::vector<StoreStats> per_replica_;
};

// The time a request waits for the units it loads from its host tier (`host_s`, 0 = none) and from
// the store (`store_s`, 0 = none): the two copies run on different links (PCIe from host memory,
// the NIC from the store) at the same time, so the request waits for the longer one.
inline double tier_load_seconds(double host_s, double store_s) { return host_s > store_s ? host_s : store_s; }

// A replica's sink below its HBM when the cluster has a store: passes HBM's registrations and
// evictions to the replica's local tiers (host and/or NVMe; null = none) and writes units to the
// store by the store's write policy (on_eviction: from the lowest local tier, i.e. the evictions of
// the NVMe tier, else of the host tier, when there is one, else HBM's; write_through: every unit HBM
// registers).
class StoreWriter final : public KvTierSink {
 public:
  StoreWriter(SharedKvStore& store, uint32_t replica, KvTierSink* local)
      : store_(store), replica_(replica), local_(local) {}
  // Where the writes go as traffic (null: nowhere, their time is analytic).
  void set_traffic(KvTierTraffic* traffic) { traffic_ = traffic; }
  void on_hbm_insert(uint64_t key, int64_t blocks) override {
    if (local_) local_->on_hbm_insert(key, blocks);
    if (store_.store_on_compute()) write(key, blocks);
  }
  void on_hbm_evict(uint64_t key, int64_t blocks) override {
    if (local_) local_->on_hbm_evict(key, blocks);
    else if (store_.store_on_eviction()) write(key, blocks);
  }
  void on_tier_evict(uint64_t key, int64_t blocks) override {
    if (store_.store_on_eviction()) write(key, blocks);
  }

 private:
  void write(uint64_t key, int64_t blocks) {
    if (store_.store(key, blocks, replica_) && traffic_) traffic_->on_store(KvTierEndpoint::kGpu, KvTierEndpoint::kStore, store_.copy_bytes(blocks));
  }
  SharedKvStore& store_;
  uint32_t replica_;
  KvTierSink* local_;
  KvTierTraffic* traffic_ = nullptr;
};

}  // namespace servesim::sim
