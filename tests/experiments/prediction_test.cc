// Prediction intervals (experiments/prediction.h): a draw's error reaches the run as the error model
// says (exact shifts and scalings on built cases), the draws order the answers as physics does, the
// probability of meeting the SLO at its two extremes, the command line, and the errors.
#include "experiments/prediction.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/cli/cli.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

// A profile with nothing but the uncertainty of 10 residuals: 3% step time, 4 ms client path.
const char* kProfile = R"(# servesim calibration profile
format = "servesim-calibration-profile"
version = 1
gpu = "h100-sxm"
[uncertainty]
residuals = 10
step_log_rms = 0.03
frontend_rms_ms = 4
correlation = 0
held_out = true
)";

// Light load: one replica, requests far apart, so nothing queues and every request runs alone.
std::string light_config(const std::string& profile) {
  return R"(
seed = 5
[workload]
kind = "poisson"
rate = 0.5
max_requests = 30
[workload.prompt]
kind = "fixed"
value = 500
[workload.output]
kind = "fixed"
value = 100
[model]
kind = "llama-2-7b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 1
[engine]
kind = "vllm-v1"
api_server_ms = 6
[cost_model]
calibration = ")" + profile + R"("
[slo]
ttft_ms = 10000
)";
}

void write(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

std::function<core::Params(const std::vector<std::string>&)> loader(const std::string& text,
                                                                    std::vector<std::string> sets = {}) {
  return [text, sets](const std::vector<std::string>& extra) {
    std::vector<std::string> all = sets;
    all.insert(all.end(), extra.begin(), extra.end());
    return core::parse_config(text, "p.toml", run_schema(), all, ".");
  };
}

RunResult run_with(const std::string& text, std::vector<std::string> sets) {
  RunOutputs none;
  return run_simulation(loader(text, std::move(sets))({}), none);
}

TEST(PredictionTest, FrontendOffsetShiftsEveryFirstTokenExactly) {
  TempDir dir;
  write(dir.file("p.toml"), kProfile);
  const std::string cfg = light_config(dir.file("p.toml"));
  const RunResult base = run_with(cfg, {});
  // Every request waits 5 ms longer before the engine sees it; nothing queues, so the engine does
  // the same work shifted by 5 ms: TTFT and E2E +5 ms each, TPOT unchanged.
  const RunResult later = run_with(cfg, {"prediction.frontend_offset_ms=5"});
  EXPECT_NEAR(later.summary.ttft_ms.mean, base.summary.ttft_ms.mean + 5.0, 1e-6);
  EXPECT_NEAR(later.summary.e2e_ms.mean, base.summary.e2e_ms.mean + 5.0, 1e-6);
  EXPECT_NEAR(later.summary.tpot_ms.mean, base.summary.tpot_ms.mean, 1e-9);
  // An offset below the whole ingress time (6 ms here) stops at zero: TTFT 6 ms shorter, not 100.
  const RunResult sooner = run_with(cfg, {"prediction.frontend_offset_ms=-100"});
  EXPECT_NEAR(sooner.summary.ttft_ms.mean, base.summary.ttft_ms.mean - 6.0, 1e-6);
}

TEST(PredictionTest, StepScaleStretchesDecodeSteps) {
  TempDir dir;
  write(dir.file("p.toml"), kProfile);
  const std::string cfg = light_config(dir.file("p.toml"));
  const RunResult base = run_with(cfg, {});
  const RunResult slow = run_with(cfg, {"prediction.step_scale=1.2"});
  // A lone request's TPOT is its decode iteration: the GPU step (now x 1.2) plus host time the GPU
  // does not hide, a small share under async scheduling. So the ratio lies just under 1.2.
  const double ratio = slow.summary.tpot_ms.mean / base.summary.tpot_ms.mean;
  EXPECT_GT(ratio, 1.15);
  EXPECT_LE(ratio, 1.2 + 1e-9);
  EXPECT_EQ(slow.summary.output_tokens, base.summary.output_tokens);  // the same work
}

TEST(PredictionTest, DrawsOrderAnswersAsTheirErrorsDo) {
  TempDir dir;
  write(dir.file("p.toml"), kProfile);
  PredictionOptions o;
  o.draws = 12;
  o.run.jobs = 2;
  const PredictionResult r = run_prediction(loader(light_config(dir.file("p.toml"))), o);
  ASSERT_EQ(r.draws.size(), 12u);
  ASSERT_EQ(r.errors.size(), 12u);
  EXPECT_EQ(r.source.uncertainty.residuals, 10);
  // The draws keep the seed: the same arrivals and lengths, only the error moves.
  for (const RunResult& d : r.draws) {
    EXPECT_EQ(d.info.seed, r.point.info.seed);
    EXPECT_EQ(d.summary.output_tokens, r.point.summary.output_tokens);
  }
  // A larger step factor gives a longer TPOT, draw for draw (no queue: TPOT is the step).
  std::vector<size_t> order(r.draws.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r.errors[a].step_scale < r.errors[b].step_scale; });
  for (size_t k = 1; k < order.size(); ++k)
    EXPECT_LT(r.draws[order[k - 1]].summary.tpot_ms.mean, r.draws[order[k]].summary.tpot_ms.mean);
  // The interval of TPOT: between the smallest and the largest draw, and it holds most of them.
  const PredictedMetric* tpot = find_predicted(r.metrics, "tpot_ms_mean");
  ASSERT_NE(tpot, nullptr);
  EXPECT_EQ(tpot->point, r.point.summary.tpot_ms.mean);
  const auto [lo_it, hi_it] = std::minmax_element(tpot->values.begin(), tpot->values.end());
  EXPECT_GE(tpot->lo, *lo_it);
  EXPECT_LE(tpot->hi, *hi_it);
  EXPECT_LT(tpot->lo, tpot->hi);
  // A 10 s TTFT limit is met by every draw.
  EXPECT_EQ(r.p_meets_slo, 1.0);
}

