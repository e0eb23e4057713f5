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
#include "hwmodels/engine/engine_model.h"
#include "hwmodels/expert_parallel.h"
#include "hwmodels/gpu_spec.h"
#include "hwmodels/hf_config.h"
#include "hwmodels/roofline.h"
#include "hwmodels/roofline_cost_model.h"
#include "sim/core/format.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

constexpr double kMsPerSecond = 1e3;

// One phase, placed on the roofline with one definition of FLOPs and bytes: the cost model's
// (every useful FLOP, attention included, and every HBM byte it counts). The peak is that of the
// precision each FLOP ran at (StepCost::peak_flop_seconds), so an fp8 model's ridge point is the fp8
// one and achieved FLOP/s can never exceed the attainable bound. The lecture notes' intensity (2N
// FLOPs per token over the weight and KV-cache bytes, the number their tables use) is shown beside
// it.
struct Phase {
  std::string name;
  hwmodels::StepCost cost;
  std::vector<hwmodels::OperatorCost> ops;
  double matmul_flops = 0;         // the notes' 2 x active parameters x tokens
  double weight_kv_bytes = 0;      // weights read once (active experts; the embedding is a gather) + KV
  double notes_intensity = 0;      // matmul_flops / weight_kv_bytes
  double intensity = 0;            // cost.flops / cost.bytes
  double peak_flops_per_s = 0;     // whole group, at the mix of precisions the FLOPs ran at
  double ridge_point = 0;          // per GPU: that peak / HBM bandwidth
  double attainable_flops_per_s = 0;
  double achieved_flops_per_s = 0;
  double mfu = 0, mbu = 0;
  std::string bound;
};

// `gpus`: the replica's (the TP group, or every GPU of an expert-parallel replica).
Phase evaluate(std::string name, const hwmodels::BatchShape& shape, const hwmodels::RooflineCostModel& cost,
               const hwmodels::GpuSpec& gpu, int64_t gpus, double tokens, double weight_kv_bytes) {
  const double t = static_cast<double>(gpus);
  Phase p;
  p.name = std::move(name);
  p.cost = cost.step(shape);
  p.ops = cost.breakdown(shape);
  p.matmul_flops = cost.model().flops_per_token() * tokens;
  p.weight_kv_bytes = weight_kv_bytes;
  p.notes_intensity = hwmodels::arithmetic_intensity(p.matmul_flops, weight_kv_bytes);  // decode: decode_intensity()
  p.intensity = hwmodels::arithmetic_intensity(p.cost.flops, p.cost.bytes);
  // FLOPs per GPU-second at peak: the harmonic mix of the precisions' peaks, weighted by FLOPs.
  const double per_gpu_peak = p.cost.peak_flop_seconds > 0 ? p.cost.flops / p.cost.peak_flop_seconds : gpu.peak_flops;
  p.peak_flops_per_s = per_gpu_peak * t;
  p.ridge_point = per_gpu_peak / gpu.hbm_bandwidth;
  p.attainable_flops_per_s = hwmodels::attainable_flops(p.peak_flops_per_s, gpu.hbm_bandwidth * t, p.intensity);
  p.achieved_flops_per_s = p.cost.flops / p.cost.seconds;
  p.mfu = hwmodels::step_mfu(p.cost, gpus);
  p.mbu = hwmodels::step_mbu(p.cost, gpu, gpus);
  p.bound = p.intensity >= p.ridge_point ? "compute" : "memory";
  return p;
}

