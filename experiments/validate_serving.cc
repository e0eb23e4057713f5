#include "experiments/validate_serving.h"

#include "experiments/prediction.h"

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <cmath>
#include <sstream>

#include "experiments/run.h"
#include "hwmodels/gpu_spec.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/lifecycle.h"

namespace servesim::experiments {

std::string model_preset_for(const std::string& model_id) {
  // The last path component, lower case, matched against the presets' spellings.
  std::string name = core::to_lower(model_id.substr(model_id.find_last_of('/') + 1));
  const std::pair<const char*, const char*> known[] = {
      {"llama-2-7b-hf", "llama-2-7b"},     {"llama-2-7b", "llama-2-7b"},           {"llama-2-70b-hf", "llama-2-70b"},
      {"llama-2-70b", "llama-2-70b"},      {"meta-llama-3-8b", "llama-3-8b"},       {"llama-3.1-8b", "llama-3-8b"},
      {"llama-3-8b", "llama-3-8b"},        {"meta-llama-3-70b", "llama-3-70b"},     {"llama-3.1-70b", "llama-3-70b"},
      {"llama-3-70b", "llama-3-70b"},      {"mixtral-8x7b-v0.1", "mixtral-8x7b"},   {"mixtral-8x7b", "mixtral-8x7b"},
      {"mistral-7b-v0.1", "mistral-7b"},   {"mistral-7b", "mistral-7b"},            {"qwen2-7b", "qwen2-7b"},
      {"deepseek-v3", "deepseek-v3"},
  };
  for (const auto& [id, preset] : known)
    if (name == id || name == std::string(id) + "-instruct") return preset;
  return "";
}

namespace {

std::string quoted(const std::string& s) { return core::toml_quote(s); }
std::string num(double v) { return core::format_double(v); }

// The arrivals of a benchmark that sent a number of requests (vllm bench serve's num_prompts) rather
// than a sequence of rate stages.
std::string arrival_section(const LoadStage& l) {
  std::string t;
  switch (l.shape) {
    case ArrivalShape::kPoissonFixedCount:
      break;  // written by the caller as stages
    case ArrivalShape::kPoisson:
      t += "kind = \"poisson\"\nrate = " + num(l.rate) + "\n";
      break;
    case ArrivalShape::kConstant:
      t += "kind = \"constant\"\nrate = " + num(l.rate) + "\n";
      break;
    case ArrivalShape::kGamma:
      t += "kind = \"gamma\"\nrate = " + num(l.rate) + "\ncv = " + num(1.0 / std::sqrt(l.burstiness)) + "\n";
      break;
    case ArrivalShape::kOffline:
      t += "kind = \"offline\"\n";
      break;
    case ArrivalShape::kClosedLoop:
      t += "kind = \"closed_loop\"\nconcurrency = " + std::to_string(l.concurrency) + "\n";
      break;
  }
  return t + "requests = " + std::to_string(l.requests) + "\n";
}

std::string stage_type(ArrivalShape s) {
  switch (s) {
    case ArrivalShape::kPoisson: return "poisson";
    case ArrivalShape::kConstant: return "constant";
    default: return "poisson_fixed_count";
  }
}

}  // namespace

std::string stage_config(const MeasuredStage& s, const ValidateOptions& o, const std::string& lengths_jsonl) {
  const std::string where = s.source;
  // The deployment.
  std::string model = o.model.empty() ? model_preset_for(s.model) : o.model;
  if (model.empty())
    throw core::InputError(where, 0, "model",
                           "model '" + s.model + "' is not one of servesim's presets: name one with --model (a preset "
                           "or a Hugging Face config.json)");
  const std::string gpu = o.gpu.empty() ? s.gpu : o.gpu;
  if (gpu.empty()) throw core::InputError(where, 0, "gpu", "the file does not say the GPU: give --gpu");
  if (!hwmodels::find_gpu_preset(gpu))
    throw core::InputError(where, 0, "gpu", "'" + gpu + "' is not a servesim GPU preset (servesim list gpus)");
  const int64_t tp = o.tensor_parallel > 0 ? o.tensor_parallel : std::max<int64_t>(1, s.tensor_parallel);

  std::ostringstream t;
  t << "seed = " << o.seed << "\n";
  // The workload: the shared-prefix pool when the benchmark used one, else the lengths it reports.
  const MeasuredWorkload& w = s.workload;
  t << "[workload]\n";
  const bool pool = w.groups > 0 && w.prompts_per_group > 0 && w.question_len > 0;
  if (pool) {
    t << "kind = \"shared_prefix\"\ngroups = " << w.groups << "\nprompts_per_group = " << w.prompts_per_group
      << "\nsystem_prompt_len = " << w.system_prompt_len << "\nquestion_len = " << w.question_len << "\n";
  } else {
    t << "kind = \"synthetic\"\n";
  }
  if (o.client_timeout_s > 0) t << "client_timeout_s = " << num(o.client_timeout_s) << "\n";
  LoadStage load = s.load;
  if (!(load.rate > 0) && o.rate > 0) load.rate = o.rate;
  if (!(load.duration_s > 0) && o.duration_s > 0) load.duration_s = o.duration_s;
  // Rate stages (inference-perf, the serving-runs table: the stages before this one too), or a count
  // of requests at a rate, a burstiness, all at once or from a number of clients (vllm bench serve).
  const bool staged = load.shape == ArrivalShape::kPoissonFixedCount ||
                      ((load.shape == ArrivalShape::kPoisson || load.shape == ArrivalShape::kConstant) &&
                       (!s.earlier.empty() || load.requests < 1));
  if (!staged && load.requests < 1)
    throw core::InputError(where, 0, "num_prompts", "the file does not say how many requests were sent");
  if (pool) {
    // What the template adds to system + question, as the measured prompt lengths say.
    const double base = static_cast<double>(w.system_prompt_len + w.question_len);
    if (w.prompt_len_max > 0 && w.prompt_len_min > 0 && w.prompt_len_max >= w.prompt_len_min &&
        w.prompt_len_min >= base) {
      t << "[workload.extra_tokens]\nkind = \"uniform\"\nmin = " << std::llround(w.prompt_len_min - base)
        << "\nmax = " << std::llround(w.prompt_len_max - base) << "\n";
    } else if (w.prompt_len_mean > base) {
      t << "[workload.extra_tokens]\nkind = \"fixed\"\nvalue = " << std::llround(w.prompt_len_mean - base) << "\n";
    }
  } else if (lengths_jsonl.empty()) {
    if (!(w.prompt_len_mean >= 1)) throw core::InputError(where, 0, "prompt_len", "the file does not say the prompt lengths");
    t << "[workload.prompt]\nkind = \"fixed\"\nvalue = " << std::llround(w.prompt_len_mean) << "\n";
  }
  if (!pool && !lengths_jsonl.empty()) {
    // Each request's own lengths, in the order the benchmark sent them.
    for (const char* field : {"prompt", "output"})
      t << "[workload." << field << "]\nkind = \"empirical\"\nformat = \"jsonl\"\nfield = \"" << field
        << "\"\ncolumn = \"" << (field[0] == 'p' ? "input_len" : "output_len") << "\"\norder = \"sequential\"\npath = "
        << quoted(lengths_jsonl) << "\n";
  } else {
    const int64_t output = w.max_tokens > 0 ? w.max_tokens : std::llround(w.output_len_mean);
    if (output < 1) throw core::InputError(where, 0, "output_len", "the file does not say the output lengths");
    t << "[workload.output]\nkind = \"fixed\"\nvalue = " << output << "\n";
  }
  // Arrivals: the stages before this one and this one, back to back on the same server.
  t << "[workload.arrival]\n";
  if (staged) {
    if (!(load.rate > 0) || !(load.duration_s > 0))
      throw core::InputError(where, 0, "rate", "the file does not give the stage's rate and duration: give --rate and --duration");
    t << "kind = \"stages\"\n";
    for (const LoadStage& e : s.earlier)
      t << "[[workload.arrival.stages]]\nrate = " << num(e.rate) << "\nduration_s = " << num(e.duration_s)
        << "\ntype = \"" << stage_type(e.shape) << "\"\n";
    t << "[[workload.arrival.stages]]\nrate = " << num(load.rate) << "\nduration_s = " << num(load.duration_s)
      << "\ntype = \"" << stage_type(load.shape) << "\"\n";
  } else {
    t << arrival_section(load);
  }
  t << "[model]\nkind = " << quoted(model) << "\n";
  if (s.max_model_len > 0) t << "max_context = " << s.max_model_len << "\n";
  t << "[gpu]\nkind = " << quoted(gpu) << "\n";
  t << "[engine]\nkind = " << quoted(o.engine) << "\n";
  if (!o.calibration.empty()) t << "[cost_model]\ncalibration = " << quoted(o.calibration) << "\n";
  t << "[cluster]\nreplicas = 1\ntensor_parallel = " << tp << "\nblock_size = 16\nprefix_caching = true\n";
  // vLLM V1 schedules with chunked prefill always on.
  t << "[scheduler]\nkind = \"chunked\"\nmax_num_batched_tokens = "
    << (s.max_num_batched_tokens > 0 ? s.max_num_batched_tokens : o.max_num_batched_tokens)
    << "\nmax_num_seqs = " << (s.max_num_seqs > 0 ? s.max_num_seqs : o.max_num_seqs) << "\n";
  t << "[output]\nsample_interval_ms = 0\n";
  return t.str();
}

namespace {

// Collects the measured stage's requests as a client sees them.
class StageObserver final : public core::LifecycleObserver {
 public:
  explicit StageObserver(uint32_t stage) : stage_(stage) {}
  void on_request_done(const core::RequestRecord& r) override {
    if (r.stage != stage_) return;
    first_ = std::min(first_, r.arrival.ns());
    // The benchmark's clock stops at the last answer or time-out of the stage's requests.
    last_ = std::max(last_, r.client_finish.ns());
    if (r.outcome != core::RequestOutcome::kCompleted) {
      ++failed_;
      return;
    }
    const double ttft = (r.client_first_token - r.arrival).seconds();
    const double e2e = (r.client_finish - r.arrival).seconds();
    ttft_.push_back(ttft);
    e2e_.push_back(e2e);
    if (r.output_tokens > 1) {
      tpot_.push_back((e2e - ttft) / static_cast<double>(r.output_tokens - 1));
      gap_sum_ += e2e - ttft;
      gaps_ += r.output_tokens - 1;
    }
    tokens_ += r.output_tokens;
  }
  SimulatedStage result() {
    SimulatedStage s;
    s.ttft = stats(ttft_);
    s.e2e = stats(e2e_);
    s.tpot = stats(tpot_);
    if (gaps_ > 0) s.itl.mean = gap_sum_ / static_cast<double>(gaps_);
    s.completed = static_cast<int64_t>(ttft_.size());
    s.failed = failed_;
    // Throughput as both benchmark tools report it: requests answered over the span from the first
    // send to the last answer or time-out (an overloaded stage's span runs a time-out past its end).
    if (last_ > first_) {
      const double span_s = static_cast<double>(last_ - first_) * 1e-9;
      s.throughput_req_s = static_cast<double>(s.completed) / span_s;
      s.output_tok_s = static_cast<double>(tokens_) / span_s;
    }
    return s;
  }

