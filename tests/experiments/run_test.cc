// End to end: configurations through the simulation into the results, as the CLI runs them.
#include "experiments/run.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiments/cli/cli.h"
#include "hwmodels/model_spec.h"
#include "hwmodels/roofline.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "tests/cli_driver.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

std::string quickstart() { return servesim::testing::source_dir() + "/experiments/quickstart.toml"; }
std::string azure_conv() { return servesim::testing::source_dir() + "/experiments/azure_conv.toml"; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A small, fast configuration for most tests.
const char* kSmall = R"(
seed = 3
[workload]
kind = "poisson"
rate = 20.0
max_requests = 300
[workload.prompt]
kind = "uniform"
min = 50
max = 1500
[workload.output]
kind = "uniform"
min = 1
max = 300
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 2
[router]
kind = "least_outstanding"
)";

core::Params small(const std::vector<std::string>& sets = {}) {
  return core::parse_config(kSmall, "small.toml", run_schema(), sets);
}

std::string config_error(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    core::Params p = core::parse_config(text, "bad.toml", run_schema(), sets);
    run_simulation(p, RunOutputs{});
  } catch (const core::ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a configuration error";
  return "";
}

TEST(RunTest, QuickstartRunsAndWritesEveryTable) {
  TempDir dir;
  const std::string db = dir.file("results.db");
  RunResult r = run_simulation(load_run_config(quickstart()), RunOutputs{db, ""});
  const auto& s = r.summary;
  EXPECT_EQ(s.requests_total, 2000u);
  EXPECT_EQ(s.requests_completed + s.requests_rejected, s.requests_total);
  EXPECT_GT(s.throughput_output_tok_s, 0);
  EXPECT_GT(s.ttft_ms.p99, s.ttft_ms.p50);
  EXPECT_GT(s.mbu_mean, 0.1);
  EXPECT_LE(s.mbu_mean, 1.0);
  EXPECT_LE(s.mfu_mean, 1.0);
  EXPECT_GT(s.kv_util_mean, 0);
  SQLite::Database d(db);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM runs").getInt64(), 1);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests").getInt64(), 2000);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(DISTINCT request_id) FROM requests").getInt64(), 2000);
  // One sample per second per replica over the run (2,000 requests at 30 req/s: about 70 s).
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM replica_timeseries").getInt64(),
            2 * (static_cast<int64_t>(std::floor(s.sim_seconds)) + 1));
  EXPECT_EQ(d.execAndGet("SELECT config_hash FROM runs").getString(), r.info.config_hash);
  // The stored config is the resolved one: it parses back to the same hash.
  const std::string stored = d.execAndGet("SELECT config FROM runs").getString();
  EXPECT_EQ(config_hash(core::parse_config(stored, "stored.toml", run_schema())), r.info.config_hash);
  // Per-request rows agree with the summary.
  EXPECT_NEAR(d.execAndGet("SELECT AVG(ttft_ms) FROM requests WHERE outcome = 'completed'").getDouble(),
              s.ttft_ms.mean, 1e-6);
  EXPECT_EQ(d.execAndGet("SELECT SUM(meets_slo) FROM requests").getInt64(),
            static_cast<int64_t>(s.requests_meeting_slo));
}

// Little's law (seed 002: "serve 100 requests per second, each takes 2 seconds: 200 requests in
// flight", L = lambda x W) through two independent paths: the time average of queued + running that the replicas
// report, and throughput x mean E2E from the requests' own timestamps. Over a run that starts and
// ends empty the two are equal exactly (up to rounding), at any load.
TEST(RunTest, LittlesLawHoldsBetweenReplicaStatesAndRequestLatencies) {
  for (const char* rate : {"10", "30", "60"}) {
    // No engine: the replicas' queues then hold a request for all of its E2E (no client path).
    RunResult r = run_simulation(load_run_config(quickstart(), {std::string("workload.rate=") + rate, "engine.kind=none"}),
                                 RunOutputs{});
    const auto& s = r.summary;
    ASSERT_EQ(s.requests_rejected, 0u);
    EXPECT_NEAR(s.mean_requests_in_system, s.throughput_req_s * s.e2e_ms.mean / 1000.0,
                1e-9 * s.mean_requests_in_system)
        << rate;
  }
}

