// servesim validate-serving (experiments/validate_serving.h): a small hand-written results file of each
// supported format becomes the simulation of the same load, checked against what the file says
// (request counts, stages back to back, per-request lengths) and against hand computations that do
// not depend on the step costs (the engine's client-path terms shift every TTFT and E2E by their sum
// when nothing queues).
#include "experiments/validate_serving.h"
#include "experiments/serving_fit.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "experiments/cli/cli.h"
#include "sim/core/error.h"
#include "tests/cli_driver.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

// One client at a time (rate inf, max_concurrency 1): no request ever waits for another.
const char* kBench = R"({"backend": "vllm", "model_id": "meta-llama/Llama-2-7b-hf",
 "num_prompts": 3, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 1, "duration": 2.0,
 "completed": 3, "request_throughput": 1.5,
 "mean_ttft_ms": 20.0, "median_ttft_ms": 20.0, "p99_ttft_ms": 22.0,
 "mean_tpot_ms": 8.0, "median_tpot_ms": 8.0, "p99_tpot_ms": 9.0,
 "mean_itl_ms": 8.0, "median_itl_ms": 8.0, "p99_itl_ms": 9.0,
 "mean_e2el_ms": 200.0, "median_e2el_ms": 150.0, "p99_e2el_ms": 350.0,
 "input_lens": [100, 100, 100], "output_lens": [5, 10, 40]})";

ValidateOptions options(std::vector<std::string> sets) {
  ValidateOptions o;
  o.gpu = "h100-sxm";
  o.sets = std::move(sets);
  return o;
}

TEST(ValidateServingTest, ClientPathTermsShiftEveryLatencyByTheirSum) {
  const MeasuredStage m = parse_vllm_bench_json(kBench, "bench.json");
  const SimulatedStage bare = simulate_stage(
      m, options({"engine.api_server_ms=0", "engine.stream_ms=0", "engine.first_token_ms=0"}));
  const SimulatedStage with = simulate_stage(
      m, options({"engine.api_server_ms=5", "engine.stream_ms=2", "engine.first_token_ms=3"}));
  ASSERT_EQ(bare.completed, 3);
  ASSERT_EQ(with.completed, 3);
  // TTFT from the send: ingress 5 + egress 2 + the first token's extra 3 ms; E2E: 5 + 2 ms.
  EXPECT_NEAR(*with.ttft.mean - *bare.ttft.mean, 0.010, 1e-8);
  EXPECT_NEAR(*with.ttft.p99 - *bare.ttft.p99, 0.010, 1e-8);
  EXPECT_NEAR(*with.e2e.mean - *bare.e2e.mean, 0.007, 1e-8);
  EXPECT_NEAR(*with.e2e.p50 - *bare.e2e.p50, 0.007, 1e-8);
  // The per-request lengths are replayed in order: 4, 9 and 39 decode steps after the first token,
  // so the longest request takes far longer than the shortest (a mean length would make them equal).
  ASSERT_TRUE(with.e2e.p99 && with.e2e.p50);
  const double spread = *bare.e2e.p99 - *bare.ttft.p99;  // ~39 steps
  EXPECT_GT(spread, 0);
  EXPECT_GT(*bare.tpot.mean, 0);
  EXPECT_NEAR(spread / *bare.tpot.mean, 39.0, 39.0 * 0.2);
  // No per-request lengths: every request the mean (15 output tokens): p50 and p99 coincide.
  MeasuredStage mean_only = m;
  mean_only.workload.input_lens.clear();
  mean_only.workload.output_lens.clear();
  const SimulatedStage mean = simulate_stage(mean_only, options({}));
  EXPECT_NEAR(*mean.e2e.p99, *mean.e2e.p50, 1e-3);
  EXPECT_NE(stage_config(m, options({}), "lengths.jsonl").find("kind = \"empirical\""), std::string::npos);
}

