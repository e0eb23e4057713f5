#pragma once
// A calibration profile: what one GPU type measurably reaches, as efficiency tables over operator
// shape, launch costs, collective alpha-beta coefficients and engine overheads. The roofline cost
// model reads it (`[cost_model] calibration = "PROFILE.toml"`); calibration/ writes it (from CUDA
// microbenchmarks, measured operator tables or step latencies).
//
// The format lives here rather than in calibration/ because the dependency runs calibration ->
// hwmodels: the cost model must read profiles without knowing how they were made. The file format
// is documented in docs/calibration.md; every section is optional, and what a profile lacks the
// cost model takes from its [cost_model] parameters.

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwmodels/efficiency_table.h"
#include "hwmodels/uncertainty.h"
#include "sim/core/params.h"

namespace servesim::hwmodels {

inline constexpr std::string_view kProfileFormat = "servesim-calibration-profile";
inline constexpr int64_t kProfileVersion = 1;
// Efficiencies above 1 are legal up to this bound: a kernel whose working set stays in L2 between
// timed repetitions moves bytes faster than HBM. The fitters never write a memory efficiency
// above 1 unless the samples were L2-resident on purpose (calibration/fit.h, kMaxHbmEfficiency):
// serving does not find its data in L2.
inline constexpr double kMaxEfficiency = 4.0;

// Latency plus size over bandwidth: time(bytes) = latency_s + bytes / bandwidth.
struct AlphaBeta {
  double latency_s = 0;
  double bandwidth = 0;  // bytes/s; for all-reduce the bus bandwidth (NCCL's busbw convention)
  friend bool operator==(const AlphaBeta&, const AlphaBeta&) = default;
};

// One message-size regime of an all-reduce: messages of up to max_bytes.
struct AllReduceRegime {
  double max_bytes = 0;
  AlphaBeta cost;
  friend bool operator==(const AllReduceRegime&, const AllReduceRegime&) = default;
};

// The elementwise kernel families a profile may give a curve for. A Llama block's operators map to
// them: input/post-attention/final RMSNorm -> rms_norm, rotary -> rope, SiLU-and-multiply -> act,
// residual adds -> add, embedding lookup -> embedding. "copy" is plain HBM streaming (the
// microbenchmarks' copy kernel) and stands in for a family the profile lacks.
inline constexpr std::string_view kElementwiseKinds[] = {"rms_norm", "rope", "act", "add", "embedding", "copy"};

struct GemmTables {
  Table2D compute_efficiency;  // x: rows (M, tokens), y: weight elements (N x K): fraction of peak
  Curve memory_efficiency;     // x: bytes moved (weights + activations): fraction of HBM bandwidth
  bool empty() const { return compute_efficiency.empty() && memory_efficiency.empty(); }
};

// One GPU's share of a model's attention as a decode kernel sees it: the key of a decode-attention
// table, because a paged decode kernel's efficiency depends on how many KV heads it streams in
// parallel, how many query heads share each, their size and the page size.
struct AttentionLayout {
  int64_t heads = 0;         // query heads on this GPU
  int64_t kv_heads = 0;      // KV heads on this GPU (replicated ones count once; MLA: 1, the latent)
  int64_t head_dim = 0;      // elements per cached key (MLA: kv_lora_rank + qk_rope_head_dim)
  int64_t block_size = 16;   // tokens per KV-cache page
  int64_t kv_lora_rank = 0;  // MLA: the latent's rank, the values' width (0: not MLA)
  bool is_mla() const { return kv_lora_rank > 0; }
  // Query heads per KV head.
  int64_t group() const { return kv_heads > 0 ? heads / kv_heads : 0; }
  auto operator<=>(const AttentionLayout&) const = default;
  std::string name() const;  // "32 heads / 8 KV heads x 128, pages of 16" (MLA: "... latent 512 + 64 ...")
};

// A decode-attention table measured at one head layout.
struct DecodeAttentionTable {
  AttentionLayout layout;
  Table2D memory_efficiency;  // x: decoding sequences, y: mean context tokens: fraction of HBM bandwidth
};

// How a model's layout found its decode-attention table (CalibrationProfile::decode_attention_table).
enum class DecodeTableMatch { kExact, kNearest, kUnkeyed, kNone };
struct DecodeTableChoice {
  const Table2D* table = nullptr;           // null: kNone, the constant attention_memory_efficiency
  DecodeTableMatch match = DecodeTableMatch::kNone;
  const AttentionLayout* layout = nullptr;  // the chosen keyed table's layout (kExact, kNearest)
};

struct CalibrationProfile {
  std::string gpu;          // the catalogue name of the GPU it describes
  std::string description;  // free text
  std::string source;       // how it was made: the commands, the inputs

  // Launch costs. kernel_us: fixed time each kernel adds on the GPU (ramp-up, tail, the gap to the
  // next), included in every operator's time; gemm_kernel_us: the same for GEMMs, whose prologue and
  // epilogue are longer (unset: kernel_us). eager_launch_us: CPU time to launch one kernel without
  // CUDA graphs; a kernel shorter than it leaves the GPU waiting. graph_launch_us: one CUDA graph
  // replay.
  std::optional<double> kernel_us, gemm_kernel_us, eager_launch_us, graph_launch_us;

  GemmTables gemm;      // 16-bit GEMMs (and int4 weight-only, which computes at the 16-bit rate)
  GemmTables gemm_fp8;  // W8A8 fp8 GEMMs relative to the fp8 peak; empty: gemm's tables are used
  std::map<std::string, Curve> elementwise;  // by kind (kElementwiseKinds): fraction of HBM bandwidth
  // By kind: the least time per byte of one row, for kernels that give each row to one thread block
  // (a row cannot finish faster than its block streams it, whatever the total bytes): ns per byte.
  std::map<std::string, double> elementwise_row_ns_per_byte;