TEST(RunTest, SameSeedSameBytesDifferentSeedDifferentResults) {
  TempDir dir;
  run_simulation(small(), RunOutputs{dir.file("a.db"), dir.file("csv-a")});
  run_simulation(small(), RunOutputs{dir.file("b.db"), dir.file("csv-b")});
  run_simulation(small({"seed=4"}), RunOutputs{dir.file("c.db"), ""});
  EXPECT_EQ(slurp(dir.file("a.db")), slurp(dir.file("b.db")));
  EXPECT_EQ(slurp(dir.file("csv-a/requests.csv")), slurp(dir.file("csv-b/requests.csv")));
  EXPECT_EQ(slurp(dir.file("csv-a/runs.csv")), slurp(dir.file("csv-b/runs.csv")));
  EXPECT_NE(slurp(dir.file("a.db")), slurp(dir.file("c.db")));
}

TEST(RunTest, OverridesUseTheSameValidation) {
  EXPECT_EQ(run_simulation(small({"workload.max_requests=40"}), RunOutputs{}).summary.requests_total, 40u);
  EXPECT_EQ(run_simulation(small({"router.kind=random"}), RunOutputs{}).router_kind, "random");
  const std::string m = config_error(kSmall, {"cluster.replicas=0"});
  EXPECT_NE(m.find("--set cluster.replicas=0"), std::string::npos) << m;
  EXPECT_NE(m.find("out of range"), std::string::npos) << m;
  const std::string k = config_error(kSmall, {"scheduler.max_num_seq=4"});
  EXPECT_NE(k.find("did you mean 'max_num_seqs'"), std::string::npos) << k;
}

TEST(RunTest, ConfigErrorsNameFileLineColumnKeyAndWhatIsValid) {
  struct Case {
    std::string text;
    std::vector<std::string> needles;
  };
  const std::string base = kSmall;
  const std::vector<Case> cases = {
      // unknown key
      {base + "[slo]\nttft = 5\n", {"bad.toml:24:1", "slo.ttft", "unknown key", "ttft_ms"}},
      // unknown kind
      {std::string(kSmall).replace(std::string(kSmall).find("least_outstanding"), 17, "fastest"),
       {"bad.toml:22:8", "router.kind", "unknown routers kind 'fastest'", "round_robin", "least_outstanding"}},
      // wrong type
      {base + "[slo]\nttft_ms = \"fast\"\n", {"bad.toml:24:11", "slo.ttft_ms", "expected a float", "got a string"}},
      // out of range
      {base + "[output]\nsample_interval_ms = -1\n", {"bad.toml:24:22", "output.sample_interval_ms", "out of range"}},
      // missing required section
      {"[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n", {"workload.kind", "missing section [workload]"}},
      // TOML syntax
      {"seed = \n", {"bad.toml:1:", "TOML syntax error"}},
      // a value of the wrong shape for a section
      {"workload = 3\n", {"bad.toml:1:12", "expected a table"}},
  };
  for (const auto& c : cases) {
    std::string m;
    try {
      core::parse_config(c.text, "bad.toml", run_schema());
    } catch (const core::ConfigError& e) {
      m = e.what();
    }
    for (const auto& needle : c.needles) EXPECT_NE(m.find(needle), std::string::npos) << "'" << needle << "' not in: " << m;
  }
}

TEST(RunTest, DeploymentErrorsAreConfigErrors) {
  // Llama-3-70B in fp16 (141 GB) does not fit one 80 GB H100.
  std::string m = config_error(kSmall, {"model.kind=llama-3-70b"});
  EXPECT_NE(m.find("cluster.tensor_parallel"), std::string::npos) << m;
  EXPECT_NE(m.find("does not fit"), std::string::npos) << m;
  // ... but does at TP 4.
  EXPECT_NO_THROW(run_simulation(small({"model.kind=llama-3-70b", "cluster.tensor_parallel=4",
                                        "workload.max_requests=20"}),
                                 RunOutputs{}));
  // TP must divide the heads.
  m = config_error(kSmall, {"cluster.tensor_parallel=3"});
  EXPECT_NE(m.find("cluster.tensor_parallel"), std::string::npos) << m;
  // Inconsistent scheduler budget (below the model context of 8192).
  m = config_error(kSmall, {"scheduler.max_num_batched_tokens=4096"});
  EXPECT_NE(m.find("max_context"), std::string::npos) << m;
}

