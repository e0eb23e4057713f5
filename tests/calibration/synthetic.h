#pragma once
// Synthetic measurements made from known efficiencies, for tests that a fit recovers them.

#include <cmath>
#include <fstream>
#include <string>

#include "calibration/fit.h"
#include "calibration/microbench/raw_format.h"
#include "calibration/operator_csv.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/model_spec.h"
#include "hwmodels/roofline_cost_model.h"

namespace servesim::calibration::synthetic {

inline const hwmodels::GpuSpec& h100() { return *hwmodels::find_gpu_preset("h100-sxm"); }

// GEMM compute efficiency rising with rows (tile fill) and weight size (waves), both smooth.
inline double gemm_efficiency(double rows, double weights) {
  const double w = std::clamp(std::log2(weights / 4194304.0) / 7.0, 0.0, 1.0);
  return 0.75 * rows / (rows + 64.0) * (0.8 + 0.2 * w);
}
inline double stream_efficiency(double bytes) { return 0.6 * bytes / (bytes + 2e6); }
// Decode attention by head layout: fewer KV heads, less parallelism at small batches.
inline double decode_efficiency(double batch, double context, double kv_heads = 8) {
  return 0.3 + 0.5 * (1.0 - std::exp(-batch * context * kv_heads / 400000.0));
}
inline double prefill_efficiency(double seq) { return 0.2 + 0.4 * seq / (seq + 1024.0); }
constexpr double kMemoryEfficiency = 0.85;
constexpr double kKernelUs = 1.0, kGemmKernelUs = 4.0;

inline hwmodels::CalibrationProfile true_profile() {
  hwmodels::CalibrationProfile p;
  p.gpu = "h100-sxm";
  p.kernel_us = kKernelUs;
  p.gemm_kernel_us = kGemmKernelUs;
  std::vector<double> rows, weights;
  for (double r = 1; r <= 8192; r *= 2) rows.push_back(r);
  for (double w = 1 << 20; w <= double(1 << 30); w *= 2) weights.push_back(w);
  std::vector<std::vector<double>> values;
  for (double w : weights) {
    std::vector<double> row;
    for (double r : rows) row.push_back(gemm_efficiency(r, w));
    values.push_back(row);
  }
  p.gemm.compute_efficiency = hwmodels::Table2D(rows, weights, values);
  p.gemm.memory_efficiency = hwmodels::Curve({1e3, 1e11}, {kMemoryEfficiency, kMemoryEfficiency});
  std::vector<double> bytes, eff;
  for (double b = 1024; b <= 4e9; b *= std::sqrt(2.0)) {
    bytes.push_back(b);
    eff.push_back(stream_efficiency(b));
  }
  for (const char* kind : {"rms_norm", "rope", "act", "add", "embedding", "copy"}) p.elementwise[kind] = hwmodels::Curve(bytes, eff);
  p.all_reduce[2] = {10e-6, 300e9};
  p.all_reduce[4] = {15e-6, 350e9};
  p.all_reduce[8] = {20e-6, 380e9};
  p.send_recv = hwmodels::AlphaBeta{8e-6, 200e9};
  return p;
}

// Operator tables of two architectures at TP 1..8 timed by the roofline model with `truth`.
inline OperatorData operator_data(const hwmodels::CalibrationProfile& truth) {
  OperatorData data;
  struct Arch {
    const char* name;
    int64_t hidden, heads, kv, inter;
  };
  for (const Arch& a : {Arch{"small", 4096, 32, 8, 14336}, Arch{"large", 8192, 64, 8, 28672}}) {
    OperatorTable t;
    t.model_name = a.name;
    t.source = std::string(a.name) + "/mlp.csv";
    t.model.name = a.name;
    t.model.num_layers = 1;
    t.model.hidden_size = a.hidden;
    t.model.num_heads = a.heads;
    t.model.num_kv_heads = a.kv;
    t.model.head_dim = 128;
    t.model.intermediate_size = a.inter;
    t.model.vocab_size = 32000;
    t.model.max_context = 4096;
    t.ops = {"emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
             "mlp_up_proj", "mlp_act", "mlp_down_proj", "add"};
    hwmodels::RooflineParams params;
    const hwmodels::ProfileUse use =
        hwmodels::apply_profile_scalars(truth, params, [](std::string_view) { return false; });
    int64_t line = 2;
    for (int64_t tp : {1, 2, 4, 8}) {
      const hwmodels::RooflineCostModel m(t.model, h100(), tp, params, &truth, use);
      for (int64_t tokens : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096}) {
        OperatorRow row;
        row.line = line++;
        row.num_tokens = tokens;
        row.tensor_parallel = tp;
        for (const auto& op : t.ops) row.median_ms[op] = *m.operator_seconds(op, static_cast<double>(tokens)) * 1e3;
        t.rows.push_back(row);
      }
    }
    data.tables.push_back(t);
  }
  for (const auto& [n, ab] : truth.all_reduce)
    for (double bytes = 2048; bytes <= 67108864; bytes *= 4)
      data.all_reduce.push_back({0, "all_reduce", n, n, bytes,
                                 (ab.latency_s + 2.0 * (n - 1) / n * bytes / ab.bandwidth) * 1e3});
  for (double bytes = 2048; bytes <= 67108864; bytes *= 4)
    data.send_recv.push_back({0, "send_recv", 2, 2, bytes, (truth.send_recv->latency_s + bytes / truth.send_recv->bandwidth) * 1e3});
  return data;
}