TEST(ValidateServingTest, ComparisonErrorsAndSaturation) {
  const MeasuredStage m = parse_vllm_bench_json(kBench, "bench.json");
  SimulatedStage s;
  s.ttft.mean = 0.025;  // measured 20 ms: +25%
  s.e2e.p99 = 0.280;    // measured 350 ms: -20%
  s.ttft.p90 = 0.5;
  s.throughput_req_s = 1.2;
  s.failed = 0;
  MeasuredStage failing = m;
  failing.failed = 1;  // one request timed out at the client: the server did not keep up
  const StageComparison c = compare(failing, s);
  EXPECT_NEAR(*c.figure_error("ttft", "mean"), 0.25, 1e-12);
  EXPECT_NEAR(*c.figure_error("e2e", "p99"), -0.20, 1e-12);
  EXPECT_NEAR(*c.figure_error("throughput", "req/s"), -0.20, 1e-12);
  EXPECT_FALSE(c.figure_error("ttft", "p90"));  // the file has no p90
  // The measurement had a failure: overloaded; the simulation none.
  EXPECT_TRUE(failing.overloaded());
  EXPECT_TRUE(c.saturation_mismatch);
  EXPECT_NEAR(*c.figure_error("failed", "requests"), -1.0, 1e-12);
  // A server that kept up (measured TTFT p90 50 ms) against a simulation whose TTFT p90 is 2 s:
  // the simulation queued where the server did not.
  MeasuredStage kept = m;
  kept.failed = 0;
  kept.ttft.p90 = 0.050;
  s.ttft.p90 = 2.0;
  EXPECT_TRUE(compare(kept, s).saturation_mismatch);
  s.ttft.p90 = 0.4;  // slower, but not queueing (under a second)
  EXPECT_FALSE(compare(kept, s).saturation_mismatch);
}

// inference-perf stage files: the stages run back to back on one server, and each is measured alone.
std::string inference_perf_stage(double rate, double duration) {
  std::ostringstream t;
  t << R"({"load_summary": {"count": )" << static_cast<int>(rate * duration) << R"(, "requested_rate": )" << rate
    << R"(, "achieved_rate": )" << rate << R"(, "send_duration": )" << duration << R"(},
 "successes": {"count": )" << static_cast<int>(rate * duration) << R"(, "latency": {
   "request_latency": {"mean": 1.0, "min": 0.5, "p10": 0.6, "median": 0.9, "p90": 1.2, "p99": 1.5, "max": 1.6},
   "time_to_first_token": {"mean": 0.03, "min": 0.02, "p10": 0.02, "median": 0.03, "p90": 0.04, "p99": 0.05, "max": 0.06},
   "time_per_output_token": {"mean": 0.0036, "min": 0.003, "p10": 0.003, "median": 0.0036, "p90": 0.004, "p99": 0.005, "max": 0.006},
   "inter_token_latency": {"mean": 0.0036, "min": 1e-05, "p10": 1e-05, "median": 9.7e-05, "p90": 0.008, "p99": 0.011, "max": 0.02}},
  "throughput": {"requests_per_sec": )" << rate << R"(, "output_tokens_per_sec": 100.0},
  "prompt_len": {"mean": 200.0, "min": 190.0, "max": 210.0},
  "output_len": {"mean": 64.0, "min": 64.0, "max": 64.0}},
 "failures": {"count": 0, "request_latency": null}})";
  return t.str();
}

TEST(ValidateServingTest, InferencePerfStagesRunBackToBackAndEachIsMeasuredAlone) {
  TempDir dir;
  std::ofstream(dir.file("stage_0_lifecycle_metrics.json")) << inference_perf_stage(2.0, 10.0);
  std::ofstream(dir.file("stage_1_lifecycle_metrics.json")) << inference_perf_stage(3.0, 10.0);
  const std::vector<MeasuredStage> stages = read_serving_results(dir.path());
  ASSERT_EQ(stages.size(), 2u);
  ValidateOptions o = options({});
  o.model = "llama-2-7b";  // the files do not name the model
  const std::vector<StageComparison> c = validate_stages(stages, o, 1);
  // Poisson with a fixed count: exactly rate x duration requests per stage, the second stage's
  // requests alone counted in its comparison.
  EXPECT_EQ(c[0].simulated.completed + c[0].simulated.failed, 20);
  EXPECT_EQ(c[1].simulated.completed + c[1].simulated.failed, 30);
  const std::string config = stage_config(stages[1], o);
  size_t n = 0;
  for (size_t at = config.find("[[workload.arrival.stages]]"); at != std::string::npos;
       at = config.find("[[workload.arrival.stages]]", at + 1))
    ++n;
  EXPECT_EQ(n, 2u);
  // Throughput is requests answered over the span from the first send to the last answer.
  EXPECT_GT(c[1].simulated.throughput_req_s, 30.0 / 12.0);
  EXPECT_LT(c[1].simulated.throughput_req_s, 30.0 / 9.0);
}

