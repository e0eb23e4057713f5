#include "hwmodels/gpu_spec.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/hwmodels/hw_test_util.h"

namespace servesim::hwmodels {
namespace {

using hwtest::parse_hw;

GpuSpec parse_gpu(const std::string& text) {
  const core::Params root = parse_hw("[model]\nkind = \"llama-3-8b\"\n" + text);
  return *gpu_registry().make(root.section("gpu"));
}

TEST(GpuSpecTest, RegistryListsEveryPreset) {
  const auto names = gpu_registry().kind_names();
  for (const char* want : {"a100-80gb-sxm", "h100-sxm", "h200", "reference"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_EQ(gpu_registry().name(), "gpus");
  EXPECT_NE(find_gpu_preset("H100-SXM"), nullptr);
  EXPECT_EQ(find_gpu_preset("tpu-v5"), nullptr);
}

TEST(GpuSpecTest, PresetsAreInSiUnits) {
  const GpuSpec h100 = parse_gpu("[gpu]\nkind = \"H100-SXM\"\n");
  EXPECT_EQ(h100.name, "h100-sxm");
  EXPECT_DOUBLE_EQ(h100.peak_flops, 989e12);
  EXPECT_DOUBLE_EQ(h100.hbm_bandwidth, 3350e9);
  EXPECT_DOUBLE_EQ(h100.memory_bytes, 80.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h100.interconnect_bandwidth, 450e9);
  EXPECT_DOUBLE_EQ(h100.sram_bytes, 83.0 * 1024 * 1024);
  EXPECT_GT(h100.price_usd_per_hour, 0);

  const GpuSpec a100 = parse_gpu("[gpu]\nkind = \"a100-80gb-sxm\"\n");
  EXPECT_DOUBLE_EQ(a100.peak_flops, 312e12);
  EXPECT_DOUBLE_EQ(a100.hbm_bandwidth, 2039e9);
  EXPECT_DOUBLE_EQ(a100.interconnect_bandwidth, 300e9);

  const GpuSpec h200 = parse_gpu("[gpu]\nkind = \"h200\"\n");
  EXPECT_DOUBLE_EQ(h200.memory_bytes, 141 * kBytesPerGib);  // "141GB" of HBM3e, binary as DRAM is
  EXPECT_DOUBLE_EQ(h200.hbm_bandwidth, 4800e9);

  const GpuSpec ref = parse_gpu("[gpu]\nkind = \"reference\"\n");
  EXPECT_DOUBLE_EQ(ref.peak_flops, 312e12);
  EXPECT_DOUBLE_EQ(ref.hbm_bandwidth, 2e12);
  EXPECT_NEAR(ref.sram_bytes, 20e6, 1e-3);
  EXPECT_DOUBLE_EQ(ref.price_usd_per_hour, 2.0);
}

// One unit for every preset's capacity: the datasheet figure read as GiB (issue 11: A100/H100 were
// in GiB while H200, B200 and L40S were converted from decimal GB, 7% less KV cache on an H200).
TEST(GpuSpecTest, EveryPresetsCapacityIsItsDatasheetFigureInGiB) {
  const std::pair<const char*, double> datasheet_gb[] = {
      {"a100-80gb-sxm", 80}, {"a100-40gb-sxm", 40}, {"h100-sxm", 80}, {"h100-pcie", 80},
      {"h200", 141},         {"b200", 180},         {"l40s", 48},     {"reference", 80},
  };
  EXPECT_EQ(gpu_registry().kind_names().size(), std::size(datasheet_gb)) << "a preset without its datasheet figure here";
  for (const auto& [name, gb] : datasheet_gb) {
    const GpuSpec g = parse_gpu(std::string("[gpu]\nkind = \"") + name + "\"\n");
    EXPECT_DOUBLE_EQ(g.memory_bytes, gb * 1024.0 * 1024.0 * 1024.0) << name;
  }
}

TEST(GpuSpecTest, FieldsOverrideInDatasheetUnits) {
  const GpuSpec g = parse_gpu("[gpu]\nkind = \"h100-sxm\"\nprice_usd_per_hour = 4\n"
                              "hbm_bandwidth_gb_s = 1000\nmemory_gib = 94\nnvlink_gb_s = 50\n");
  EXPECT_DOUBLE_EQ(g.price_usd_per_hour, 4.0);
  EXPECT_DOUBLE_EQ(g.hbm_bandwidth, 1e12);
  EXPECT_DOUBLE_EQ(g.memory_bytes, 94.0 * kBytesPerGib);
  EXPECT_DOUBLE_EQ(g.interconnect_bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(g.peak_flops, 989e12);
}

TEST(GpuSpecTest, RejectsNonPositiveRates) {
  try {
    parse_gpu("[gpu]\nkind = \"h100-sxm\"\npeak_tflops = 0\n");
    FAIL() << "peak_tflops = 0 accepted";
  } catch (const core::ConfigError& e) {
    EXPECT_EQ(e.key(), "gpu.peak_tflops");
  }
}

}  // namespace
}  // namespace servesim::hwmodels

namespace servesim::hwmodels {
namespace {

TEST(GpuSpecTest, AddedPresetsCarryTheirDatasheets) {
  const auto names = gpu_registry().kind_names();
  for (const char* want : {"a100-40gb-sxm", "h100-pcie", "b200", "l40s"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  const GpuSpec a40 = parse_gpu("[gpu]\nkind = \"a100-40gb-sxm\"\n");
  EXPECT_DOUBLE_EQ(a40.hbm_bandwidth, 1555e9);
  EXPECT_DOUBLE_EQ(a40.memory_bytes, 40 * kBytesPerGib);
  EXPECT_DOUBLE_EQ(a40.fp8_peak_flops, 0);  // Ampere has no fp8 tensor cores
  EXPECT_DOUBLE_EQ(a40.int8_peak_ops, 624e12);
  const GpuSpec pcie = parse_gpu("[gpu]\nkind = \"h100-pcie\"\n");
  EXPECT_DOUBLE_EQ(pcie.peak_flops, 756e12);
  EXPECT_DOUBLE_EQ(pcie.hbm_bandwidth, 2000e9);
  EXPECT_DOUBLE_EQ(pcie.fp8_peak_flops, 1513e12);
  const GpuSpec b200 = parse_gpu("[gpu]\nkind = \"b200\"\n");
  EXPECT_DOUBLE_EQ(b200.peak_flops, 2250e12);
  EXPECT_DOUBLE_EQ(b200.fp8_peak_flops, 4500e12);
  EXPECT_DOUBLE_EQ(b200.hbm_bandwidth, 8000e9);
  EXPECT_DOUBLE_EQ(b200.memory_bytes, 180 * kBytesPerGib);
  EXPECT_DOUBLE_EQ(b200.interconnect_bandwidth, 900e9);
  EXPECT_DOUBLE_EQ(b200.fp4_peak_flops, 9000e12);  // dense: half the datasheet's 18 PFLOPS with sparsity
  EXPECT_DOUBLE_EQ(pcie.fp4_peak_flops, 0);        // Hopper has no fp4 tensor cores
  const GpuSpec h200_fp4 = parse_gpu("[gpu]\nkind = \"h200\"\nfp4_peak_tflops = 1000\n");
  EXPECT_DOUBLE_EQ(h200_fp4.fp4_peak_flops, 1000e12);  // settable on any GPU (a what-if)
  const GpuSpec l40s = parse_gpu("[gpu]\nkind = \"l40s\"\n");
  EXPECT_DOUBLE_EQ(l40s.peak_flops, 362.05e12);
  EXPECT_DOUBLE_EQ(l40s.hbm_bandwidth, 864e9);
  EXPECT_DOUBLE_EQ(l40s.interconnect_bandwidth, 32e9);  // PCIe Gen4 x16, one direction
  const GpuSpec h100 = parse_gpu("[gpu]\nkind = \"h100-sxm\"\nfp8_peak_tflops = 0\n");
  EXPECT_DOUBLE_EQ(h100.gemm_peak(DType::kFp8), 989e12);  // overridable like every field
  for (const auto& name : names) EXPECT_GT(parse_gpu("[gpu]\nkind = \"" + name + "\"\n").price_usd_per_hour, 0) << name;
  EXPECT_THROW(gpu_preset("tpu-v5"), core::ConfigError);
  EXPECT_EQ(gpu_preset("B200").name, "b200");
}

}  // namespace
}  // namespace servesim::hwmodels