nlohmann::ordered_json phase_json(const Phase& p) {
  nlohmann::ordered_json j;
  j["ms"] = p.cost.seconds * kMsPerSecond;
  j["flops"] = p.cost.flops;
  j["bytes"] = p.cost.bytes;
  j["intensity"] = p.intensity;
  j["matmul_flops"] = p.matmul_flops;
  j["weight_kv_bytes"] = p.weight_kv_bytes;
  j["notes_intensity"] = p.notes_intensity;
  j["bound"] = p.bound;
  j["peak_flops_per_s"] = p.peak_flops_per_s;
  j["ridge_point"] = p.ridge_point;
  j["achieved_flops_per_s"] = p.achieved_flops_per_s;
  j["attainable_flops_per_s"] = p.attainable_flops_per_s;
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

void print_phase(std::ostream& out, const Phase& p) {
  out << p.name << "\n";
  out << "  time            " << fixed(p.cost.seconds * kMsPerSecond, 3) << " ms\n";
  out << "  FLOPs           " << sci(p.cost.flops) << " modelled (" << sci(p.matmul_flops) << " = 2N x tokens)\n";
  out << "  bytes           " << sci(p.cost.bytes) << " modelled HBM traffic (" << sci(p.weight_kv_bytes)
      << " weights + KV cache)\n";
  out << "  intensity       " << fixed(p.intensity, 1) << " FLOP/byte modelled vs ridge " << fixed(p.ridge_point, 1)
      << ": " << p.bound << "-bound (the notes' 2N x tokens over weights + KV: " << fixed(p.notes_intensity, 2)
      << ")\n";
  out << "  roofline        peak " << sci(p.peak_flops_per_s) << " FLOP/s at the FLOPs' precisions, attainable "
      << sci(p.attainable_flops_per_s) << ", achieved " << sci(p.achieved_flops_per_s) << " FLOP/s\n";
  out << "  utilisation     MFU " << percent(p.mfu) << ", MBU " << percent(p.mbu) << "\n";
  std::vector<hwmodels::OperatorCost> top = p.ops;
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  out << "  largest parts  ";
  for (size_t i = 0; i < std::min<size_t>(4, top.size()); ++i)
    out << (i ? ", " : " ") << top[i].name << " " << percent(top[i].seconds / p.cost.seconds);
  out << "\n";
}

// The cache per layer group: what a token costs in the full (and sparse) layers, in the window
// layers up to the window, and what a sequence's state costs whatever its length.
void print_kv_groups(std::ostream& out, const hwmodels::ModelSpec& m, const hwmodels::KvGroups& g, int64_t context,
                     double at_context) {
  using hwmodels::LayerAttention;
  const int64_t full = m.layers_of(LayerAttention::kFull), window = m.layers_of(LayerAttention::kSlidingWindow),
                linear = m.layers_of(LayerAttention::kLinear), sparse = m.layers_of(LayerAttention::kSparse);
  out << "KV cache        ";
  if (m.uniform_full()) {
    out << fixed(g.full_bytes_per_token, 0) << " B/token (" << m.num_layers << " full-attention layers)";
  } else {
    std::string sep;
    if (full + sparse > 0) {
      out << fixed(g.full_bytes_per_token, 0) << " B/token in " << full + sparse << " "
          << (sparse > 0 && full == 0 ? "sparse-attention" : sparse > 0 ? "full and sparse" : "full-attention")
          << " layers";
      if (sparse > 0) out << " (indexer keys included)";
      sep = "; ";
    }
    if (window > 0) {
      out << sep << fixed(g.window_bytes_per_token, 0) << " B/token in " << window
          << " sliding-window layers, for the last " << g.window << " tokens only";
      sep = "; ";
    }
    if (linear > 0)
      out << sep << fixed(g.state_bytes / (1024.0 * 1024.0), 2) << " MiB/sequence of state in " << linear
          << " linear-attention layers, whatever the context";
  }
  out << "\n                one sequence at context " << context << ": " << fixed(at_context / 1e6, 2) << " MB ("
      << fixed(at_context / static_cast<double>(context), 0) << " B/token)\n\n";
}

int cmd_estimate(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  po::options_description opts("servesim estimate options");
  std::string model_arg, gpu_name, calibration;
  int64_t tp = 1, batch = 1, prompt = 0, context = 0, cached = 0, draft_tokens = 0, ep_degree = 1, redundant = 0,
          gpus_per_node = 8;
  double skew = 0, nic_gb_s = 50;
  opts.add_options()
      ("help,h", "this help")
      ("model", po::value<std::string>(&model_arg), "a [model] preset name or a Hugging Face config.json")
      ("gpu", po::value<std::string>(&gpu_name), "a [gpu] preset name")
      ("tp", po::value<int64_t>(&tp)->default_value(1), "tensor-parallel GPUs")
      ("batch", po::value<int64_t>(&batch)->default_value(1), "sequences (B)")
      ("prompt", po::value<int64_t>(&prompt), "prompt tokens of each sequence (P): the prefill pass")
      ("cached", po::value<int64_t>(&cached)->default_value(0),
       "of the P prompt tokens, how many a prefix-cache hit spares (their KV is read, not computed)")
      ("context", po::value<int64_t>(&context), "context of each sequence in the decode iteration (default P)")
      ("calibration", po::value<std::string>(&calibration), "calibration profile (default: constant efficiencies)")
      ("ep", po::value<int64_t>(&ep_degree)->default_value(1),
       "expert parallelism: GPUs of the replica (experts spread over them, attention in ep/tp data-parallel ranks)")
      ("redundant-experts", po::value<int64_t>(&redundant)->default_value(0), "with --ep: redundant expert replicas (EPLB)")
      ("routing-skew", po::value<double>(&skew)->default_value(0), "with --ep: Zipf exponent of the experts' loads")
      ("two-batch-overlap", "with --ep: dispatch and combine hide behind the other micro-batch's compute")
      ("gpus-per-node", po::value<int64_t>(&gpus_per_node)->default_value(8), "with --ep: GPUs per node (NVLink domain)")
      ("nic-gb-s", po::value<double>(&nic_gb_s)->default_value(50), "with --ep: NIC bandwidth per GPU across nodes, GB/s")
      ("cuda-graphs", "the decode iteration replays a CUDA graph")
      ("draft-tokens", po::value<int64_t>(&draft_tokens)->default_value(0),
       "also time the decode iteration verifying K draft tokens per sequence (speculative decoding): the "
       "target's part, and the tokens per step it must yield to pay")
      ("json", "print one JSON object");
  const po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    out << "usage: servesim estimate --model NAME|config.json --gpu NAME --tp N --batch B --prompt P [--cached H] [--context C]"
           " [--draft-tokens K] [--calibration PROFILE] [--ep N [--redundant-experts R] [--routing-skew S]"
           " [--two-batch-overlap]] [--json]\n\n"
        << opts << "\n";
    return 0;
  }
  if (model_arg.empty() || gpu_name.empty() || !vm.count("prompt"))
    throw UsageError("estimate needs --model, --gpu and --prompt (servesim estimate --help)");
  require_option("--tp", static_cast<double>(tp), 1, 1024, "tensor-parallel GPUs");
  require_option("--batch", static_cast<double>(batch), 1, 1e6, "sequences");
  require_option("--prompt", static_cast<double>(prompt), 1, 4294967296.0, "prompt tokens of each sequence");
  if (cached < 0 || cached >= prompt)
    throw UsageError("--cached must be at least 0 and below --prompt (" + std::to_string(prompt) +
                     "): at least one prompt token is computed to produce the first token");
  if (!vm.count("context")) context = prompt;
  require_option("--draft-tokens", static_cast<double>(draft_tokens), 0, 64, "draft tokens verified per sequence");
  require_option("--context", static_cast<double>(context), 1, 4294967296.0, "context tokens of each sequence");
  const hwmodels::ModelSpec model = hwmodels::model_by_name_or_file(model_arg);
  const hwmodels::GpuSpec& gpu = hwmodels::gpu_preset(gpu_name);
  if (const std::string why = hwmodels::tp_problem(model, tp); !why.empty()) throw UsageError("--tp: " + why);
  // Expert parallelism on [network]'s default fabric: NVLink 1 us per hop; PCIe 50 GB/s and 1 us, the
  // NIC and 2 us per hop across nodes, one NIC per GPU.
  hwmodels::ExpertParallelism ep;
  ep.degree = ep_degree;
  ep.redundant_experts = redundant;
  ep.eplb = redundant > 0;
  ep.two_batch_overlap = vm.count("two-batch-overlap") > 0;
  ep.gpus_per_node = gpus_per_node;
  ep.nvlink_bytes_per_s = gpu.interconnect_bandwidth;
  ep.nvlink_latency_s = 2e-6;
  ep.scaleout_bytes_per_s = std::min(50.0, nic_gb_s) * 1e9;
  ep.scaleout_latency_s = 6e-6;
  if (gpus_per_node < 1 || !(nic_gb_s > 0)) throw UsageError("--gpus-per-node and --nic-gb-s must be positive");
  if (ep.enabled() && model.is_moe() && skew > 0) ep.expert_shares = hwmodels::zipf_expert_shares(model.num_experts, skew);
  if (const std::string why = hwmodels::ep_problem(model, tp, ep); !why.empty()) {
    const std::string key = why.substr(0, why.find(": "));
    throw UsageError("--" + std::string(key == "expert_parallel" ? "ep" : key == "redundant_experts" ? "redundant-experts" : "routing-skew") +
                     ": " + why.substr(why.find(": ") + 2));
  }
  const int64_t gpus = ep.enabled() ? ep.degree : tp;
  const int64_t ranks = hwmodels::attention_ranks(ep.degree, tp);

  hwmodels::RooflineParams params;
  std::optional<hwmodels::CalibrationProfile> profile;
  hwmodels::ProfileUse use;
  if (!calibration.empty()) {
    profile = hwmodels::read_calibration_profile(calibration);
    if (core::to_lower(profile->gpu) != gpu.name)
      throw UsageError("--calibration: the profile describes GPU '" + profile->gpu + "', not " + gpu.name);
    use = hwmodels::apply_profile_scalars(*profile, params, [](std::string_view) { return false; });
  }
  const hwmodels::RooflineCostModel cost(model, gpu, tp, params, profile ? &*profile : nullptr, use, ep);

  const double b = static_cast<double>(batch);
  const hwmodels::AttentionLimits caps = model.attention_limits();
  hwmodels::BatchShape prefill;
  const int64_t computed = prompt - cached;
  for (int64_t i = 0; i < batch; ++i) hwmodels::add_prefill_chunk(prefill, caps, cached, computed, true);
  hwmodels::BatchShape decode;
  hwmodels::add_decodes(decode, caps, batch, context);
  if (vm.count("cuda-graphs")) {
    hwmodels::EngineModel launcher;  // a decode step replayed as one captured graph, as vLLM does
    launcher.graphs = hwmodels::CudaGraphMode::kFullDecode;
    launcher.data_parallel = ranks;
    launcher.prepare(decode);
  }
  // The notes' byte count: every weight once (of the routed experts those the tokens activate; the
  // embedding table is a lookup, so only the gathered rows) plus the KV cache the attention reads
  // or writes.
  const double row_bytes = static_cast<double>(model.hidden_size) * model.activation_bytes;
  auto weights = [&](double tokens) { return model.decode_weight_bytes(tokens) + tokens * row_bytes; };
  const double prefill_tokens = b * static_cast<double>(computed);
  const std::string cached_note = cached > 0 ? " (" + std::to_string(cached) + " cached)" : "";
  // A sequence's cache (a hybrid model's window layers keep the window, its state layers a state).
  const auto sequence_kv = [&](int64_t tokens) { return model.sequence_kv_bytes(static_cast<double>(tokens)); };
  const Phase pre = evaluate("prefill: " + std::to_string(batch) + " x " + std::to_string(prompt) + " tokens" + cached_note,
                             prefill, cost, gpu, gpus, prefill_tokens, weights(prefill_tokens) + sequence_kv(prompt) * b);
  const Phase dec = evaluate("decode: " + std::to_string(batch) + " sequences at context " + std::to_string(context),
                             decode, cost, gpu, gpus, b, weights(b) + sequence_kv(context) * b);

  // Speculative decoding: the same decodes verifying draft_tokens drafts each, as one small batch of
  // B (1 + K) tokens (more FLOPs, the same weights; docs/models.md).
  std::optional<Phase> ver;
  if (draft_tokens > 0) {
    hwmodels::BatchShape verify = decode;
    verify.decode_extra_tokens = batch * draft_tokens;
    verify.decode_extra_pairs = batch * (draft_tokens * context + draft_tokens * (draft_tokens + 1) / 2);
    if (caps.window > 0) verify.decode_extra_window_pairs = batch * hwmodels::capped_pairs(context, draft_tokens, caps.window);
    if (caps.topk > 0) verify.decode_extra_sparse_pairs = batch * hwmodels::capped_pairs(context, draft_tokens, caps.topk);
    if (vm.count("cuda-graphs")) {
      hwmodels::EngineModel launcher;
      launcher.graphs = hwmodels::CudaGraphMode::kFullDecode;
      launcher.prepare(verify);
    }
    const double rows = b * static_cast<double>(1 + draft_tokens);
    ver = evaluate("verify: " + std::to_string(batch) + " sequences at context " + std::to_string(context) +
                       ", each verifying " + std::to_string(draft_tokens) + " draft tokens",
                   verify, cost, gpu, gpus, rows,
                   weights(rows) + model.kv_bytes_per_token() * b * static_cast<double>(context));
  }

  // The notes' decode limits at this batch and context (16-bit weights: 2P bytes for 2N FLOPs); for
  // a hybrid model, the cache per token at this context (state and window spread over it).
  const double step_weights = weights(b);
  const double kv_per_token =
      model.uniform_full() ? model.kv_bytes_per_token() : sequence_kv(context) / static_cast<double>(context);
  const double bandwidth = gpu.hbm_bandwidth * static_cast<double>(gpus);
  struct {
    double weight_floor_ms, ceiling_tokens_per_s, kv_gb, saturated_intensity, crossover_batch,
        kv_budget_gb, tokens_that_fit;
  } limits{
      hwmodels::weight_read_seconds(step_weights, bandwidth) * kMsPerSecond,
      hwmodels::decode_ceiling_tokens_per_s(step_weights, bandwidth),
      sequence_kv(context) * b * 1e-9,
      hwmodels::saturated_decode_intensity(model.flops_per_token(), context, kv_per_token),
      hwmodels::decode_crossover_batch(step_weights, context, kv_per_token),
      0, 0};
  // What the cluster's KV blocks would hold at vLLM's defaults (gpu_memory_utilization 0.9, the
  // [cluster] activation reserve of 2 GiB), per sequence of this batch.
  // With expert parallelism every attention rank keeps its own requests' KV: the replica holds `ranks`
  // times one rank's.
  const double budget = hwmodels::kv_budget_bytes_per_gpu(gpu, model, tp, 0.9, 2.0 * hwmodels::kBytesPerGib,
                                                          ep.degree, ep.redundant_experts);
  limits.kv_budget_gb = std::max(0.0, budget) * static_cast<double>(gpus) * 1e-9;
  const hwmodels::KvGroups groups = hwmodels::kv_groups_per_gpu(model, tp);
  const double rank_budget = budget * static_cast<double>(ranks);
  limits.tokens_that_fit =
      groups.hybrid()
          ? hwmodels::kv_tokens_that_fit(groups, std::max(0.0, rank_budget), batch)
          : std::max(0.0, hwmodels::kv_tokens_that_fit(hwmodels::kv_bytes_per_token_per_gpu(model, tp), rank_budget, batch));
  const double weights_per_gpu = hwmodels::weight_bytes_per_gpu(model, tp, ep.degree, ep.redundant_experts);
  // The cache by layer group, whole model (all GPUs of the group together).
  const hwmodels::KvGroups whole = hwmodels::kv_groups_per_gpu(model, 1);

  if (vm.count("json")) {
    nlohmann::ordered_json j;
    j["model"] = model.name;
    j["gpu"] = gpu.name;
    j["tp"] = tp;
    j["batch"] = batch;
    j["prompt"] = prompt;
    j["cached"] = cached;
    j["context"] = context;
    j["calibration"] = calibration.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(calibration);
    j["peak_flops_per_s"] = gpu.peak_flops * static_cast<double>(gpus);
    j["hbm_bytes_per_s"] = gpu.hbm_bandwidth * static_cast<double>(gpus);
    j["ridge_point"] = gpu.ridge_point();  // 16-bit; each phase gives the ridge of its precisions
    j["prefill_ms"] = pre.cost.seconds * kMsPerSecond;
    j["decode_step_ms"] = dec.cost.seconds * kMsPerSecond;
    j["prefill"] = phase_json(pre);
    j["decode"] = phase_json(dec);
    j["decode"]["weight_floor_ms"] = limits.weight_floor_ms;
    j["decode"]["ceiling_tokens_per_s"] = limits.ceiling_tokens_per_s;
    j["decode"]["kv_cache_gb"] = limits.kv_gb;
    j["decode"]["saturated_notes_intensity"] = limits.saturated_intensity;
    j["decode"]["kv_crossover_batch"] = limits.crossover_batch;
    if (ver) {
      j["verify"] = phase_json(*ver);
      j["verify"]["draft_tokens"] = draft_tokens;
      j["verify"]["vs_decode"] = ver->cost.seconds / dec.cost.seconds;
    }
    j["kv_budget_gb"] = limits.kv_budget_gb;
    j["context_that_fits"] = limits.tokens_that_fit;
    j["weight_gb_per_gpu"] = weights_per_gpu * 1e-9;
    if (ep.enabled()) {
      const auto& a = dec.cost.all_to_all;
      j["expert_parallel"] = {{"gpus", ep.degree},
                              {"attention_ranks", ranks},
                              {"experts_per_gpu", cost.expert_placement().slots_per_gpu},
                              {"redundant_experts", ep.redundant_experts},
                              {"imbalance", cost.expert_placement().imbalance},
                              {"decode_all_to_all_ms", (a.fixed_s + std::max(a.nvlink_s, a.scaleout_s)) * kMsPerSecond},
                              {"decode_scaleout_bytes_per_gpu", a.scaleout_bytes},
                              {"prefill_scaleout_bytes_per_gpu", pre.cost.all_to_all.scaleout_bytes}};
    }
    nlohmann::ordered_json kv;
    kv["full_bytes_per_token"] = whole.full_bytes_per_token;
    kv["window_bytes_per_token"] = whole.window_bytes_per_token;
    kv["window_tokens"] = whole.window;
    kv["state_bytes_per_sequence"] = whole.state_bytes;
    kv["bytes_per_sequence_at_context"] = sequence_kv(context);
    kv["layers"] = {{"full", model.layers_of(hwmodels::LayerAttention::kFull)},
                    {"sliding_window", model.layers_of(hwmodels::LayerAttention::kSlidingWindow)},
                    {"linear", model.layers_of(hwmodels::LayerAttention::kLinear)},
                    {"sparse", model.layers_of(hwmodels::LayerAttention::kSparse)}};
    j["kv_cache"] = kv;
    out << j.dump() << "\n";
    return 0;
  }
  out << model.name << " on " << gpus << " x " << gpu.name;
  if (ep.enabled()) out << " (EP " << ep.degree << ": " << ranks << " attention ranks of TP " << tp << ")";
  out << " ("
      << (calibration.empty() ? std::string("constant efficiencies") : "calibration " + calibration) << ")\n";
  out << "roofline: peak " << sci(gpu.peak_flops * static_cast<double>(gpus)) << " FLOP/s, HBM "
      << sci(gpu.hbm_bandwidth * static_cast<double>(gpus)) << " B/s, ridge point " << fixed(gpu.ridge_point(), 1)
      << " FLOP/byte\n\n";
  print_kv_groups(out, model, whole, context, sequence_kv(context));
  print_phase(out, pre);
  out << "\n";
  print_phase(out, dec);
  out << "  decode limits   weights once take " << fixed(limits.weight_floor_ms, 2) << " ms: at most "
      << fixed(limits.ceiling_tokens_per_s, 1) << " tokens/s per sequence; the batch's KV cache is "
      << fixed(limits.kv_gb, 2) << " GB\n";
  out << "  batching        KV reads cap the notes' intensity at " << fixed(limits.saturated_intensity, 1)
      << " FLOP/byte and overtake the weights at batch " << fixed(limits.crossover_batch, 1) << "\n";
  out << "  KV budget       " << fixed(limits.kv_budget_gb, 1)
      << " GB at gpu_memory_utilization 0.9 (weights " << fixed(weights_per_gpu * 1e-9, 1) << " GB per GPU): "
      << fixed(limits.tokens_that_fit, 0) << " tokens per sequence at batch " << batch << "\n";
  if (ver) {
    const double ratio = ver->cost.seconds / dec.cost.seconds;
    out << "\n";
    print_phase(out, *ver);
    out << "  speculation     " << fixed(ratio, 2) << "x the decode iteration: it pays only if a verify step yields more "
        << "than " << fixed(ratio, 2) << " tokens per sequence on average, before the drafter's own passes\n";
  }
  if (ep.enabled()) {
    const hwmodels::ExpertPlacement& placement = cost.expert_placement();
    const double without = hwmodels::weight_bytes_per_gpu(model, tp);
    out << "\nexpert parallelism\n";
    out << "  placement       " << placement.slots_per_gpu << " experts per GPU (" << ep.redundant_experts
        << " redundant), busiest GPU " << fixed(placement.imbalance, 3) << " x the mean load"
        << (ep.eplb ? " after EPLB" : "") << "\n";
    out << "  memory          " << fixed(weights_per_gpu * 1e-9, 1) << " GB of weights per GPU ("
        << fixed(without * 1e-9, 1) << " GB with every expert on every GPU of a TP " << tp << " group)\n";
    for (const Phase* p : {&pre, &dec}) {
      const auto& a = p->cost.all_to_all;
      out << "  all-to-all      " << (p == &pre ? "prefill" : "decode") << ": "
          << fixed((a.fixed_s + std::max(a.nvlink_s, a.scaleout_s)) * kMsPerSecond, 3) << " ms = fixed "
          << fixed(a.fixed_s * kMsPerSecond, 3) << " + max(NVLink " << fixed(a.nvlink_s * kMsPerSecond, 3)
          << ", scale-out " << fixed(a.scaleout_s * kMsPerSecond, 3) << " for " << sci(a.scaleout_bytes)
          << " bytes per GPU)" << (a.overlapped ? ", overlapping the other micro-batch's compute" : "") << "\n";
    }
  }
  return 0;
}

const bool kRegistered = register_command(
    {"estimate",
     "--model NAME|config.json --gpu NAME --tp N --batch B --prompt P [--cached H] [--context C] [--draft-tokens K] "
     "[--calibration PROFILE] [--ep N ...] [--json]",
     "time one prefill pass (B prompts of P tokens) and one decode iteration (B sequences at context C)\n"
     "and place each on the GPU's roofline: FLOPs, bytes, intensity, bound, MFU, MBU",
     cmd_estimate});

}  // namespace
}  // namespace servesim::experiments