// The serving-runs table: two stages of one experiment, the second run after the first on the same
// server; the inference-perf client's halved per-token times corrected before the comparison.
TEST(ValidateServingTest, ServingRunsTableStagesRunBackToBack) {
  const std::string header =
      "experiment\thf_model\ttp\tgpu\tmax_model_len\tmax_num_batched_tokens\tmax_num_seqs\tworkload\t"
      "system_prompt_len\tquestion_len\tmax_tokens\tstage\trate\tduration_s\tsent\tsucceeded\tfailed\t"
      "prompt_len_mean\tprompt_len_min\tprompt_len_max\tttft_s_mean\tttft_s_median\tttft_s_p90\tttft_s_p99\t"
      "e2e_s_mean\te2e_s_median\te2e_s_p90\te2e_s_p99\ttpot_reported_s_mean\ttpot_reported_s_median\t"
      "tpot_reported_s_p90\ttpot_reported_s_p99\titl_reported_s_mean\titl_reported_s_median\titl_reported_s_p90\t"
      "itl_reported_s_p99\tthroughput_req_s\tthroughput_output_tok_s\n";
  const std::string row = "\tmeta-llama/Llama-2-7b-hf\t1\th100-sxm\t4096\t2048\t128\tgeneral\t100\t447\t64\t";
  const std::string table =
      header + "exp-a" + row + "0\t2\t10\t20\t20\t0\t575\t559\t592\t0.03\t0.03\t0.035\t0.04\t0.6\t0.6\t0.65\t0.7\t"
      "0.004\t0.004\t0.0045\t0.005\t0.004\t3e-05\t0.008\t0.009\t1.9\t120\n" +
      "exp-a" + row + "1\t3\t10\t30\t30\t0\t575\t559\t592\t0.03\t0.03\t0.035\t0.04\t0.6\t0.6\t0.65\t0.7\t"
      "0.004\t0.004\t0.0045\t0.005\t0.004\t3e-05\t0.008\t0.009\t2.9\t180\n";
  const std::vector<MeasuredStage> stages = parse_serving_runs_table(table, "runs.tsv");
  ASSERT_EQ(stages.size(), 2u);
  // n = 64 output tokens: the engine's time per token is 4 ms x 129 / 63.
  EXPECT_NEAR(*stages[1].tpot.mean, 0.004 * 129 / 63, 1e-12);
  const std::vector<StageComparison> c = validate_stages(stages, ValidateOptions{}, 1);
  EXPECT_EQ(c[0].simulated.completed, 20);
  EXPECT_EQ(c[1].simulated.completed, 30);  // the second stage's requests alone
  EXPECT_NEAR(*c[1].figure_error("tpot", "mean"),
              (*c[1].simulated.tpot.mean - 0.004 * 129 / 63) / (0.004 * 129 / 63), 1e-12);
  // The second stage's simulation replays the first before it, and the pool's template tokens
  // (559-592 measured against 100 + 447) as the extra tokens.
  const std::string config = stage_config(stages[1], ValidateOptions{});
  EXPECT_NE(config.find("rate = 2\nduration_s = 10"), std::string::npos) << config;
  EXPECT_NE(config.find("rate = 3\nduration_s = 10"), std::string::npos) << config;
  EXPECT_NE(config.find("min = 12\nmax = 45"), std::string::npos) << config;
}