// A raw microbenchmark directory as servesim-microbench writes it, timed from the known efficiencies.
// Decode attention is measured at two layouts, 32/8 and 8/1 (head_dim 128, pages of 16);
// `decode_check_ok` false fails the 8/1 kernel's correctness check.
inline void write_microbench_dir(const std::string& dir, bool decode_check_ok = true) {
  using namespace raw;
  const double peak = h100().peak_flops, bw = h100().hbm_bandwidth;
  auto file = [&](const char* name, const char* header) {
    std::ofstream out(dir + "/" + name);
    out << header << "\n";
    return out;
  };
  {
    auto out = file(kDeviceFile, kDeviceHeader);
    out << "name,NVIDIA H100 80GB HBM3\nsm_count,132\nl2_bytes,52428800\n";
  }
  {
    auto out = file(kGemmFile, kGemmHeader);
    for (auto [n, k] : {std::pair<double, double>{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {57344, 8192},
                        {8192, 28672}, {1536, 4096}, {4096, 1792}})
      for (double m = 1; m <= 8192; m *= 2) {
        const double flops = 2 * m * n * k, bytes = n * k * 2 + m * (n + k) * 2;
        const double t = std::max(flops / (peak * gemm_efficiency(m, n * k)), bytes / (bw * kMemoryEfficiency)) + kGemmKernelUs * 1e-6;
        out << "bf16," << m << "," << n << "," << k << "," << t << ",20\n";
      }
  }
  {
    auto out = file(kStreamFile, kStreamHeader);
    for (double rows = 1; rows <= 32768; rows *= 2)
      for (const char* kernel : {"rms_norm", "rope", "act", "add", "embedding", "copy", "read"}) {
        const double bytes = rows * 4096 * 2 * 3;
        out << kernel << "," << rows << ",4096," << bytes << "," << kKernelUs * 1e-6 + bytes / (bw * stream_efficiency(bytes))
            << ",20,0\n";
      }
  }
  {
    auto out = file(kDecodeAttentionFile, kDecodeAttentionHeader);
    for (auto [heads, kv_heads] : {std::pair<double, double>{32, 8}, {8, 1}})
      for (double b : {1, 4, 16, 64})
        for (double ctx : {128, 512, 2048, 8192}) {
          const double kv = 2 * b * ctx * kv_heads * 128 * 2, bytes = kv + b * heads * 128 * 2 * 2;
          out << b << "," << ctx << "," << heads << "," << kv_heads << ",128,16," << kv << ","
              << kKernelUs * 1e-6 + bytes / (bw * decode_efficiency(b, ctx, kv_heads)) << ",20\n";
        }
  }
  {
    auto out = file(kPrefillAttentionFile, kPrefillAttentionHeader);
    for (double seq = 128; seq <= 8192; seq *= 2) {
      const double batch = std::max(1.0, 16384 / seq), flops = 4 * 128 * 32 * batch * seq * (seq + 1) / 2;
      out << batch << "," << seq << ",32,8,128," << flops << "," << kKernelUs * 1e-6 + flops / (peak * prefill_efficiency(seq)) << ",9\n";
    }
  }
  {
    auto out = file(kLaunchFile, kLaunchHeader);
    out << "host_launch_kernel,4e-06,7\ngpu_kernel_stream,1e-06,7\nhost_launch_graph,2.5e-06,7\n"
           "gpu_kernel_graph,0.9e-06,7\ngraph_replay_idle,6.9e-06,25\n";
  }
  {
    auto out = file(kAllReduceFile, kAllReduceHeader);
    for (int n : {2, 4, 8})
      for (double bytes = 4096; bytes <= 268435456; bytes *= 4) {
        const double lat = n == 2 ? 10e-6 : n == 4 ? 15e-6 : 20e-6, busbw = n == 2 ? 300e9 : n == 4 ? 350e9 : 380e9;
        out << n << "," << bytes << "," << lat + 2.0 * (n - 1) / n * bytes / busbw << ",20\n";
      }
  }
  {
    auto out = file(kSendRecvFile, kSendRecvHeader);
    for (double bytes = 4096; bytes <= 268435456; bytes *= 4) out << bytes << "," << 8e-6 + bytes / 200e9 << ",20\n";
  }
  {
    auto out = file(kHostCopyFile, kHostCopyHeader);
    for (double bytes = 1 << 20; bytes <= double(1 << 30); bytes *= 4)
      out << "h2d," << bytes << "," << 10e-6 + bytes / 50e9 << ",20\nd2h," << bytes << "," << 10e-6 + bytes / 45e9 << ",20\n";
  }
  {
    auto out = file(kChecksFile, kChecksHeader);
    out << "rms_norm,0.001,1\nact,0.001,1\nattention_decode:32:8:128:16,0.002,1\nattention_decode:8:1:128:16,0.002,"
        << (decode_check_ok ? 1 : 0) << "\nattention_prefill,0.003,1\n";
  }
}

}  // namespace servesim::calibration::synthetic
