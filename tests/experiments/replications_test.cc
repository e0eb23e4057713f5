// Replications (experiments/replications.h): each is the run of its seed, the outputs do not depend
// on --jobs, a trace's replications are block bootstraps, and the interval across them covers a
// queueing formula.
#include "experiments/replications.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/cli/cli.h"
#include "experiments/experiment.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "tests/experiments/results_dump.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

const char* kSmall = R"(
seed = 11
[workload]
kind = "poisson"
rate = 20.0
max_requests = 200
[workload.prompt]
kind = "uniform"
min = 50
max = 1500
[workload.output]
kind = "uniform"
min = 1
max = 200
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 2
[router]
kind = "random"
[slo]
ttft_ms = 500
)";

std::function<core::Params(const std::vector<std::string>&)> loader(const std::string& text,
                                                                    std::vector<std::string> sets = {}) {
  return [text, sets](const std::vector<std::string>& extra) {
    std::vector<std::string> all = sets;
    all.insert(all.end(), extra.begin(), extra.end());
    return core::parse_config(text, "small.toml", run_schema(), all, ".");
  };
}

TEST(ReplicationsTest, EachReplicationIsTheRunOfItsSeed) {
  ReplicationOptions o;
  o.count = 3;
  o.jobs = 2;
  const ReplicationResult r = run_replications(loader(kSmall), o);
  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_FALSE(r.resampled);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.runs[i].info.seed, 11u + i);
    const RunResult alone = run_simulation(loader(kSmall, {"seed=" + std::to_string(11 + i)})({}), RunOutputs{});
    EXPECT_EQ(r.runs[i].summary.ttft_ms.p99, alone.summary.ttft_ms.p99);
    EXPECT_EQ(r.runs[i].summary.goodput_req_s_window, alone.summary.goodput_req_s_window);
  }
  // The interval of each summary value is the Student-t interval of the three runs' values.
  const ReplicatedMetric* p99 = find_metric(r.metrics, "ttft_ms_p99");
  ASSERT_NE(p99, nullptr);
  const double a = r.runs[0].summary.ttft_ms.p99, b = r.runs[1].summary.ttft_ms.p99, c = r.runs[2].summary.ttft_ms.p99;
  const double mean = (a + b + c) / 3;
  const double sd = std::sqrt(((a - mean) * (a - mean) + (b - mean) * (b - mean) + (c - mean) * (c - mean)) / 2);
  EXPECT_NEAR(p99->interval.mean, mean, 1e-9 * mean);
  EXPECT_NEAR(p99->interval.half_width, 4.302653 * sd / std::sqrt(3.0), 1e-5 * sd);  // t_{2, 0.975}
  EXPECT_EQ(p99->values, (std::vector<double>{a, b, c}));
}

TEST(ReplicationsTest, TheDatabaseDoesNotDependOnJobs) {
  TempDir dir;
  std::string bytes[2];
  for (int jobs : {1, 2}) {
    ReplicationOptions o;
    o.count = 4;
    o.jobs = jobs;
    o.db_path = dir.file("r" + std::to_string(jobs) + ".db");
    o.csv_dir = dir.file("csv" + std::to_string(jobs));
    const ReplicationResult r = run_replications(loader(kSmall), o);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.runs[i].info.run_id, i + 1);
    bytes[jobs - 1] = servesim::testing::file_bytes(o.db_path);
    EXPECT_EQ(servesim::testing::file_bytes(o.csv_dir + "/runs.csv").size() > 0, true);
  }
  EXPECT_EQ(bytes[0], bytes[1]);
  EXPECT_EQ(servesim::testing::file_bytes(dir.file("csv1/requests.csv")),
            servesim::testing::file_bytes(dir.file("csv2/requests.csv")));
}

TEST(ReplicationsTest, TraceReplicationsAreBlockBootstraps) {
  TempDir dir;
  const std::string trace = dir.file("t.csv");
  {
    std::FILE* f = std::fopen(trace.c_str(), "w");
    std::fprintf(f, "TIMESTAMP,ContextTokens,GeneratedTokens\n");
    // 300 requests over 60 s, denser and denser (request i at 60 (i / 300)^2 s).
    for (int i = 0; i < 300; ++i) {
      const int64_t us = static_cast<int64_t>(60e6 * (i / 300.0) * (i / 300.0));
      std::fprintf(f, "2023-11-16 18:%02lld:%02lld.%06lld,%d,%d\n", static_cast<long long>(us / 60'000'000),
                   static_cast<long long>(us / 1'000'000 % 60), static_cast<long long>(us % 1'000'000), 100 + (i * 37) % 900,
                   1 + (i * 13) % 100);
    }
    std::fclose(f);
  }
  // Round robin: nothing but the workload could tell two seeds apart.
  const auto load = loader(kSmall, {"workload={ kind = \"azure_csv\", path = \"" + trace + "\" }", "replication.block_s=10",
                                    "router.kind=round_robin"});
  const core::Params base = load({});
  EXPECT_TRUE(replays_trace(base));
  EXPECT_EQ(replication_overrides(base, 2), (std::vector<std::string>{"seed=13", "replication.resample_trace=true"}));
  ReplicationOptions o;
  o.count = 3;
  const ReplicationResult r = run_replications(load, o);
  EXPECT_TRUE(r.resampled);
  // Resamples of the same trace: different request counts and results, each the plain run of its
  // seed with resampling on.
  EXPECT_NE(r.runs[0].summary.requests_total, r.runs[1].summary.requests_total);
  for (int i = 0; i < 3; ++i) {
    const RunResult alone =
        run_simulation(load({"seed=" + std::to_string(11 + i), "replication.resample_trace=true"}), RunOutputs{});
    EXPECT_EQ(r.runs[i].summary.requests_total, alone.summary.requests_total);
    EXPECT_EQ(r.runs[i].summary.e2e_ms.p90, alone.summary.e2e_ms.p90);
  }
  // Without resampling every seed replays the same trace: the same run.
  const RunResult a = run_simulation(load({"seed=1"}), RunOutputs{});
  const RunResult b = run_simulation(load({"seed=2"}), RunOutputs{});
  EXPECT_EQ(a.summary.e2e_ms.p90, b.summary.e2e_ms.p90);
  EXPECT_EQ(a.summary.requests_total, 300u);
}

