// The KV tiers' price (kv_tiers.{host,nvme,store}.usd_per_gb_hour; docs/kv-tiers.md, "Cost"):
// capacity x price x the hours the run's GPUs are billed, added to cost_usd and to $/1M output
// tokens, reported as kv_<tier>_cost_usd; against hand computations with the GPUs' list prices
// (hwmodels/gpu_spec.cc: h100-sxm $2.50/h, a100-80gb-sxm $1.80/h). Unset: the results as before.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>
#include <string>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "tests/cli_driver.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

// Multi-turn conversations (prefix hits for the tiers) on H100-SXM; the cluster comes with each test.
constexpr const char* kBase = R"(
[workload]
kind = "sessions"
rate = 2.0
think_time_s = 20
max_requests = 300
[workload.turns]
kind = "uniform"
min = 2
max = 6
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

constexpr const char* kTwo = "[cluster]\nreplicas = 2\nprefix_caching = true\ngpu_memory_utilization = 0.25\n";

RunResult run(const std::string& text) {
  RunOutputs outputs;
  outputs.check = true;
  return run_simulation(core::parse_config(std::string(kBase) + text, "t.toml", run_schema()), outputs);
}

std::optional<double> metric(const RunResult& r, const std::string& name) {
  for (const auto& v : r.summary.fleet)
    if (v.name == name) return v.value;
  return std::nullopt;
}

std::string error_of(const std::string& text) {
  try {
    run_simulation(core::parse_config(std::string(kBase) + text, "f.toml", run_schema()), RunOutputs{});
  } catch (const core::Error& e) {
    return e.what();
  }
  return "";
}

TEST(KvTierCostTest, HostTierCostsCapacityTimesPriceTimesReplicasTimesHours) {
  const RunResult r = run(std::string(kTwo) + "[kv_tiers.host]\ncapacity_gb = 100\nusd_per_gb_hour = 0.005\n");
  const double t = r.summary.sim_seconds;
  ASSERT_GT(t, 0);
  // By hand: the tier 2 replicas x 100 GB x $0.005/GB-h = $1.00/h; the GPUs 2 x $2.50/h = $5.00/h;
  // both for the run's t seconds.
  const double hours = t / 3600.0;
  EXPECT_NEAR(*metric(r, "kv_host_cost_usd"), 1.00 * hours, 1e-12);
  EXPECT_NEAR(r.summary.gpu_hours, 2 * hours, 1e-12);
  EXPECT_NEAR(r.summary.cost_usd, (5.00 + 1.00) * hours, 1e-12);
  EXPECT_NEAR(r.summary.cost_usd_per_mtok_output,
              6.00 * hours / static_cast<double>(r.summary.output_tokens) * 1e6, 1e-9);
  // The window's $/1M: the same $6/h over the window's length and the tokens that left in it.
  const double w = r.summary.arrival_window_s;
  EXPECT_NEAR(r.summary.cost_usd_per_mtok_output_window,
              6.00 * w / 3600.0 / (r.summary.throughput_output_tok_s_window * w) * 1e6, 1e-9);
  EXPECT_FALSE(metric(r, "kv_nvme_cost_usd"));
  EXPECT_FALSE(metric(r, "kv_store_cost_usd"));
}

TEST(KvTierCostTest, TheStoreIsPaidOnceAndNvmePerReplica) {
  const RunResult r = run(std::string(kTwo) +
                          "[kv_tiers.host]\ncapacity_gb = 8\n"  // unpriced: no row, no dollars
                          "[kv_tiers.nvme]\ncapacity_gb = 500\nusd_per_gb_hour = 0.0002\n"
                          "[kv_tiers.store]\ncapacity_gb = 1000\nusd_per_gb_hour = 0.004\n");
  const double hours = r.summary.sim_seconds / 3600.0;
  // By hand: NVMe 2 x 500 GB x $0.0002 = $0.20/h; the store 1000 GB x $0.004 = $4.00/h once (not
  // per replica); the GPUs $5.00/h.
  EXPECT_NEAR(*metric(r, "kv_nvme_cost_usd"), 0.20 * hours, 1e-12);
  EXPECT_NEAR(*metric(r, "kv_store_cost_usd"), 4.00 * hours, 1e-12);
  EXPECT_FALSE(metric(r, "kv_host_cost_usd"));
  EXPECT_NEAR(r.summary.cost_usd, (5.00 + 0.20 + 4.00) * hours, 1e-12);
}

TEST(KvTierCostTest, DisaggregatedOnlyThePrefillReplicasPayForTheirTiers) {
  const RunResult r = run(
      "[cluster]\nprefix_caching = true\ngpu_memory_utilization = 0.25\n"
      "[cluster.prefill]\nreplicas = 2\n[cluster.decode]\nreplicas = 3\n"
      "[decode_router]\nkind = \"least_outstanding\"\n"
      "[kv_tiers.host]\ncapacity_gb = 100\nusd_per_gb_hour = 0.005\n");
  const double hours = r.summary.sim_seconds / 3600.0;
  // By hand: the host tier is the 2 prefill replicas' ($1.00/h), the GPUs are 5 x $2.50 = $12.50/h.
  EXPECT_NEAR(*metric(r, "kv_host_cost_usd"), 1.00 * hours, 1e-12);
  EXPECT_NEAR(r.summary.cost_usd, (12.50 + 1.00) * hours, 1e-12);
}

