#include "hwmodels/engine/engine_model.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "sim/core/error.h"

namespace servesim::hwmodels {

namespace {
constexpr double kSecondsPerMs = 1e-3;
constexpr double kSecondsPerUs = 1e-6;
}  // namespace

EngineRegistry& engine_registry() {
  static EngineRegistry r("engines", "serving engines: client path, per-iteration host work, CUDA graphs");
  return r;
}

int64_t cuda_graph_batch(int64_t b) {
  if (b <= 1) return 1;
  if (b <= 2) return 2;
  if (b <= 4) return 4;
  return (b + 7) / 8 * 8;
}

std::string_view cuda_graph_mode_name(CudaGraphMode mode) {
  switch (mode) {
    case CudaGraphMode::kNone: return "none";
    case CudaGraphMode::kFullDecode: return "full_decode";
    case CudaGraphMode::kPiecewise: return "piecewise";
    case CudaGraphMode::kFullAndPiecewise: return "full_and_piecewise";
  }
  return "none";
}

void EngineModel::prepare(BatchShape& s) const {
  const int64_t tokens = data_parallel > 1 ? busiest_rank(s, data_parallel).tokens() : s.tokens();
  s.launch = LaunchMode::kEager;
  s.graph_tokens = 0;
  if (graphs == CudaGraphMode::kNone || tokens > max_graph_tokens) return;
  const bool decode_only = s.prefill_tokens == 0;
  const bool full = decode_only && (graphs == CudaGraphMode::kFullDecode || graphs == CudaGraphMode::kFullAndPiecewise);
  const bool piecewise = !full && (graphs == CudaGraphMode::kPiecewise || graphs == CudaGraphMode::kFullAndPiecewise);
  if (!full && !piecewise) return;
  s.launch = full ? LaunchMode::kFullGraph : LaunchMode::kPiecewiseGraph;
  s.graph_tokens = std::min(cuda_graph_batch(tokens), std::max<int64_t>(max_graph_tokens, 1));
}

namespace {

// The host seconds and sampling terms of `s`, the busiest rank's share with data-parallel ranks.
double rank_host_seconds(const EngineModel& e, const BatchShape& s, int64_t layers) {
  const bool decode_only = s.prefill_tokens == 0;
  double host = (decode_only ? e.decode_schedule_s : e.schedule_s) +
                e.schedule_s_per_seq * static_cast<double>(s.prefill_seqs + s.decode_seqs);
  if (s.launch != LaunchMode::kFullGraph) host += (decode_only ? e.decode_layer_s : e.layer_s) * static_cast<double>(layers);
  return host;
}

double rank_sample_seconds(const EngineModel& e, const BatchShape& r) {
  return e.sample_s + e.sample_s_per_seq * static_cast<double>(r.prefill_logits + r.decode_seqs);
}

EngineModel::IterationTerms terms_of(const EngineModel& e, const BatchShape& s, int64_t layers) {
  // With data-parallel ranks every rank's host works on its own share at the same time.
  if (e.data_parallel > 1) {
    const BatchShape rank = busiest_rank(s, e.data_parallel);
    return {rank_host_seconds(e, rank, layers), rank_sample_seconds(e, rank)};
  }
  return {rank_host_seconds(e, s, layers), rank_sample_seconds(e, s)};
}

}  // namespace

double EngineModel::host_seconds(const BatchShape& shape, int64_t layers) const {
  return terms_of(*this, shape, layers).host_s;
}

double EngineModel::iteration_seconds(double gpu_s, const BatchShape& s, int64_t layers, bool after_idle) const {
  return iteration_seconds(gpu_s, terms_of(*this, s, layers), after_idle);
}

EngineModel::IterationTerms EngineModel::launch_and_remember(BatchShape& s, int64_t layers) const {
  // A decode-only batch: every field the terms read (of the busiest rank's share too) follows from
  // decode_seqs, and prepare() overwrites the launch fields.
  const bool memoisable = s.prefill_seqs == 0 && s.prefill_tokens == 0 && s.prefill_logits == 0 &&
                          s.decode_extra_tokens == 0 && s.decode_seqs > 0 && s.decode_seqs < kMemoDecodeSeqs;
  if (!memoisable) {
    prepare(s);
    return terms_of(*this, s, layers);
  }
  const size_t b = static_cast<size_t>(s.decode_seqs);
  if (memo_.by_seqs.size() <= b) {
    memo_.by_seqs.resize(std::min<size_t>(kMemoDecodeSeqs, 2 * b + 16));
    memo_.size = memo_.by_seqs.size();
  }
  // Not yet computed, or for another number of layers (the entry then serves the new one).
  DecodeTerms& m = memo_.by_seqs[b];
  prepare(s);
  m.launch = s.launch;
  m.graph_tokens = s.graph_tokens;
  m.terms = terms_of(*this, s, layers);
  m.layers = layers;
  return m.terms;
}

namespace {

using core::ParamSpec;

// A preset's value in a parameter's unit, without the last-bit noise of the division (5e-6 s is
// 5 us, not 5.000000000000001).
double in_unit(double seconds, double unit) { return std::round(seconds / unit * 1e9) / 1e9; }

// The preset's values, as the defaults of its parameters.
std::vector<ParamSpec> engine_param_specs(const EngineModel& d) {
  return {
      ParamSpec::real("api_server_ms", in_unit(d.api_server_s, kSecondsPerMs), "ms",
                      "the client's send -> the engine's waiting queue: HTTP server, request parsing, IPC to the "
                      "engine (tokenisation per token below)")
          .range(0, 1e6),
      ParamSpec::real("tokenize_us_per_token", in_unit(d.tokenize_s_per_token, kSecondsPerUs), "us",
                      "tokenisation on the way in, per prompt token")
          .range(0, 1e6),
      ParamSpec::real("stream_ms", in_unit(d.stream_s, kSecondsPerMs), "ms",
                      "an iteration's end -> the client has its tokens: outputs to the API server, detokenising, "
                      "streaming")
          .range(0, 1e6),
      ParamSpec::real("first_token_ms", in_unit(d.first_token_s, kSecondsPerMs), "ms",
                      "extra delay of the first streamed token (the first chunk of a stream)")
          .range(0, 1e6),
      ParamSpec::real("schedule_ms", in_unit(d.schedule_s, kSecondsPerMs), "ms",
                      "host time of an iteration with prefill work: scheduling, input preparation, sampling, "
                      "output handling")
          .range(0, 1e6),
      ParamSpec::real("decode_schedule_ms", in_unit(d.decode_schedule_s, kSecondsPerMs), "ms",
                      "the same for a decode-only iteration")
          .range(0, 1e6),
      ParamSpec::real("schedule_us_per_seq", in_unit(d.schedule_s_per_seq, kSecondsPerUs), "us",
                      "host time per sequence in an iteration")
          .range(0, 1e6),
      ParamSpec::real("layer_us", in_unit(d.layer_s, kSecondsPerUs), "us",
                      "host time per layer in an iteration with prefill work not replayed as one graph "
                      "(module calls, launches)")
          .range(0, 1e6),
      ParamSpec::real("decode_layer_us", in_unit(d.decode_layer_s, kSecondsPerUs), "us",
                      "the same for a decode-only iteration")
          .range(0, 1e6),
      ParamSpec::real("sample_ms", in_unit(d.sample_s, kSecondsPerMs), "ms",
                      "per-iteration time nothing overlaps: sampling, logits handling, the sampled tokens' copy "
                      "to the host")
          .range(0, 1e6),
      ParamSpec::real("sample_us_per_seq", in_unit(d.sample_s_per_seq, kSecondsPerUs), "us",
                      "the same per sequence that produces a token in the iteration")
          .range(0, 1e6),
      ParamSpec::boolean("async_scheduling", d.async_scheduling,
                         "the host prepares the next iteration while the GPU runs this one (an iteration takes "
                         "the longer of host and GPU time; after an idle spell, both)"),
      ParamSpec::string("cuda_graphs", std::string(cuda_graph_mode_name(d.graphs)),
                        "which iterations replay CUDA graphs: none, full_decode (decode-only batches, one graph), "
                        "piecewise (every batch, attention launched eagerly between graph pieces), "
                        "full_and_piecewise (vLLM V1: full graphs for decode-only batches, piecewise for the rest)")
          .one_of({"none", "full_decode", "piecewise", "full_and_piecewise"}),
      ParamSpec::integer("max_graph_tokens", d.max_graph_tokens, "tokens",
                         "largest captured batch; batches are padded up to the next captured size (1, 2, 4, "
                         "then multiples of 8), larger ones run eagerly")
          .range(1, 1 << 20),
  };
}

CudaGraphMode graph_mode(const std::string& s) {
  if (s == "full_decode") return CudaGraphMode::kFullDecode;
  if (s == "piecewise") return CudaGraphMode::kPiecewise;
  if (s == "full_and_piecewise") return CudaGraphMode::kFullAndPiecewise;
  return CudaGraphMode::kNone;
}

// The profile's fitted value of an engine parameter ([engine.<kind>]), if any. The `none` engine
// takes nothing from profiles: it is the GPU time alone.
std::optional<double> fitted(const CalibrationProfile* profile, const std::string& kind, const char* key) {
  if (!profile || kind == "none") return std::nullopt;
  const auto e = profile->engine.find(kind);
  if (e == profile->engine.end()) return std::nullopt;
  const auto v = e->second.find(key);
  return v == e->second.end() ? std::nullopt : std::optional<double>(v->second);
}

// A parameter's value: written in [engine] > the profile's [engine.<kind>] > the profile's
// [overhead] (engine-agnostic host times fitted from step latencies) > the preset.
double number(const core::Params& p, const CalibrationProfile* profile, const std::string& kind, const char* key,
              const std::optional<double>& overhead = std::nullopt) {
  if (p.given(key)) return p.get_float(key);
  if (const auto v = fitted(profile, kind, key)) return *v;
  if (overhead && kind != "none") return *overhead;
  return p.get_float(key);
}

EngineModel engine_from_params(const core::Params& p, const CalibrationProfile* profile, const std::string& kind) {
  EngineModel e;
  e.name = kind;
  e.api_server_s = number(p, profile, kind, "api_server_ms") * kSecondsPerMs;
  e.tokenize_s_per_token = number(p, profile, kind, "tokenize_us_per_token") * kSecondsPerUs;
  e.stream_s = number(p, profile, kind, "stream_ms") * kSecondsPerMs;
  e.first_token_s = number(p, profile, kind, "first_token_ms") * kSecondsPerMs;
  const auto* o = profile;
  e.schedule_s = number(p, profile, kind, "schedule_ms", o ? o->iteration_overhead_ms : std::nullopt) * kSecondsPerMs;
  e.decode_schedule_s =
      number(p, profile, kind, "decode_schedule_ms", o ? o->decode_iteration_overhead_ms : std::nullopt) * kSecondsPerMs;
  e.schedule_s_per_seq = number(p, profile, kind, "schedule_us_per_seq") * kSecondsPerUs;
  e.layer_s = number(p, profile, kind, "layer_us", o ? o->layer_overhead_us : std::nullopt) * kSecondsPerUs;
  e.decode_layer_s = number(p, profile, kind, "decode_layer_us", o ? o->decode_layer_overhead_us : std::nullopt) * kSecondsPerUs;
  e.sample_s = number(p, profile, kind, "sample_ms") * kSecondsPerMs;
  e.sample_s_per_seq = number(p, profile, kind, "sample_us_per_seq") * kSecondsPerUs;
  // A profile stores the fitted choice as 0 or 1.
  const auto async = fitted(profile, kind, "async_scheduling");
  e.async_scheduling = p.given("async_scheduling") || !async ? p.get_bool("async_scheduling") : *async != 0;
  e.graphs = graph_mode(p.get_string("cuda_graphs"));
  e.max_graph_tokens = p.get_int("max_graph_tokens");
  return e;
}

// vLLM V1 (the engine of vLLM 0.8 onwards): the preset's values before any fitting. The client path
// starts from what the serving runs' publishers measured (about 5-7 ms from arrival to queued);
// the shipped calibration profiles replace every number here with values fitted to real runs
// (servesim fit --from-serving-runs; docs/fidelity.md).
EngineModel vllm_v1_defaults() {
  EngineModel e;
  e.name = "vllm-v1";
  e.api_server_s = 6e-3;
  e.tokenize_s_per_token = 0;
  e.stream_s = 1e-3;
  e.first_token_s = 0;
  e.schedule_s = 1e-3;
  e.decode_schedule_s = 1e-3;
  e.schedule_s_per_seq = 5e-6;
  e.layer_s = 0;
  e.decode_layer_s = 0;
  e.async_scheduling = false;
  e.graphs = CudaGraphMode::kFullAndPiecewise;
  e.max_graph_tokens = 512;
  return e;
}

EngineModel no_engine() {
  EngineModel e;
  e.name = "none";
  return e;
}

[[maybe_unused]] const bool kRegistered = [] {
  for (const auto& [preset, description] :
       {std::pair<EngineModel, const char*>{vllm_v1_defaults(),
                                            "vLLM V1: API server + engine core, synchronous scheduling by default, "
                                            "piecewise CUDA graphs up to 512 tokens and full graphs for decode"},
        {no_engine(), "no engine: the GPU time alone (no client path, no host work, no CUDA graphs)"}}) {
    const std::string kind = preset.name;
    engine_registry().add({kind, description, engine_param_specs(preset)},
                          [kind](const core::Params& p, const CalibrationProfile* profile) {
                            return std::make_unique<EngineModel>(engine_from_params(p, profile, kind));
                          });
  }
  return true;
}();

}  // namespace

}  // namespace servesim::hwmodels
