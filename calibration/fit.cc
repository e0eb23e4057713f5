#include "calibration/fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "calibration/smooth_fit.h"
#include "hwmodels/engine/engine_model.h"
#include "hwmodels/roofline.h"
#include "hwmodels/roofline_cost_model.h"
#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::calibration {

namespace {

constexpr double kSecondsPerMs = 1e-3;
constexpr double kUsPerSecond = 1e6;
// Rows up to which a GEMM streams its weights (the memory-efficiency samples): at 8 rows a GEMM's
// intensity is ~8 FLOP/byte, 20-40x below any GPU's ridge point.
constexpr double kWeightStreamRows = 8;
// Smoothing of the fits (per node, against one sample): GEMM tables have few weight sizes and
// staircase-shaped efficiency in rows (wave quantisation), so they are smoothed harder than the
// elementwise curves, whose cliffs (L2 capacity) are real and sharp.
constexpr double kGemmSmoothing = 1.0;
constexpr double kMemorySmoothing = 0.3;
constexpr double kStreamSmoothing = 0.1;
constexpr double kStreamNodeStep = 0.5;  // half-octave nodes for elementwise curves

// A measured time less the fixed kernel time, never below 5% of the measurement.
double busy(double seconds, double kernel_s) { return std::max(seconds - kernel_s, 0.05 * seconds); }

std::pair<double, double> range(const std::vector<double>& v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return {*lo, *hi};
}

// A GEMM's fixed time: the zero-bytes intercept of the weight-streaming samples' times, which a
// cuBLAS kernel's prologue and epilogue make longer than an elementwise kernel's.
double gemm_fixed_seconds(const std::vector<GemmSample>& samples, double kernel_s) {
  std::vector<double> bytes, seconds;
  for (const GemmSample& s : samples)
    if (s.rows <= kWeightStreamRows) {
      bytes.push_back(s.bytes);
      seconds.push_back(s.seconds);
    }
  if (bytes.size() < 2) return kernel_s;
  const double intercept = fit_relative_line(bytes, seconds).intercept;
  const double shortest = *std::min_element(seconds.begin(), seconds.end());
  return round_significant(std::clamp(intercept, kernel_s, 0.9 * shortest), 2);
}

hwmodels::GemmTables fit_gemm(const std::vector<GemmSample>& samples, const hwmodels::GpuSpec& gpu, double kernel_s,
                              const std::string& table, CapReport& caps) {
  hwmodels::GemmTables out;
  if (samples.empty()) return out;
  std::vector<double> rows, weights, eff, mem_bytes, mem_eff;
  for (const GemmSample& s : samples) {
    const double t = busy(s.seconds, kernel_s);
    rows.push_back(s.rows);
    weights.push_back(s.weight_elements);
    eff.push_back(s.flops / (s.peak_flops * t));
    if (s.rows <= kWeightStreamRows) {
      mem_bytes.push_back(s.bytes);
      mem_eff.push_back(cap_memory_efficiency(s.bytes / (gpu.hbm_bandwidth * t), table, caps));
    }
  }
  const auto [r_lo, r_hi] = range(rows);
  const auto [w_lo, w_hi] = range(weights);
  out.compute_efficiency =
      fit_table(rows, weights, eff, log2_nodes(r_lo, r_hi), log2_nodes(w_lo, w_hi), kGemmSmoothing);
  if (!mem_bytes.empty()) {
    const auto [b_lo, b_hi] = range(mem_bytes);
    out.memory_efficiency = fit_curve(mem_bytes, mem_eff, log2_nodes(b_lo, b_hi), kMemorySmoothing, kMaxHbmEfficiency);
  }
  return out;
}

hwmodels::AlphaBeta fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds,
                                   double traffic_factor) {
  const Line line = fit_relative_line(bytes, seconds);
  // A negative intercept is noise at the small end: the latency is then the smallest measured time.
  const double floor = *std::min_element(seconds.begin(), seconds.end());
  const double latency = line.intercept > 0 ? line.intercept : floor;
  const double slope = line.slope > 0 ? line.slope : (seconds.back() - latency) / bytes.back();
  return {round_significant(latency), round_significant(traffic_factor / std::max(slope, 1e-18))};
}

