#include "calibration/microbench_samples.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "calibration/csv.h"
#include "calibration/microbench/planning.h"
#include "calibration/microbench/raw_format.h"
#include "calibration/smooth_fit.h"
#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::calibration {

namespace {

// The header must be the format's, column for column.
void check_header(const CsvTable& t, const char* expected) {
  const CsvTable want = parse_csv(expected, "format");
  if (t.header != want.header)
    throw core::InputError(t.source, 1, "", std::string("expected the header '") + expected + "'");
}

double positive(const CsvTable& t, size_t r, size_t c) {
  const double v = t.number(r, c);
  if (!(v > 0)) throw core::InputError(t.source, t.lines[r], t.header[c], "expected a positive value");
  return v;
}

template <class F>
void rows(const CsvTable& t, F&& f) {
  for (size_t r = 0; r < t.rows.size(); ++r) f(r);
}

std::string one_of(const CsvTable& t, size_t r, size_t c, std::initializer_list<const char*> valid) {
  const std::string& v = t.rows[r][c];
  for (const char* ok : valid)
    if (v == ok) return v;
  std::string list;
  for (const char* ok : valid) list += (list.empty() ? "" : ", ") + std::string(ok);
  throw core::InputError(t.source, t.lines[r], t.header[c], "'" + v.substr(0, 40) + "' is not one of: " + list);
}

}  // namespace

void parse_microbench_file(std::string_view name, std::string_view text, const std::string& source,
                           MicrobenchRun& run) {
  const CsvTable t = parse_csv(text, source);
  using namespace raw;
  if (name == kDeviceFile) {
    check_header(t, kDeviceHeader);
    rows(t, [&](size_t r) { run.device[t.rows[r][0]] = t.rows[r][1]; });
  } else if (name == kGemmFile) {
    check_header(t, kGemmHeader);
    rows(t, [&](size_t r) {
      run.gemm.push_back({t.lines[r], one_of(t, r, 0, {"fp16", "bf16", "fp8"}), positive(t, r, 1), positive(t, r, 2),
                          positive(t, r, 3), positive(t, r, 4)});
    });
  } else if (name == kStreamFile) {
    check_header(t, kStreamHeader);
    rows(t, [&](size_t r) {
      const int64_t l2_resident = t.integer(r, 6);
      if (l2_resident < 0 || l2_resident > 1)
        throw core::InputError(source, t.lines[r], "l2_resident", "expected 0 or 1");
      run.streams.push_back({t.lines[r], one_of(t, r, 0, {"read", "copy", "rms_norm", "rope", "act", "add", "embedding"}),
                             positive(t, r, 1), positive(t, r, 2), positive(t, r, 3), positive(t, r, 4),
                             l2_resident == 1});
    });
  } else if (name == kDecodeAttentionFile) {
    check_header(t, kDecodeAttentionHeader);
    rows(t, [&](size_t r) {
      // The head layout keys a profile table: whole numbers, query heads a multiple of KV heads.
      auto whole = [&](size_t c) {
        const int64_t v = t.integer(r, c);
        if (v < 1 || v > (int64_t{1} << 30)) throw core::InputError(source, t.lines[r], t.header[c], "expected 1..2^30");
        return static_cast<double>(v);
      };
      const double heads = whole(2), kv_heads = whole(3);
      if (std::fmod(heads, kv_heads) != 0)
        throw core::InputError(source, t.lines[r], "kv_heads", "must divide heads");
      run.decode_attention.push_back({t.lines[r], whole(0), whole(1), heads, kv_heads, whole(4), whole(5),
                                      positive(t, r, 6), positive(t, r, 7)});
    });
  } else if (name == kPrefillAttentionFile) {
    check_header(t, kPrefillAttentionHeader);
    rows(t, [&](size_t r) {
      run.prefill_attention.push_back({t.lines[r], positive(t, r, 0), positive(t, r, 1), positive(t, r, 2),
                                       positive(t, r, 3), positive(t, r, 4), positive(t, r, 5), positive(t, r, 6)});
    });
  } else if (name == kLaunchFile) {
    check_header(t, kLaunchHeader);
    rows(t, [&](size_t r) {
      run.launch.push_back({t.lines[r],
                            one_of(t, r, 0, {"host_launch_kernel", "gpu_kernel_stream", "host_launch_graph",
                                             "gpu_kernel_graph", "graph_replay_idle"}),
                            positive(t, r, 1)});
    });
  } else if (name == kAllReduceFile) {
    check_header(t, kAllReduceHeader);
    rows(t, [&](size_t r) {
      const int64_t gpus = t.integer(r, 0);
      if (gpus < 2 || gpus > 4096) throw core::InputError(source, t.lines[r], "gpus", "expected 2..4096 GPUs");
      run.all_reduce.push_back({t.lines[r], gpus, positive(t, r, 1), positive(t, r, 2)});
    });
  } else if (name == kSendRecvFile) {
    check_header(t, kSendRecvHeader);
    rows(t, [&](size_t r) { run.send_recv.push_back({t.lines[r], 2, positive(t, r, 0), positive(t, r, 1)}); });
  } else if (name == kHostCopyFile) {
    check_header(t, kHostCopyHeader);
    rows(t, [&](size_t r) {
      run.host_copy.push_back({t.lines[r], one_of(t, r, 0, {"h2d", "d2h"}), positive(t, r, 1), positive(t, r, 2)});
    });
  } else if (name == kChecksFile) {
    check_header(t, kChecksHeader);
    rows(t, [&](size_t r) {
      const int64_t ok = t.integer(r, 2);
      if (ok > 1) throw core::InputError(source, t.lines[r], "ok", "expected 0 or 1");
      run.checks.push_back({t.lines[r], t.rows[r][0], t.number(r, 1), ok == 1});
    });
  } else {
    throw core::InputError(source, 0, "", "not a microbenchmark output file (raw_format.h)");
  }
}

