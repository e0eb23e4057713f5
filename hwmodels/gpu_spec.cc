#include "hwmodels/gpu_spec.h"

#include <memory>

#include "sim/core/error.h"
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
            double nvlink_gb_s, double price_usd_per_hour, double fp8_tflops, double int8_tops, int64_t sm_count,
            double fp4_tflops = 0) {
  GpuSpec g;
  g.name = std::move(name);
  g.peak_flops = peak_tflops * kFlopsPerTflop;
  g.fp8_peak_flops = fp8_tflops * kFlopsPerTflop;
  g.int8_peak_ops = int8_tops * kFlopsPerTflop;
  g.fp4_peak_flops = fp4_tflops * kFlopsPerTflop;
  g.hbm_bandwidth = hbm_gb_s * kBytesPerGb;
  g.memory_bytes = memory_gib * kBytesPerGib;
  g.sram_bytes = sram_mib * kBytesPerMib;
  g.interconnect_bandwidth = nvlink_gb_s * kBytesPerGb;
  g.price_usd_per_hour = price_usd_per_hour;
  g.sm_count = sm_count;
  return g;
}

// Memory capacity, one unit for every preset: the datasheet's figure in GiB. DRAM comes in
// binary-sized devices, and the "GB" of a GPU datasheet is a binary gigabyte: nvidia-smi reports
// 81,920 MiB (80.0 GiB) on an A100 80GB, about 143,700 MiB (140.4 GiB) on an H200 "141GB" and about
// 183,300 MiB (179 GiB) on a B200 "180GB". Reading 141 GB as 141e9 bytes (131.3 GiB) would lose
// 7% of an H200's KV cache. What the runtime and the engine keep for themselves is
// gpu_memory_utilization's and activation_reserve_gib's business, not the capacity's.
//
// Sources. Compute, bandwidth, capacity and NVLink: NVIDIA's A100 80GB, H100 SXM5 and H200 SXM
// datasheets (dense, i.e. without the 2:4-sparsity doubling; NVLink quoted there as the
// bidirectional total, 600 and 900 GB/s, halved here to one direction). On-chip SRAM: L2 plus the
// combined L1/shared memory of all SMs (SM counts: A100 108, H100 SXM and H200 132, H100 PCIe 114,
// B200 148, L40S 142), from the Ampere, Hopper, Blackwell and Ada architecture whitepapers:
// A100 40 MiB L2 + 108 SMs x 192 KiB = 60.25 MiB; H100/H200 50 MiB L2 + 132 SMs x 256 KiB = 83 MiB.
// fp8 and int8 rates are the datasheets' dense tensor figures (A100: int8 624 TOPS, no fp8; H100
// SXM and H200: 1979 for both).
// Prices: per-GPU on-demand rates as surveyed in early-to-mid 2026. mercatus-ai.com "Cloud GPU
// pricing" (May 2026), specialist clouds / hyperscalers: A100 80GB $1.10-1.50 / $1.50-3.00,
// H100 SXM $2.50-3.50 / $3.50-5.00, H200 $3.50-4.50 / $4.50-7.00; pricegpu.pages.dev (early 2026):
// A100 80GB SXM $1.49-2.49, H100 SXM $2.49-3.99 (Lambda, CoreWeave, RunPod, Crusoe). We take
// A100 $1.80, H100 $2.50, H200 $3.50: the low end of the common range. Reservations run 30-50%
// lower and hyperscalers up to 2x higher; every $/token result scales with this one number, so
// set it to the deal being costed.
//
// Added presets, same conventions:
// - A100 40GB SXM: NVIDIA A100 datasheet, 312 TFLOP/s bf16, 624 TOPS int8, 1555 GB/s HBM2, NVLink 3
//   600 GB/s bidirectional; same die (60.25 MiB SRAM). $1.30/h: below the 80GB part, as clouds list it.
// - H100 PCIe: NVIDIA H100 datasheet (PCIe column), 756 TFLOP/s bf16, 1513 fp8/int8, 2000 GB/s
//   HBM2e, 80 GB, NVLink bridge 600 GB/s bidirectional (pairs); 114 SMs x 256 KiB + 50 MiB L2 =
//   78.5 MiB. $2.00/h.
// - B200 (HGX, 1000 W): NVIDIA HGX/DGX B200 datasheets, 2250 TFLOP/s bf16 dense, 4500 fp8 and int8
//   dense, 180 GB HBM3e per GPU (DGX B200: 1440 GB over 8), 8000 GB/s (64 TB/s over 8), NVLink 5
//   1800 GB/s bidirectional; fp4 9000 TFLOP/s dense (the datasheets' 18 PFLOPS fp4 per GPU, DGX B200
//   144 PFLOPS over 8, are with 2:4 sparsity; dense is half, as for every other precision). SRAM: 148 SMs x 256 KiB + the ~96 MB L2 third-party die analyses
//   report (NVIDIA publishes no L2 figure) = 133 MiB, approximate. $5.00/h (2026 specialist-cloud
//   listings run $4-6).
// - L40S: NVIDIA L40S datasheet, 362.05 TFLOP/s bf16 dense, 733 fp8 and int8 dense, 864 GB/s GDDR6,
//   48 GB, no NVLink: PCIe Gen4 x16 64 GB/s bidirectional, so 32 GB/s one way is the TP link. SRAM:
//   AD102's 96 MiB L2 + 142 SMs x 128 KiB = 113.75 MiB. $0.87/h (aihardwareindex.com, Dec 2025).
const std::vector<GpuPreset>& gpu_presets() {
  static const std::vector<GpuPreset> presets = {
      {gpu("a100-80gb-sxm", 312, 2039, 80, 60.25, 300, 1.80, 0, 624, 108),
       "NVIDIA A100 80GB SXM: 312 TFLOP/s bf16, 2039 GB/s HBM2e, NVLink 3"},
      {gpu("a100-40gb-sxm", 312, 1555, 40, 60.25, 300, 1.30, 0, 624, 108),
       "NVIDIA A100 40GB SXM: 312 TFLOP/s bf16, 1555 GB/s HBM2, NVLink 3"},
      {gpu("h100-sxm", 989, 3350, 80, 83, 450, 2.50, 1979, 1979, 132),
       "NVIDIA H100 80GB SXM5: 989 TFLOP/s dense bf16 (1979 fp8), 3350 GB/s HBM3, NVLink 4"},
      {gpu("h100-pcie", 756, 2000, 80, 78.5, 300, 2.00, 1513, 1513, 114),
       "NVIDIA H100 80GB PCIe: 756 TFLOP/s dense bf16 (1513 fp8), 2000 GB/s HBM2e, NVLink bridge"},
      {gpu("h200", 989, 4800, 141, 83, 450, 3.50, 1979, 1979, 132),
       "NVIDIA H200 SXM: H100 compute with 141 GB HBM3e at 4800 GB/s"},
      {gpu("b200", 2250, 8000, 180, 133, 900, 5.00, 4500, 4500, 148, 9000),
       "NVIDIA B200 (HGX): 2250 TFLOP/s dense bf16 (4500 fp8, 9000 fp4), 180 GB HBM3e at 8000 GB/s, NVLink 5"},
      {gpu("l40s", 362.05, 864, 48, 113.75, 32, 0.87, 733, 733, 142),
       "NVIDIA L40S: 362 TFLOP/s dense bf16 (733 fp8), 48 GB GDDR6 at 864 GB/s, PCIe Gen4 (no NVLink)"},
      // The lecture notes' reference accelerator: 312 TFLOP/s, 2 TB/s, "about 20 MB" of on-chip
      // memory (20e6 bytes); capacity, NVLink and price are not given there, so A100-like values.
      {gpu("reference", 312, 2000, 80, 20e6 / kBytesPerMib, 300, 2.00, 0, 0, 108),
       "the lecture notes' reference accelerator: 312 TFLOP/s, 2 TB/s, 20 MB on-chip (ridge 156)"},
  };
  return presets;
}

}  // namespace