// An all-reduce's time by message size runs in regimes: latency-bound one-shot kernels for small
// messages, then two-shot and ring protocols whose time grows with the bytes (NCCL switches between
// LL, LL128 and Simple protocols; vLLM's custom all-reduce between one-shot and two-shot). One line
// cannot follow both: the small regime would inherit the large one's intercept (NCCL's 30 us at 8
// GPUs where decode-size messages take under 10). This fits up to three lines to the lower
// envelope of the measurements (per power-of-two size bin, the 25th percentile of each size's
// fastest repetition: what a replayed graph, free of the host's launch jitter, pays), choosing the
// breakpoints that fit best; an extra regime must cut the error by a fifth (and by more than noise)
// to be kept. Returns the
// regimes ascending by size, the last one open-ended (max_bytes = infinity).
std::vector<hwmodels::AllReduceRegime> fit_all_reduce_regimes(const std::vector<MessageSample>& samples,
                                                              double traffic_factor) {
  std::map<int, std::vector<std::pair<double, double>>> bins;  // log2 size -> (bytes, fastest seconds)
  for (const MessageSample& s : samples)
    bins[static_cast<int>(std::floor(std::log2(s.bytes)))].emplace_back(
        s.bytes, s.fastest_seconds > 0 ? s.fastest_seconds : s.seconds);
  std::vector<double> bytes, seconds;
  for (auto& [bin, v] : bins) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    const auto& q = v[(v.size() - 1) / 4];  // a measured (size, time) pair, not a mix of two
    bytes.push_back(q.first);
    seconds.push_back(q.second);
  }
  const size_t n = bytes.size();
  auto segment_error = [&](size_t lo, size_t hi, Line& line) {  // points [lo, hi)
    const std::vector<double> b(bytes.begin() + static_cast<std::ptrdiff_t>(lo), bytes.begin() + static_cast<std::ptrdiff_t>(hi));
    const std::vector<double> t(seconds.begin() + static_cast<std::ptrdiff_t>(lo), seconds.begin() + static_cast<std::ptrdiff_t>(hi));
    line = fit_relative_line(b, t);
    if (!(line.intercept > 0)) line.intercept = *std::min_element(t.begin(), t.end()) * 0.5;
    if (!(line.slope > 0)) line.slope = 1e-18;
    double e = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      const double r = (line.intercept + line.slope * b[i]) / t[i] - 1.0;
      e += r * r;
    }
    return e;
  };
  struct Best {
    double error = std::numeric_limits<double>::infinity();
    std::vector<size_t> cuts;  // segment starts after the first
  } best;
  constexpr size_t kMinPoints = 2;
  for (size_t regimes = 1; regimes <= 3; ++regimes) {
    Best here;
    auto consider = [&](const std::vector<size_t>& cuts) {
      double e = 0;
      size_t lo = 0;
      Line line;
      for (size_t c : cuts) {
        e += segment_error(lo, c, line);
        lo = c;
      }
      e += segment_error(lo, n, line);
      if (e < here.error) here = {e, cuts};
    };
    if (regimes == 1) {
      if (n >= kMinPoints) consider({});
    } else if (regimes == 2) {
      for (size_t a = kMinPoints; a + kMinPoints <= n; ++a) consider({a});
    } else {
      for (size_t a = kMinPoints; a + 2 * kMinPoints <= n; ++a)
        for (size_t b = a + kMinPoints; b + kMinPoints <= n; ++b) consider({a, b});
    }
    // One regime always; each further one only on top of the last kept and when it pays: a fifth
    // less squared relative error, and at least (3%)^2 per point less (not noise-level gains).
    const double gain = best.error - here.error;
    if (regimes == 1 || (best.cuts.size() == regimes - 2 && here.error < 0.8 * best.error &&
                         gain > 9e-4 * static_cast<double>(n)))
      best = here;
  }
  std::vector<hwmodels::AllReduceRegime> out;
  size_t lo = 0;
  std::vector<size_t> cuts = best.cuts;
  cuts.push_back(n);
  for (size_t c : cuts) {
    Line line;
    segment_error(lo, c, line);
    const double max_bytes =
        c < n ? round_significant(std::sqrt(bytes[c - 1] * bytes[c]), 3) : std::numeric_limits<double>::infinity();
    out.push_back({max_bytes, {round_significant(line.intercept), round_significant(traffic_factor / line.slope)}});
    lo = c;
  }
  return out;
}

}  // namespace

