#include "hwmodels/gpu_spec.h"

#include <memory>

#include "sim/core/format.h"

namespace servesim::hwmodels {

GpuRegistry& gpu_registry() {
  static GpuRegistry r("gpus", "accelerator types (datasheet figures, per GPU)");
  return r;
}

namespace {

struct GpuPreset {
  GpuSpec spec;
  std::string description;
};

GpuSpec gpu(std::string name, double peak_tflops, double hbm_gb_s, double memory_gib, double sram_mib,
            double nvlink_gb_s, double price_usd_per_hour) {
  GpuSpec g;
  g.name = std::move(name);
  g.peak_flops = peak_tflops * kFlopsPerTflop;
  g.hbm_bandwidth = hbm_gb_s * kBytesPerGb;
  g.memory_bytes = memory_gib * kBytesPerGib;
  g.sram_bytes = sram_mib * kBytesPerMib;
  g.interconnect_bandwidth = nvlink_gb_s * kBytesPerGb;
  g.price_usd_per_hour = price_usd_per_hour;
  return g;
}

// Sources. Compute, bandwidth, capacity and NVLink: NVIDIA's A100 80GB, H100 SXM5 and H200 SXM
// datasheets (dense, i.e. without the 2:4-sparsity doubling; NVLink quoted there as the
// bidirectional total, 600 and 900 GB/s, halved here to one direction). On-chip SRAM: L2 plus the
// combined L1/shared memory of all SMs, from the Ampere and Hopper architecture whitepapers:
// A100 40 MiB L2 + 108 SMs x 192 KiB = 60.25 MiB; H100/H200 50 MiB L2 + 132 SMs x 256 KiB = 83 MiB.
// Prices: per-GPU on-demand rates as surveyed in early-to-mid 2026. mercatus-ai.com "Cloud GPU
// pricing" (May 2026), specialist clouds / hyperscalers: A100 80GB $1.10-1.50 / $1.50-3.00,
// H100 SXM $2.50-3.50 / $3.50-5.00, H200 $3.50-4.50 / $4.50-7.00; pricegpu.pages.dev (early 2026):
// A100 80GB SXM $1.49-2.49, H100 SXM $2.49-3.99 (Lambda, CoreWeave, RunPod, Crusoe). We take
// A100 $1.80, H100 $2.50, H200 $3.50: the low end of the common range. Reservations run 30-50%
// lower and hyperscalers up to 2x higher; every $/token result scales with this one number, so
// set it to the deal being costed.
const std::vector<GpuPreset>& gpu_presets() {
  static const std::vector<GpuPreset> presets = {
      {gpu("a100-80gb-sxm", 312, 2039, 80, 60.25, 300, 1.80),
       "NVIDIA A100 80GB SXM: 312 TFLOP/s bf16, 2039 GB/s HBM2e, NVLink 3"},
      {gpu("h100-sxm", 989, 3350, 80, 83, 450, 2.50),
       "NVIDIA H100 80GB SXM5: 989 TFLOP/s dense bf16, 3350 GB/s HBM3, NVLink 4"},
      // 141 GB (decimal) of HBM3e = 131.3 GiB.
      {gpu("h200", 989, 4800, 141e9 / kBytesPerGib, 83, 450, 3.50),
       "NVIDIA H200 SXM: H100 compute with 141 GB HBM3e at 4800 GB/s"},
      // The lecture notes' reference accelerator: 312 TFLOP/s, 2 TB/s, "about 20 MB" of on-chip
      // memory (20e6 bytes); capacity, NVLink and price are not given there, so A100-like values.
      {gpu("reference", 312, 2000, 80, 20e6 / kBytesPerMib, 300, 2.00),
       "the lecture notes' reference accelerator: 312 TFLOP/s, 2 TB/s, 20 MB on-chip (ridge 156)"},
  };
  return presets;
}

}  // namespace

std::vector<core::ParamSpec> gpu_param_specs(const GpuSpec& d) {
  using core::ParamSpec;
  return {
      ParamSpec::real("peak_tflops", d.peak_flops / kFlopsPerTflop, "TFLOP/s",
                      "dense fp16/bf16 tensor-core peak (no sparsity)")
          .above(0),
      ParamSpec::real("hbm_bandwidth_gb_s", d.hbm_bandwidth / kBytesPerGb, "GB/s",
                      "HBM bandwidth (decimal GB)")
          .above(0),
      ParamSpec::real("memory_gib", d.memory_bytes / kBytesPerGib, "GiB", "HBM capacity").above(0),
      ParamSpec::real("sram_mib", d.sram_bytes / kBytesPerMib, "MiB",
                      "on-chip SRAM: L2 plus all SMs' L1/shared memory")
          .at_least(0),
      ParamSpec::real("nvlink_gb_s", d.interconnect_bandwidth / kBytesPerGb, "GB/s",
                      "NVLink bandwidth per GPU, one direction (half the bidirectional datasheet figure)")
          .above(0),
      ParamSpec::real("price_usd_per_hour", d.price_usd_per_hour, "USD/h",
                      "rental price of one GPU (on-demand cloud rate)")
          .at_least(0),
  };
}

GpuSpec gpu_from_params(const core::Params& p, const std::string& name) {
  return gpu(name, p.get_float("peak_tflops"), p.get_float("hbm_bandwidth_gb_s"),
             p.get_float("memory_gib"), p.get_float("sram_mib"), p.get_float("nvlink_gb_s"),
             p.get_float("price_usd_per_hour"));
}

const GpuSpec* find_gpu_preset(std::string_view name) {
  const std::string key = core::to_lower(name);
  for (const auto& p : gpu_presets())
    if (p.spec.name == key) return &p.spec;
  return nullptr;
}

namespace {

[[maybe_unused]] const bool kRegistered = [] {
  for (const auto& preset : gpu_presets()) {
    const std::string name = preset.spec.name;
    gpu_registry().add({name, preset.description, gpu_param_specs(preset.spec)},
                       [name](const core::Params& p) {
                         return std::make_unique<GpuSpec>(gpu_from_params(p, name));
                       });
  }
  return true;
}();

}  // namespace

}  // namespace servesim::hwmodels
