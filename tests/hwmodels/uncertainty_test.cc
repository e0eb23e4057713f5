// Calibration uncertainty: the residual figures by hand, the draws' distribution against its closed
// form, the [uncertainty] table of a profile, and the step-scaling decorator.
#include "hwmodels/uncertainty.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hwmodels/calibration_profile.h"
#include "sim/core/error.h"
#include "tests/hwmodels/hw_test_util.h"

namespace servesim::hwmodels {
namespace {

TEST(UncertaintyTest, ResidualFiguresByHand) {
  // Step residuals 0.03, -0.04, 0: RMS about zero sqrt((0.0009 + 0.0016) / 3) = 0.028868.
  // Front-end residuals 3, -6, 0 ms: RMS sqrt((9 + 36) / 3) = 3.873 ms.
  // Correlation about zero: (0.03 x 0.003 + 0.04 x 0.006) / sqrt(0.0025 x 45e-6) = 0.00033 / 0.00033541 = 0.98387.
  const CalibrationUncertainty u = uncertainty_from_residuals({0.03, -0.04, 0.0}, {0.003, -0.006, 0.0}, true);
  EXPECT_EQ(u.residuals, 3);
  EXPECT_NEAR(u.step_log_rms, 0.028868, 1e-6);
  EXPECT_NEAR(u.frontend_rms_s, 0.0038730, 1e-7);
  EXPECT_NEAR(u.correlation, 0.98387, 1e-5);
  EXPECT_TRUE(u.held_out);
  // A bias is an error: residuals all +2% have an RMS of 2%, not 0.
  EXPECT_NEAR(uncertainty_from_residuals({0.02, 0.02, 0.02}, {0, 0, 0}, false).step_log_rms, 0.02, 1e-12);
  EXPECT_THROW(uncertainty_from_residuals({0.01, 0.02}, {0.0, 0.0}, false), core::Error);
  EXPECT_THROW(uncertainty_from_residuals({0.01, 0.02, 0.0}, {0.0, 0.0}, false), core::Error);
}

TEST(UncertaintyTest, DrawsFollowThePredictiveStudentT) {
  CalibrationUncertainty u;
  u.residuals = 10;
  u.step_log_rms = 0.02;
  u.frontend_rms_s = 0.005;
  u.correlation = 0.5;
  const int64_t n = 20000;
  const std::vector<CalibrationDraw> d = draw_calibration_errors(u, 7, n);
  ASSERT_EQ(d.size(), static_cast<size_t>(n));
  double ss = 0, ff = 0, sf = 0, s_mean = 0;
  for (const CalibrationDraw& x : d) {
    const double s = std::log(x.step_scale);
    ss += s * s;
    ff += x.frontend_offset_s * x.frontend_offset_s;
    sf += s * x.frontend_offset_s;
    s_mean += s;
  }
  // Closed form: a Student t with nu = 10 degrees of freedom has variance nu / (nu - 2) = 1.25; the
  // predictive widening is 1 + 1/10. So var(e_s) = 0.02^2 x 1.1 x 1.25 and var(e_f) = 0.005^2 x 1.1 x 1.25.
  const double k = 1.1 * 1.25;
  EXPECT_NEAR(ss / n, 0.02 * 0.02 * k, 0.05 * 0.02 * 0.02 * k);
  EXPECT_NEAR(ff / n, 0.005 * 0.005 * k, 0.05 * 0.005 * 0.005 * k);
  EXPECT_NEAR(sf / std::sqrt(ss * ff), 0.5, 0.03);
  EXPECT_NEAR(s_mean / n, 0.0, 0.001);  // centred on the model: no correction of its answer
  // Draw i comes from its own stream: asking for more draws does not move the first ones.
  const std::vector<CalibrationDraw> few = draw_calibration_errors(u, 7, 3);
  for (size_t i = 0; i < few.size(); ++i) {
    EXPECT_EQ(few[i].step_scale, d[i].step_scale);
    EXPECT_EQ(few[i].frontend_offset_s, d[i].frontend_offset_s);
  }
  // Another seed, other draws.
  EXPECT_NE(draw_calibration_errors(u, 8, 1)[0].step_scale, d[0].step_scale);
  EXPECT_THROW(draw_calibration_errors(CalibrationUncertainty{}, 1, 5), core::Error);
  // The widest table a profile may hold, from the fewest residuals (t with 3 degrees of freedom has
  // long tails): every draw stays a factor a run accepts.
  CalibrationUncertainty wide;
  wide.residuals = 3;
  wide.step_log_rms = 0.5;
  wide.frontend_rms_s = 10;
  for (const CalibrationDraw& x : draw_calibration_errors(wide, 3, 2000)) {
    EXPECT_GE(x.step_scale, 0.01);
    EXPECT_LE(x.step_scale, 100.0);
    EXPECT_LE(std::fabs(x.frontend_offset_s), 60.0);
  }
}

TEST(UncertaintyTest, QuantileSettingsByHand) {
  CalibrationUncertainty u;
  u.residuals = 10;
  u.step_log_rms = 0.02;
  u.frontend_rms_s = 0.005;
  u.correlation = 0.5;
  // t_{10, 0.95} = 1.812461 (tables), x sqrt(1.1) = 1.900927: step exp(0.02 x 1.900927) = 1.038750;
  // client path at its conditional mean 0.5 x 1.900927 x 5 ms = 4.7523 ms.
  const CalibrationDraw hi = calibration_quantile(u, 0.95);
  EXPECT_NEAR(hi.step_scale, 1.038750, 2e-6);
  EXPECT_NEAR(hi.frontend_offset_s, 0.0047523, 2e-7);
  const CalibrationDraw lo = calibration_quantile(u, 0.05);
  EXPECT_NEAR(lo.step_scale, 1.0 / 1.038750, 2e-6);
  EXPECT_NEAR(lo.frontend_offset_s, -0.0047523, 2e-7);
}

TEST(UncertaintyTest, ProfileKeepsItsUncertaintyTable) {
  const std::string head = "format = \"servesim-calibration-profile\"\nversion = 1\ngpu = \"H100-SXM\"\n";
  const CalibrationProfile p = parse_calibration_profile(
      head + "[uncertainty]\nresiduals = 10\nstep_log_rms = 0.021\nfrontend_rms_ms = 6.5\ncorrelation = -0.25\n"
             "held_out = true\n",
      "p.toml");
  EXPECT_EQ(p.uncertainty.residuals, 10);
  EXPECT_DOUBLE_EQ(p.uncertainty.step_log_rms, 0.021);
  EXPECT_DOUBLE_EQ(p.uncertainty.frontend_rms_s, 0.0065);
  EXPECT_DOUBLE_EQ(p.uncertainty.correlation, -0.25);
  EXPECT_TRUE(p.uncertainty.held_out);
  const CalibrationProfile back = parse_calibration_profile(calibration_profile_toml(p), "back.toml");
  EXPECT_EQ(back.uncertainty.residuals, 10);
  EXPECT_DOUBLE_EQ(back.uncertainty.step_log_rms, 0.021);
  EXPECT_DOUBLE_EQ(back.uncertainty.frontend_rms_s, 0.0065);
  EXPECT_DOUBLE_EQ(back.uncertainty.correlation, -0.25);
  EXPECT_TRUE(back.uncertainty.held_out);
  EXPECT_TRUE(parse_calibration_profile(head, "none.toml").uncertainty.empty());

  auto error_of = [&](const std::string& table) -> std::string {
    try {
      parse_calibration_profile(head + "[uncertainty]\n" + table, "bad.toml");
    } catch (const core::InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("residuals = 2\nstep_log_rms = 0.1\nfrontend_rms_ms = 1\n").find("uncertainty.residuals"),
            std::string::npos);
  EXPECT_NE(error_of("residuals = 5\nfrontend_rms_ms = 1\n").find("needs residuals"), std::string::npos);
  EXPECT_NE(error_of("residuals = 5\nstep_log_rms = -0.1\nfrontend_rms_ms = 1\n").find("uncertainty.step_log_rms"),
            std::string::npos);
  EXPECT_NE(error_of("residuals = 5\nstep_log_rms = 0.1\nfrontend_rms_ms = 1\ncorrelation = 2\n")
                .find("uncertainty.correlation"),
            std::string::npos);
  EXPECT_NE(error_of("residuals = 5.5\nstep_log_rms = 0.1\nfrontend_rms_ms = 1\n").find("whole count"),
            std::string::npos);
  EXPECT_NE(error_of("residuals = 5\nstep_log_rms = 0.1\nfrontend_rms_ms = 1\nsigma = 3\n").find("uncertainty.sigma"),
            std::string::npos);
}

TEST(UncertaintyTest, ScaledCostModelScalesTimeNotWork) {
  const std::string cfg = hwtest::hw_config("llama-2-7b", "h100-sxm");
  hwtest::Hw plain = hwtest::build_hw(cfg);
  hwtest::Hw inner = hwtest::build_hw(cfg);
  const ScaledCostModel scaled(std::move(inner.cost), 1.25);
  for (const BatchShape& s : {hwtest::decode(1, 100), hwtest::decode(64, 1500)}) {
    const StepCost a = plain.cost->step(s), b = scaled.step(s);
    EXPECT_DOUBLE_EQ(b.seconds, 1.25 * a.seconds);
    EXPECT_EQ(b.flops, a.flops);
    EXPECT_EQ(b.bytes, a.bytes);
    EXPECT_EQ(b.peak_flop_seconds, a.peak_flop_seconds);
  }
  EXPECT_EQ(scaled.tensor_parallel(), 1);
  EXPECT_EQ(&scaled.model(), &scaled.inner().model());
}

}  // namespace
}  // namespace servesim::hwmodels