TEST(KvTierCostTest, AutoscaledTheTierIsPaidForTheReplicasProvisionedTime) {
  // One replica; the schedule provisions a second at 10 s (ready 25 s later).
  const RunResult r = run(
      "[cluster]\nreplicas = 1\nprefix_caching = true\n"
      "[autoscaler]\nkind = \"schedule\"\nmax_replicas = 2\ntimes_s = [10]\nreplicas = [2]\ninterval_s = 5\n"
      "provision_s = 20\nwarmup_s = 5\n"
      "[kv_tiers.host]\ncapacity_gb = 100\nusd_per_gb_hour = 0.005\n");
  // TP 1: replica-hours are GPU-hours. The second replica is provisioned from 10 s, not from 0:
  // fewer replica-hours than 2 x the run.
  const double replica_hours = *metric(r, "provisioned_replica_hours");
  EXPECT_LT(replica_hours, 2 * r.summary.sim_seconds / 3600.0 - 5 / 3600.0);
  EXPECT_NEAR(r.summary.gpu_hours, replica_hours, 1e-12);
  // By hand: 100 GB x $0.005 = $0.50 per provisioned replica-hour, the GPU $2.50.
  EXPECT_NEAR(*metric(r, "kv_host_cost_usd"), 0.50 * replica_hours, 1e-12);
  EXPECT_NEAR(r.summary.cost_usd, (2.50 + 0.50) * replica_hours, 1e-12);
}

TEST(KvTierCostTest, UnpricedTiersLeaveTheResultsAsTheyWere) {
  const std::string tier = "[kv_tiers.host]\ncapacity_gb = 100\n";
  const RunResult unpriced = run(std::string(kTwo) + tier);
  const RunResult priced = run(std::string(kTwo) + tier + "usd_per_gb_hour = 0.005\n");
  const RunResult free = run(std::string(kTwo) + tier + "usd_per_gb_hour = 0\n");
  EXPECT_FALSE(metric(unpriced, "kv_host_cost_usd"));
  // Unpriced: the GPUs only, 2 x $2.50/h.
  EXPECT_NEAR(unpriced.summary.cost_usd, 5.00 * unpriced.summary.sim_seconds / 3600.0, 1e-12);
  // A price changes the cost only: the same run otherwise.
  EXPECT_EQ(priced.summary.sim_seconds, unpriced.summary.sim_seconds);
  EXPECT_EQ(priced.summary.ttft_ms.p90, unpriced.summary.ttft_ms.p90);
  EXPECT_EQ(priced.summary.prefix_hit_tokens, unpriced.summary.prefix_hit_tokens);
  EXPECT_GT(priced.summary.cost_usd, unpriced.summary.cost_usd);
  // Price 0: a zero row, the same dollars to the bit.
  EXPECT_EQ(*metric(free, "kv_host_cost_usd"), 0);
  EXPECT_EQ(free.summary.cost_usd, unpriced.summary.cost_usd);
  EXPECT_EQ(free.summary.cost_usd_per_mtok_output, unpriced.summary.cost_usd_per_mtok_output);
  EXPECT_EQ(free.summary.cost_usd_per_mtok_output_window, unpriced.summary.cost_usd_per_mtok_output_window);
}

TEST(KvTierCostTest, AnOutOfRangePriceIsRefusedNamingTheKey) {
  for (const char* tier : {"host", "nvme", "store"})
    for (const char* price : {"-0.001", "2"}) {
      const std::string e = error_of(std::string(kTwo) + "[kv_tiers." + tier + "]\nusd_per_gb_hour = " + price + "\n");
      EXPECT_NE(e.find("f.toml"), std::string::npos) << e;
      EXPECT_NE(e.find(std::string("kv_tiers.") + tier + ".usd_per_gb_hour"), std::string::npos) << e;
      EXPECT_NE(e.find("out of range"), std::string::npos) << e;
    }
}

TEST(KvTierCostTest, TheCommandLineSplitsTheCostIntoGpusAndTiers) {
  servesim::testing::TempDir dir;
  const std::string path = dir.file("priced.toml");
  std::ofstream(path) << kBase << kTwo << "[kv_tiers.host]\ncapacity_gb = 100\nusd_per_gb_hour = 0.005\n"
                      << "[kv_tiers.store]\ncapacity_gb = 1000\nusd_per_gb_hour = 0.004\n";
  const servesim::testing::Cli text = servesim::testing::cli({"run", path, "--no-db"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("GPU-hours at $2.50/h = $"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(", + KV tiers $"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" (host $"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(", store $"), std::string::npos) << text.out;
  const servesim::testing::Cli json = servesim::testing::cli({"run", path, "--no-db", "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  const auto& summary = j.contains("summary") ? j["summary"] : j;
  const double hours = summary["sim_seconds"].get<double>() / 3600.0;
  // By hand: host 2 x 100 GB x $0.005 = $1/h, the store 1000 GB x $0.004 = $4/h, GPUs $5/h.
  EXPECT_NEAR(j["fleet"]["kv_host_cost_usd"].get<double>(), 1.00 * hours, 1e-12);
  EXPECT_NEAR(j["fleet"]["kv_store_cost_usd"].get<double>(), 4.00 * hours, 1e-12);
  EXPECT_NEAR(summary["cost_usd"].get<double>(), 10.00 * hours, 1e-12);
  // Unpriced: the line as before, GPUs only.
  std::ofstream(dir.file("free.toml")) << kBase << kTwo << "[kv_tiers.host]\ncapacity_gb = 100\n";
  const servesim::testing::Cli free = servesim::testing::cli({"run", dir.file("free.toml"), "--no-db"});
  ASSERT_EQ(free.code, 0) << free.err;
  EXPECT_EQ(free.out.find("KV tiers $"), std::string::npos) << free.out;
}

}  // namespace
}  // namespace servesim::experiments