// Plausible ranges (issue 14): from far below any accelerator a model is served on to far above any
// announced one, so that a typo (1e-12, 1e300) is refused instead of giving zero latencies, an MFU
// above 100% or a clock overflow.
std::vector<core::ParamSpec> gpu_param_specs(const GpuSpec& d) {
  using core::ParamSpec;
  // Declared with a default only where the GPU has fp4 units, so that the resolved configuration
  // (and its hash) of every other GPU is what it was before fp4 existed.
  ParamSpec fp4 = ParamSpec::real("fp4_peak_tflops", d.fp4_peak_flops / kFlopsPerTflop, "TFLOP/s",
                                  "dense fp4 tensor-core peak (nvfp4 W4A4 GEMMs); unset or 0 = no fp4 units")
                      .zero_or(0.1, 4e5);
  if (d.fp4_peak_flops <= 0) fp4.optional();
  return {
      ParamSpec::real("peak_tflops", d.peak_flops / kFlopsPerTflop, "TFLOP/s",
                      "dense fp16/bf16 tensor-core peak (no sparsity)")
          .range(0.1, 1e5),
      ParamSpec::real("fp8_peak_tflops", d.fp8_peak_flops / kFlopsPerTflop, "TFLOP/s",
                      "dense fp8 tensor-core peak; 0 = no fp8 units (fp8 weights then run weight-only)")
          .zero_or(0.1, 2e5),
      ParamSpec::real("int8_peak_tops", d.int8_peak_ops / kFlopsPerTflop, "TOP/s",
                      "dense int8 tensor-core peak; 0 = no int8 units")
          .zero_or(0.1, 2e5),
      fp4,
      ParamSpec::real("hbm_bandwidth_gb_s", d.hbm_bandwidth / kBytesPerGb, "GB/s",
                      "HBM bandwidth (decimal GB)")
          .range(1, 1e6),
      ParamSpec::real("memory_gib", d.memory_bytes / kBytesPerGib, "GiB", "HBM capacity").range(0.5, 1e5),
      ParamSpec::real("sram_mib", d.sram_bytes / kBytesPerMib, "MiB",
                      "on-chip SRAM: L2 plus all SMs' L1/shared memory")
          .range(0, 1e5),
      ParamSpec::real("nvlink_gb_s", d.interconnect_bandwidth / kBytesPerGb, "GB/s",
                      "GPU-to-GPU link bandwidth per GPU, one direction (half the bidirectional datasheet "
                      "figure): NVLink, or PCIe where a GPU has no NVLink")
          .range(0.1, 1e5),
      ParamSpec::integer("sm_count", d.sm_count, "SMs",
                         "streaming multiprocessors: how many thread blocks run at once (attention and norm "
                         "kernels with few blocks cannot use all of them)")
          .range(1, 1 << 16),
      ParamSpec::real("price_usd_per_hour", d.price_usd_per_hour, "USD/h",
                      "rental price of one GPU (on-demand cloud rate)")
          .range(0, 1e4),
  };
}