TEST(ValidateServingTest, WhatTheFileDoesNotSayIsAskedFor) {
  MeasuredStage m = parse_vllm_bench_json(kBench, "bench.json");
  ValidateOptions o;
  m.gpu.clear();
  try {
    stage_config(m, o);
    FAIL() << "no GPU";
  } catch (const core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--gpu"), std::string::npos) << e.what();
  }
  m.model = "acme/unknown-13b";
  o.gpu = "h100-sxm";
  try {
    stage_config(m, o);
    FAIL() << "unknown model";
  } catch (const core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--model"), std::string::npos) << e.what();
  }
}

TEST(ValidateServingTest, CommandLineOnEachFormat) {
  TempDir dir;
  std::ofstream(dir.file("bench.json")) << kBench;
  std::ofstream(dir.file("stage_0_lifecycle_metrics.json")) << inference_perf_stage(2.0, 5.0);
  // The exit code and everything printed.
  auto cli = [](std::vector<std::string> args) {
    const servesim::testing::Cli r = servesim::testing::cli(std::move(args));
    return std::make_pair(r.code, r.out + r.err);
  };
  const auto bench = cli({"validate-serving", dir.file("bench.json"), "--gpu", "h100-sxm", "--json"});
  ASSERT_EQ(bench.first, 0) << bench.second;
  EXPECT_NE(bench.second.find("\"format\":\"vllm-bench\""), std::string::npos) << bench.second;
  const auto ip = cli({"validate-serving", dir.file("stage_0_lifecycle_metrics.json"), "--gpu", "h100-sxm", "--model",
                       "llama-2-7b"});
  ASSERT_EQ(ip.first, 0) << ip.second;
  EXPECT_NE(ip.second.find("ttft mean"), std::string::npos) << ip.second;
  const auto missing = cli({"validate-serving", dir.file("nope.json"), "--gpu", "h100-sxm"});
  EXPECT_NE(missing.first, 0);
  EXPECT_NE(missing.second.find("nope.json"), std::string::npos) << missing.second;

  // Prediction intervals: with the shipped H100 profile's uncertainty, every latency figure gets an
  // interval and the table says how many measured ones lie inside.
  const auto drawn = cli({"validate-serving", dir.file("bench.json"), "--gpu", "h100-sxm", "--prediction-draws", "10"});
  ASSERT_EQ(drawn.first, 0) << drawn.second;
  EXPECT_NE(drawn.second.find("90% prediction interval"), std::string::npos) << drawn.second;
  EXPECT_NE(drawn.second.find("latency figures of those stages inside their 90% prediction interval (10 draws"),
            std::string::npos)
      << drawn.second;
  // A profile that claims no error at all: every draw is the simulation itself, so each interval is
  // the point [simulated, simulated].
  std::string profile;
  {
    std::ifstream in(servesim::testing::source_dir() + "/calibration/profiles/h100-sxm.toml");
    std::stringstream text;
    text << in.rdbuf();
    profile = text.str();
  }
  profile = profile.substr(0, profile.find("[uncertainty]")) +
            "[uncertainty]\nresiduals = 10\nstep_log_rms = 0\nfrontend_rms_ms = 0\n";
  std::ofstream(dir.file("exact.toml")) << profile;
  const auto exact = cli({"validate-serving", dir.file("bench.json"), "--gpu", "h100-sxm", "--calibration",
                          dir.file("exact.toml"), "--prediction-draws", "10", "--json"});
  ASSERT_EQ(exact.first, 0) << exact.second;
  const auto j = nlohmann::json::parse(exact.second);
  int figures = 0;
  for (const auto& f : j["stages"][0]["figures"]) {
    ASSERT_TRUE(f.contains("low")) << f.dump();
    EXPECT_DOUBLE_EQ(f["low"].get<double>(), f["simulated"].get<double>()) << f.dump();
    EXPECT_DOUBLE_EQ(f["high"].get<double>(), f["simulated"].get<double>()) << f.dump();
    ++figures;
  }
  EXPECT_GT(figures, 5);
  EXPECT_EQ(j["prediction"]["draws"], 10);
  const auto few = cli({"validate-serving", dir.file("bench.json"), "--gpu", "h100-sxm", "--prediction-draws", "3"});
  EXPECT_EQ(few.first, 2);
  EXPECT_NE(few.second.find("--prediction-draws"), std::string::npos) << few.second;
}

}  // namespace
}  // namespace servesim::experiments

