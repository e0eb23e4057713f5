// Stores per group of replicas (kv_tiers.store.replicas_per_store, attach) through the whole run
// path: the figures summed over the stores and broken down per store, the price of every store,
// the keys' checks, a leaf store's links on a PD cluster's fabric (and their faults), and runs
// whose groups are one store being exactly the runs without the keys.
#include <gtest/gtest.h>

#include <string>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/error.h"

namespace servesim::experiments {
namespace {

// Multi-turn conversations (as kvtier_run_test.cc) on a small HBM, so that prefixes reach the store.
constexpr const char* kBase = R"(
[workload]
kind = "sessions"
rate = 2.0
think_time_s = 20
max_requests = 600
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
kind = "round_robin"
)";

constexpr const char* kFour = "[cluster]\nreplicas = 4\nprefix_caching = true\ngpu_memory_utilization = 0.25\n";
// PD on dgx-h100 links, 2 GPUs a node, one node per leaf group (its 8 rail leaves): prefill
// replicas 0, 1 on node 0, 2, 3 on node 1; decode replicas 4, 5 on node 2.
constexpr const char* kPd =
    "[cluster]\nprefix_caching = true\ngpu_memory_utilization = 0.25\n"
    "[cluster.prefill]\nreplicas = 4\n[cluster.decode]\nreplicas = 2\n"
    "[decode_router]\nkind = \"least_outstanding\"\n"
    "[network]\npreset = \"dgx-h100\"\ngpus_per_node = 2\nnodes_per_switch = 1\n";

RunResult run(const std::string& text) {
  RunOutputs outputs;
  outputs.check = true;  // every store's check()
  return run_simulation(core::parse_config(std::string(kBase) + text, "t.toml", run_schema()), outputs);
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
bool has(const RunResult& r, const std::string& name) {
  for (const auto& v : r.summary.fleet)
    if (v.name == name) return true;
  return false;
}

TEST(StoreGroupsRunTest, TotalsSumOverTheStoresAndEachStoreIsPriced) {
  const std::string store = "[kv_tiers.store]\ncapacity_gb = 100\nusd_per_gb_hour = 0.004\n";
  const RunResult one = run(std::string(kFour) + store);
  const RunResult two = run(std::string(kFour) + store + "replicas_per_store = 2\n");
  EXPECT_FALSE(has(one, "store0.kv_store_loads"));  // one store: no per-store rows
  ASSERT_TRUE(has(two, "store1.kv_store_loads"));
  EXPECT_FALSE(has(two, "store2.kv_store_loads"));
  for (const char* f : {"loaded_tokens", "cross_replica_tokens", "loads", "stores", "evictions", "units_at_end",
                        "blocks_at_end"})
    EXPECT_EQ(metric(two, std::string("store0.kv_store_") + f) + metric(two, std::string("store1.kv_store_") + f),
              metric(two, std::string("kv_store_") + f))
        << f;
  // Store 0 is replicas 0 and 1's: its loads are theirs.
  EXPECT_EQ(metric(two, "store0.kv_store_loads"),
            metric(two, "replica0.kv_store_loads") + metric(two, "replica1.kv_store_loads"));
  EXPECT_EQ(metric(two, "kv_hbm_hit_tokens") + metric(two, "kv_store_hit_tokens"),
            static_cast<double>(two.summary.prefix_hit_tokens));
  // By hand: each store 100 GB x $0.004/GB-h = $0.40/h: one store $0.40/h, two $0.80/h.
  EXPECT_NEAR(metric(one, "kv_store_cost_usd"), 0.40 * one.summary.sim_seconds / 3600, 1e-12);
  EXPECT_NEAR(metric(two, "kv_store_cost_usd"), 0.80 * two.summary.sim_seconds / 3600, 1e-12);
  // round_robin spreads a conversation's turns over the replicas: a prefix written in one group is not found in the
  // other, so fewer cross-replica hits than with one store for all four.
  EXPECT_LT(metric(two, "kv_store_cross_replica_tokens"), metric(one, "kv_store_cross_replica_tokens"));
}

TEST(StoreGroupsRunTest, OneGroupOfEveryReplicaIsExactlyOneStore) {
  const std::string store = "[kv_tiers.store]\ncapacity_gb = 100\n";
  const RunResult plain = run(std::string(kFour) + store);
  const RunResult group = run(std::string(kFour) + store + "replicas_per_store = 4\nattach = \"spine\"\n");
  EXPECT_EQ(plain.summary.fleet.size(), group.summary.fleet.size());
  for (size_t i = 0; i < plain.summary.fleet.size() && i < group.summary.fleet.size(); ++i) {
    EXPECT_EQ(plain.summary.fleet[i].name, group.summary.fleet[i].name);
    EXPECT_EQ(plain.summary.fleet[i].value, group.summary.fleet[i].value) << plain.summary.fleet[i].name;
  }
  EXPECT_EQ(plain.summary.ttft_ms.mean, group.summary.ttft_ms.mean);
  EXPECT_EQ(plain.summary.e2e_ms.p99, group.summary.e2e_ms.p99);
  // The same on a PD cluster's fabric: the one store stays on the spine.
  const RunResult pd_plain = run(std::string(kPd) + store);
  const RunResult pd_group = run(std::string(kPd) + store + "replicas_per_store = 4\n");
  EXPECT_EQ(pd_plain.summary.ttft_ms.mean, pd_group.summary.ttft_ms.mean);
  EXPECT_EQ(pd_plain.summary.kv_transfer_ms.mean, pd_group.summary.kv_transfer_ms.mean);
  EXPECT_EQ(metric(pd_plain, "kv_store_load_seconds"), metric(pd_group, "kv_store_load_seconds"));
}

TEST(StoreGroupsRunTest, LeafStoresOnAPdFabricLoadAndTheirLinksCanFail) {
  const std::string store = "[kv_tiers.store]\ncapacity_gb = 100\nreplicas_per_store = 2\nattach = \"leaf\"\n";
  const RunResult leaf = run(std::string(kPd) + store);
  EXPECT_EQ(leaf.summary.requests_completed, leaf.summary.requests_total);
  EXPECT_GT(metric(leaf, "store0.kv_store_loads"), 0);
  EXPECT_GT(metric(leaf, "store1.kv_store_loads"), 0);
  // A leaf store's path: GPU PCIe, NIC - leaf, the store's rail port ("store s nic k - leaf l"),
  // the store's own link ("store s"); 1 us a hop on dgx-h100 and 0 on the store's link: at least
  // GB / 50 (the NIC) + 3 us a load.
  EXPECT_GE(metric(leaf, "kv_store_load_seconds"),
            (metric(leaf, "kv_store_load_gb") / 50 + metric(leaf, "kv_store_loads") * 3e-6) * (1 - 1e-9));
  // Store 1's own link down from 60 s to 120 s: group 1's copies under way wait for it, group 0's
  // do not; the `cost` policy's estimate on the fabric sees no path to store 1 meanwhile, so group 1
  // recomputes its store hits until the repair (more declined, fewer loads); every request completes.
  const RunResult cut = run(std::string(kPd) + store +
                            "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"store 1\"\nat_s = 60\nrepair_s = 60\n");
  EXPECT_EQ(cut.summary.requests_completed, cut.summary.requests_total);
  EXPECT_EQ(cut.summary.kv_transfers, leaf.summary.kv_transfers);
  EXPECT_GT(metric(cut, "kv_store_declined"), metric(leaf, "kv_store_declined"));
  EXPECT_LT(metric(cut, "store1.kv_store_loads"), metric(leaf, "store1.kv_store_loads"));
  // With `always` the loads are not declined: they wait for the repair.
  const std::string always = "[kv_tiers.store.load]\nkind = \"always\"\n";
  const RunResult leaf_always = run(std::string(kPd) + store + always);
  const RunResult cut_always =
      run(std::string(kPd) + store + always +
          "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"store 1\"\nat_s = 60\nrepair_s = 60\n");
  EXPECT_EQ(cut_always.summary.requests_completed, cut_always.summary.requests_total);
  EXPECT_GT(metric(cut_always, "kv_store_load_seconds") / metric(cut_always, "kv_store_loads"),
            10 * metric(leaf_always, "kv_store_load_seconds") / metric(leaf_always, "kv_store_loads"));
  // A unified cluster's tier copies are flows on its fabric too (kv_tiers.copies = "flows", the
  // default): its groups' stores go on their leaves the same way (replicas 0, 1 on node 0, 2, 3 on
  // node 1, a node per leaf group).
  const RunResult unified = run(std::string(kFour) +
                                "[network]\npreset = \"dgx-h100\"\ngpus_per_node = 2\nnodes_per_switch = 1\n" + store);
  EXPECT_EQ(unified.summary.requests_completed, unified.summary.requests_total);
  EXPECT_GT(metric(unified, "store0.kv_store_loads"), 0);
  EXPECT_GT(metric(unified, "store1.kv_store_loads"), 0);
  EXPECT_GE(metric(unified, "kv_store_load_seconds"),
            (metric(unified, "kv_store_load_gb") / 50 + metric(unified, "kv_store_loads") * 3e-6) * (1 - 1e-9));
  const std::string bad = error_of(std::string(kPd) + store +
                                   "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"store - spine\"\nat_s = 1\n");
  EXPECT_NE(bad.find("store 0"), std::string::npos) << bad;  // the names it offers
}

TEST(StoreGroupsRunTest, TheKeysAreCheckedWithTheirFileLineAndKey) {
  const std::string store = "[kv_tiers.store]\ncapacity_gb = 64\n";
  const std::string many = error_of(std::string(kFour) + store + "replicas_per_store = 5\n");
  EXPECT_NE(many.find("f.toml:"), std::string::npos) << many;
  EXPECT_NE(many.find("kv_tiers.store.replicas_per_store"), std::string::npos) << many;
  EXPECT_NE(many.find("4 replicas"), std::string::npos) << many;
  const std::string zero = error_of(std::string(kFour) + store + "replicas_per_store = 0\n");
  EXPECT_NE(zero.find("kv_tiers.store.replicas_per_store"), std::string::npos) << zero;
  // PD: the prefill pool's replicas count (4), not the decode pool's.
  const std::string pd = error_of(std::string(kPd) + store + "replicas_per_store = 5\n");
  EXPECT_NE(pd.find("4 prefill replicas"), std::string::npos) << pd;
  // No topology (a unified cluster whose tier copies are analytic): nowhere to put a leaf store.
  const std::string no_fabric =
      error_of(std::string(kFour) + "[kv_tiers]\ncopies = \"analytic\"\n" + store + "attach = \"leaf\"\n");
  EXPECT_NE(no_fabric.find("kv_tiers.store.attach"), std::string::npos) << no_fabric;
  EXPECT_NE(no_fabric.find("has none"), std::string::npos) << no_fabric;
  const std::string kind = error_of(std::string(kFour) + store + "attach = \"rack\"\n");
  EXPECT_NE(kind.find("kv_tiers.store.attach"), std::string::npos) << kind;
  // A group over two leaves (replicas 0-3 on nodes 0 and 1, a node per leaf) is not rack-local.
  const std::string wide = error_of(std::string(kPd) + store + "replicas_per_store = 4\nattach = \"leaf\"\n");
  EXPECT_NE(wide.find("kv_tiers.store.attach"), std::string::npos) << wide;
  EXPECT_NE(wide.find("more than one leaf"), std::string::npos) << wide;
}

}  // namespace
}  // namespace servesim::experiments