size_t CapReport::total() const {
  size_t n = 0;
  for (const auto& [table, count] : capped) n += count;
  return n;
}

std::string CapReport::summary() const {
  if (total() == 0) return "";
  std::string tables;
  for (const auto& [table, count] : capped) tables += (tables.empty() ? "" : ", ") + table + " " + std::to_string(count);
  return std::to_string(total()) + " of " + std::to_string(samples) + " memory-efficiency samples above " +
         core::format_double(kMaxHbmEfficiency) + " x HBM bandwidth capped to it (" + tables + ")";
}

double cap_memory_efficiency(double efficiency, const std::string& table, CapReport& report) {
  ++report.samples;
  if (!(efficiency > kMaxHbmEfficiency)) return efficiency;
  ++report.capped[table];
  return kMaxHbmEfficiency;
}

double fitted_kernel_seconds(const Samples& samples) {
  double shortest = 1.0;
  for (const auto& s : samples.gemm) shortest = std::min(shortest, s.seconds);
  for (const auto& s : samples.gemm_fp8) shortest = std::min(shortest, s.seconds);
  for (const auto& s : samples.streams) shortest = std::min(shortest, s.seconds);
  constexpr double kMinKernelSeconds = 0.5e-6;
  return round_significant(std::max(kMinKernelSeconds, 0.8 * shortest), 2);
}

