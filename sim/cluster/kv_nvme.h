#pragma once
// A replica's local NVMe KV tier (issue 16, third slice): prefix units on the node's SSDs below host
// DRAM, as SGLang HiCache's L3 file backend and LMCache's local-disk backend keep them.
//
// Where it sits: below the host tier when the replica has one (on_eviction writes what host memory
// evicts), else directly below HBM (what HBM evicts); above the shared store (with a store, the
// store's on_eviction writes come from the lowest local tier: this one). Mechanism here, decisions
// in policies/kvtier/ (the host tier's three families). The unit queue is a HostKvTier (the same
// LRU / FIFO mechanism and counts), as SharedKvStore's is.
//
// How a load reaches the GPU: through a pinned host bounce buffer, as both backends do (NVMe read
// into host memory, then the GPU's PCIe copy), pipelined chunk by chunk, so a copy of B bytes of the
// whole replica (B / gpus per GPU) takes
//     max(B / read bandwidth, B / gpus / PCIe bandwidth) + latency
// (the slower stage; GPUDirect Storage would skip the bounce but crosses the same PCIe link and the
// same SSDs, so the formula is the same). The read and write bandwidths are the replica's share of
// its node's SSDs (a node's NVMe is shared by its GPUs: with 8 replicas of one GPU on a node with
// 4 SSDs of 6 GB/s, each replica's share is 3 GB/s), for the whole replica's bytes; concurrent loads
// do not slow each other (analytic, no contention). When the same request also loads host units,
// those cross the same GPU PCIe link: the two share it, while the NVMe read overlaps them, so the
// local copy takes max((host bytes + NVMe bytes) per GPU / PCIe, NVMe bytes / read) + the longer
// latency (local_copy_seconds, the ONE place an NVMe copy is timed); a store copy runs on the NIC
// at the same time (tier_load_seconds combines the two). Writes are asynchronous (off the critical
// path, as the host tier's): their bytes and B / write bandwidth are counted.
//
// On a network topology (a disaggregated cluster) the copies are flows instead (set_traffic, and
// Replica::start_loads): a node's SSDs are a vertex behind its host whose links carry the sum of its
// replicas' read / write shares (sim/cluster/network.h); local_copy_seconds is then only the load
// policy's estimate.
//
// A replica failure (the engine process or its GPU) keeps the NVMe content: files on the node's
// disk outlive the process (HiCache's file backend finds them by key); a node loss is not what the
// faults model's replica failure is (docs/kv-tiers.md).

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/cluster/kv_tier.h"

namespace servesim::sim {

struct NvmeTierSpec {
  int64_t capacity_blocks = 0;     // per replica
  double block_bytes_per_gpu = 0;  // a block's bytes per GPU of a copy (KvLayout::block_bytes; tier_copy_share)
  int64_t gpus = 1;                // GPUs of the replica that carry every copy (tier_copy_share)
  double read_bytes_per_s = 0;     // the replica's share of its node's SSD reads (whole replica's bytes)
  double write_bytes_per_s = 0;    // the same for writes
  double pcie_bytes_per_s = 0;     // host bounce buffer -> GPU, per GPU (the host tier's link when there is one)
  double latency_s = 0;            // per load (one I/O batch)
  std::shared_ptr<const KvTierWritePolicy> write;
  std::shared_ptr<const KvTierEvictionPolicy> eviction;
  std::shared_ptr<const KvTierLoadPolicy> load;
};

class NvmeKvTier final : public KvTierSink {
 public:
  explicit NvmeKvTier(NvmeTierSpec spec);

  const NvmeTierSpec& spec() const { return spec_; }
  int64_t capacity() const { return units_.capacity(); }
  int64_t used() const { return units_.used(); }
  size_t units() const { return units_.units(); }
  bool contains(uint64_t key) const { return units_.contains(key); }
  int64_t blocks_of(uint64_t key) const { return units_.blocks_of(key); }
  std::vector<uint64_t> eviction_order() const { return units_.eviction_order(); }

