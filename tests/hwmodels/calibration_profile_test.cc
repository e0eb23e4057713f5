#include "hwmodels/calibration_profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "tests/test_paths.h"

namespace servesim::hwmodels {
namespace {

const char* kProfile = R"(format = "servesim-calibration-profile"
version = 1
gpu = "h100-sxm"
description = "test"

[launch]
kernel_us = 1.5
eager_launch_us = 4
graph_launch_us = 12

[gemm]
rows = [1, 16, 256, 4096]
weight_elements = [1e6, 1e8]
compute_efficiency = [
  [0.01, 0.1, 0.5, 0.7],
  [0.02, 0.2, 0.6, 0.8],
]
memory_bytes = [1e6, 1e9]
memory_efficiency = [0.5, 0.9]

[elementwise.rms_norm]
bytes = [1e4, 1e8]
memory_efficiency = [0.05, 0.4]

[attention_prefill]
tokens = [128, 4096]
compute_efficiency = [0.3, 0.6]

[attention_decode]
seqs = [1, 256]
context_tokens = [128, 8192]
memory_efficiency = [[0.2, 0.6], [0.5, 0.8]]

[all_reduce]
gpus = [2, 8]
latency_us = [8, 20]
bus_bandwidth_gb_s = [300, 400]

[send_recv]
latency_us = 6
bandwidth_gb_s = 200

[host_copy]
h2d_gb_s = 50
d2h_gb_s = 48

[overhead]
iteration_ms = 0.7
layer_us = 20
decode_iteration_ms = 0.3
)";

core::InputError profile_error(const std::string& text) {
  try {
    parse_calibration_profile(text, "p.toml");
  } catch (const core::InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no InputError for:\n" << text;
  return core::InputError("", 0, "", "");
}

TEST(CalibrationProfileTest, ParsesEverySection) {
  const CalibrationProfile p = parse_calibration_profile(kProfile, "p.toml");
  EXPECT_EQ(p.gpu, "h100-sxm");
  EXPECT_DOUBLE_EQ(*p.kernel_us, 1.5);
  EXPECT_DOUBLE_EQ(*p.graph_launch_us, 12);
  EXPECT_DOUBLE_EQ(p.gemm.compute_efficiency(16, 1e6), 0.1);
  EXPECT_DOUBLE_EQ(p.gemm.memory_efficiency(1e9), 0.9);
  EXPECT_TRUE(p.gemm_fp8.empty());
  ASSERT_NE(p.elementwise_curve("rms_norm"), nullptr);
  EXPECT_EQ(p.elementwise_curve("rope"), nullptr);  // no own curve and no "copy"
  EXPECT_DOUBLE_EQ(p.attention_prefill(4096), 0.6);
  EXPECT_DOUBLE_EQ(p.attention_decode(256, 8192), 0.8);
  EXPECT_DOUBLE_EQ(p.all_reduce.at(8).latency_s, 20e-6);
  EXPECT_DOUBLE_EQ(p.all_reduce.at(2).bandwidth, 300e9);
  EXPECT_DOUBLE_EQ(p.send_recv->bandwidth, 200e9);
  EXPECT_DOUBLE_EQ(*p.d2h_bandwidth, 48e9);
  EXPECT_DOUBLE_EQ(*p.iteration_overhead_ms, 0.7);
  EXPECT_DOUBLE_EQ(*p.layer_overhead_us, 20);
  EXPECT_FALSE(p.decode_layer_overhead_us.has_value());
}

TEST(CalibrationProfileTest, WriteThenReadIsTheSameProfile) {
  const CalibrationProfile p = parse_calibration_profile(kProfile, "p.toml");
  const std::string text = calibration_profile_toml(p);
  const CalibrationProfile q = parse_calibration_profile(text, "q.toml");
  EXPECT_EQ(calibration_profile_toml(q), text);
  servesim::testing::TempDir dir;
  write_calibration_profile(p, dir.file("x.toml"));
  EXPECT_EQ(calibration_profile_toml(read_calibration_profile(dir.file("x.toml"))), text);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.toml.tmp")));
  EXPECT_THROW(write_calibration_profile(p, dir.file("no/such/dir/x.toml")), core::Error);
}

TEST(CalibrationProfileTest, ErrorsNameLineAndKey) {
  const std::string base = kProfile;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = base;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  {
    const core::InputError e = profile_error(with("kernel_us = 1.5", "kernel_ms = 1.5"));
    EXPECT_EQ(e.field(), "launch.kernel_ms");
    EXPECT_EQ(e.line(), 7);
  }
  EXPECT_EQ(profile_error(with("[0.5, 0.9]", "[0.5, 5]")).field(), "gemm.memory_efficiency");
  EXPECT_EQ(profile_error(with("[0.5, 0.9]", "[0.5]")).field(), "gemm.memory_efficiency");
  EXPECT_EQ(profile_error(with("rows = [1, 16, 256, 4096]", "rows = [1, 16, 16, 4096]")).field(), "gemm.rows");
  EXPECT_EQ(profile_error(with("[0.02, 0.2, 0.6, 0.8]", "[0.02, 0.2, 0.6]")).field(), "gemm.compute_efficiency");
  EXPECT_EQ(profile_error(with("version = 1", "version = 2")).field(), "version");
  EXPECT_EQ(profile_error(with("format = \"servesim-calibration-profile\"", "format = \"x\"")).field(), "format");
  EXPECT_EQ(profile_error(with("gpus = [2, 8]", "gpus = [1, 8]")).field(), "all_reduce.gpus");
  EXPECT_EQ(profile_error(with("[elementwise.rms_norm]", "[elementwise.rmsnorm]")).field(), "elementwise.rmsnorm");
  EXPECT_EQ(profile_error(with("latency_us = 6", "latency = 6")).field(), "send_recv.latency");
  EXPECT_EQ(profile_error("format = \"servesim-calibration-profile\"\nversion = 1\n").field(), "gpu");
  EXPECT_EQ(profile_error("gpu = [").line(), 1);
  EXPECT_THROW(read_calibration_profile("/no/such/profile.toml"), core::InputError);
}

TEST(CalibrationProfileTest, GarbageOnlyRaisesInputErrors) {
  core::Rng rng(11, "profile-garbage");
  const std::string base = kProfile;
  for (int i = 0; i < 2000; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng.uniform_int(3));
    for (int e = 0; e < edits; ++e) {
      const size_t at = static_cast<size_t>(rng.uniform_int(text.size()));
      const char c = "[]=\",.0123456789-e \n#abc"[rng.uniform_int(25)];
      if (rng.uniform_int(2) == 0) text[at] = c;
      else text.erase(at, 1 + static_cast<size_t>(rng.uniform_int(8)));
    }
    try {
      const CalibrationProfile p = parse_calibration_profile(text, "fuzz.toml");
      EXPECT_EQ(calibration_profile_toml(parse_calibration_profile(calibration_profile_toml(p), "again")),
                calibration_profile_toml(p));
    } catch (const core::InputError&) {
    }
  }
}

TEST(CalibrationProfileTest, ShippedProfilesParse) {
  for (const char* name : {"a100-80gb-sxm.toml", "h100-sxm.toml"}) {
    const std::string path = servesim::testing::source_dir() + "/calibration/profiles/" + name;
    const CalibrationProfile p = read_calibration_profile(path);
    EXPECT_FALSE(p.gemm.compute_efficiency.empty()) << name;
    EXPECT_FALSE(p.gemm.memory_efficiency.empty()) << name;
    EXPECT_FALSE(p.all_reduce.empty()) << name;
    for (const char* kind : {"rms_norm", "rope", "act", "add", "embedding"})
      EXPECT_NE(p.elementwise_curve(kind), nullptr) << name << " " << kind;
  }
}

}  // namespace
}  // namespace servesim::hwmodels