hwmodels::CalibrationProfile fit_profile(const Samples& samples, const hwmodels::GpuSpec& gpu, double kernel_s,
                                         CapReport& caps) {
  hwmodels::CalibrationProfile p;
  p.gpu = gpu.name;
  p.kernel_us = round_significant(kernel_s * kUsPerSecond, 3);
  const double gemm_s = gemm_fixed_seconds(samples.gemm.empty() ? samples.gemm_fp8 : samples.gemm, kernel_s);
  if (gemm_s != kernel_s) p.gemm_kernel_us = round_significant(gemm_s * kUsPerSecond, 3);
  p.gemm = fit_gemm(samples.gemm, gpu, gemm_s, "gemm", caps);
  p.gemm_fp8 = fit_gemm(samples.gemm_fp8, gpu, gemm_s, "gemm_fp8", caps);

  struct Family {
    std::vector<double> bytes, eff;
    bool l2_resident = false;  // some sample measured in L2 on purpose: the curve may exceed HBM
  };
  // The row floor of each family: a kernel that gives each row to one thread block takes, with a
  // wave of rows or fewer, as long as one block needs to stream one row's bytes, however few rows
  // there are (Vidur's H100 RMSNorm: 4 us for every row count up to 256 at hidden 4096, 6 us at
  // 8192; SiLU-and-multiply 6 us at width 11008, 15 us at 28672). The floor per byte of a row is
  // the median over the samples of at most kFloorRows rows of (time - fixed) / bytes per row; it
  // carries the floor to other widths, where a curve over total bytes cannot (same bytes, another
  // shape). Samples the floor explains are then left out of the bandwidth curve.
  constexpr double kFloorRows = 16, kFloorMargin = 1.25;
  std::map<std::string, std::vector<double>> per_byte;
  for (const StreamSample& s : samples.streams)
    if (s.rows > 0 && s.rows <= kFloorRows && s.bytes_per_row > 0 && !s.l2_resident)
      per_byte[s.family].push_back(busy(s.seconds, kernel_s) / s.bytes_per_row);
  for (auto& [family, v] : per_byte) {
    std::sort(v.begin(), v.end());
    p.elementwise_row_ns_per_byte[family] = round_significant(v[v.size() / 2] * 1e9, 3);
  }
  auto floor_explains = [&](const StreamSample& s) {
    const auto floor = p.elementwise_row_ns_per_byte.find(s.family);
    return floor != p.elementwise_row_ns_per_byte.end() && s.bytes_per_row > 0 &&
           busy(s.seconds, kernel_s) < kFloorMargin * floor->second * 1e-9 * s.bytes_per_row;
  };
  // A family whose samples the floor explains nearly all of cannot tell a floor from its bandwidth
  // (one row per sample, say): no floor then, and every sample goes to the curve.
  std::map<std::string, size_t> beyond_floor;
  for (const StreamSample& s : samples.streams)
    if (!floor_explains(s)) ++beyond_floor[s.family];
  for (auto it = p.elementwise_row_ns_per_byte.begin(); it != p.elementwise_row_ns_per_byte.end();)
    it = beyond_floor[it->first] < 3 ? p.elementwise_row_ns_per_byte.erase(it) : std::next(it);
  std::map<std::string, Family> streams;
  for (const StreamSample& s : samples.streams) {
    if (floor_explains(s)) continue;  // the row floor's time, not the bandwidth's
    const double busy_s = busy(s.seconds, kernel_s);
    Family& f = streams[s.family];
    const double eff = s.bytes / (gpu.hbm_bandwidth * busy_s);
    f.bytes.push_back(s.bytes);
    f.eff.push_back(s.l2_resident ? eff : cap_memory_efficiency(eff, "elementwise." + s.family, caps));
    f.l2_resident = f.l2_resident || s.l2_resident;
  }
  for (const auto& [family, f] : streams) {
    const auto [lo, hi] = range(f.bytes);
    p.elementwise[family] = fit_curve(f.bytes, f.eff, log2_nodes(lo, hi, kStreamNodeStep), kStreamSmoothing,
                                      f.l2_resident ? hwmodels::kMaxEfficiency : kMaxHbmEfficiency);
  }

  std::map<int64_t, std::vector<MessageSample>> messages;
  for (const MessageSample& s : samples.all_reduce) messages[s.gpus].push_back(s);
  for (const auto& [n, v] : messages) {
    // Ring all-reduce moves 2 (n - 1) / n of the message over each GPU's link: bus bandwidth.
    const double ring = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n);
    std::vector<hwmodels::AllReduceRegime> regimes = fit_all_reduce_regimes(v, ring);
    p.all_reduce[n] = regimes.back().cost;
    regimes.pop_back();
    if (!regimes.empty()) p.all_reduce_regimes[n] = regimes;
  }
  if (!samples.send_recv.empty()) {
    std::vector<double> bytes, seconds;
    for (const MessageSample& s : samples.send_recv) {
      bytes.push_back(s.bytes);
      seconds.push_back(s.seconds);
    }
    p.send_recv = fit_alpha_beta(bytes, seconds, 1.0);
  }
  return p;
}

Samples samples_from_operator_data(const OperatorData& data, const hwmodels::GpuSpec& gpu) {
  Samples out;
  for (const OperatorTable& table : data.tables) {
    std::map<int64_t, std::vector<hwmodels::OperatorShape>> shapes_by_tp;
    for (const OperatorRow& row : table.rows) {
      auto it = shapes_by_tp.find(row.tensor_parallel);
      if (it == shapes_by_tp.end()) {
        if (const std::string why = hwmodels::tp_problem(table.model, row.tensor_parallel); !why.empty())
          throw core::InputError(table.source, row.line, "num_tensor_parallel_workers", why);
        const hwmodels::RooflineCostModel model(table.model, gpu, row.tensor_parallel);
        it = shapes_by_tp.emplace(row.tensor_parallel, model.operator_shapes()).first;
      }
      const double m = static_cast<double>(row.num_tokens);
      for (const hwmodels::OperatorShape& op : it->second) {
        const auto measured = row.median_ms.find(std::string(op.name));
        if (measured == row.median_ms.end()) continue;
        const double seconds = measured->second * kSecondsPerMs;
        const double bytes = op.weight_bytes + op.bytes_per_row * m;
        if (op.gemm)
          out.gemm.push_back({m, op.weight_elements, op.flops_per_row * m, bytes, op.peak_flops, seconds});
        else
          out.streams.push_back({std::string(op.family), bytes, seconds, false, m, op.bytes_per_row});
      }
    }
  }
  for (const CollectiveRow& r : data.all_reduce)
    if (r.gpus_per_node == r.gpus)
      out.all_reduce.push_back({r.gpus, r.bytes, r.median_ms * kSecondsPerMs, r.min_ms * kSecondsPerMs});
  for (const CollectiveRow& r : data.send_recv)
    if (r.gpus_per_node == r.gpus)
      out.send_recv.push_back({r.gpus, r.bytes, r.median_ms * kSecondsPerMs, r.min_ms * kSecondsPerMs});
  return out;
}

