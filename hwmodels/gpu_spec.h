#pragma once
// A GPU type as its datasheet describes it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hwmodels/dtype.h"
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
  double fp8_peak_flops = 0;       // dense fp8 FLOP/s; 0 = no fp8 tensor cores
  double int8_peak_ops = 0;        // dense int8 OP/s; 0 = no int8 tensor cores
  double fp4_peak_flops = 0;       // dense fp4 (nvfp4/mxfp4 block-scaled) FLOP/s; 0 = no fp4 tensor cores
  double hbm_bandwidth = 0;        // bytes/s
  double memory_bytes = 0;         // HBM capacity, bytes
  double sram_bytes = 0;           // on-chip SRAM (L2 + shared), bytes
  double interconnect_bandwidth = 0;  // per-GPU NVLink bandwidth, bytes/s, one direction
  double price_usd_per_hour = 0;   // per GPU
  int64_t sm_count = 108;          // streaming multiprocessors

  double ridge_point() const { return peak_flops / hbm_bandwidth; }  // FLOP/byte
  // The tensor-core rate a GEMM with weights stored as `weights` runs at: fp8 and int8 weights run
  // W8A8 on the matching tensor cores where the GPU has them; everything else (fp16/bf16, int4
  // weight-only, fp8 or int8 on a GPU without those units) computes at the 16-bit rate. nvfp4
  // weights run W4A4 at the fp4 rate on GPUs with fp4 tensor cores (Blackwell); mxfp4 weights run
  // weight-only, as engines serve gpt-oss's experts by default.
  double gemm_peak(DType weights) const;
};

// The [gpu] parameters of a preset (datasheet units: TFLOP/s, GB/s, GiB, MiB), preset values as
// defaults.
std::vector<core::ParamSpec> gpu_param_specs(const GpuSpec& defaults);
// Reads them back into SI units (the one factory behind every preset).
GpuSpec gpu_from_params(const core::Params& params, const std::string& name);
// A built-in preset by name (case ignored), nullptr when there is none.
const GpuSpec* find_gpu_preset(std::string_view name);
// The same for a command-line argument: core::ConfigError naming `option` and listing the presets
// when there is none.
const GpuSpec& gpu_preset(std::string_view name, const std::string& option = "--gpu");

// Family "gpus": presets whose parameters default to the datasheet figures.
using GpuRegistry = core::Registry<GpuSpec>;
GpuRegistry& gpu_registry();

}  // namespace servesim::hwmodels
