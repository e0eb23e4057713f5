#include "sim/cluster/kv_store.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"

namespace servesim::sim {

namespace {
HostTierSpec queue_spec(const StoreSpec& s) {
  HostTierSpec h;
  h.capacity_blocks = s.capacity_blocks;
  h.block_bytes_per_gpu = s.block_bytes_per_gpu;
  h.gpus = s.gpus;
  h.link_bytes_per_s = s.link_bytes_per_s;
  h.latency_s = s.latency_s;
  h.write = s.write;
  h.eviction = s.eviction;
  h.load = s.load;
  return h;
}
}  // namespace

SharedKvStore::SharedKvStore(StoreSpec spec) : spec_(std::move(spec)), units_(queue_spec(spec_)) {
  if (spec_.total_bytes_per_s < 0) throw core::Error("internal: KV store with a negative total bandwidth");
  units_.set_below(this);
}

int64_t SharedKvStore::writer_of(uint64_t key) const {
  auto it = writer_.find(key);
  return it == writer_.end() ? -1 : static_cast<int64_t>(it->second);
}

double SharedKvStore::copy_seconds(int64_t blocks) const {
  const double per_gpu = static_cast<double>(blocks) * spec_.block_bytes_per_gpu / spec_.link_bytes_per_s;
  const double whole = spec_.total_bytes_per_s > 0 ? copy_bytes(blocks) / spec_.total_bytes_per_s : 0;
  return std::max(per_gpu, whole) + spec_.latency_s;
}

StoreStats& SharedKvStore::stats(uint32_t replica) {
  if (replica >= per_replica_.size()) per_replica_.resize(replica + 1);
  return per_replica_[replica];
}

bool SharedKvStore::store(uint64_t key, int64_t blocks, uint32_t replica) {
  const uint64_t before = units_.stats().stores;
  units_.store(key, blocks);
  if (units_.stats().stores == before) return false;  // here already (refreshed), or too large
  writer_[key] = replica;
  StoreStats& st = stats(replica);
  ++st.stores;
  st.store_bytes += copy_bytes(blocks);
  st.store_seconds += copy_seconds(blocks);
  return true;
}

void SharedKvStore::check() const {
  units_.check();
  if (writer_.size() != units_.units())
    throw core::Error("invariant: KV store records " + std::to_string(writer_.size()) + " writers for " +
                      std::to_string(units_.units()) + " units");
  for (const auto& [key, replica] : writer_)
    if (!units_.contains(key)) throw core::Error("invariant: KV store records a writer of a unit it does not hold");
  uint64_t stores = 0;
  for (const StoreStats& s : per_replica_) stores += s.stores;
  if (stores != units_.stats().stores)
    throw core::Error("invariant: KV store counts " + std::to_string(units_.stats().stores) +
                      " stores, its replicas " + std::to_string(stores));
}

}  // namespace servesim::sim