MicrobenchRun read_microbench_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw core::InputError(dir, 0, "", "not a directory of microbenchmark samples (calibration/microbench/)");
  MicrobenchRun run;
  run.dir = dir;
  using namespace raw;
  for (const char* name : {kDeviceFile, kGemmFile, kStreamFile, kDecodeAttentionFile, kPrefillAttentionFile, kLaunchFile,
                           kAllReduceFile, kSendRecvFile, kHostCopyFile, kChecksFile}) {
    const fs::path p = fs::path(dir) / name;
    if (!fs::is_regular_file(p, ec)) continue;
    parse_microbench_file(name, read_text_file(p.string()), p.string(), run);
    run.files.push_back(p.string());
  }
  if (run.device.empty())
    throw core::InputError((fs::path(dir) / kDeviceFile).string(), 0, "", "missing: not a microbenchmark output directory");
  if (run.gemm.empty() && run.streams.empty())
    throw core::InputError(dir, 0, "", "no gemm.csv or stream.csv samples: the microbenchmarks did not run");
  return run;
}

std::string gpu_of_run(const MicrobenchRun& run) {
  if (const auto it = run.device.find("servesim_gpu"); it != run.device.end() && !it->second.empty())
    return core::to_lower(it->second);
  const auto it = run.device.find("name");
  if (it == run.device.end()) return "";
  const std::string n = core::to_lower(it->second);
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("h200")) return "h200";
  if (has("h100") && has("pcie")) return "h100-pcie";
  if (has("h100")) return "h100-sxm";
  if (has("a100") && has("40gb")) return "a100-40gb-sxm";
  if (has("a100")) return "a100-80gb-sxm";
  if (has("b200")) return "b200";
  if (has("l40s")) return "l40s";
  return "";
}

namespace {

constexpr double kHalfBytes = 2.0;

double gemm_peak(const hwmodels::GpuSpec& gpu, const std::string& dtype) {
  return dtype == "fp8" ? gpu.gemm_peak(hwmodels::DType::kFp8) : gpu.peak_flops;
}

}  // namespace

