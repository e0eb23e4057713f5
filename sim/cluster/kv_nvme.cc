#include "sim/cluster/kv_nvme.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"

namespace servesim::sim {

namespace {
HostTierSpec queue_spec(const NvmeTierSpec& s) {
  HostTierSpec h;
  h.capacity_blocks = s.capacity_blocks;
  h.block_bytes_per_gpu = s.block_bytes_per_gpu;
  h.gpus = s.gpus;
  // The queue's own store time is bytes per GPU / this: per GPU, the replica's write share split.
  h.link_bytes_per_s = s.write_bytes_per_s / static_cast<double>(s.gpus > 0 ? s.gpus : 1);
  h.latency_s = 0;
  h.write = s.write;
  h.eviction = s.eviction;
  h.load = s.load;
  return h;
}
}  // namespace

NvmeKvTier::NvmeKvTier(NvmeTierSpec spec) : spec_(std::move(spec)), units_(queue_spec(spec_)) {
  if (!(spec_.read_bytes_per_s > 0) || !(spec_.write_bytes_per_s > 0) || !(spec_.pcie_bytes_per_s > 0))
    throw core::Error("internal: NVMe KV tier built without read, write or PCIe bandwidth");
}

double NvmeKvTier::local_copy_seconds(int64_t nvme_blocks, int64_t host_blocks, double host_latency_s) const {
  const double pcie =
      static_cast<double>(nvme_blocks + host_blocks) * spec_.block_bytes_per_gpu / spec_.pcie_bytes_per_s;
  const double read = copy_bytes(nvme_blocks) / spec_.read_bytes_per_s;
  const double latency = std::max(nvme_blocks > 0 ? spec_.latency_s : 0.0, host_blocks > 0 ? host_latency_s : 0.0);
  return std::max(pcie, read) + latency;
}

void NvmeKvTier::store(uint64_t key, int64_t blocks, KvTierEndpoint from) {
  const uint64_t before = units_.stats().stores;
  units_.store(key, blocks);
  if (units_.stats().stores == before) return;  // here already (refreshed), or too large
  ++stats_.stores;
  stats_.store_bytes += copy_bytes(blocks);
  stats_.store_seconds += write_seconds(blocks);
  if (traffic_) traffic_->on_store(from, KvTierEndpoint::kNvme, copy_bytes(blocks));
}

void NvmeKvTier::check() const {
  units_.check();
  if (stats_.stores != units_.stats().stores)
    throw core::Error("invariant: NVMe KV tier counts " + std::to_string(stats_.stores) + " stores, its queue " +
                      std::to_string(units_.stats().stores));
}

}  // namespace servesim::sim
