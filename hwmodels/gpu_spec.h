#pragma once
// A GPU type as its datasheet describes it.

#include <string>

#include "sim/core/params.h"

namespace servesim::hwmodels {

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

// Family "gpus": presets whose parameters default to the datasheet figures.
using GpuRegistry = core::Registry<GpuSpec>;
GpuRegistry& gpu_registry();

}  // namespace servesim::hwmodels
