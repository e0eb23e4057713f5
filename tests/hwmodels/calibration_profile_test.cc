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

const char* kLayouts = R"(format = "servesim-calibration-profile"
version = 1
gpu = "h100-sxm"

[[attention_decode_layout]]
heads = 32
kv_heads = 8
head_dim = 128
block_size = 16
seqs = [1, 256]
context_tokens = [128, 8192]
memory_efficiency = [[0.2, 0.6], [0.5, 0.8]]

[[attention_decode_layout]]
heads = 16
kv_heads = 1
head_dim = 576
block_size = 64
kv_lora_rank = 512
seqs = [1, 64]
context_tokens = [1024, 4096]
memory_efficiency = [[0.3, 0.4], [0.5, 0.6]]

[[attention_decode_layout]]
heads = 8
kv_heads = 1
head_dim = 128
block_size = 16
seqs = [4]
context_tokens = [512]
memory_efficiency = [[0.7]]
)";

TEST(CalibrationProfileTest, DecodeTablesKeyedByHeadLayout) {
  const CalibrationProfile p = parse_calibration_profile(kLayouts, "l.toml");
  ASSERT_EQ(p.attention_decode_layouts.size(), 3u);
  // Kept in layout order (query heads first), whatever the file's order.
  EXPECT_EQ(p.attention_decode_layouts[0].layout, (AttentionLayout{8, 1, 128, 16, 0}));
  EXPECT_EQ(p.attention_decode_layouts[1].layout, (AttentionLayout{16, 1, 576, 64, 512}));
  EXPECT_EQ(p.attention_decode_layouts[2].layout, (AttentionLayout{32, 8, 128, 16, 0}));
  EXPECT_DOUBLE_EQ(p.attention_decode_layouts[2].memory_efficiency(256, 8192), 0.8);
  EXPECT_TRUE(p.attention_decode.empty());
  // Written and read back unchanged.
  const std::string text = calibration_profile_toml(p);
  EXPECT_NE(text.find("[[attention_decode_layout]]\n# 16 heads / 1 KV heads x 576 (MLA latent 512 + 64), pages of 64"),
            std::string::npos)
      << text;
  EXPECT_EQ(calibration_profile_toml(parse_calibration_profile(text, "again.toml")), text);

  // The lookup: exact, nearest, un-keyed, none.
  const DecodeTableChoice exact = p.decode_attention_table({32, 8, 128, 16, 0});
  EXPECT_EQ(exact.match, DecodeTableMatch::kExact);
  EXPECT_EQ(exact.table, &p.attention_decode_layouts[2].memory_efficiency);
  // 16/2 (group 8) is nearest to 8/1 (group 8), not to 32/8 (group 4).
  const DecodeTableChoice near = p.decode_attention_table({16, 2, 128, 16, 0});
  EXPECT_EQ(near.match, DecodeTableMatch::kNearest);
  EXPECT_EQ(*near.layout, (AttentionLayout{8, 1, 128, 16, 0}));
  // MLA finds the MLA table (pages of 16 against its 64: still the nearest), never a GQA one.
  EXPECT_EQ(p.decode_attention_table({128, 1, 576, 16, 512}).layout, &p.attention_decode_layouts[1].layout);
  EXPECT_EQ(p.decode_attention_table({16, 1, 576, 16, 448}).match, DecodeTableMatch::kNone);
  EXPECT_EQ(p.decode_attention_table({32, 8, 64, 16, 0}).match, DecodeTableMatch::kNone);
  CalibrationProfile with_unkeyed = p;
  with_unkeyed.attention_decode = Table2D({1}, {1}, {{0.9}});
  EXPECT_EQ(with_unkeyed.decode_attention_table({32, 8, 64, 16, 0}).match, DecodeTableMatch::kUnkeyed);
  EXPECT_EQ(with_unkeyed.decode_attention_table({32, 8, 64, 16, 0}).table, &with_unkeyed.attention_decode);
  // A tie in every distance goes to the first in layout order: 8/4 (group 2) is one octave from
  // both 4/4 (group 1) and 16/4 (group 4), with the same KV heads and pages.
  CalibrationProfile tie;
  tie.attention_decode_layouts = {{{4, 4, 128, 16, 0}, Table2D({1}, {1}, {{0.1}})},
                                  {{16, 4, 128, 16, 0}, Table2D({1}, {1}, {{0.2}})}};
  EXPECT_EQ(tie.decode_attention_table({8, 4, 128, 16, 0}).layout, &tie.attention_decode_layouts[0].layout);

  // Errors name the table and the key.
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = kLayouts;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  EXPECT_EQ(profile_error(with("heads = 32\nkv_heads = 8", "heads = 32\nkv_heads = 6")).field(),
            "attention_decode_layout[0].kv_heads");
  EXPECT_EQ(profile_error(with("kv_lora_rank = 512", "kv_lora_rank = 576")).field(), "attention_decode_layout[1].head_dim");
  EXPECT_EQ(profile_error(with("head_dim = 576\nblock_size = 64\n", "head_dim = 576\n")).field(),
            "attention_decode_layout[1].block_size");
  EXPECT_EQ(profile_error(with("block_size = 64", "block_size = 64.5")).field(), "attention_decode_layout[1].block_size");
  EXPECT_EQ(profile_error(with("heads = 8\nkv_heads = 1\nhead_dim = 128", "heads = 32\nkv_heads = 8\nhead_dim = 128"))
                .field(),
            "attention_decode_layout[2]");  // a second 32/8/128/16 table
  EXPECT_EQ(profile_error(with("[[0.7]]", "[[7]]")).field(), "attention_decode_layout[2].memory_efficiency");
  EXPECT_EQ(profile_error(with("seqs = [4]", "seqs = [4]\nwidth = 3")).field(), "attention_decode_layout[2].width");
  const core::InputError line = profile_error(with("heads = 16\n", "heads = 0\n"));
  EXPECT_EQ(line.field(), "attention_decode_layout[1].heads");
  EXPECT_EQ(line.line(), 15);
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
