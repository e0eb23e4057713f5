#pragma once
// A GPU type as its datasheet describes it.

#include <string>
#include <string_view>
#include <vector>

#include "sim/core/params.h"

namespace servesim::hwmodels {

// The unit conversions the [gpu] keys need; named so no multiplier is hidden in arithmetic.
inline constexpr double kFlopsPerTflop = 1e12;
inline constexpr double kBytesPerGb = 1e9;                // decimal, as bandwidths are quoted
inline constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kBytesPerMib = 1024.0 * 1024.0;

struct GpuSpec {
  std::string name;
  double peak_flops = 0;           // dense fp16/bf16 FLOP/s
  double hbm_bandwidth = 0;        // bytes/s
  double memory_bytes = 0;         // HBM capacity, bytes
  double sram_bytes = 0;           // on-chip SRAM (L2 + shared), bytes
  double interconnect_bandwidth = 0;  // per-GPU NVLink bandwidth, bytes/s, one direction
  double price_usd_per_hour = 0;   // per GPU

  double ridge_point() const { return peak_flops / hbm_bandwidth; }  // FLOP/byte
};

// The [gpu] parameters of a preset (datasheet units: TFLOP/s, GB/s, GiB, MiB), preset values as
// defaults.
std::vector<core::ParamSpec> gpu_param_specs(const GpuSpec& defaults);
// Reads them back into SI units (the one factory behind every preset).
GpuSpec gpu_from_params(const core::Params& params, const std::string& name);
// A built-in preset by name (case ignored), nullptr when there is none.
const GpuSpec* find_gpu_preset(std::string_view name);

// Family "gpus": presets whose parameters default to the datasheet figures.
using GpuRegistry = core::Registry<GpuSpec>;
GpuRegistry& gpu_registry();

}  // namespace servesim::hwmodels