hwmodels::CalibrationProfile fit_operator_profile(const OperatorData& data, const hwmodels::GpuSpec& gpu,
                                                  const std::string& source) {
  const Samples samples = samples_from_operator_data(data, gpu);
  CapReport caps;
  hwmodels::CalibrationProfile p = fit_profile(samples, gpu, fitted_kernel_seconds(samples), caps);
  p.description = "fitted from measured operator tables (" + std::to_string(data.tables.size()) + " models, " +
                  std::to_string(samples.gemm.size()) + " GEMM and " + std::to_string(samples.streams.size()) +
                  " elementwise samples, " + std::to_string(samples.all_reduce.size()) + " all-reduce and " +
                  std::to_string(samples.send_recv.size()) + " send/recv samples)";
  // The tables reused their buffers, so small kernels partly ran from L2 (docs/fidelity.md).
  if (const std::string capped = caps.summary(); !capped.empty()) p.description += "; " + capped;
  p.source = source;
  return p;
}

namespace {

struct PhaseFit {
  double iteration_ms = 0;
  double layer_us = 0;
};

// Least squares of residual = a + b x layers with weights 1 / measured^2 (relative error), a, b >= 0.
PhaseFit fit_overheads(const std::vector<const OverheadRow*>& rows, bool per_layer) {
  auto solve = [&](bool use_a, bool use_b) {
    double saa = 0, sab = 0, sbb = 0, sar = 0, sbr = 0;
    for (const OverheadRow* r : rows) {
      const double w = 1.0 / (r->measured_ms * r->measured_ms);
      const double res = r->measured_ms - r->physics_ms;
      const double l = static_cast<double>(r->layers);
      saa += w;
      sab += w * l;
      sbb += w * l * l;
      sar += w * res;
      sbr += w * l * res;
    }
    PhaseFit f;
    if (use_a && use_b) {
      const double det = saa * sbb - sab * sab;
      if (std::fabs(det) <= 1e-12 * saa * sbb) return f;
      f.iteration_ms = (sbb * sar - sab * sbr) / det;
      f.layer_us = (saa * sbr - sab * sar) / det * 1e3;
    } else if (use_a) {
      f.iteration_ms = sar / saa;
    } else if (use_b) {
      f.layer_us = sbr / sbb * 1e3;
    }
    return f;
  };
  if (rows.empty()) return {};
  PhaseFit f = per_layer ? solve(true, true) : solve(true, false);
  if (f.iteration_ms < 0 || f.layer_us < 0) {
    PhaseFit only_a = solve(true, false), only_b = per_layer ? solve(false, true) : PhaseFit{};
    only_a.iteration_ms = std::max(0.0, only_a.iteration_ms);
    only_b.layer_us = std::max(0.0, only_b.layer_us);
    auto error = [&](const PhaseFit& g) {
      double e = 0;
      for (const OverheadRow* r : rows) {
        const double p = r->physics_ms + g.iteration_ms + g.layer_us * 1e-3 * static_cast<double>(r->layers);
        e += (p - r->measured_ms) * (p - r->measured_ms) / (r->measured_ms * r->measured_ms);
      }
      return e;
    };
    f = error(only_a) <= error(only_b) ? only_a : only_b;
  }
  return f;
}

double predict(const OverheadRow& r, const PhaseFit& f) {
  return r.physics_ms + f.iteration_ms + f.layer_us * 1e-3 * static_cast<double>(r.layers);
}

}  // namespace