TEST(PredictionTest, ProbabilityOfMeetingTheSloAtBothEnds) {
  TempDir dir;
  write(dir.file("p.toml"), kProfile);
  PredictionOptions o;
  o.draws = 10;
  // TPOT under 1 us: no draw meets it.
  EXPECT_EQ(run_prediction(loader(light_config(dir.file("p.toml")), {"slo.tpot_ms=0.001"}), o).p_meets_slo, 0.0);
  // No SLO at all: not a probability.
  std::string no_slo = light_config(dir.file("p.toml"));
  no_slo = no_slo.substr(0, no_slo.find("[slo]"));
  EXPECT_TRUE(std::isnan(run_prediction(loader(no_slo), o).p_meets_slo));
}

TEST(PredictionTest, IntervalQuantilesByHand) {
  // 11 values 0..10: the 5% and 95% quantiles by linear interpolation are 0.5 and 9.5.
  std::vector<double> v;
  for (int i = 10; i >= 0; --i) v.push_back(i);
  v.push_back(std::nan(""));
  const auto [lo, hi] = prediction_interval(v, 0.9);
  EXPECT_DOUBLE_EQ(lo, 0.5);
  EXPECT_DOUBLE_EQ(hi, 9.5);
  EXPECT_TRUE(std::isnan(prediction_interval({1.0}, 0.9).first));
}

TEST(PredictionTest, RefusesWhatItCannotDraw) {
  TempDir dir;
  write(dir.file("p.toml"), kProfile);
  std::string bare = kProfile;
  bare = bare.substr(0, bare.find("[uncertainty]"));
  write(dir.file("bare.toml"), bare);
  PredictionOptions o;
  o.draws = 10;
  auto message = [&](const std::string& cfg, std::vector<std::string> sets = {}) -> std::string {
    try {
      run_prediction(loader(cfg, std::move(sets)), o);
    } catch (const core::Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string none = message(light_config("none"));
  EXPECT_NE(none.find("cost_model.calibration"), std::string::npos) << none;
  EXPECT_NE(none.find("[uncertainty]"), std::string::npos) << none;
  const std::string without = message(light_config(dir.file("bare.toml")));
  EXPECT_NE(without.find("has no [uncertainty] table"), std::string::npos) << without;
  EXPECT_NE(without.find("bare.toml"), std::string::npos) << without;
  const std::string set = message(light_config(dir.file("p.toml")), {"prediction.step_scale=1.1"});
  EXPECT_NE(set.find("prediction.step_scale"), std::string::npos) << set;
  o.draws = 5;
  EXPECT_NE(message(light_config(dir.file("p.toml"))).find("at least 10"), std::string::npos);
}

TEST(PredictionTest, CommandLineIsDeterministicAcrossJobs) {
  TempDir dir;
  write(dir.file("p.toml"), kProfile);
  const std::string path = dir.file("run.toml");
  write(path, light_config(dir.file("p.toml")));
  auto json = [&](const char* jobs) {
    std::ostringstream out, err;
    const char* argv[] = {"servesim", "run", path.c_str(), "--prediction-draws", "10", "--no-db", "--json", "--jobs", jobs};
    EXPECT_EQ(run_cli(9, argv, out, err), 0) << err.str();
    return out.str();
  };
  const std::string one = json("1"), two = json("2");
  EXPECT_EQ(one, two);
  const auto j = nlohmann::json::parse(one);
  EXPECT_EQ(j["prediction_draws"], 10);
  EXPECT_EQ(j["calibration"]["residuals"], 10);
  EXPECT_EQ(j["draws"].size(), 10u);
  const auto& m = j["metrics"]["ttft_ms_window_p90"];
  EXPECT_LE(m["low"].get<double>(), m["high"].get<double>());
  EXPECT_EQ(m["draws"].size(), 10u);

  std::ostringstream out, err;
  const std::string db = dir.file("r.db");
  const char* table[] = {"servesim", "run", path.c_str(), "--prediction-draws", "10", "--db", db.c_str()};
  ASSERT_EQ(run_cli(7, table, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("90% prediction"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("P(meets the SLO) 100%"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("runs 1 (as configured) and 2 to 11"), std::string::npos) << out.str();

  std::ostringstream uout, uerr;
  const char* both[] = {"servesim", "run", path.c_str(), "--prediction-draws", "10", "--replications", "3"};
  EXPECT_EQ(run_cli(7, both, uout, uerr), 2);
  EXPECT_NE(uerr.str().find("give one"), std::string::npos) << uerr.str();
  const char* stray[] = {"servesim", "run", path.c_str(), "--slo-target", "0.5"};
  std::ostringstream sout, serr;
  EXPECT_EQ(run_cli(5, stray, sout, serr), 2);
  EXPECT_NE(serr.str().find("go with --prediction-draws"), std::string::npos) << serr.str();
}

}  // namespace
}  // namespace servesim::experiments