hwmodels::CalibrationProfile fit_microbench_profile(const MicrobenchRun& run, const hwmodels::GpuSpec& gpu,
                                                    const std::string& source) {
  std::vector<std::string> failed;
  for (const auto& c : run.checks)
    if (!c.ok) failed.push_back(c.check);
  auto check_failed = [&](const std::string& prefix) {
    return std::any_of(failed.begin(), failed.end(), [&](const std::string& f) { return f.rfind(prefix, 0) == 0; });
  };

  Samples s;
  for (const auto& g : run.gemm) {
    const double w_bytes = g.dtype == "fp8" ? 1.0 : kHalfBytes;
    // An fp8 GEMM reads fp8 activations and writes bf16; a 16-bit one reads and writes 16-bit.
    const double a_in = g.dtype == "fp8" ? 1.0 : kHalfBytes;
    GemmSample sample{g.m, g.n * g.k, 2.0 * g.m * g.n * g.k, g.n * g.k * w_bytes + g.m * (g.k * a_in + g.n * kHalfBytes),
                      gemm_peak(gpu, g.dtype), g.seconds};
    (g.dtype == "fp8" ? s.gemm_fp8 : s.gemm).push_back(sample);
  }
  for (const auto& st : run.streams) {
    if (st.kernel == "read") continue;  // the bandwidth ceiling, reported below; copy is the generic curve
    if (check_failed(st.kernel)) continue;
    s.streams.push_back({st.kernel, st.bytes, st.seconds, st.l2_resident, st.rows,
                         st.rows > 0 ? st.bytes / st.rows : 0.0});
  }
  for (const auto& m : run.all_reduce) s.all_reduce.push_back({m.gpus, m.bytes, m.seconds});
  for (const auto& m : run.send_recv) s.send_recv.push_back({2, m.bytes, m.seconds});

  // Launch costs (raw_format.h), mapped to the profile as docs/calibration.md says:
  // kernel_us = GPU time per kernel launched back to back from a stream (every kernel the cost
  // model times pays it, and the kernels here were timed that way, so fits subtract the same time
  // the model adds back; without it, estimated from the shortest kernels); eager_launch_us = the
  // host's CPU time per launch call; graph_launch_us = what a replay costs a step that waits for
  // it: the idle replay's wall time less its one node's GPU time.
  auto launch = [&](const char* kind) -> const MicrobenchRun::Launch* {
    for (const auto& l : run.launch)
      if (l.kind == kind) return &l;
    return nullptr;
  };
  const auto* gpu_kernel = launch("gpu_kernel_stream");
  const auto* host_launch = launch("host_launch_kernel");
  const auto* replay_idle = launch("graph_replay_idle");
  const auto* graph_node = launch("gpu_kernel_graph");
  double kernel_s = fitted_kernel_seconds(s);
  if (gpu_kernel) kernel_s = round_significant(gpu_kernel->seconds, 3);
  CapReport caps;
  hwmodels::CalibrationProfile p = fit_profile(s, gpu, kernel_s, caps);
  if (host_launch) p.eager_launch_us = round_significant(host_launch->seconds * 1e6, 3);
  if (replay_idle) {
    const double node_s = graph_node ? graph_node->seconds : gpu_kernel ? gpu_kernel->seconds : 0.0;
    if (!(replay_idle->seconds > node_s))
      throw core::InputError(run.dir + "/" + raw::kLaunchFile, replay_idle->line, "seconds",
                             "graph_replay_idle is not longer than one graph node's GPU time: the launch samples "
                             "contradict each other");
    p.graph_launch_us = round_significant((replay_idle->seconds - node_s) * 1e6, 3);
  }

  // Decode attention: one table per head layout measured, keyed by it (the cost model picks the
  // table of each model's per-GPU layout). A layout whose kernel failed its check
  // ("attention_decode:H:KV:D:B", or "attention_decode" for all) contributes nothing.
  std::map<hwmodels::AttentionLayout, std::vector<const MicrobenchRun::DecodeAttention*>> by_layout;
  for (const auto& a : run.decode_attention) {
    const plan::DecodeLayout raw_layout{static_cast<int>(a.heads), static_cast<int>(a.kv_heads),
                                        static_cast<int>(a.head_dim), static_cast<int>(a.block_size)};
    if (std::find(failed.begin(), failed.end(), "attention_decode") != failed.end() ||
        std::find(failed.begin(), failed.end(), "attention_decode:" + raw_layout.name()) != failed.end())
      continue;
    hwmodels::AttentionLayout l;
    l.heads = static_cast<int64_t>(a.heads);
    l.kv_heads = static_cast<int64_t>(a.kv_heads);
    l.head_dim = static_cast<int64_t>(a.head_dim);
    l.block_size = static_cast<int64_t>(a.block_size);
    by_layout[l].push_back(&a);
  }
  for (const auto& [layout, rows] : by_layout) {
    const std::string table = "attention_decode:" + plan::DecodeLayout{static_cast<int>(layout.heads),
                                                                       static_cast<int>(layout.kv_heads),
                                                                       static_cast<int>(layout.head_dim),
                                                                       static_cast<int>(layout.block_size)}
                                                        .name();
    std::vector<double> batch, context, eff;
    for (const auto* a : rows) {
      // K and V read, plus Q read and O written (fp16).
      const double bytes = a->kv_bytes + a->batch * a->heads * a->head_dim * 2.0 * kHalfBytes;
      batch.push_back(a->batch);
      context.push_back(a->context);
      eff.push_back(cap_memory_efficiency(bytes / (gpu.hbm_bandwidth * std::max(a->seconds - kernel_s, 0.05 * a->seconds)),
                                          table, caps));
    }
    const auto [b_lo, b_hi] = std::minmax_element(batch.begin(), batch.end());
    const auto [c_lo, c_hi] = std::minmax_element(context.begin(), context.end());
    p.attention_decode_layouts.push_back({layout, fit_table(batch, context, eff, log2_nodes(*b_lo, *b_hi),
                                                            log2_nodes(*c_lo, *c_hi), 0.3, kMaxHbmEfficiency)});
  }
  if (!run.prefill_attention.empty() && !check_failed("attention_prefill")) {
    std::vector<double> seq, eff;
    for (const auto& a : run.prefill_attention) {
      seq.push_back(a.seq);
      eff.push_back(a.flops / (gpu.peak_flops * std::max(a.seconds - kernel_s, 0.05 * a.seconds)));
    }
    const auto [lo, hi] = std::minmax_element(seq.begin(), seq.end());
    p.attention_prefill = fit_curve(seq, eff, log2_nodes(*lo, *hi), 0.3);
  }
  // Host copies: the bandwidth of the largest transfers (their latency is negligible).
  for (const char* dir : {"h2d", "d2h"}) {
    double best_bytes = 0, bandwidth = 0;
    for (const auto& h : run.host_copy)
      if (h.direction == dir && h.bytes >= best_bytes) {
        best_bytes = h.bytes;
        bandwidth = h.bytes / h.seconds;
      }
    if (bandwidth > 0) (std::string(dir) == "h2d" ? p.h2d_bandwidth : p.d2h_bandwidth) = round_significant(bandwidth);
  }

  // The HBM read ceiling from the rotated reads; the L2 one from the reads held in L2 on purpose.
  double read_bw = 0, l2_read_bw = 0;
  for (const auto& st : run.streams)
    if (st.kernel == "read") {
      double& best = st.l2_resident ? l2_read_bw : read_bw;
      best = std::max(best, st.bytes / st.seconds);
    }
  const auto name = run.device.find("name");
  p.description = "fitted from the servesim CUDA microbenchmarks on " +
                  (name == run.device.end() ? std::string("an unnamed device") : name->second) + " (" +
                  std::to_string(run.gemm.size()) + " GEMMs, " + std::to_string(run.streams.size()) +
                  " memory-bound kernels, " + std::to_string(run.decode_attention.size() + run.prefill_attention.size()) +
                  " attention runs, " + std::to_string(run.all_reduce.size()) + " all-reduces)";
  if (read_bw > 0)
    p.description += "; best HBM read " + core::format_double(round_significant(read_bw / 1e9, 4)) + " GB/s = " +
                     core::format_double(round_significant(read_bw / gpu.hbm_bandwidth * 100, 3)) + "% of the datasheet";
  if (l2_read_bw > 0)
    p.description += "; L2-resident read " + core::format_double(round_significant(l2_read_bw / 1e9, 4)) + " GB/s";
  if (const std::string capped = caps.summary(); !capped.empty()) p.description += "; " + capped;
  if (!failed.empty()) {
    p.description += "; left out after failed correctness checks:";
    for (const auto& f : failed) p.description += " " + f;
  }
  p.source = source;
  return p;
}

}  // namespace servesim::calibration