TEST(RunTest, MalformedTraceFailsWithoutWritingARun) {
  TempDir dir;
  const std::string trace = dir.file("trace.csv");
  {
    std::ofstream out(trace);
    out << "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    for (int i = 0; i < 50; ++i) out << "2023-11-16 18:15:" << 10 + i / 10 << "." << i % 10 << "000000,100,20\n";
    out << "2023-11-16 18:16:00.0000000,abc,20\n";
  }
  const std::string db = dir.file("r.db");
  run_simulation(small(), RunOutputs{db, ""});  // an earlier, good run
  try {
    const std::string text = "[workload]\nkind = \"azure_csv\"\npath = \"" + trace +
                             "\"\n[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n";
    run_simulation(core::parse_config(text, "azure.toml", run_schema()), RunOutputs{db, ""});
    FAIL() << "expected an input error";
  } catch (const core::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("trace.csv:52"), std::string::npos) << m;
    EXPECT_NE(m.find("ContextTokens"), std::string::npos) << m;
  } catch (const core::ConfigError& e) {
    FAIL() << e.what();
  }
  SQLite::Database d(db);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM runs").getInt64(), 1);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests").getInt64(), 300);
  EXPECT_EQ(d.execAndGet("PRAGMA integrity_check").getString(), "ok");
}

TEST(RunTest, AzureConversationTraceEndToEnd) {
  const std::string trace = servesim::testing::shared_file("traces/azure-2023/AzureLLMInferenceTrace_conv.csv");
  ASSERT_TRUE(std::filesystem::exists(trace)) << "the Azure trace is expected at " << trace
                                              << " (../shared beside the checkout)";
  TempDir dir;
  RunResult r = run_simulation(load_run_config(azure_conv(), {"workload.path=" + trace}),
                               RunOutputs{dir.file("azure.db"), ""});
  const auto& s = r.summary;
  EXPECT_EQ(s.requests_total, 19366u);
  EXPECT_EQ(s.requests_completed + s.requests_rejected, 19366u);
  SQLite::Database d(dir.file("azure.db"));
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests").getInt64(), 19366);
  EXPECT_EQ(std::lround(d.execAndGet("SELECT AVG(prompt_tokens) FROM requests").getDouble()), 1155);
  EXPECT_EQ(std::lround(d.execAndGet("SELECT AVG(output_tokens) FROM requests").getDouble()), 211);
  // The one prompt of 14,050 tokens exceeds Llama-3-8B's 8,192-token context.
  EXPECT_EQ(s.rejected_context, static_cast<uint64_t>(
                                    d.execAndGet("SELECT COUNT(*) FROM requests WHERE prompt_tokens + output_tokens > 8192")
                                        .getInt64()));
  EXPECT_GT(s.rejected_context, 0u);
  EXPECT_NEAR(s.sim_seconds, 3600, 120);  // one hour of traffic
}

// ---- the command line ----------------------------------------------------------------------------

int cli(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr) {
  const servesim::testing::Cli r = servesim::testing::cli(std::move(args));
  if (out) *out = r.out;
  if (err) *err = r.err;
  return r.code;
}

TEST(CliTest, RunJsonHasEverySummaryKey) {
  TempDir dir;
  std::string out, err;
  ASSERT_EQ(cli({"run", quickstart(), "--json", "--db", dir.file("q.db"), "--set", "workload.max_requests=200"}, &out, &err),
            0)
      << err;
  const auto j = nlohmann::json::parse(out);
  for (const char* key : {"requests_total", "requests_completed", "requests_rejected", "sim_seconds", "wall_seconds",
                          "events", "throughput_req_s", "throughput_output_tok_s", "goodput_req_s", "slo_attainment",
                          "cost_usd_per_mtok_output", "mfu_mean", "mbu_mean", "kv_util_mean", "preemptions"})
    EXPECT_TRUE(j.contains(key)) << key;
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
    for (const char* stat : {"mean", "p50", "p90", "p99"}) EXPECT_TRUE(j[key].contains(stat)) << key << "." << stat;
  EXPECT_EQ(j["requests_total"], 200);
  EXPECT_EQ(j["run_id"], 1);
}

TEST(CliTest, TableCsvAndNoDb) {
  TempDir dir;
  std::string out, err;
  ASSERT_EQ(cli({"run", quickstart(), "--no-db", "--csv", dir.file("csv"), "--set", "workload.max_requests=100"}, &out,
                &err),
            0)
      << err;
  EXPECT_NE(out.find("TTFT"), std::string::npos);
  EXPECT_NE(out.find("goodput"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir.file("csv/requests.csv")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("csv/runs.csv")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("csv/replica_timeseries.csv")));
}

