// The host KV tier ([kv_tiers.host], issue 16) through the whole run path: its configuration and
// its refusals, its metrics, and a tier that never loads leaving the results as they were.
#include <gtest/gtest.h>

#include <string>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/error.h"

namespace servesim::experiments {
namespace {

// Multi-turn conversations on 2 replicas with a small HBM (a quarter of the GPU's memory for the
// engine: ~1,500 blocks per replica), so that HBM evicts conversations that come back.
constexpr const char* kBase = R"(
[workload]
kind = "sessions"
rate = 2.0
think_time_s = 20
max_requests = 800
[workload.turns]
kind = "uniform"
min = 2
max = 8
[workload.system_tokens]
kind = "fixed"
value = 1500
[workload.user]
kind = "lognormal"
mean = 200
sd = 150
[workload.output]
kind = "lognormal"
mean = 250
sd = 200
max = 1000
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[scheduler]
kind = "chunked"
[router]
kind = "prefix_affinity"
)";

constexpr const char* kCluster = "[cluster]\nreplicas = 2\nprefix_caching = true\ngpu_memory_utilization = 0.25\n";

RunResult run(const std::string& extra) {
  RunOutputs outputs;
  outputs.check = true;  // the invariant checker, and the tiers' conservation checks
  return run_simulation(core::parse_config(std::string(kBase) + kCluster + extra, "t.toml", run_schema()), outputs);
}

std::string error_of(const std::string& text) {
  try {
    run_simulation(core::parse_config(std::string(kBase) + text, "f.toml", run_schema()), RunOutputs{});
  } catch (const core::Error& e) {
    return e.what();
  }
  return "";
}

double metric(const RunResult& r, const std::string& name) {
  for (const auto& v : r.summary.fleet)
    if (v.name == name) return v.value;
  ADD_FAILURE() << "no metric " << name;
  return -1;
}

// The tiers' analytic copy times (no topology): kv_tiers.copies = "analytic".
constexpr const char* kAnalytic = "[kv_tiers]\ncopies = \"analytic\"\n";

TEST(KvTierRunTest, HostHitsAddToHbmHitsAndTheirBytesAreCounted) {
  const RunResult hbm = run("");
  const RunResult tier = run(std::string(kAnalytic) + "[kv_tiers.host]\ncapacity_gb = 64\nbandwidth_gb_s = 25\n");
  EXPECT_TRUE(hbm.summary.fleet.empty());  // no tier, no tier metrics
  const double host_hits = metric(tier, "kv_host_hit_tokens"), hbm_hits = metric(tier, "kv_hbm_hit_tokens");
  EXPECT_GT(host_hits, 0);
  EXPECT_EQ(host_hits + hbm_hits, static_cast<double>(tier.summary.prefix_hit_tokens));
  EXPECT_GT(tier.summary.prefix_token_hit_rate, hbm.summary.prefix_token_hit_rate);
  EXPECT_GT(metric(tier, "kv_host_loads"), 0);
  EXPECT_GT(metric(tier, "kv_host_stores"), 0);
  // Llama-3-8B keeps 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token (TP 1):
  // each loaded token moved that much.
  EXPECT_NEAR(metric(tier, "kv_host_load_gb"), metric(tier, "kv_host_loaded_tokens") * 131072 * 1e-9, 1e-6);
  // Each load waited bytes / 25 GB/s + 10 us.
  EXPECT_NEAR(metric(tier, "kv_host_load_seconds"),
              metric(tier, "kv_host_load_gb") / 25 + metric(tier, "kv_host_loads") * 10e-6, 1e-9);
  EXPECT_GT(metric(tier, "kv_host_saved_tflop"), 0);
}

TEST(KvTierRunTest, ATierThatNeverLoadsLeavesTheResultsAsTheyWere) {
  const RunResult hbm = run("");
  const RunResult never = run("[kv_tiers.host]\ncapacity_gb = 64\n[kv_tiers.host.load]\nkind = \"never\"\n");
  EXPECT_EQ(metric(never, "kv_host_loads"), 0);
  EXPECT_GT(metric(never, "kv_host_declined"), 0);
  EXPECT_EQ(never.summary.prefix_hit_tokens, hbm.summary.prefix_hit_tokens);
  EXPECT_EQ(never.summary.ttft_ms.p90, hbm.summary.ttft_ms.p90);
  EXPECT_EQ(never.summary.e2e_ms.mean, hbm.summary.e2e_ms.mean);
  EXPECT_EQ(never.summary.iterations, hbm.summary.iterations);
}

// Disaggregated on a topology: 2 prefill replicas on node 0 (GPUs 0, 1, behind PCIe switch 0 with
// the node's host) and 2 decode replicas on node 1, DGX H100 links (PCIe 50 GB/s, 1 us a hop). The
// tier is the prefill replicas'; its loads and stores are flows on the fabric.
RunOutputs checked() {
  RunOutputs o;
  o.check = true;
  return o;
}

constexpr const char* kPd =
    "[cluster]\nprefix_caching = true\ngpu_memory_utilization = 0.25\n"
    "[cluster.prefill]\nreplicas = 2\n[cluster.decode]\nreplicas = 2\n"
    "[decode_router]\nkind = \"least_outstanding\"\n"
    "[network]\npreset = \"dgx-h100\"\ngpus_per_node = 2\n";

TEST(KvTierRunTest, PrefillReplicasLoadPrefixHitsFromHostOverTheFabric) {
  const RunResult tier = run_simulation(
      core::parse_config(std::string(kBase) + kPd + "[kv_tiers.host]\ncapacity_gb = 64\n", "t.toml", run_schema()),
      checked());
  EXPECT_GT(metric(tier, "kv_host_hit_tokens"), 0);
  EXPECT_GT(metric(tier, "kv_host_loads"), 0);
  EXPECT_GT(metric(tier, "kv_host_stores"), 0);
  EXPECT_EQ(metric(tier, "kv_host_hit_tokens") + metric(tier, "kv_hbm_hit_tokens"),
            static_cast<double>(tier.summary.prefix_hit_tokens));
  EXPECT_EQ(tier.summary.requests_completed, tier.summary.requests_total);
  // Llama-3-8B at TP 1: 131,072 bytes per token, all on the prefill replica's one GPU.
  EXPECT_NEAR(metric(tier, "kv_host_load_gb"), metric(tier, "kv_host_loaded_tokens") * 131072 * 1e-9, 1e-6);
  // A load's flow crosses the host uplink and the GPU's PCIe link, 50 GB/s each, 1 us each: alone it
  // takes GB / 50 + 2 us (not the tier's analytic bandwidth_gb_s = 25 + 10 us); sharing the uplink
  // with the other prefill GPU's loads, longer. Summed over the loads:
  const double alone = metric(tier, "kv_host_load_gb") / 50 + metric(tier, "kv_host_loads") * 2e-6;
  EXPECT_GE(metric(tier, "kv_host_load_seconds"), alone * (1 - 1e-9));
  EXPECT_LT(metric(tier, "kv_host_load_seconds"), 2 * alone);  // at worst both GPUs load at once throughout
}

TEST(KvTierRunTest, TheHostUplinkBandwidthIsNetworkHostGbS) {
  // network.host_gb_s = 10: a load's path is held to 10 GB/s by the host uplink (the GPU's PCIe link
  // carries 50): each load takes at least GB / 10 + 2 us.
  const RunResult slow = run_simulation(
      core::parse_config(std::string(kBase) + kPd + "host_gb_s = 10\n[kv_tiers.host]\ncapacity_gb = 64\n", "t.toml",
                         run_schema()),
      checked());
  EXPECT_GT(metric(slow, "kv_host_loads"), 0);
  EXPECT_GE(metric(slow, "kv_host_load_seconds"),
            (metric(slow, "kv_host_load_gb") / 10 + metric(slow, "kv_host_loads") * 2e-6) * (1 - 1e-9));
  // Out of range: the error names the key.
  const std::string zero = error_of(std::string(kPd) + "host_gb_s = 0\n");
  EXPECT_NE(zero.find("network.host_gb_s"), std::string::npos) << zero;
}

TEST(KvTierRunTest, StoresOnTheFabricSlowThePdTransfersSharingTheirPcieLinks) {
  // load = "never": the requests are served as without a tier (the same prefills), but every unit
  // HBM evicts is stored GPU -> host over "gpu i pcie (up)", the link the PD transfers to node 1
  // leave by: the transfers take longer, and nothing else changes in the request counts.
  auto pd = [](const std::string& extra) {
    return run_simulation(core::parse_config(std::string(kBase) + kPd + extra, "t.toml", run_schema()),
                          checked());
  };
  const RunResult none = pd("");
  const RunResult stores = pd("[kv_tiers.host]\ncapacity_gb = 64\n[kv_tiers.host.load]\nkind = \"never\"\n");
  EXPECT_GT(metric(stores, "kv_host_stores"), 0);
  EXPECT_EQ(metric(stores, "kv_host_loads"), 0);
  EXPECT_EQ(stores.summary.kv_transfers, none.summary.kv_transfers);
  EXPECT_EQ(stores.summary.prefix_hit_tokens, none.summary.prefix_hit_tokens);
  EXPECT_GT(stores.summary.kv_transfer_ms.mean, none.summary.kv_transfer_ms.mean);
}

TEST(KvTierRunTest, ConfigurationErrorsNameTheKey) {
  const std::string tier = "[kv_tiers.host]\ncapacity_gb = 64\n";
  // Without prefix caching there are no units to keep.
  const std::string no_prefix = error_of("[cluster]\nreplicas = 2\n" + tier);
  EXPECT_NE(no_prefix.find("kv_tiers.host.capacity_gb"), std::string::npos) << no_prefix;
  EXPECT_NE(no_prefix.find("prefix_caching"), std::string::npos) << no_prefix;
  // Ranges and kinds.
  const std::string zero = error_of(std::string(kCluster) + "[kv_tiers.host]\ncapacity_gb = 0\n");
  EXPECT_NE(zero.find("kv_tiers.host.capacity_gb"), std::string::npos) << zero;
  const std::string huge = error_of(std::string(kCluster) + "[kv_tiers.host]\ncapacity_gb = 2e6\n");
  EXPECT_NE(huge.find("kv_tiers.host.capacity_gb"), std::string::npos) << huge;
  const std::string bw = error_of(std::string(kCluster) + tier + "bandwidth_gb_s = 0\n");
  EXPECT_NE(bw.find("kv_tiers.host.bandwidth_gb_s"), std::string::npos) << bw;
  const std::string kind = error_of(std::string(kCluster) + tier + "[kv_tiers.host.load]\nkind = \"sometimes\"\n");
  EXPECT_NE(kind.find("kv_tiers.host.load.kind"), std::string::npos) << kind;
  EXPECT_NE(kind.find("cost"), std::string::npos) << kind;  // the valid kinds are listed
  const std::string tiny = error_of(std::string(kCluster) + "[kv_tiers.host]\ncapacity_gb = 0.001\n");
  EXPECT_NE(tiny.find("holds no KV block"), std::string::npos) << tiny;
  const std::string unknown = error_of(std::string(kCluster) + "[kv_tiers.cxl]\ncapacity_gb = 1\n");
  EXPECT_NE(unknown.find("kv_tiers"), std::string::npos) << unknown;
}

TEST(KvTierRunTest, StoreHitsAddToHbmAndHostHitsAndAStoreThatNeverLoadsChangesNothing) {
  const std::string host = std::string(kAnalytic) + "[kv_tiers.host]\ncapacity_gb = 4\n";
  const RunResult tier = run(host);
  const RunResult store = run(host + "[kv_tiers.store]\ncapacity_gb = 256\nbandwidth_gb_s = 40\n");
  const double hbm = metric(store, "kv_hbm_hit_tokens"), host_hits = metric(store, "kv_host_hit_tokens"),
               store_hits = metric(store, "kv_store_hit_tokens");
  EXPECT_GT(store_hits, 0);
  EXPECT_EQ(hbm + host_hits + store_hits, static_cast<double>(store.summary.prefix_hit_tokens));
  EXPECT_GT(store.summary.prefix_token_hit_rate, tier.summary.prefix_token_hit_rate);
  EXPECT_GT(metric(store, "kv_store_stores"), 0);
  // (prefix_affinity keeps a conversation on its replica: few or no cross-replica hits here)
  EXPECT_LE(metric(store, "kv_store_cross_replica_tokens"), metric(store, "kv_store_loaded_tokens"));
  // 131,072 bytes per token (Llama-3-8B, TP 1); each load waited bytes / 40 GB/s + 100 us.
  EXPECT_NEAR(metric(store, "kv_store_load_gb"), metric(store, "kv_store_loaded_tokens") * 131072 * 1e-9, 1e-6);
  EXPECT_NEAR(metric(store, "kv_store_load_seconds"),
              metric(store, "kv_store_load_gb") / 40 + metric(store, "kv_store_loads") * 100e-6, 1e-9);
  // Per replica: the two replicas' figures add up to the totals.
  EXPECT_EQ(metric(store, "replica0.kv_store_loads") + metric(store, "replica1.kv_store_loads"),
            metric(store, "kv_store_loads"));
  EXPECT_EQ(metric(store, "replica0.kv_host_loads") + metric(store, "replica1.kv_host_loads"),
            metric(store, "kv_host_loads"));
  // A store that never loads leaves the host tier's results as they were.
  const RunResult never = run(host + "[kv_tiers.store]\ncapacity_gb = 256\n[kv_tiers.store.load]\nkind = \"never\"\n");
  EXPECT_EQ(metric(never, "kv_store_loads"), 0);
  EXPECT_GT(metric(never, "kv_store_declined"), 0);
  EXPECT_EQ(never.summary.prefix_hit_tokens, tier.summary.prefix_hit_tokens);
  EXPECT_EQ(never.summary.ttft_ms.p90, tier.summary.ttft_ms.p90);
  EXPECT_EQ(never.summary.e2e_ms.mean, tier.summary.e2e_ms.mean);
  // A store without a host tier: HBM's evictions go there.
  const RunResult alone = run("[kv_tiers.store]\ncapacity_gb = 64\n");
  EXPECT_GT(metric(alone, "kv_store_hit_tokens"), 0);
  EXPECT_EQ(metric(alone, "kv_hbm_hit_tokens") + metric(alone, "kv_store_hit_tokens"),
            static_cast<double>(alone.summary.prefix_hit_tokens));
}

TEST(KvTierRunTest, StoreConfigurationErrorsNameTheKey) {
  const std::string store = "[kv_tiers.store]\ncapacity_gb = 64\n";
  const std::string no_prefix = error_of("[cluster]\nreplicas = 2\n" + store);
  EXPECT_NE(no_prefix.find("kv_tiers.store.capacity_gb"), std::string::npos) << no_prefix;
  EXPECT_NE(no_prefix.find("prefix_caching"), std::string::npos) << no_prefix;
  const std::string zero = error_of(std::string(kCluster) + "[kv_tiers.store]\ncapacity_gb = 0\n");
  EXPECT_NE(zero.find("kv_tiers.store.capacity_gb"), std::string::npos) << zero;
  const std::string bw = error_of(std::string(kCluster) + store + "bandwidth_gb_s = 0\n");
  EXPECT_NE(bw.find("kv_tiers.store.bandwidth_gb_s"), std::string::npos) << bw;
  const std::string total = error_of(std::string(kCluster) + store + "total_bandwidth_gb_s = -1\n");
  EXPECT_NE(total.find("kv_tiers.store.total_bandwidth_gb_s"), std::string::npos) << total;
  const std::string lat = error_of(std::string(kCluster) + store + "latency_us = 1e9\n");
  EXPECT_NE(lat.find("kv_tiers.store.latency_us"), std::string::npos) << lat;
  const std::string kind = error_of(std::string(kCluster) + store + "[kv_tiers.store.write]\nkind = \"later\"\n");
  EXPECT_NE(kind.find("kv_tiers.store.write.kind"), std::string::npos) << kind;
  const std::string tiny = error_of(std::string(kCluster) + "[kv_tiers.store]\ncapacity_gb = 0.001\n");
  EXPECT_NE(tiny.find("holds no KV block"), std::string::npos) << tiny;
}

// The shared store on a disaggregated cluster (the prefill replicas'), its loads and writes flows
// between the prefill GPUs and the store on the spine. kPd's topology (dgx-h100, 2 GPUs a node): a
// store -> prefill GPU path is store - spine (non-blocking: 2 nodes x 8 NICs x 50 GB/s), leaf k -
// spine (2 NICs x 50), NIC k - leaf (50), NIC k's PCIe link (50), the GPU's PCIe link (50), 1 us a
// hop: bottleneck 50 GB/s, latency 5 us.
RunResult pd_run(const std::string& extra) {
  return run_simulation(core::parse_config(std::string(kBase) + kPd + extra, "t.toml", run_schema()), checked());
}

TEST(KvTierRunTest, AStoreOnAPdClusterLoadsAndWritesOverTheFabric) {
  const RunResult store = pd_run("[kv_tiers.store]\ncapacity_gb = 256\n");
  EXPECT_EQ(store.summary.requests_completed, store.summary.requests_total);
  EXPECT_GT(metric(store, "kv_store_loads"), 0);
  EXPECT_GT(metric(store, "kv_store_stores"), 0);
  EXPECT_EQ(metric(store, "kv_hbm_hit_tokens") + metric(store, "kv_store_hit_tokens"),
            static_cast<double>(store.summary.prefix_hit_tokens));
  EXPECT_NEAR(metric(store, "kv_store_load_gb"), metric(store, "kv_store_loaded_tokens") * 131072 * 1e-9, 1e-6);
  // Each load: at least GB / 50 + 5 us (alone on an idle path), at most twice the drain time (the
  // two prefill GPUs' loads sharing a NIC; nothing else goes store -> prefill GPU).
  const double alone = metric(store, "kv_store_load_gb") / 50 + metric(store, "kv_store_loads") * 5e-6;
  EXPECT_GE(metric(store, "kv_store_load_seconds"), alone * (1 - 1e-9));
  EXPECT_LT(metric(store, "kv_store_load_seconds"), 2 * alone);
  // Only the 2 prefill replicas have the store.
  EXPECT_GT(metric(store, "replica0.kv_store_loads") + metric(store, "replica1.kv_store_loads"), 0);
  for (const auto& v : store.summary.fleet) EXPECT_EQ(v.name.rfind("replica2.", 0), std::string::npos) << v.name;
  // With a host tier too: HBM + host + store hits are the prefix hits, and every request completes.
  const RunResult both = pd_run("[kv_tiers.host]\ncapacity_gb = 4\n[kv_tiers.store]\ncapacity_gb = 256\n");
  EXPECT_EQ(both.summary.requests_completed, both.summary.requests_total);
  EXPECT_GT(metric(both, "kv_store_loads"), 0);
  EXPECT_GT(metric(both, "kv_host_loads"), 0);
  EXPECT_EQ(metric(both, "kv_hbm_hit_tokens") + metric(both, "kv_host_hit_tokens") +
                metric(both, "kv_store_hit_tokens"),
            static_cast<double>(both.summary.prefix_hit_tokens));
}

TEST(KvTierRunTest, StoreWritesOnTheFabricSlowPdTransfersAndLeaveTtftAsItWas) {
  // load = "never": every unit HBM registers (write_through) or evicts (on_eviction) is written GPU
  // -> store over the PCIe link and the NIC that the PD transfers to node 1 leave by: the transfers
  // take longer. With HBM to spare on the prefill replicas (gpu_memory_utilization 0.9), a prefill
  // replica's schedule does not depend on when its hand-offs' blocks come back, so the prefills, and
  // TTFT (the prefill replica's first token), are exactly those without a store. With a tight HBM
  // (kPd's 0.25) slower transfers hold the prefill blocks longer, which changes what HBM evicts and
  // so some later hits: the hits stay equal in total here, TTFT's tail moves (not asserted).
  const std::string roomy = std::string(kBase) + kPd;
  auto run_roomy = [&](const std::string& extra) {
    std::string text = roomy;
    text.replace(text.find("gpu_memory_utilization = 0.25"), 29, "gpu_memory_utilization = 0.9");
    return run_simulation(core::parse_config(text + extra, "t.toml", run_schema()), checked());
  };
  const RunResult none = run_roomy("");
  const RunResult writes = run_roomy(
      "[kv_tiers.store]\ncapacity_gb = 256\n[kv_tiers.store.write]\nkind = \"write_through\"\n"
      "[kv_tiers.store.load]\nkind = \"never\"\n");
  EXPECT_GT(metric(writes, "kv_store_stores"), 0);
  EXPECT_EQ(metric(writes, "kv_store_loads"), 0);
  EXPECT_EQ(writes.summary.kv_transfers, none.summary.kv_transfers);
  EXPECT_EQ(writes.summary.prefix_hit_tokens, none.summary.prefix_hit_tokens);
  EXPECT_EQ(writes.summary.ttft_ms.p50, none.summary.ttft_ms.p50);
  EXPECT_EQ(writes.summary.ttft_ms.p90, none.summary.ttft_ms.p90);
  EXPECT_EQ(writes.summary.ttft_ms.mean, none.summary.ttft_ms.mean);
  EXPECT_GT(writes.summary.kv_transfer_ms.mean, none.summary.kv_transfer_ms.mean);
  // kPd (tight HBM), on_eviction: the same requests and transfers, the transfers slower.
  const RunResult tight_none = pd_run("");
  const RunResult tight = pd_run("[kv_tiers.store]\ncapacity_gb = 256\n[kv_tiers.store.load]\nkind = \"never\"\n");
  EXPECT_GT(metric(tight, "kv_store_stores"), 0);
  EXPECT_EQ(tight.summary.kv_transfers, tight_none.summary.kv_transfers);
  EXPECT_GT(tight.summary.kv_transfer_ms.mean, tight_none.summary.kv_transfer_ms.mean);
}

TEST(KvTierRunTest, OnAPdClusterTheStoresLinkIsTotalBandwidthGbS) {
  // total_bandwidth_gb_s = 10: the store's link to the spine carries 10 GB/s for every copy at once,
  // so each load takes at least GB / 10 + 5 us.
  const RunResult slow = pd_run("[kv_tiers.store]\ncapacity_gb = 256\ntotal_bandwidth_gb_s = 10\n"
                                "[kv_tiers.store.load]\nkind = \"always\"\n");
  EXPECT_GT(metric(slow, "kv_store_loads"), 0);
  EXPECT_GE(metric(slow, "kv_store_load_seconds"),
            (metric(slow, "kv_store_load_gb") / 10 + metric(slow, "kv_store_loads") * 5e-6) * (1 - 1e-9));
}

TEST(KvTierRunTest, TheStoresLinkCanFailAndItsCopiesWaitForTheRepair) {
  // "store - spine" down from 60 s to 120 s: loads and writes to the store have no path meanwhile
  // and wait with their bytes (a load's request waits with them); every request still completes,
  // and the loads' time grows by the wait. PD transfers never cross the store: they are unaffected
  // in number.
  const std::string store = "[kv_tiers.store]\ncapacity_gb = 256\n";
  const RunResult up = pd_run(store);
  const RunResult cut = pd_run(store + "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"store - spine\"\n"
                                       "at_s = 60\nrepair_s = 60\n");
  EXPECT_EQ(cut.summary.requests_completed, cut.summary.requests_total);
  EXPECT_EQ(cut.summary.kv_transfers, up.summary.kv_transfers);
  EXPECT_GT(metric(cut, "kv_store_loads"), 0);
  EXPECT_GT(metric(cut, "kv_store_load_seconds") / metric(cut, "kv_store_loads"),
            metric(up, "kv_store_load_seconds") / metric(up, "kv_store_loads"));
}

TEST(KvTierRunTest, NvmeHitsAddToTheOtherTiersAndAnNvmeTierThatNeverLoadsChangesNothing) {
  const std::string host = std::string(kAnalytic) + "[kv_tiers.host]\ncapacity_gb = 4\n";
  const std::string nvme = "[kv_tiers.nvme]\ncapacity_gb = 64\nread_gb_s = 6\nwrite_gb_s = 3\n";
  const RunResult tier = run(host);
  const RunResult both = run(host + nvme);
  const double hbm = metric(both, "kv_hbm_hit_tokens"), host_hits = metric(both, "kv_host_hit_tokens"),
               nvme_hits = metric(both, "kv_nvme_hit_tokens");
  EXPECT_GT(nvme_hits, 0);
  EXPECT_EQ(hbm + host_hits + nvme_hits, static_cast<double>(both.summary.prefix_hit_tokens));
  EXPECT_GT(both.summary.prefix_token_hit_rate, tier.summary.prefix_token_hit_rate);
  EXPECT_GT(metric(both, "kv_nvme_stores"), 0);
  // 131,072 bytes per token (Llama-3-8B, TP 1). An NVMe copy is max(bytes / 6 GB/s read, bytes / 25
  // GB/s PCIe) + 100 us: the read is the slower stage, so the load seconds are GB / 6 + 100 us a load;
  // the stores GB / 3.
  EXPECT_NEAR(metric(both, "kv_nvme_load_gb"), metric(both, "kv_nvme_loaded_tokens") * 131072 * 1e-9, 1e-6);
  EXPECT_NEAR(metric(both, "kv_nvme_load_seconds"),
              metric(both, "kv_nvme_load_gb") / 6 + metric(both, "kv_nvme_loads") * 100e-6, 1e-9);
  EXPECT_NEAR(metric(both, "kv_nvme_store_seconds"), metric(both, "kv_nvme_store_gb") / 3, 1e-9);
  EXPECT_GT(metric(both, "kv_nvme_saved_tflop"), 0);
  // Per replica: the two replicas' figures add up to the totals.
  for (const char* f : {"kv_nvme_loads", "kv_nvme_loaded_tokens"})
    EXPECT_EQ(metric(both, std::string("replica0.") + f) + metric(both, std::string("replica1.") + f), metric(both, f))
        << f;
  EXPECT_NEAR(metric(both, "replica0.kv_nvme_store_gb") + metric(both, "replica1.kv_nvme_store_gb"),
              metric(both, "kv_nvme_store_gb"), 1e-9);
  // An NVMe tier that never loads leaves the host tier's results as they were.
  const RunResult never = run(host + nvme + "[kv_tiers.nvme.load]\nkind = \"never\"\n");
  EXPECT_EQ(metric(never, "kv_nvme_loads"), 0);
  EXPECT_GT(metric(never, "kv_nvme_declined"), 0);
  EXPECT_EQ(never.summary.prefix_hit_tokens, tier.summary.prefix_hit_tokens);
  EXPECT_EQ(never.summary.ttft_ms.p90, tier.summary.ttft_ms.p90);
  EXPECT_EQ(never.summary.e2e_ms.mean, tier.summary.e2e_ms.mean);
  EXPECT_EQ(never.summary.iterations, tier.summary.iterations);
  EXPECT_EQ(metric(never, "kv_host_loads"), metric(tier, "kv_host_loads"));
  // NVMe without a host tier (HBM's evictions go there), and with a store below it.
  const RunResult alone = run(nvme);
  EXPECT_GT(metric(alone, "kv_nvme_hit_tokens"), 0);
  EXPECT_EQ(metric(alone, "kv_hbm_hit_tokens") + metric(alone, "kv_nvme_hit_tokens"),
            static_cast<double>(alone.summary.prefix_hit_tokens));
  const RunResult all = run("[kv_tiers.host]\ncapacity_gb = 2\n[kv_tiers.nvme]\ncapacity_gb = 4\n"
                            "[kv_tiers.store]\ncapacity_gb = 256\n");
  EXPECT_GT(metric(all, "kv_store_hit_tokens"), 0);
  EXPECT_EQ(metric(all, "kv_hbm_hit_tokens") + metric(all, "kv_host_hit_tokens") + metric(all, "kv_nvme_hit_tokens") +
                metric(all, "kv_store_hit_tokens"),
            static_cast<double>(all.summary.prefix_hit_tokens));
  // On a disaggregated cluster the tier is the prefill replicas', its copies flows on the topology.
  const RunResult pd = run_simulation(
      core::parse_config(std::string(kBase) + kPd + host + nvme, "t.toml", run_schema()), checked());
  EXPECT_GT(metric(pd, "kv_nvme_loads"), 0);
  EXPECT_EQ(metric(pd, "kv_hbm_hit_tokens") + metric(pd, "kv_host_hit_tokens") + metric(pd, "kv_nvme_hit_tokens"),
            static_cast<double>(pd.summary.prefix_hit_tokens));
  EXPECT_EQ(pd.summary.requests_completed, pd.summary.requests_total);
  // The fabric's time, not the analytic one: both prefill replicas (GPUs 0 and 1) are on node 0,
  // whose SSD read link is their 2 x 6 = 12 GB/s (100 us), then the host uplink and the GPU's PCIe
  // link (50 GB/s, 1 us each): a load alone takes GB / 12 + 102 us, never less (two at once, 6 GB/s
  // each), where the analytic time per replica is GB / 6 + 100 us.
  const double fabric_alone = metric(pd, "kv_nvme_load_gb") / 12 + metric(pd, "kv_nvme_loads") * 102e-6;
  EXPECT_GE(metric(pd, "kv_nvme_load_seconds"), fabric_alone * (1 - 1e-9));
  EXPECT_NE(metric(pd, "kv_nvme_load_seconds"),
            metric(pd, "kv_nvme_load_gb") / 6 + metric(pd, "kv_nvme_loads") * 100e-6);
}

// Every tier on a disaggregated cluster at once (host, NVMe, the shared store with prefetch): each
// copy a flow (prefetches too), every request completes, and the per-tier hits add up to the
// prefix hits.
TEST(KvTierRunTest, APdClusterWithHostNvmeStoreAndPrefetchCompletesAndItsTierHitsAddUp) {
  const RunResult all = pd_run("[kv_tiers.host]\ncapacity_gb = 2\n[kv_tiers.nvme]\ncapacity_gb = 4\n"
                               "[kv_tiers.store]\ncapacity_gb = 256\n[kv_tiers.store.prefetch]\n"
                               "kind = \"best_effort\"\n");
  EXPECT_EQ(all.summary.requests_completed, all.summary.requests_total);
  EXPECT_GT(metric(all, "kv_nvme_loads"), 0);
  EXPECT_GT(metric(all, "kv_nvme_stores"), 0);
  EXPECT_GT(metric(all, "kv_store_loads"), 0);
  EXPECT_GT(metric(all, "kv_store_prefetches"), 0);
  EXPECT_EQ(metric(all, "kv_hbm_hit_tokens") + metric(all, "kv_host_hit_tokens") + metric(all, "kv_nvme_hit_tokens") +
                metric(all, "kv_store_hit_tokens"),
            static_cast<double>(all.summary.prefix_hit_tokens));
}

TEST(KvTierRunTest, NvmeConfigurationErrorsNameTheKey) {
  const std::string nvme = "[kv_tiers.nvme]\ncapacity_gb = 64\n";
  const std::string no_prefix = error_of("[cluster]\nreplicas = 2\n" + nvme);
  EXPECT_NE(no_prefix.find("kv_tiers.nvme.capacity_gb"), std::string::npos) << no_prefix;
  EXPECT_NE(no_prefix.find("prefix_caching"), std::string::npos) << no_prefix;
  const std::string read = error_of(std::string(kCluster) + nvme + "read_gb_s = 0\n");
  EXPECT_NE(read.find("kv_tiers.nvme.read_gb_s"), std::string::npos) << read;
  const std::string write = error_of(std::string(kCluster) + nvme + "write_gb_s = 1e5\n");
  EXPECT_NE(write.find("kv_tiers.nvme.write_gb_s"), std::string::npos) << write;
  const std::string lat = error_of(std::string(kCluster) + nvme + "latency_us = -1\n");
  EXPECT_NE(lat.find("kv_tiers.nvme.latency_us"), std::string::npos) << lat;
  const std::string kind = error_of(std::string(kCluster) + nvme + "[kv_tiers.nvme.eviction]\nkind = \"lfu\"\n");
  EXPECT_NE(kind.find("kv_tiers.nvme.eviction.kind"), std::string::npos) << kind;
  const std::string tiny = error_of(std::string(kCluster) + "[kv_tiers.nvme]\ncapacity_gb = 0.001\n");
  EXPECT_NE(tiny.find("holds no KV block"), std::string::npos) << tiny;
  // The bounce buffer's PCIe link is the host tier's when there is one: one key for one link.
  const std::string pcie =
      error_of(std::string(kCluster) + "[kv_tiers.host]\ncapacity_gb = 4\n" + nvme + "pcie_gb_s = 50\n");
  EXPECT_NE(pcie.find("kv_tiers.nvme.pcie_gb_s"), std::string::npos) << pcie;
  EXPECT_NE(pcie.find("kv_tiers.host.bandwidth_gb_s"), std::string::npos) << pcie;
  EXPECT_EQ(error_of(std::string(kCluster) + nvme + "pcie_gb_s = 50\n"), "");  // without a host tier, its own
}

TEST(KvTierRunTest, PrefetchedStoreUnitsBecomeHostHitsAndAreCounted) {
  const std::string tiers = "[kv_tiers.host]\ncapacity_gb = 4\n[kv_tiers.store]\ncapacity_gb = 256\nbandwidth_gb_s = 40\n";
  const RunResult plain = run(tiers);
  const RunResult pre = run(tiers + "[kv_tiers.store.prefetch]\nkind = \"best_effort\"\n");
  EXPECT_GT(metric(pre, "kv_store_prefetches"), 0);
  EXPECT_GT(metric(pre, "kv_store_prefetched_tokens"), 0);
  // Every hit is HBM's, the host tier's or the store's.
  EXPECT_EQ(metric(pre, "kv_hbm_hit_tokens") + metric(pre, "kv_host_hit_tokens") + metric(pre, "kv_store_hit_tokens"),
            static_cast<double>(pre.summary.prefix_hit_tokens));
  // 131,072 bytes per token (Llama-3-8B, TP 1) for the units that arrived.
  EXPECT_NEAR(metric(pre, "kv_store_prefetch_gb"), metric(pre, "kv_store_prefetched_tokens") * 131072 * 1e-9, 1e-6);
  EXPECT_EQ(metric(pre, "replica0.kv_store_prefetched_tokens") + metric(pre, "replica1.kv_store_prefetched_tokens"),
            metric(pre, "kv_store_prefetched_tokens"));
  EXPECT_EQ(metric(pre, "kv_store_prefetch_waits"), 0);  // best_effort never waits
  // Units that arrived in host memory are loaded from there: more host hits, fewer store loads.
  EXPECT_GT(metric(pre, "kv_host_hit_tokens"), metric(plain, "kv_host_hit_tokens"));
  EXPECT_LT(metric(pre, "kv_store_loaded_tokens"), metric(plain, "kv_store_loaded_tokens"));
  // Without a prefetch policy there are no prefetch rows.
  for (const auto& v : plain.summary.fleet) EXPECT_EQ(v.name.find("prefetch"), std::string::npos) << v.name;
  // wait_complete: nothing is cut off at the head of the queue (a request waits for all of it).
  const RunResult wait = run(tiers + "[kv_tiers.store.prefetch]\nkind = \"wait_complete\"\n");
  EXPECT_GT(metric(wait, "kv_store_prefetched_tokens"), 0);
  EXPECT_GE(metric(wait, "kv_store_prefetched_tokens"), metric(pre, "kv_store_prefetched_tokens"));
}

TEST(KvTierRunTest, PrefetchConfigurationErrorsNameTheKey) {
  const std::string store = "[kv_tiers.store]\ncapacity_gb = 64\n";
  const std::string no_host =
      error_of(std::string(kCluster) + store + "[kv_tiers.store.prefetch]\nkind = \"best_effort\"\n");
  EXPECT_NE(no_host.find("kv_tiers.store.prefetch.kind"), std::string::npos) << no_host;
  EXPECT_NE(no_host.find("kv_tiers.host"), std::string::npos) << no_host;
  const std::string timeout = error_of(std::string(kCluster) + "[kv_tiers.host]\ncapacity_gb = 4\n" + store +
                                       "[kv_tiers.store.prefetch]\nkind = \"timeout\"\ntimeout_ms = -1\n");
  EXPECT_NE(timeout.find("kv_tiers.store.prefetch.timeout_ms"), std::string::npos) << timeout;
  const std::string kind = error_of(std::string(kCluster) + "[kv_tiers.host]\ncapacity_gb = 4\n" + store +
                                    "[kv_tiers.store.prefetch]\nkind = \"eager\"\n");
  EXPECT_NE(kind.find("kv_tiers.store.prefetch.kind"), std::string::npos) << kind;
}

TEST(KvTierRunTest, ATierOnAWorkloadWithoutBlockHashesIsRefusedNamingTheKey) {
  // Prefix caching on a workload that makes no block hashes (plain Poisson lengths): HBM's prefix
  // cache finds nothing, and a tier has no units to keep; each tier is refused at its own key (the
  // run once stopped with an internal error instead).
  const std::string plain =
      "[workload]\nkind = \"poisson\"\nrate = 2\nmax_requests = 20\n[workload.prompt]\nkind = \"fixed\"\n"
      "value = 100\n[workload.output]\nkind = \"fixed\"\nvalue = 10\n[model]\nkind = \"llama-3-8b\"\n"
      "[gpu]\nkind = \"h100-sxm\"\n[cluster]\nprefix_caching = true\n";
  for (const std::string tier : {"host", "nvme", "store"}) {
    std::string message;
    try {
      run_simulation(core::parse_config(plain + "[kv_tiers." + tier + "]\ncapacity_gb = 64\n", "p.toml", run_schema()),
                     RunOutputs{});
    } catch (const core::Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("p.toml"), std::string::npos) << message;
    EXPECT_NE(message.find("kv_tiers." + tier + ".capacity_gb"), std::string::npos) << message;
    EXPECT_NE(message.find("no block hashes"), std::string::npos) << message;
  }
}

// A unified cluster with a tier has a topology (the [network] fields; unset: 8 GPUs a node, one GPU
// per PCIe switch, PCIe 50 GB/s and 1 us a hop, the host at each GPU's PCIe endpoint), and its
// tiers' copies are flows on it (kv_tiers.copies unset = "flows"). The tier's analytic bandwidth is
// 5 GB/s (+ 10 us): with analytic copies each load takes exactly GB / 5 + 10 us; on the fabric a
// load alone crosses the host link and the GPU's PCIe link, 50 GB/s, 1 us each: GB / 50 + 2 us,
// longer only while another copy shares a link (a write of the same GPU goes the other way).
TEST(KvTierRunTest, OnAUnifiedClusterTheTiersCopiesAreFlowsUnlessAnalytic) {
  const std::string host = "[kv_tiers.host]\ncapacity_gb = 64\nbandwidth_gb_s = 5\n";
  const RunResult flows = run(host);
  const RunResult analytic = run(std::string(kAnalytic) + host);
  const double gb = metric(flows, "kv_host_load_gb"), loads = metric(flows, "kv_host_loads");
  ASSERT_GT(loads, 0);
  EXPECT_EQ(flows.summary.requests_completed, flows.summary.requests_total);
  EXPECT_GE(metric(flows, "kv_host_load_seconds"), (gb / 50 + loads * 2e-6) * (1 - 1e-9));
  EXPECT_LT(metric(flows, "kv_host_load_seconds"), 2 * (gb / 50 + loads * 2e-6));  // far below GB / 5
  EXPECT_NEAR(metric(analytic, "kv_host_load_seconds"),
              metric(analytic, "kv_host_load_gb") / 5 + metric(analytic, "kv_host_loads") * 10e-6, 1e-9);
  // Faster copies: the loading requests wait less, so TTFT moves.
  EXPECT_NE(flows.summary.ttft_ms.mean, analytic.summary.ttft_ms.mean);
  // Without a tier, no network: a link fault is refused as before (the error names the key).
  const std::string link = "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"node 0 host - nic 0\"\nat_s = 60\nrepair_s = 30\n";
  EXPECT_NE(error_of(std::string(kCluster) + link).find("this cluster has no network"), std::string::npos);
  EXPECT_NE(error_of(std::string(kCluster) + kAnalytic + host + link).find("this cluster has no network"),
            std::string::npos);
  // kv_tiers.copies is checked like any kind.
  EXPECT_NE(error_of(std::string(kCluster) + "[kv_tiers]\ncopies = \"flow\"\n" + host).find("kv_tiers.copies"),
            std::string::npos);
}

// Every tier on the fabric of a unified cluster, with what a unified cluster has and a PD one does
// not: replica failures (with copies in flight: recomputed elsewhere) and a host link failing and
// coming back: nothing hangs, every request completes, the tiers' hits add up, and the invariant
// checker and the tiers' conservation checks (--check) pass.
TEST(KvTierRunTest, AUnifiedClusterOnTheFabricSurvivesReplicaAndLinkFailures) {
  const std::string tiers =
      "[kv_tiers.host]\ncapacity_gb = 4\n[kv_tiers.nvme]\ncapacity_gb = 16\n"
      "[kv_tiers.store]\ncapacity_gb = 64\ntotal_bandwidth_gb_s = 10\n"
      "[kv_tiers.store.prefetch]\nkind = \"timeout\"\ntimeout_ms = 5\n"
      "[faults]\nmtbf_s = 120\nmttr_s = 10\n"
      "[[faults.events]]\nkind = \"link\"\nlink = \"node 0 host - nic 0\"\nat_s = 100\nrepair_s = 20\n";
  const RunResult r = run(tiers);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  EXPECT_GT(metric(r, "kv_store_loads") + metric(r, "kv_nvme_loads") + metric(r, "kv_host_loads"), 0);
  EXPECT_EQ(metric(r, "kv_hbm_hit_tokens") + metric(r, "kv_host_hit_tokens") + metric(r, "kv_nvme_hit_tokens") +
                metric(r, "kv_store_hit_tokens"),
            static_cast<double>(r.summary.prefix_hit_tokens));
}

}  // namespace
}  // namespace servesim::experiments