  double copy_bytes(int64_t blocks) const {
    return static_cast<double>(blocks) * spec_.block_bytes_per_gpu * static_cast<double>(spec_.gpus);
  }
  // The one place a local copy with NVMe units is timed (header comment): `nvme_blocks` from the
  // SSDs through the bounce buffer, with `host_blocks` from host memory (latency `host_latency_s`)
  // sharing the GPU's PCIe link.
  double local_copy_seconds(int64_t nvme_blocks, int64_t host_blocks = 0, double host_latency_s = 0) const;
  // An NVMe copy alone (its own link time, for its stats).
  double copy_seconds(int64_t blocks) const { return local_copy_seconds(blocks); }
  double write_seconds(int64_t blocks) const { return copy_bytes(blocks) / spec_.write_bytes_per_s; }
  bool should_load(double load_s, double recompute_s) const { return spec_.load->load(load_s, recompute_s); }
  bool weighs_copy_time() const { return spec_.load->weighs_copy_time(); }

  // A load read this unit (LRU refresh).
  void touch(uint64_t key) { units_.touch(key); }
  // Writes a unit (a refresh when it is here already) copied from `from` (kGpu: HBM's; kHost: what
  // host memory evicts); evicts by policy to make room.
  void store(uint64_t key, int64_t blocks, KvTierEndpoint from = KvTierEndpoint::kGpu);
  // Where writes go as traffic (null: nowhere, their time is analytic): on a topology with the
  // node's NVMe vertex (Replica::set_tier_fabric).
  void set_traffic(KvTierTraffic* traffic) { traffic_ = traffic; }
  // Told of every unit this tier evicts (the shared store's writer; null = none).
  void set_below(KvTierSink* below) { units_.set_below(below); }

  // Loads and declines (counted by the replica), stores; totals() adds the queue's evictions and
  // dropped units.
  KvTierStats& stats() { return stats_; }
  const KvTierStats& stats() const { return stats_; }
  KvTierStats totals() const {
    KvTierStats t = stats_;
    t.evictions = units_.stats().evictions;
    t.dropped = units_.stats().dropped;
    return t;
  }
  // Throws core::Error when the counts disagree with the entries or exceed the capacity.
  void check() const;

  // KvTierSink: from HBM (write_through; on_eviction when there is no host tier) and from the host
  // tier above (its evictions, on_eviction).
  void on_hbm_insert(uint64_t key, int64_t blocks) override {
    if (spec_.write->store_on_compute()) store(key, blocks);
  }
  void on_hbm_evict(uint64_t key, int64_t blocks) override {
    if (spec_.write->store_on_eviction()) store(key, blocks);
  }
  void on_tier_evict(uint64_t key, int64_t blocks) override {
    if (spec_.write->store_on_eviction()) store(key, blocks, KvTierEndpoint::kHost);
  }

 private:
  NvmeTierSpec spec_;
  HostKvTier units_;
  KvTierStats stats_;
  KvTierTraffic* traffic_ = nullptr;
};

// The replica's sink below HBM with a host tier and an NVMe tier: HBM's registrations go to both
// (each by its write policy), HBM's evictions to the host tier, whose evictions reach the NVMe tier
// (HostKvTier::set_below).
class LocalKvTiers final : public KvTierSink {
 public:
  LocalKvTiers(HostKvTier& host, NvmeKvTier& nvme) : host_(host), nvme_(nvme) {}
  void on_hbm_insert(uint64_t key, int64_t blocks) override {
    host_.on_hbm_insert(key, blocks);
    nvme_.on_hbm_insert(key, blocks);
  }
  void on_hbm_evict(uint64_t key, int64_t blocks) override { host_.on_hbm_evict(key, blocks); }

 private:
  HostKvTier& host_;
  NvmeKvTier& nvme_;
};

}  // namespace servesim::sim