 private:
  // Percentiles as numpy (and both benchmark tools) compute them: linear between closest ranks.
  static MeasuredLatency stats(std::vector<double>& v) {
    MeasuredLatency l;
    if (v.empty()) return l;
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    auto at = [&](double p) {
      const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
      const size_t lo = static_cast<size_t>(pos);
      const size_t hi = std::min(lo + 1, v.size() - 1);
      return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
    };
    l.mean = sum / static_cast<double>(v.size());
    l.p50 = at(50);
    l.p90 = at(90);
    l.p99 = at(99);
    return l;
  }
  uint32_t stage_;
  std::vector<double> ttft_, e2e_, tpot_;
  double gap_sum_ = 0;
  int64_t gaps_ = 0, failed_ = 0, tokens_ = 0;
  int64_t first_ = INT64_MAX, last_ = 0;
};

}  // namespace

namespace {

// A per-request length file for one simulation, removed when the simulation is done.
class LengthsFile {
 public:
  explicit LengthsFile(const MeasuredWorkload& w) {
    if (w.input_lens.empty() || w.input_lens.size() != w.output_lens.size()) return;
    static std::atomic<uint64_t> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("servesim-lengths-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".jsonl"))
                .string();
    std::string text;
    for (size_t i = 0; i < w.input_lens.size(); ++i)
      text += "{\"input_len\": " + std::to_string(std::max<int64_t>(1, w.input_lens[i])) +
              ", \"output_len\": " + std::to_string(std::max<int64_t>(1, w.output_lens[i])) + "}\n";
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f.flush()) throw core::Error("cannot write the per-request lengths to " + path_);
  }
  ~LengthsFile() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove(path_, ec);
  }
  LengthsFile(const LengthsFile&) = delete;
  LengthsFile& operator=(const LengthsFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

SimulatedStage simulate_stage(const MeasuredStage& stage, const ValidateOptions& options) {
  const LengthsFile lengths(stage.workload);
  const std::string text = stage_config(stage, options, lengths.path());
  const core::Params config = core::parse_config(text, stage.label + " (servesim validate-serving)", run_schema(), options.sets);
  StageObserver observer(static_cast<uint32_t>(stage.earlier.size()));
  RunOutputs outputs;
  outputs.observers.push_back(&observer);
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_simulation(config, outputs);
  SimulatedStage s = observer.result();
  s.config = r.info.config_toml;
  s.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

StageComparison compare(const MeasuredStage& m, const SimulatedStage& s) {
  StageComparison c;
  c.measured = m;
  c.simulated = s;
  auto add = [&](const char* metric, const MeasuredLatency& a, const MeasuredLatency& b) {
    const std::pair<const char*, std::optional<double> MeasuredLatency::*> stats[] = {
        {"mean", &MeasuredLatency::mean}, {"p50", &MeasuredLatency::p50}, {"p90", &MeasuredLatency::p90},
        {"p99", &MeasuredLatency::p99}};
    for (const auto& [name, field] : stats)
      if (a.*field && b.*field) c.figures.push_back({metric, name, *(a.*field), *(b.*field)});
  };
  add("ttft", m.ttft, s.ttft);
  add("tpot", m.tpot, s.tpot);
  add("itl", m.itl, s.itl);
  add("e2e", m.e2e, s.e2e);
  if (m.throughput_req_s) c.figures.push_back({"throughput", "req/s", *m.throughput_req_s, s.throughput_req_s});
  if (m.overloaded()) c.figures.push_back({"failed", "requests", static_cast<double>(m.failed), static_cast<double>(s.failed)});
  // Saturation: the measurement and the simulation disagree on whether the server kept up. The
  // simulation did not keep up when its requests time out, or when they queue: a TTFT p90 over ten
  // times the measured one and over a second (a queue that grows through the stage).
  const bool queued = m.ttft.p90 && s.ttft.p90 && *s.ttft.p90 > std::max(1.0, 10.0 * *m.ttft.p90);
  const bool sim_overloaded = s.failed > 0 || queued;
  c.saturation_mismatch = sim_overloaded != m.overloaded();
  return c;
}

std::optional<double> StageComparison::figure_error(const std::string& metric, const std::string& stat) const {
  for (const ComparedFigure& f : figures)
    if (f.metric == metric && f.stat == stat) return f.error();
  return std::nullopt;
}

std::vector<StageComparison> validate_stages(const std::vector<MeasuredStage>& stages, const ValidateOptions& options,
                                             int jobs) {
  std::vector<SimulatedStage> sims(stages.size());
  std::vector<std::string> errors(stages.size());
  tbb::task_arena arena(jobs > 0 ? jobs : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, stages.size(), [&](size_t i) {
      try {
        sims[i] = simulate_stage(stages[i], options);
      } catch (const std::exception& e) {
        errors[i] = stages[i].label + ": " + e.what();
      }
    });
  });
  for (size_t i = 0; i < stages.size(); ++i)
    if (!errors[i].empty()) throw core::Error(errors[i]);
  std::vector<StageComparison> out;
  for (size_t i = 0; i < stages.size(); ++i) out.push_back(compare(stages[i], sims[i]));
  return out;
}

std::optional<double> mean_abs_error(const std::vector<StageComparison>& c, const std::string& metric,
                                     const std::string& stat) {
  double sum = 0;
  int n = 0;
  for (const StageComparison& s : c) {
    if (!s.comparable()) continue;
    if (const auto e = s.figure_error(metric, stat)) {
      sum += std::fabs(*e);
      ++n;
    }
  }
  return n ? std::optional<double>(sum / n) : std::nullopt;
}

std::vector<std::vector<StageComparison>> validate_draws(const std::vector<MeasuredStage>& stages,
                                                         const ValidateOptions& options,
                                                         const hwmodels::CalibrationUncertainty& u, int64_t draws,
                                                         int jobs) {
  std::vector<std::vector<StageComparison>> drawn;
  for (const hwmodels::CalibrationDraw& d : hwmodels::draw_calibration_errors(u, options.seed, draws)) {
    ValidateOptions v = options;
    for (const std::string& set : prediction_overrides(d)) v.sets.push_back(set);
    drawn.push_back(validate_stages(stages, v, jobs));
  }
  return drawn;
}

std::vector<std::vector<FigureInterval>> figure_intervals(const std::vector<StageComparison>& point,
                                                          const std::vector<std::vector<StageComparison>>& drawn,
                                                          double level) {
  std::vector<std::vector<FigureInterval>> out;
  for (size_t i = 0; i < point.size(); ++i) {
    std::vector<FigureInterval> row;
    for (const ComparedFigure& p : point[i].figures) {
      std::vector<double> values;
      for (const auto& d : drawn)
        for (const ComparedFigure& f : d.at(i).figures)
          if (f.metric == p.metric && f.stat == p.stat) values.push_back(f.simulated);
      const auto [lo, hi] = prediction_interval(values, level);
      row.push_back({lo, hi});
    }
    out.push_back(std::move(row));
  }
  return out;
}

hwmodels::CalibrationUncertainty stage_uncertainty(const std::vector<MeasuredStage>& stages, const ValidateOptions& options) {
  if (stages.empty()) throw core::Error("no stages to simulate");
  const std::string text = stage_config(stages.front(), options);
  return run_uncertainty(core::parse_config(text, stages.front().label + " (servesim validate-serving)", run_schema(),
                                            options.sets))
      .uncertainty;
}

}  // namespace servesim::experiments