TEST(ReplicationsTest, AWorkloadSeedThatFixesTheDrawsIsAnError) {
  const auto load = loader(std::string(kSmall), {"workload.seed=5"});
  ReplicationOptions o;
  o.count = 2;
  try {
    run_replications(load, o);
    FAIL() << "expected an error";
  } catch (const core::ConfigError& e) {
    EXPECT_EQ(e.key(), "workload.seed");
    EXPECT_NE(std::string(e.what()).find("every replication would repeat one run"), std::string::npos) << e.what();
  }
  o.count = 1;
  EXPECT_THROW(run_replications(loader(kSmall), o), core::Error);
}

// An M/D/1 queue (servesim's single replica serving one 512-token prompt at a time, S each) at
// load 0.5: mean wait rho S / (2 (1 - rho)). Twenty groups of five replications of 1,000
// requests: the 95% interval across each group's replications covers the formula in at least 17
// (19 measured; the binomial's tail below 17 at p = 0.95 is 1.6%).
TEST(ReplicationsTest, IntervalsAcrossReplicationsCoverTheMD1Formula) {
  const std::string text = R"(
seed = 1000
[workload]
kind = "poisson"
rate = 1.0
max_requests = 1000
[workload.prompt]
kind = "fixed"
value = 512
[workload.output]
kind = "fixed"
value = 1
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[engine]
kind = "none"
[cluster]
replicas = 1
[scheduler]
kind = "continuous"
max_num_seqs = 1
[measurement]
auto_warmup = true
[output]
sample_interval_ms = 0
)";
  const double s = run_simulation(loader(text, {"workload.rate=0.01", "workload.max_requests=2"})({}), RunOutputs{})
                       .summary.ttft_ms.mean;
  const double rho = 0.5, expected = s + rho * s / (2 * (1 - rho));
  char rate[64];
  std::snprintf(rate, sizeof rate, "workload.rate=%.17g", rho / (s / 1000));
  int covered = 0;
  for (int g = 0; g < 20; ++g) {
    ReplicationOptions o;
    o.count = 5;
    o.jobs = 2;
    const ReplicationResult r = run_replications(loader(text, {rate, "seed=" + std::to_string(1000 + 5 * g)}), o);
    if (find_metric(r.metrics, "ttft_ms_window_mean")->interval.contains(expected)) ++covered;
  }
  EXPECT_GE(covered, 17) << "of 20 groups' intervals covered " << expected << " ms";
}

TEST(ReplicationsTest, ExperimentFileKey) {
  const std::string base = "[base]\n" + [] {
    std::string t = kSmall, out;
    std::istringstream in(t);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line[0] == '[') line = "[base." + line.substr(1);
      out += line + "\n";
    }
    return out;
  }();
  Experiment e = Experiment::parse("replications = 3\n" + base, "r.toml", ".");
  e.check(1);
  EXPECT_EQ(e.replications(), 3);
  EXPECT_FALSE(e.replications_resample());  // a generator: the seed is enough
  ASSERT_EQ(e.points().size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(e.points()[i].seed, 11u + i);
  try {
    Experiment::parse("seeds = [1, 2]\nreplications = 3\n" + base, "r.toml", ".");
    FAIL() << "expected an error";
  } catch (const core::ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("r.toml:2:"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("remove seeds"), std::string::npos) << err.what();
  }
}

TEST(ReplicationsTest, CommandLineTableAndJson) {
  TempDir dir;
  const std::string path = dir.file("small.toml");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(kSmall, f);
    std::fclose(f);
  }
  std::ostringstream out, err;
  const std::string db = dir.file("r.db");
  const char* argv[] = {"servesim", "run", path.c_str(), "--replications", "3", "--db", db.c_str()};
  ASSERT_EQ(run_cli(7, argv, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("(3 replications, seeds 11 to 13: arrivals and lengths drawn afresh)"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("TTFT p99 (ms)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("runs 1 to 3 in " + db), std::string::npos) << out.str();
  std::ostringstream jout, jerr;
  const char* json[] = {"servesim", "run", path.c_str(), "--replications", "3", "--no-db", "--json"};
  ASSERT_EQ(run_cli(7, json, jout, jerr), 0) << jerr.str();
  const auto j = nlohmann::json::parse(jout.str());
  EXPECT_EQ(j["replications"], 3);
  EXPECT_EQ(j["seeds"], nlohmann::json::array({11, 12, 13}));
  const auto& m = j["metrics"]["goodput_req_s_window"];
  EXPECT_LE(m["ci95_low"].get<double>(), m["mean"].get<double>());
  EXPECT_EQ(m["values"].size(), 3u);
  std::ostringstream uout, uerr;
  const char* bad[] = {"servesim", "run", path.c_str(), "--replications", "1"};
  EXPECT_EQ(run_cli(5, bad, uout, uerr), 2);
  EXPECT_NE(uerr.str().find("--replications needs at least 2"), std::string::npos) << uerr.str();
}

}  // namespace
}  // namespace servesim::experiments
