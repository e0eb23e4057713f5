// servesim estimate: one prefill pass and one decode iteration of a model on a GPU, placed on the
// roofline.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/gpu_spec.h"
#include "hwmodels/hf_config.h"
#include "hwmodels/roofline.h"
#include "hwmodels/roofline_cost_model.h"
#include "sim/core/format.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

constexpr double kMsPerSecond = 1e3;

// One phase. Two intensities: the lecture notes' (2N FLOPs per token over the weight and KV-cache
// bytes, the number their roofline tables use) places the phase on the roofline; the modelled one
// divides the cost model's FLOPs (attention included) by every HBM byte it counts (activations too).
struct Phase {
  std::string name;
  hwmodels::StepCost cost;
  std::vector<hwmodels::OperatorCost> ops;
  double matmul_flops = 0;         // 2 x active parameters x tokens
  double weight_kv_bytes = 0;      // weights read once (active experts) + KV cache read or written
  double intensity = 0;            // matmul_flops / weight_kv_bytes
  double modelled_intensity = 0;   // cost.flops / cost.bytes
  double mfu = 0, mbu = 0;
  std::string bound;
};

Phase evaluate(std::string name, const hwmodels::BatchShape& shape, const hwmodels::RooflineCostModel& cost,
               const hwmodels::GpuSpec& gpu, int64_t tp, double tokens, double weight_kv_bytes) {
  Phase p;
  p.name = std::move(name);
  p.cost = cost.step(shape);
  p.ops = cost.breakdown(shape);
  p.matmul_flops = cost.model().flops_per_token() * tokens;
  p.weight_kv_bytes = weight_kv_bytes;
  p.intensity = hwmodels::arithmetic_intensity(p.matmul_flops, weight_kv_bytes);
  p.modelled_intensity = hwmodels::arithmetic_intensity(p.cost.flops, p.cost.bytes);
  p.mfu = hwmodels::step_mfu(p.cost, gpu, tp);
  p.mbu = hwmodels::step_mbu(p.cost, gpu, tp);
  p.bound = p.intensity >= gpu.ridge_point() ? "compute" : "memory";
  return p;
}

nlohmann::ordered_json phase_json(const Phase& p, const hwmodels::GpuSpec& gpu, int64_t tp) {
  const double t = static_cast<double>(tp);
  nlohmann::ordered_json j;
  j["ms"] = p.cost.seconds * kMsPerSecond;
  j["flops"] = p.cost.flops;
  j["bytes"] = p.cost.bytes;
  j["modelled_intensity"] = p.modelled_intensity;
  j["matmul_flops"] = p.matmul_flops;
  j["weight_kv_bytes"] = p.weight_kv_bytes;
  j["intensity"] = p.intensity;
  j["bound"] = p.bound;
  j["achieved_flops_per_s"] = p.cost.flops / p.cost.seconds;
  j["attainable_flops_per_s"] =
      hwmodels::attainable_flops(gpu.peak_flops * t, gpu.hbm_bandwidth * t, p.intensity);
  j["mfu"] = p.mfu;
  j["mbu"] = p.mbu;
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const auto& op : p.ops)
    ops.push_back({{"name", op.name}, {"count", op.count}, {"ms", op.seconds * kMsPerSecond}, {"flops", op.flops},
                   {"bytes", op.bytes}});
  j["operators"] = ops;
  return j;
}

std::string sci(double v) {
  std::ostringstream s;
  s << std::setprecision(3) << v;
  return s.str();
}

void print_phase(std::ostream& out, const Phase& p, const hwmodels::GpuSpec& gpu, int64_t tp) {
  const double t = static_cast<double>(tp);
  const double attainable = hwmodels::attainable_flops(gpu.peak_flops * t, gpu.hbm_bandwidth * t, p.intensity);
  out << p.name << "\n";
  out << "  time            " << fixed(p.cost.seconds * kMsPerSecond, 3) << " ms\n";
  out << "  FLOPs           " << sci(p.cost.flops) << " modelled (" << sci(p.matmul_flops) << " = 2N x tokens)\n";
  out << "  bytes           " << sci(p.cost.bytes) << " modelled HBM traffic (" << sci(p.weight_kv_bytes)
      << " weights + KV cache)\n";
  out << "  intensity       " << fixed(p.intensity, 1) << " FLOP/byte (2N x tokens over weights + KV; "
      << fixed(p.modelled_intensity, 1) << " modelled) vs ridge " << fixed(gpu.ridge_point(), 1) << ": " << p.bound
      << "-bound\n";
  out << "  roofline        attainable " << sci(attainable) << " FLOP/s, achieved "
      << sci(p.cost.flops / p.cost.seconds) << " FLOP/s\n";
  out << "  utilisation     MFU " << percent(p.mfu) << ", MBU " << percent(p.mbu) << "\n";
  std::vector<hwmodels::OperatorCost> top = p.ops;
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  out << "  largest parts  ";
  for (size_t i = 0; i < std::min<size_t>(4, top.size()); ++i)
    out << (i ? ", " : " ") << top[i].name << " " << percent(top[i].seconds / p.cost.seconds);
  out << "\n";
}

