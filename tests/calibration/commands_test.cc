// The calibration commands end to end, in process: estimate, validate-ops, fit (all three
// sources) and calibrate (which must fail clearly without a GPU or a microbenchmark binary).
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiments/cli/cli.h"
#include "hwmodels/calibration_profile.h"
#include "tests/calibration/synthetic.h"
#include "tests/cli_driver.h"
#include "tests/test_paths.h"

namespace servesim::calibration {
namespace {

using servesim::testing::Cli;
using servesim::testing::cli;

std::string source(const std::string& rel) { return servesim::testing::source_dir() + "/" + rel; }
std::string reference(const std::string& rel) {
  return servesim::testing::shared_file("reference-data/operator-profiles/" + rel);
}
bool have_reference() {
  std::error_code ec;
  return !servesim::testing::shared_dir().empty() && std::filesystem::is_directory(reference(""), ec);
}

TEST(CommandsTest, EstimatePlacesTheSeedsPointOnTheRoofline) {
  // The seeds' table: a 70B GQA model at B = 32 and L = 512 has decode intensity 30.8 FLOP/byte.
  const Cli r = cli({"estimate", "--model", "llama-2-70b", "--gpu", "h100-sxm", "--batch", "32", "--prompt", "512", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // (30.9: Llama-2-70B's embedding rows are gathered, not read; the table's 70B reads 2P bytes.)
  EXPECT_NEAR(j["decode"]["notes_intensity"].get<double>(), 30.8, 0.2);
  EXPECT_NEAR(j["decode"]["matmul_flops"].get<double>() / j["decode"]["weight_kv_bytes"].get<double>(),
              j["decode"]["notes_intensity"].get<double>(), 1e-12);
  EXPECT_EQ(j["decode"]["bound"], "memory");
  EXPECT_EQ(j["prefill"]["bound"], "compute");
  for (const char* key : {"flops", "bytes", "intensity", "notes_intensity", "mfu", "mbu", "ms", "ridge_point",
                          "peak_flops_per_s", "attainable_flops_per_s", "achieved_flops_per_s", "operators"}) {
    EXPECT_TRUE(j["prefill"].contains(key)) << key;
    EXPECT_TRUE(j["decode"].contains(key)) << key;
  }
  EXPECT_GT(j["prefill_ms"].get<double>(), j["decode_step_ms"].get<double>());
  EXPECT_DOUBLE_EQ(j["decode_step_ms"].get<double>(), j["decode"]["ms"].get<double>());
  EXPECT_NEAR(j["ridge_point"].get<double>(), 295.2, 0.1);
  // The same at L = 2048 is the table's 27.7.
  const auto j2 = nlohmann::json::parse(
      cli({"estimate", "--model", "llama-2-70b", "--gpu", "h100-sxm", "--batch", "32", "--prompt", "2048", "--json"}).out);
  EXPECT_NEAR(j2["decode"]["notes_intensity"].get<double>(), 27.7, 0.2);
}

// Issue 11: estimate's ridge point, attainable bound and achieved FLOP/s use one FLOP definition
// (the cost model's, at the precisions the FLOPs ran at), so nothing achieves more than the bound
// says; DeepSeek-V3 decode (fp8 experts, MLA attention) printed achieved > attainable before.
TEST(CommandsTest, EstimateNeverAchievesMoreThanTheRooflineAllows) {
  for (const char* model : {"deepseek-v3", "llama-3-70b", "mixtral-8x7b"}) {
    for (const char* batch : {"1", "16", "256"}) {
      SCOPED_TRACE(std::string(model) + " batch " + batch);
      const Cli r = cli({"estimate", "--model", model, "--gpu", "h200", "--tp", "8", "--batch", batch, "--prompt", "2048",
                         "--json"});
      ASSERT_EQ(r.code, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      for (const char* phase : {"prefill", "decode"}) {
        const auto& p = j[phase];
        EXPECT_LE(p["achieved_flops_per_s"].get<double>(), p["attainable_flops_per_s"].get<double>() * (1 + 1e-12)) << phase;
        EXPECT_LE(p["mfu"].get<double>(), 1.0) << phase;
        EXPECT_EQ(p["bound"] == "compute", p["intensity"].get<double>() >= p["ridge_point"].get<double>()) << phase;
      }
    }
  }
  // An fp8 model's ridge point is the fp8 peak's: about twice the 16-bit one on an H200.
  const auto fp8 = nlohmann::json::parse(
      cli({"estimate", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--prompt", "4096", "--json"}).out);
  EXPECT_GT(fp8["prefill"]["ridge_point"].get<double>(), 1.5 * fp8["ridge_point"].get<double>());
}

// Issue 15: --draft-tokens times the same decodes verifying K drafts each, the target's share of a
// speculative step: a step of B (1 + K) rows on the same weights.
TEST(CommandsTest, EstimateVerificationStep) {
  const auto j = nlohmann::json::parse(cli({"estimate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--batch", "4",
                                            "--prompt", "1000", "--draft-tokens", "3", "--json"})
                                           .out);
  ASSERT_TRUE(j.contains("verify"));
  EXPECT_EQ(j["verify"]["draft_tokens"], 3);
  // Memory-bound at 16 rows: a few percent more time for 4x the FLOPs.
  EXPECT_NEAR(j["verify"]["flops"].get<double>() / j["decode"]["flops"].get<double>(), 4.0, 0.05);
  EXPECT_GT(j["verify"]["vs_decode"].get<double>(), 1.0);
  EXPECT_LT(j["verify"]["vs_decode"].get<double>(), 1.1);
  EXPECT_DOUBLE_EQ(j["verify"]["vs_decode"].get<double>(),
                   j["verify"]["ms"].get<double>() / j["decode"]["ms"].get<double>());
  const Cli text = cli({"estimate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--batch", "4", "--prompt", "1000",
                        "--draft-tokens", "3"});
  EXPECT_NE(text.out.find("verify: 4 sequences at context 1000, each verifying 3 draft tokens"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("it pays only if a verify step yields more than"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(cli({"estimate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--prompt", "10",
                                          "--json"})
                                         .out)
                   .contains("verify"));
  EXPECT_EQ(cli({"estimate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--prompt", "10", "--draft-tokens", "65"}).code,
            2);
}

TEST(CommandsTest, EstimateTableAndInputs) {
  const Cli text = cli({"estimate", "--model", source("tests/hwmodels/testdata/hf/Mixtral-8x7B/config.json"), "--gpu",
                        "h100-sxm", "--tp", "2", "--batch", "16", "--prompt", "1000", "--context", "3000",
                        "--calibration", source("calibration/profiles/h100-sxm.toml")});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("ridge point 295.2"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("decode: 16 sequences at context 3000"), std::string::npos);
  EXPECT_NE(text.out.find("memory-bound"), std::string::npos);
  const Cli graphs = cli({"estimate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--prompt", "100", "--cuda-graphs", "--json"});
  ASSERT_EQ(graphs.code, 0);
  bool launch = false;
  const auto gj = nlohmann::json::parse(graphs.out);
  for (const auto& op : gj["decode"]["operators"]) launch = launch || op["name"] == "cuda_graph_launch";
  EXPECT_TRUE(launch);

  const Cli unknown = cli({"estimate", "--model", "gpt-9", "--gpu", "h100-sxm", "--prompt", "10"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("unknown model 'gpt-9'"), std::string::npos) << unknown.err;
  EXPECT_EQ(cli({"estimate", "--model", "llama-3-8b", "--gpu", "tpu", "--prompt", "10"}).code, 2);
  EXPECT_EQ(cli({"estimate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--prompt", "10", "--tp", "3"}).code, 2);
  EXPECT_EQ(cli({"estimate", "--model", "llama-3-8b", "--gpu", "h100-sxm"}).code, 2);
  const Cli wrong_gpu = cli({"estimate", "--model", "llama-3-8b", "--gpu", "h200", "--prompt", "10", "--calibration",
                             source("calibration/profiles/h100-sxm.toml")});
  EXPECT_EQ(wrong_gpu.code, 2);
  EXPECT_EQ(cli({"estimate", "--model", "/no/such/config.json", "--gpu", "h100-sxm", "--prompt", "10"}).code, 1);
}

TEST(CommandsTest, FitFromOperatorTablesThenValidate) {
  ASSERT_TRUE(have_reference()) << "reference data missing: " << reference("");
  servesim::testing::TempDir dir;
  const std::string profile = dir.file("no7b.toml");
  const Cli fit = cli({"fit", "--from-operator-csv", reference(""), "--gpu", "h100-sxm", "--exclude-model", "Llama-2-7b-hf",
                       "--out", profile});
  ASSERT_EQ(fit.code, 0) << fit.err;
  EXPECT_NE(fit.out.find("1 models"), std::string::npos) << fit.out;
  const Cli v = cli({"validate-ops", "--profile", reference("compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv"), "--gpu",
                     "h100-sxm", "--calibration", profile, "--min-tokens", "16", "--json"});
  ASSERT_EQ(v.code, 0) << v.err;
  const auto j = nlohmann::json::parse(v.out);
  EXPECT_LT(j["mape_overall"].get<double>(), 12.0);  // percent
  EXPECT_EQ(j["mape_by_op"].size(), 10u);
  EXPECT_EQ(j["rows"].size(), 10u * 1028);
  EXPECT_EQ(j["rows"][0]["op"].is_string(), true);
  EXPECT_GT(j["rows"][0]["measured_ms"].get<double>(), 0);
  const Cli table = cli({"validate-ops", "--profile", reference("compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv"), "--gpu",
                         "h100-sxm"});
  ASSERT_EQ(table.code, 0);
  EXPECT_NE(table.out.find("overall"), std::string::npos);
  EXPECT_EQ(cli({"validate-ops", "--profile", "/no/mlp.csv", "--gpu", "h100-sxm"}).code, 1);
  EXPECT_EQ(cli({"validate-ops", "--gpu", "h100-sxm"}).code, 2);
  EXPECT_EQ(cli({"fit", "--from-operator-csv", reference(""), "--gpu", "l40s", "--out", profile}).code, 1);
}

TEST(CommandsTest, FitFromMicrobenchKeepsRawSamplesInSqlite) {
  servesim::testing::TempDir dir;
  std::filesystem::create_directory(dir.file("raw"));
  synthetic::write_microbench_dir(dir.file("raw"));
  const Cli r = cli({"fit", "--from-microbench", dir.file("raw"), "--db", dir.file("cal.db"), "--out", dir.file("p.toml")});
  ASSERT_EQ(r.code, 0) << r.err;
  const hwmodels::CalibrationProfile p = hwmodels::read_calibration_profile(dir.file("p.toml"));
  EXPECT_EQ(p.gpu, "h100-sxm");  // told from the device name
  EXPECT_EQ(p.attention_decode_layouts.size(), 2u);
  EXPECT_NE(r.out.find("attention_decode by head layout: [8 heads / 1 KV heads x 128, pages of 16] [32 heads / 8 KV "
                       "heads x 128, pages of 16]"),
            std::string::npos)
      << r.out;
  SQLite::Database db(dir.file("cal.db"));
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM calibration_runs").getInt(), 1);
  EXPECT_GT(db.execAndGet("SELECT COUNT(*) FROM calibration_samples WHERE file = 'gemm.csv'").getInt(), 50);
  EXPECT_EQ(db.execAndGet("SELECT gpu FROM calibration_runs").getString(), "h100-sxm");
  // A second fit appends.
  ASSERT_EQ(cli({"fit", "--from-microbench", dir.file("raw"), "--gpu", "h100-sxm", "--db", dir.file("cal.db"), "--out",
                 dir.file("q.toml")})
                .code,
            0);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM calibration_runs").getInt(), 2);
  EXPECT_EQ(cli({"fit", "--from-microbench", dir.file("nothing"), "--out", dir.file("x.toml")}).code, 1);
  EXPECT_EQ(cli({"fit", "--out", dir.file("x.toml")}).code, 2);
}

TEST(CommandsTest, FitFromStepLatenciesAddsOverheads) {
  servesim::testing::TempDir dir;
  {
    std::ofstream(dir.file("steps.csv")) << "model,gpu,tp,batch,prompt,prefill_ms,decode_step_ms\n"
                                            "llama-3-8b,h100-sxm,1,1,512,20,7.5\n"
                                            "llama-3-8b,h100-sxm,1,8,1024,150,8.5\n"
                                            "llama-3-8b,h100-sxm,1,64,512,,11\n"
                                            "Meta-Llama-3-8B/config.json,h100-sxm,2,16,2048,300,6.5\n";
    std::filesystem::create_directory(dir.file("Meta-Llama-3-8B"));
    std::filesystem::copy_file(source("tests/hwmodels/testdata/hf/Meta-Llama-3-8B/config.json"),
                               dir.file("Meta-Llama-3-8B/config.json"));
  }
  const Cli r = cli({"fit", "--from-step-latencies", dir.file("steps.csv"), "--base",
                     source("calibration/profiles/h100-sxm.toml"), "--out", dir.file("engine.toml")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("predicting each row from a fit on the others"), std::string::npos) << r.out;
  const hwmodels::CalibrationProfile p = hwmodels::read_calibration_profile(dir.file("engine.toml"));
  ASSERT_TRUE(p.iteration_overhead_ms.has_value());
  ASSERT_TRUE(p.decode_iteration_overhead_ms.has_value());
  EXPECT_GT(*p.decode_iteration_overhead_ms, 0.0);
  EXPECT_FALSE(p.gemm.empty());  // the base's tables are kept
  const Cli none = cli({"fit", "--from-step-latencies", dir.file("steps.csv"), "--base", "none", "--out", dir.file("e2.toml")});
  EXPECT_EQ(none.code, 0) << none.err;
  {
    std::ofstream(dir.file("bad.csv")) << "model,gpu,tp,batch,prompt,prefill_ms,decode_step_ms\nllama-3-8b,h100-sxm,1,1,512,x,7\n";
  }
  const Cli bad = cli({"fit", "--from-step-latencies", dir.file("bad.csv"), "--base", "none", "--out", dir.file("e3.toml")});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("bad.csv:2"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("prefill_ms"), std::string::npos) << bad.err;
}

// A stand-in for servesim-microbench: a script with the binary's interface and exit codes.
std::string fake_microbench(const servesim::testing::TempDir& dir, const std::string& body) {
  const std::string path = dir.file("fake-microbench");
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(CommandsTest, CalibrateFailsClearlyWithoutGpuOrBinary) {
  servesim::testing::TempDir dir;
  const Cli no_gpu = cli({"calibrate", "--out", dir.file("p.toml"), "--microbench",
                          fake_microbench(dir, "echo 'no CUDA device is visible' >&2; exit 3")});
  EXPECT_EQ(no_gpu.code, 1);
  EXPECT_NE(no_gpu.err.find("no CUDA GPU is visible on this machine"), std::string::npos) << no_gpu.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("p.toml")));
  const Cli missing = cli({"calibrate", "--out", dir.file("p.toml"), "--microbench", dir.file("nope")});
  EXPECT_EQ(missing.code, 2);
  // Without --microbench it looks beside the binary; a build without nvcc has none there.
  setenv("SERVESIM_MICROBENCH", dir.file("also-missing").c_str(), 1);
  const Cli beside = cli({"calibrate", "--out", dir.file("p.toml")});
  unsetenv("SERVESIM_MICROBENCH");
  if (beside.code != 0) {
    EXPECT_TRUE(beside.err.find("not built beside") != std::string::npos ||
                beside.err.find("no CUDA GPU") != std::string::npos)
        << beside.err;
  }
}

TEST(CommandsTest, CalibrateRunsTheBenchmarksAndFits) {
  servesim::testing::TempDir dir;
  std::filesystem::create_directory(dir.file("canned"));
  synthetic::write_microbench_dir(dir.file("canned"));
  // Copies canned samples to --out DIR (argument 2), as the real binary writes its own.
  const std::string bench = fake_microbench(dir, "mkdir -p \"$2\" && cp " + dir.file("canned") + "/*.csv \"$2\"/");
  const Cli r = cli({"calibrate", "--out", dir.file("p.toml"), "--microbench", bench, "--db", dir.file("s.db")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("p.toml.raw/gemm.csv")));
  const hwmodels::CalibrationProfile p = hwmodels::read_calibration_profile(dir.file("p.toml"));
  EXPECT_EQ(p.gpu, "h100-sxm");
  EXPECT_NE(p.source.find("servesim calibrate"), std::string::npos);
}

}  // namespace
}  // namespace servesim::calibration