// Issue 12 end to end: the shared-prefix example in two small draining stages (constant arrivals:
// 20 requests at 4 req/s for 5 s, then 20 at 10 req/s for 2 s), from the command line into the
// database and CSV, with the stage and the timed-out outcome in every row.
TEST(CliTest, StagesAndClientTimeOutsEndToEnd) {
  const std::string config = servesim::testing::source_dir() + "/experiments/workloads/shared_prefix_stages.toml";
  const std::string stages =
      "workload.arrival.stages=[{rate = 4.0, duration_s = 5.0, type = \"constant\"}, "
      "{rate = 10.0, duration_s = 2.0, type = \"constant\"}]";
  TempDir dir;
  std::string out, err;
  // A 1 ms time-out: every client gives up before its first token, so stage 0's clients are all
  // done at 4.751 s and stage 1 starts when its duration is over plus the 1 s interval: at 6 s.
  ASSERT_EQ(cli({"run", config, "--json", "--check", "--db", dir.file("a.db"), "--csv", dir.file("csv"), "--set", stages,
                 "--set", "workload.client_timeout_s=0.001"},
                &out, &err),
            0)
      << err;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["requests_total"], 40);
  EXPECT_EQ(j["requests_timed_out"], 40);
  EXPECT_EQ(j["requests_completed"], 0);
  {
    SQLite::Database db(dir.file("a.db"));
    SQLite::Statement st(db, "SELECT stage, COUNT(*), MIN(arrival_ns), SUM(outcome = 'timed_out'), "
                             "SUM(finish_ns - arrival_ns = 1000000) FROM requests GROUP BY stage ORDER BY stage");
    ASSERT_TRUE(st.executeStep());
    EXPECT_EQ(st.getColumn(0).getInt(), 0);
    EXPECT_EQ(st.getColumn(1).getInt(), 20);
    EXPECT_EQ(st.getColumn(2).getInt64(), 0);
    EXPECT_EQ(st.getColumn(3).getInt(), 20);
    EXPECT_EQ(st.getColumn(4).getInt(), 20);  // finish_ns: when the client gave up
    ASSERT_TRUE(st.executeStep());
    EXPECT_EQ(st.getColumn(0).getInt(), 1);
    EXPECT_EQ(st.getColumn(1).getInt(), 20);
    EXPECT_EQ(st.getColumn(2).getInt64(), 6'000'000'000);
    EXPECT_FALSE(st.executeStep());
  }
  const std::string csv = slurp(dir.file("csv/requests.csv"));
  EXPECT_NE(csv.find(",engine_finish_ns,stage\n"), std::string::npos) << csv.substr(0, 300);
  EXPECT_NE(csv.find(",timed_out,"), std::string::npos);
  // Without a time-out every request completes, and stage 1 starts 1 s after the later of its
  // predecessor's end and the last response of stage 0 to reach its client.
  ASSERT_EQ(cli({"run", config, "--json", "--check", "--db", dir.file("b.db"), "--set", stages}, &out, &err), 0) << err;
  j = nlohmann::json::parse(out);
  EXPECT_EQ(j["requests_completed"], 40);
  EXPECT_EQ(j["requests_timed_out"], 0);
  SQLite::Database db(dir.file("b.db"));
  const int64_t last_response = db.execAndGet("SELECT MAX(finish_ns) FROM requests WHERE stage = 0").getInt64();
  EXPECT_GT(last_response, 4'750'000'000);
  EXPECT_EQ(db.execAndGet("SELECT MIN(arrival_ns) FROM requests WHERE stage = 1").getInt64(),
            std::max<int64_t>(5'000'000'000, last_response) + 1'000'000'000);
}

TEST(CliTest, ErrorsExitNonZeroWithOneParagraph) {
  std::string out, err;
  EXPECT_EQ(cli({"run", "/nonexistent/config.toml"}, &out, &err), 1);
  EXPECT_NE(err.find("/nonexistent/config.toml"), std::string::npos) << err;
  EXPECT_EQ(cli({"run", quickstart(), "--set", "cluster.replicas=-1", "--no-db"}, &out, &err), 2);
  EXPECT_NE(err.find("cluster.replicas"), std::string::npos) << err;
  EXPECT_EQ(cli({"frobnicate"}, &out, &err), 2);
  EXPECT_EQ(cli({"run"}, &out, &err), 2);
  EXPECT_EQ(cli({"run", quickstart(), "--bogus"}, &out, &err), 2);
  EXPECT_EQ(cli({"list", "nonsense"}, &out, &err), 2);
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;  // one paragraph
}

TEST(CliTest, ListShowsParametersWithTypeDefaultUnitDescription) {
  std::string out;
  ASSERT_EQ(cli({"list", "schedulers"}, &out), 0);
  EXPECT_NE(out.find("max_num_seqs"), std::string::npos);
  EXPECT_NE(out.find("integer"), std::string::npos);
  EXPECT_NE(out.find("256"), std::string::npos);
  EXPECT_NE(out.find("sequences"), std::string::npos);
  for (const char* family : {"routers", "schedulers", "workloads", "models", "gpus"}) {
    ASSERT_EQ(cli({"list", family}, &out), 0) << family;
    EXPECT_GT(out.size(), 100u) << family;
  }
  ASSERT_EQ(cli({"list", "models"}, &out), 0);
  EXPECT_NE(out.find("llama-3-70b"), std::string::npos);
  ASSERT_EQ(cli({"--version"}, &out), 0);
  EXPECT_NE(out.find("servesim "), std::string::npos);
}

TEST(CliTest, TheBinaryRunsTheQuickstart) {
  const std::string bin = servesim::testing::servesim_bin();
  ASSERT_FALSE(bin.empty()) << "SERVESIM_BIN is set by tests/meson.build";
  TempDir dir;
  const std::string cmd = bin + " run " + quickstart() + " --json --db " + dir.file("bin.db") +
                          " --set workload.max_requests=50 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["requests_completed"], 50);
}

// ---- hybrid and sparse attention from real config.json files ----------------------------------

std::string hf(const std::string& name) {
  return servesim::testing::source_dir() + "/tests/hwmodels/testdata/hf/" + name + "/config.json";
}

TEST(RunTest, HybridAndSparseConfigsRunEndToEnd) {
  struct Case {
    std::string config;
    int64_t tp;
    double full_bytes_per_token_per_gpu;  // by hand from config.json
  };
  // gpt-oss-120b: 18 full + 18 window layers of 8 KV heads x 64 x 2 x 2 bytes: a block is 16 tokens
  // of all 36. Qwen3-Next at TP 2: 12 full layers of one KV head x 256 x 2 x 2 bytes on each GPU.
  // DeepSeek-V3.2 at TP 8: 61 x (576 x 2 + 132) bytes on every GPU.
  for (const Case& c : {Case{hf("gpt-oss-120b"), 1, 36.0 * 2048}, Case{hf("Qwen3-Next-80B-A3B-Instruct"), 2, 12.0 * 1024},
                        Case{hf("DeepSeek-V3.2-Exp"), 8, 61.0 * 1284}}) {
    core::Params p = small({"model.kind=\"hf_config\"", "model.path=\"" + c.config + "\"", "gpu.kind=\"h200\"",
                            "cluster.replicas=1", "cluster.tensor_parallel=" + std::to_string(c.tp),
                            "scheduler.kind=\"chunked\"", "workload.max_requests=120"});
    RunOutputs out;
    out.check = true;
    const RunResult r = run_simulation(p, out);
    EXPECT_EQ(r.summary.requests_completed, 120u) << c.config;
    EXPECT_GT(r.summary.throughput_output_tok_s, 0) << c.config;
    EXPECT_GT(r.summary.kv_util_mean, 0) << c.config;
    // The KV budget counted in blocks of 16 tokens of the per-token layers.
    const double budget = 141.0 * (1 << 30) * 0.9 - 2.0 * (1 << 30) -
                          hwmodels::weight_bytes_per_gpu(*hwmodels::model_registry().make(p.section("model")), c.tp);
    EXPECT_EQ(r.kv_blocks_per_replica, static_cast<int64_t>(std::floor(budget / (16 * c.full_bytes_per_token_per_gpu))))
        << c.config;
  }
}

TEST(RunTest, SlidingWindowLayersLeaveRoomForMoreSequences) {
  // gpt-oss-120b on one H200 with long prompts and a KV budget squeezed to a few GiB: with its
  // window layers keeping 128 tokens, fewer requests are preempted and the same work takes less
  // time than with every layer full (attention_pattern = "F" makes them full).
  const std::vector<std::string> base = {"model.kind=\"gpt-oss-120b\"", "gpu.kind=\"h200\"", "cluster.replicas=1",
                                         "cluster.activation_reserve_gib=52", "scheduler.kind=\"chunked\"",
                                         "workload.max_requests=150", "workload.rate=50", "workload.prompt.min=6000",
                                         "workload.prompt.max=8000"};
  std::vector<std::string> full = base;
  full.push_back("model.attention_pattern=\"F\"");
  RunOutputs out;
  out.check = true;
  const RunResult hybrid = run_simulation(small(base), out);
  const RunResult dense = run_simulation(small(full), out);
  EXPECT_EQ(hybrid.kv_blocks_per_replica, dense.kv_blocks_per_replica);  // same bytes per block
  EXPECT_EQ(hybrid.summary.requests_completed, 150u);
  EXPECT_EQ(dense.summary.requests_completed, 150u);
  EXPECT_LT(hybrid.summary.preemptions, dense.summary.preemptions);
  EXPECT_LT(hybrid.summary.e2e_ms.mean, dense.summary.e2e_ms.mean);
}

}  // namespace
}  // namespace servesim::experiments