OverheadFit fit_step_latencies(const std::vector<StepLatencyRow>& rows, const std::vector<hwmodels::ModelSpec>& models,
                               const hwmodels::GpuSpec& gpu, const hwmodels::CalibrationProfile* base, bool cuda_graphs) {
  if (rows.size() != models.size()) throw core::Error("fit_step_latencies: one model per row is needed");
  OverheadFit out;
  if (base) out.profile = *base;
  out.profile.gpu = gpu.name;
  hwmodels::RooflineParams params;
  hwmodels::ProfileUse use;
  if (base) use = hwmodels::apply_profile_scalars(*base, params, [](std::string_view) { return false; });
  // The GPU time of each measured step, launched as the engine launched it (graphs replayed for
  // decode-only steps when cuda_graphs); the host overheads are what this fit finds.
  hwmodels::EngineModel launcher;
  launcher.graphs = cuda_graphs ? hwmodels::CudaGraphMode::kFullDecode : hwmodels::CudaGraphMode::kNone;
  for (size_t i = 0; i < rows.size(); ++i) {
    const StepLatencyRow& row = rows[i];
    if (const std::string why = hwmodels::tp_problem(models[i], row.tp); !why.empty())
      throw core::InputError("step latencies", row.line, "tp", why);
    const hwmodels::RooflineCostModel cost(models[i], gpu, row.tp, params, base, use);
    if (row.prefill_ms) {
      hwmodels::BatchShape s;
      s.prefill_seqs = row.batch;
      s.prefill_tokens = row.batch * row.prompt;
      s.prefill_logits = row.batch;
      s.prefill_attention_pairs = row.batch * (row.prompt * (row.prompt + 1) / 2);
      launcher.prepare(s);
      out.rows.push_back({row.line, row.model, "prefill", models[i].num_layers, *row.prefill_ms,
                          cost.step(s).seconds * 1e3, 0, 0});
    }
    if (row.decode_step_ms) {
      hwmodels::BatchShape s;
      s.decode_seqs = row.batch;
      s.decode_context_tokens = row.batch * row.prompt;
      launcher.prepare(s);
      out.rows.push_back({row.line, row.model, "decode", models[i].num_layers, *row.decode_step_ms,
                          cost.step(s).seconds * 1e3, 0, 0});
    }
  }
  double ape = 0, held_ape = 0;
  size_t held_n = 0;
  for (const char* phase : {"prefill", "decode"}) {
    std::vector<OverheadRow*> mine;
    for (auto& r : out.rows)
      if (r.phase == phase) mine.push_back(&r);
    if (mine.empty()) continue;
    bool per_layer = false;
    for (const OverheadRow* r : mine) per_layer = per_layer || r->layers != mine.front()->layers;
    const std::vector<const OverheadRow*> all(mine.begin(), mine.end());
    const PhaseFit f = fit_overheads(all, per_layer);
    for (OverheadRow* r : mine) {
      r->predicted_ms = predict(*r, f);
      ape += std::fabs(r->predicted_ms - r->measured_ms) / r->measured_ms;
      if (mine.size() < 2) continue;
      std::vector<const OverheadRow*> others;
      bool others_per_layer = false;
      for (const OverheadRow* o : mine)
        if (o != r) {
          others.push_back(o);
          others_per_layer = others_per_layer || o->layers != others.front()->layers;
        }
      r->held_out_ms = predict(*r, fit_overheads(others, others_per_layer));
      held_ape += std::fabs(r->held_out_ms - r->measured_ms) / r->measured_ms;
      ++held_n;
    }
    const double iteration = round_significant(f.iteration_ms, 4), layer = round_significant(f.layer_us, 4);
    if (std::string(phase) == "prefill") {
      out.profile.iteration_overhead_ms = iteration;
      out.profile.layer_overhead_us = layer;
      out.prefill_per_layer = per_layer;
    } else {
      out.profile.decode_iteration_overhead_ms = iteration;
      out.profile.decode_layer_overhead_us = layer;
      out.decode_per_layer = per_layer;
    }
  }
  out.mape = ape / static_cast<double>(out.rows.size());
  out.held_out_mape = held_n ? held_ape / static_cast<double>(held_n) : 0.0;
  return out;
}

}  // namespace servesim::calibration