namespace servesim::experiments {
namespace {

// fit --from-serving-runs recovers the engine terms of a "server" that is servesim itself with known
// terms: the measured figures are simulations with those terms, the fit starts elsewhere.
TEST(ServingFitTest, RecoversKnownEngineTermsFromSimulatedMeasurements) {
  ServingFitParams truth;
  truth.stream_ms = 2.5;
  truth.first_token_ms = 4.0;
  truth.sample_ms = 0.8;
  truth.decode_efficiency = 0.75;
  truth.async_scheduling = true;
  std::vector<MeasuredStage> stages;
  for (const double rate : {1.0, 4.0, 10.0}) {
    MeasuredStage m;
    m.format = "serving-runs";
    m.source = "synthetic";
    m.experiment = "rate-" + std::to_string(static_cast<int>(rate));
    m.label = m.experiment + " stage 0";
    m.model = "meta-llama/Llama-2-7b-hf";
    m.gpu = "h100-sxm";
    m.tensor_parallel = 1;
    m.max_model_len = 4096;
    m.max_num_batched_tokens = 2048;
    m.max_num_seqs = 128;
    m.workload.groups = 2;
    m.workload.prompts_per_group = 5;
    m.workload.system_prompt_len = 300;
    m.workload.question_len = 200;
    m.workload.max_tokens = 96;
    m.load.rate = rate;
    m.load.duration_s = 20;
    m.load.shape = ArrivalShape::kPoissonFixedCount;
    ValidateOptions o;
    o.sets = truth.overrides();
    const SimulatedStage sim = simulate_stage(m, o);
    ASSERT_EQ(sim.failed, 0);
    m.succeeded = sim.completed;
    m.ttft = sim.ttft;
    m.tpot = sim.tpot;
    m.e2e = sim.e2e;
    stages.push_back(m);
  }
  ServingFitOptions o;
  o.max_evaluations = 150;
  o.jobs = 1;
  o.leave_one_out = true;
  const ServingFitResult r = fit_serving_runs(stages, o);
  EXPECT_TRUE(r.params.async_scheduling);
  // TTFT at low load pins the client path of the first token (stream + first token; ingress is fixed
  // at 6 ms, the truth's too). How it splits between the two rests on E2E alone, which a few ms move
  // by a fraction of a percent against a second of decoding: that split is not identified, and the
  // test does not ask for it.
  EXPECT_NEAR(r.params.stream_ms + r.params.first_token_ms, truth.stream_ms + truth.first_token_ms, 0.5);
  for (const StageComparison& c : r.in_sample) {
    EXPECT_LT(std::fabs(*c.figure_error("ttft", "mean")), 0.02) << c.measured.label;
    EXPECT_LT(std::fabs(*c.figure_error("tpot", "mean")), 0.02) << c.measured.label;
    EXPECT_LT(std::fabs(*c.figure_error("e2e", "mean")), 0.02) << c.measured.label;
  }
  // Leave one out: one fold per experiment, each predicting its own stage.
  ASSERT_EQ(r.folds.size(), 3u);
  for (const auto& f : r.folds) {
    ASSERT_EQ(f.predicted.size(), 1u);
    EXPECT_EQ(f.predicted[0].measured.experiment, f.experiment);
    EXPECT_LT(std::fabs(*f.predicted[0].figure_error("e2e", "mean")), 0.05) << f.experiment;
  }
  // The measurements are simulations with the true terms, so the held-out residuals the profile's
  // [uncertainty] keeps are near zero: the fit recovers an error-free engine as nearly error-free.
  EXPECT_EQ(r.uncertainty.residuals, 3);
  EXPECT_TRUE(r.uncertainty.held_out);
  EXPECT_LT(r.uncertainty.step_log_rms, 0.02);
  EXPECT_LT(r.uncertainty.frontend_rms_s, 0.002);
}

}  // namespace
}  // namespace servesim::experiments
