// End-to-end fidelity against the real vLLM serving runs (../shared/reference-data/serving-runs), out of
// the box: each stage simulated with the shipped H100 profile (kernel tables and the vllm-v1 engine
// terms fitted to these runs), no per-run tuning. Pins the figures docs/fidelity.md reports, so a
// change that makes servesim further from the real server fails CI. (The leave-one-experiment-out
// figures come from `servesim fit --from-serving-runs --leave-one-out`, too slow for every CI run;
// tests/experiments/validate_serving_test.cc checks that fit on a small case.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "experiments/serving_fit.h"
#include "experiments/validate_serving.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

std::string stages_file() {
  return servesim::testing::shared_file("reference-data/serving-runs/stages.tsv");
}

const StageComparison& stage(const std::vector<StageComparison>& c, const std::string& label) {
  for (const StageComparison& s : c)
    if (s.measured.label == label) return s;
  throw std::runtime_error("no stage " + label);
}

TEST(ServingFidelityTest, ShippedProfileReproducesTheRealServer) {
  const std::string path = stages_file();
  std::error_code ec;
  ASSERT_TRUE(std::filesystem::is_regular_file(path, ec))
      << "the real serving runs are missing: " << path << " (../shared/reference-data/serving-runs)";
  const std::vector<MeasuredStage> stages = read_serving_results(path);
  ASSERT_EQ(stages.size(), 12u);
  const std::vector<StageComparison> c = validate_stages(stages, ValidateOptions{}, 0);

  // The stages the server kept up with: no simulated saturation, and the bounds on the mean
  // absolute error (docs/fidelity.md gives the figures per stage).
  int comparable = 0;
  for (const StageComparison& s : c) {
    if (!s.comparable()) continue;
    ++comparable;
    EXPECT_FALSE(s.saturation_mismatch) << s.measured.label;
    EXPECT_EQ(s.simulated.failed, 0) << s.measured.label;
  }
  EXPECT_EQ(comparable, 10);
  EXPECT_LE(*mean_abs_error(c, "e2e", "mean"), 0.08);
  EXPECT_LE(*mean_abs_error(c, "e2e", "p90"), 0.08);
  EXPECT_LE(*mean_abs_error(c, "ttft", "mean"), 0.15);
  EXPECT_LE(*mean_abs_error(c, "itl", "mean"), 0.08);
  EXPECT_LE(*mean_abs_error(c, "tpot", "mean"), 0.08);

  // Llama-2-7B reasoning (1,448 output tokens at 4 req/s): the real server lost most requests to the
  // 300 s client time-out; so must the simulation, within 25% of the count.
  const StageComparison& llama = stage(c, "llama-2-7b-tp1-reasoning stage 0");
  ASSERT_TRUE(llama.measured.overloaded());
  EXPECT_FALSE(llama.saturation_mismatch);
  EXPECT_NEAR(static_cast<double>(llama.simulated.failed), static_cast<double>(llama.measured.failed),
              0.25 * static_cast<double>(llama.measured.failed));
  // Mixtral reasoning: servesim's server falls behind (its queue grows through the stage) but its
  // decode steps at batch 128 and ~1,800-token contexts are 25 ms where the real engine took 37 ms,
  // so it answers requests before the time-out that the real server did not (docs/fidelity.md). Pin
  // that it is at least queueing: TTFT far above the unloaded ~50 ms.
  const StageComparison& mixtral = stage(c, "mixtral-8x7b-v0-1-tp2-reasoning stage 0");
  ASSERT_TRUE(mixtral.measured.overloaded());
  EXPECT_GT(*mixtral.simulated.ttft.mean, 10.0);
  EXPECT_LT(mixtral.simulated.throughput_req_s, mixtral.measured.load.rate);
}

// Prediction intervals (experiments/prediction.h) against the real runs, leave one experiment out:
// each experiment's stages get the calibration uncertainty of the other experiments' residuals (the
// shipped engine terms; `servesim fit --from-serving-runs --leave-one-out --coverage-draws N` refits
// them too, docs/experiments.md), and the measured TTFT, ITL and E2E figures must fall inside the 90%
// intervals about 90% of the time: between 80% and 97% (issue 13). The interval is only honest if
// it is neither too narrow (misses) nor padded (covers everything).
TEST(ServingFidelityTest, PredictionIntervalsCoverTheRealServer) {
  const std::string path = stages_file();
  std::error_code ec;
  ASSERT_TRUE(std::filesystem::is_regular_file(path, ec))
      << "the real serving runs are missing: " << path << " (../shared/reference-data/serving-runs)";
  const std::vector<MeasuredStage> stages = read_serving_results(path);
  const std::vector<StageComparison> fitted = validate_stages(stages, ValidateOptions{}, 0);
  const CoverageResult c = prediction_coverage(
      stages, fitted, [](const std::string&) { return std::vector<std::string>{}; }, ValidateOptions{}, 20, 0.9, 0);
  EXPECT_EQ(c.figures.size(), 50u);  // 10 stages the server kept up with x 5 figures
  for (const CoveredFigure& f : c.figures) {
    EXPECT_LE(f.lo, f.hi) << f.stage << " " << f.metric << " " << f.stat;
    if (!f.covered())
      std::cout << "outside: " << f.stage << " " << f.metric << " " << f.stat << " measured " << f.measured
                << ", interval [" << f.lo << ", " << f.hi << "]\n";
  }
  EXPECT_GE(c.fraction(), 0.80) << c.covered << " of " << c.figures.size();
  EXPECT_LE(c.fraction(), 0.97) << c.covered << " of " << c.figures.size();
}

}  // namespace
}  // namespace servesim::experiments