int cmd_estimate(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  po::options_description opts("servesim estimate options");
  std::string model_arg, gpu_name, calibration;
  int64_t tp = 1, batch = 1, prompt = 0, context = 0;
  opts.add_options()
      ("help,h", "this help")
      ("model", po::value<std::string>(&model_arg), "a [model] preset name or a Hugging Face config.json")
      ("gpu", po::value<std::string>(&gpu_name), "a [gpu] preset name")
      ("tp", po::value<int64_t>(&tp)->default_value(1), "tensor-parallel GPUs")
      ("batch", po::value<int64_t>(&batch)->default_value(1), "sequences (B)")
      ("prompt", po::value<int64_t>(&prompt), "prompt tokens of each sequence (P): the prefill pass")
      ("context", po::value<int64_t>(&context), "context of each sequence in the decode iteration (default P)")
      ("calibration", po::value<std::string>(&calibration), "calibration profile (default: constant efficiencies)")
      ("cuda-graphs", "the decode iteration replays a CUDA graph")
      ("json", "print one JSON object");
  const po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    out << "usage: servesim estimate --model NAME|config.json --gpu NAME --tp N --batch B --prompt P [--context C]"
           " [--calibration PROFILE] [--json]\n\n"
        << opts << "\n";
    return 0;
  }
  if (model_arg.empty() || gpu_name.empty() || !vm.count("prompt"))
    throw UsageError("estimate needs --model, --gpu and --prompt (servesim estimate --help)");
  require_option("--tp", static_cast<double>(tp), 1, 1024, "tensor-parallel GPUs");
  require_option("--batch", static_cast<double>(batch), 1, 1e6, "sequences");
  require_option("--prompt", static_cast<double>(prompt), 1, 4294967296.0, "prompt tokens of each sequence");
  if (!vm.count("context")) context = prompt;
  require_option("--context", static_cast<double>(context), 1, 4294967296.0, "context tokens of each sequence");
  const hwmodels::ModelSpec model = hwmodels::model_by_name_or_file(model_arg);
  const hwmodels::GpuSpec& gpu = hwmodels::gpu_preset(gpu_name);
  if (const std::string why = hwmodels::tp_problem(model, tp); !why.empty()) throw UsageError("--tp: " + why);

  hwmodels::RooflineParams params;
  params.cuda_graphs = vm.count("cuda-graphs") > 0;
  std::optional<hwmodels::CalibrationProfile> profile;
  hwmodels::ProfileUse use;
  if (!calibration.empty()) {
    profile = hwmodels::read_calibration_profile(calibration);
    if (core::to_lower(profile->gpu) != gpu.name)
      throw UsageError("--calibration: the profile describes GPU '" + profile->gpu + "', not " + gpu.name);
    use = hwmodels::apply_profile_scalars(*profile, params, [](std::string_view) { return false; });
  }
  const hwmodels::RooflineCostModel cost(model, gpu, tp, params, profile ? &*profile : nullptr, use);

  const double b = static_cast<double>(batch);
  hwmodels::BatchShape prefill;
  prefill.prefill_seqs = batch;
  prefill.prefill_tokens = batch * prompt;
  prefill.prefill_logits = batch;
  prefill.prefill_attention_pairs = batch * (prompt * (prompt + 1) / 2);
  hwmodels::BatchShape decode;
  decode.decode_seqs = batch;
  decode.decode_context_tokens = batch * context;
  // The notes' byte count: every weight once (2N bytes in half precision, the embedding table
  // included as in their 2N FLOPs; of the routed experts those the tokens activate) plus the KV
  // cache the attention reads or writes.
  const double table = model.tied_embeddings ? 0.0 : model.embedding_params() * model.activation_bytes;
  auto weights = [&](double tokens) { return model.decode_weight_bytes(tokens) + table; };
  const double prefill_tokens = b * static_cast<double>(prompt);
  const Phase pre = evaluate("prefill: " + std::to_string(batch) + " x " + std::to_string(prompt) + " tokens", prefill,
                             cost, gpu, tp, prefill_tokens,
                             weights(prefill_tokens) + model.kv_bytes_per_token() * prefill_tokens);
  const Phase dec = evaluate("decode: " + std::to_string(batch) + " sequences at context " + std::to_string(context),
                             decode, cost, gpu, tp, b,
                             weights(b) + model.kv_bytes_per_token() * b * static_cast<double>(context));

  if (vm.count("json")) {
    nlohmann::ordered_json j;
    j["model"] = model.name;
    j["gpu"] = gpu.name;
    j["tp"] = tp;
    j["batch"] = batch;
    j["prompt"] = prompt;
    j["context"] = context;
    j["calibration"] = calibration.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(calibration);
    j["peak_flops_per_s"] = gpu.peak_flops * static_cast<double>(tp);
    j["hbm_bytes_per_s"] = gpu.hbm_bandwidth * static_cast<double>(tp);
    j["ridge_point"] = gpu.ridge_point();
    j["prefill_ms"] = pre.cost.seconds * kMsPerSecond;
    j["decode_step_ms"] = dec.cost.seconds * kMsPerSecond;
    j["prefill"] = phase_json(pre, gpu, tp);
    j["decode"] = phase_json(dec, gpu, tp);
    out << j.dump() << "\n";
    return 0;
  }
  out << model.name << " on " << tp << " x " << gpu.name << " ("
      << (calibration.empty() ? std::string("constant efficiencies") : "calibration " + calibration) << ")\n";
  out << "roofline: peak " << sci(gpu.peak_flops * static_cast<double>(tp)) << " FLOP/s, HBM "
      << sci(gpu.hbm_bandwidth * static_cast<double>(tp)) << " B/s, ridge point " << fixed(gpu.ridge_point(), 1)
      << " FLOP/byte\n\n";
  print_phase(out, pre, gpu, tp);
  out << "\n";
  print_phase(out, dec, gpu, tp);
  return 0;
}

const bool kRegistered = register_command(
    {"estimate",
     "--model NAME|config.json --gpu NAME --tp N --batch B --prompt P [--context C] [--calibration PROFILE] [--json]",
     "time one prefill pass (B prompts of P tokens) and one decode iteration (B sequences at context C)\n"
     "and place each on the GPU's roofline: FLOPs, bytes, intensity, bound, MFU, MBU",
     cmd_estimate});

}  // namespace
}  // namespace servesim::experiments