  Curve attention_prefill;         // x: mean query tokens per prefill chunk: fraction of peak
  Table2D attention_decode;        // x: decoding sequences, y: mean context tokens: fraction of HBM
                                   // bandwidth; for any layout (the layout-keyed tables come first)
  std::vector<DecodeAttentionTable> attention_decode_layouts;  // by layout, ascending, each once

  // The analytic attention model's peak efficiencies, fitted where no attention kernel was timed
  // (servesim fit --from-serving-runs): decode streams the KV cache at this fraction of HBM
  // bandwidth when the GPU is full of work, prefill reaches this fraction of peak FLOP/s on full
  // tiles ([attention] decode_memory_efficiency, prefill_compute_efficiency). A measured table above
  // takes precedence for the layouts it covers.
  std::optional<double> attention_decode_efficiency, attention_prefill_efficiency;

  std::map<int64_t, AlphaBeta> all_reduce;  // by GPU count: the large-message (bandwidth) regime
  // Smaller-message regimes below it, by GPU count, ascending: a message of up to max_bytes takes
  // that regime's latency + 2 (n - 1) / n x bytes / its bus bandwidth (NCCL's and vLLM's custom
  // all-reduce switch from one-shot to two-shot and ring protocols as messages grow).
  std::map<int64_t, std::vector<AllReduceRegime>> all_reduce_regimes;
  std::optional<AlphaBeta> send_recv;       // point-to-point between two GPUs (pipeline stages, KV moves)
  std::optional<double> h2d_bandwidth, d2h_bandwidth;  // pinned host<->device copies, bytes/s

  // Engine overheads fitted from measured step latencies (servesim fit --from-step-latencies).
  // Iterations with prefill work use the first two, decode-only iterations the decode_ pair.
  std::optional<double> iteration_overhead_ms, layer_overhead_us, decode_iteration_overhead_ms,
      decode_layer_overhead_us;

  // Serving-engine parameters fitted to real serving runs (servesim fit --from-serving-runs), by
  // engine kind ([engine.<kind>] tables): the [engine] parameters of that kind, in their units
  // (booleans as 0 or 1). Keys written in a run's [engine] win over them.
  std::map<std::string, std::map<std::string, double>> engine;

  // How far runs on this profile are from the real engine ([uncertainty]: the serving fit's residuals,
  // hwmodels/uncertainty.h); empty when nothing measured end to end stands behind the profile.
  CalibrationUncertainty uncertainty;

  const Curve* elementwise_curve(std::string_view kind) const;  // the kind's, else "copy", else nullptr

  // The decode-attention table for a model whose per-GPU layout is `model`:
  // 1. among the layout-keyed tables of the same kind (MLA or not), the same head_dim and the same
  //    latent rank, the one nearest to `model` by, in this order, |log2| of the ratio of query
  //    heads per KV head, of KV heads, of page sizes (the first in layout order on a tie); kExact
  //    when all three agree;
  // 2. else the un-keyed [attention_decode] table (kUnkeyed);
  // 3. else none (kNone): the cost model uses its constant attention_memory_efficiency.
  DecodeTableChoice decode_attention_table(const AttentionLayout& model) const;
};

// Parses profile text; `source_name` names it in errors. Throws core::InputError naming the file,
// the line and the key (unknown keys, wrong types, arrays of mismatched length, axes that are not
// increasing, efficiencies outside (0, 4], a format or version this build does not read); nothing
// else. The fuzz entry point for this reader.
CalibrationProfile parse_calibration_profile(std::string_view toml_text, const std::string& source_name);
// Reads a profile file (core::InputError when it cannot be read or parsed).
CalibrationProfile read_calibration_profile(const std::string& path);
// The profile as TOML text, readable back by parse_calibration_profile to an equal profile.
std::string calibration_profile_toml(const CalibrationProfile& profile);
// Writes the profile to `path` through a temporary file and a rename, so an existing profile is
// replaced whole or not at all (core::Error when it cannot be written).
void write_calibration_profile(const CalibrationProfile& profile, const std::string& path);

// ---- Shipped profiles ----------------------------------------------------------------------------

// The directory of the running executable ("" when it cannot be told).
std::string executable_dir();
// The directories searched for shipped profiles, in order: $SERVESIM_PROFILE_DIR, then
// <executable>/../calibration/profiles (a build directory inside the source tree), then
// <executable>/../share/servesim/profiles (an installation).
std::vector<std::string> profile_search_path();
// The shipped profile of a GPU preset (<dir>/<gpu>.toml in the first directory that has it).
std::optional<std::string> shipped_profile(const std::string& gpu_name);

// Whether a profile of this GPU preset ships with servesim (calibration/profiles/<name>.toml; a test
// keeps the list and the files in step): a run that finds none of them selects no profile, and
// warns (a binary moved away from its build or installation would otherwise run uncalibrated).
bool has_shipped_profile(const std::string& gpu_name);

// The value of [cost_model] calibration that opts out of any profile.
inline constexpr std::string_view kNoCalibration = "none";
// The profile a run's [cost_model] section selects for a GPU: the file `calibration` names; none
// when it says "none"; else the GPU's shipped profile, when there is one (the default).
std::optional<std::string> selected_calibration(const core::Params& cost_model, const std::string& gpu_name);

}  // namespace servesim::hwmodels