GpuSpec gpu_from_params(const core::Params& p, const std::string& name) {
  return gpu(name, p.get_float("peak_tflops"), p.get_float("hbm_bandwidth_gb_s"),
             p.get_float("memory_gib"), p.get_float("sram_mib"), p.get_float("nvlink_gb_s"),
             p.get_float("price_usd_per_hour"), p.get_float("fp8_peak_tflops"), p.get_float("int8_peak_tops"),
             p.get_int("sm_count"), p.has("fp4_peak_tflops") ? p.get_float("fp4_peak_tflops") : 0.0);
}

double GpuSpec::gemm_peak(DType weights) const {
  switch (weights) {
    case DType::kFp8: return fp8_peak_flops > 0 ? fp8_peak_flops : peak_flops;
    case DType::kInt8: return int8_peak_ops > 0 ? int8_peak_ops : peak_flops;
    case DType::kNvfp4: return fp4_peak_flops > 0 ? fp4_peak_flops : peak_flops;
    case DType::kFp32: return peak_flops / 2.0;  // TF32 tensor cores run at half the 16-bit rate
    default: return peak_flops;
  }
}

const GpuSpec* find_gpu_preset(std::string_view name) {
  const std::string key = core::to_lower(name);
  for (const auto& p : gpu_presets())
    if (p.spec.name == key) return &p.spec;
  return nullptr;
}

const GpuSpec& gpu_preset(std::string_view name, const std::string& option) {
  if (const GpuSpec* g = find_gpu_preset(name)) return *g;
  std::string valid;
  for (const auto& p : gpu_presets()) valid += (valid.empty() ? "" : ", ") + p.spec.name;
  throw core::ConfigError({option, 0, 0}, option.substr(option.find_first_not_of('-')),
                          "unknown GPU '" + std::string(name) + "'; valid: " + valid);
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
