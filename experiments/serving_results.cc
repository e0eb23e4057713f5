#include "experiments/serving_results.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>

#include "calibration/csv.h"
#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::experiments {

namespace fs = std::filesystem;
using nlohmann::json;

std::string_view arrival_shape_name(ArrivalShape shape) {
  switch (shape) {
    case ArrivalShape::kPoissonFixedCount: return "poisson, fixed count";
    case ArrivalShape::kPoisson: return "poisson";
    case ArrivalShape::kGamma: return "gamma";
    case ArrivalShape::kConstant: return "constant";
    case ArrivalShape::kOffline: return "offline";
    case ArrivalShape::kClosedLoop: return "closed loop";
  }
  return "poisson";
}

double line_stamped_tpot_to_engine(double reported_s, double output_tokens) {
  return reported_s * (2.0 * output_tokens + 1.0) / (output_tokens - 1.0);
}

namespace {

const char* kLineStampedNote =
    "time per output token and inter-token latency x (2n + 1) / (n - 1): the client stamps every streamed "
    "line and each event is followed by a blank line, so it reported (last - first) / (2n + 1)";

void scale(MeasuredLatency& l, double f) {
  for (std::optional<double>* v : {&l.mean, &l.p50, &l.p90, &l.p99})
    if (*v) **v *= f;
}

// ---- the serving-runs table ----------------------------------------------------------------------

std::optional<double> optional_cell(const calibration::CsvTable& t, size_t r, const char* name) {
  const int c = t.column(name);
  if (c < 0 || t.rows[r][static_cast<size_t>(c)].empty()) return std::nullopt;
  return t.number(r, static_cast<size_t>(c));
}

MeasuredLatency latency_columns(const calibration::CsvTable& t, size_t r, const std::string& prefix) {
  MeasuredLatency l;
  l.mean = optional_cell(t, r, (prefix + "_mean").c_str());
  l.p50 = optional_cell(t, r, (prefix + "_median").c_str());
  l.p90 = optional_cell(t, r, (prefix + "_p90").c_str());
  l.p99 = optional_cell(t, r, (prefix + "_p99").c_str());
  return l;
}

}  // namespace

std::vector<MeasuredStage> parse_serving_runs_table(const std::string& text, const std::string& source) {
  const calibration::CsvTable t = calibration::parse_csv(text, source, '\t');
  for (const char* c : {"experiment", "hf_model", "tp", "stage", "rate", "duration_s", "sent", "succeeded", "failed",
                        "max_tokens", "ttft_s_mean", "e2e_s_mean", "tpot_reported_s_mean"})
    t.require(c);
  auto text_cell = [&](size_t r, const char* name) { return t.rows[r][t.require(name)]; };
  auto integer = [&](size_t r, const char* name) { return t.integer(r, t.require(name)); };
  auto number = [&](size_t r, const char* name) { return t.number(r, t.require(name)); };
  std::vector<MeasuredStage> out;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    MeasuredStage s;
    s.source = source + ":" + std::to_string(t.lines[r]);
    s.format = "serving-runs";
    s.experiment = text_cell(r, "experiment");
    if (s.experiment.empty()) throw core::InputError(source, t.lines[r], "experiment", "empty experiment name");
    s.stage = integer(r, "stage");
    s.label = s.experiment + " stage " + std::to_string(s.stage);
    s.model = text_cell(r, "hf_model");
    if (const int g = t.column("gpu"); g >= 0) s.gpu = t.rows[r][static_cast<size_t>(g)];
    s.tensor_parallel = integer(r, "tp");
    for (auto [field, name] : {std::pair<int64_t*, const char*>{&s.max_model_len, "max_model_len"},
                               {&s.max_num_batched_tokens, "max_num_batched_tokens"},
                               {&s.max_num_seqs, "max_num_seqs"}})
      if (t.column(name) >= 0) *field = integer(r, name);
    MeasuredWorkload& w = s.workload;
    w.max_tokens = integer(r, "max_tokens");
    if (w.max_tokens < 2)
      throw core::InputError(source, t.lines[r], "max_tokens", "expected at least 2 output tokens (TPOT needs two)");
    w.output_len_mean = static_cast<double>(w.max_tokens);
    if (t.column("system_prompt_len") >= 0) w.system_prompt_len = integer(r, "system_prompt_len");
    if (t.column("question_len") >= 0) w.question_len = integer(r, "question_len");
    // The shared-prefix data set of the version that ran: 10 groups x 10 prompts (SOURCE.md).
    w.groups = 10;
    w.prompts_per_group = 10;
    for (auto [field, name] : {std::pair<double*, const char*>{&w.prompt_len_mean, "prompt_len_mean"},
                               {&w.prompt_len_min, "prompt_len_min"},
                               {&w.prompt_len_max, "prompt_len_max"}})
      if (t.column(name) >= 0) *field = number(r, name);
    s.load.rate = number(r, "rate");
    s.load.duration_s = number(r, "duration_s");
    s.load.requests = integer(r, "sent");
    s.load.shape = ArrivalShape::kPoissonFixedCount;
    if (!(s.load.rate > 0) || !(s.load.duration_s > 0))
      throw core::InputError(source, t.lines[r], "rate", "a load stage needs a positive rate and duration_s");
    s.succeeded = integer(r, "succeeded");
    s.failed = integer(r, "failed");
    s.ttft = latency_columns(t, r, "ttft_s");
    s.e2e = latency_columns(t, r, "e2e_s");
    s.tpot = latency_columns(t, r, "tpot_reported_s");
    // The reported ITL is the same (last - first) / (2n + 1) for its mean; its percentiles mix the
    // blank lines' microsecond gaps with the real ones and mean nothing, so only the mean is kept.
    s.itl.mean = optional_cell(t, r, "itl_reported_s_mean");
    const double n = static_cast<double>(w.max_tokens);
    const double f = line_stamped_tpot_to_engine(1.0, n);
    scale(s.tpot, f);
    scale(s.itl, f);
    s.corrections.push_back(kLineStampedNote);
    s.corrections.push_back("inter-token latency percentiles dropped: the reported ones mix the blank lines' gaps in");
    s.throughput_req_s = optional_cell(t, r, "throughput_req_s");
    s.output_tok_s = optional_cell(t, r, "throughput_output_tok_s");
    out.push_back(std::move(s));
  }
  // The stages of each experiment before each one (they ran back to back on one server).
  for (MeasuredStage& s : out) {
    std::map<int64_t, LoadStage> before;
    for (const MeasuredStage& o : out)
      if (o.experiment == s.experiment && o.stage < s.stage) before[o.stage] = o.load;
    for (const auto& [i, l] : before) s.earlier.push_back(l);
  }
  return out;
}

// ---- JSON formats --------------------------------------------------------------------------------

namespace {

// The line of byte `offset` in `text`, for a JSON parse error.
int64_t line_of(const std::string& text, size_t offset) {
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(std::min(offset, text.size())), '\n');
}

json parse_json(const std::string& text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw core::InputError(source, line_of(text, e.byte > 0 ? e.byte - 1 : 0), "", std::string("malformed JSON: ") + e.what());
  }
}

// The number at `key` of `object` (a JSON path for errors), if present and a number.
std::optional<double> number_at(const json& object, const std::string& key, const std::string& source,
                                const std::string& path) {
  if (!object.is_object() || !object.contains(key) || object.at(key).is_null()) return std::nullopt;
  const json& v = object.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw core::InputError(source, 0, path + key, "expected a finite number");
  return v.get<double>();
}

const json& object_at(const json& object, const std::string& key, const std::string& source, const std::string& path) {
  if (!object.is_object() || !object.contains(key) || !object.at(key).is_object())
    throw core::InputError(source, 0, path + key, "missing, or not an object");
  return object.at(key);
}

MeasuredLatency inference_perf_latency(const json& stats, const std::string& source, const std::string& path) {
  MeasuredLatency l;
  l.mean = number_at(stats, "mean", source, path);
  l.p50 = number_at(stats, "median", source, path);
  l.p90 = number_at(stats, "p90", source, path);
  l.p99 = number_at(stats, "p99", source, path);
  return l;
}

}  // namespace

MeasuredStage parse_inference_perf_json(const std::string& text, const std::string& source) {
  const json doc = parse_json(text, source);
  MeasuredStage s;
  s.source = source;
  s.format = "inference-perf";
  s.label = fs::path(source).filename().string();
  const json& load = object_at(doc, "load_summary", source, "");
  s.load.requests = static_cast<int64_t>(number_at(load, "count", source, "load_summary.").value_or(0));
  s.load.rate = number_at(load, "requested_rate", source, "load_summary.").value_or(0);
  s.load.duration_s = number_at(load, "send_duration", source, "load_summary.").value_or(0);
  s.load.shape = ArrivalShape::kPoissonFixedCount;
  const json& ok = object_at(doc, "successes", source, "");
  s.succeeded = static_cast<int64_t>(number_at(ok, "count", source, "successes.").value_or(0));
  if (doc.contains("failures") && doc.at("failures").is_object())
    s.failed = static_cast<int64_t>(number_at(doc.at("failures"), "count", source, "failures.").value_or(0));
  const json& lat = object_at(ok, "latency", source, "successes.");
  s.ttft = inference_perf_latency(object_at(lat, "time_to_first_token", source, "successes.latency."), source,
                                  "successes.latency.time_to_first_token.");
  s.e2e = inference_perf_latency(object_at(lat, "request_latency", source, "successes.latency."), source,
                                 "successes.latency.request_latency.");
  s.tpot = inference_perf_latency(object_at(lat, "time_per_output_token", source, "successes.latency."), source,
                                  "successes.latency.time_per_output_token.");
  const MeasuredLatency itl = inference_perf_latency(object_at(lat, "inter_token_latency", source, "successes.latency."),
                                                     source, "successes.latency.inter_token_latency.");
  if (ok.contains("prompt_len")) {
    const json& p = ok.at("prompt_len");
    s.workload.prompt_len_mean = number_at(p, "mean", source, "successes.prompt_len.").value_or(0);
    s.workload.prompt_len_min = number_at(p, "min", source, "successes.prompt_len.").value_or(0);
    s.workload.prompt_len_max = number_at(p, "max", source, "successes.prompt_len.").value_or(0);
  }
  if (ok.contains("output_len")) {
    const json& o = ok.at("output_len");
    s.workload.output_len_mean = number_at(o, "mean", source, "successes.output_len.").value_or(0);
    s.workload.max_tokens = static_cast<int64_t>(std::llround(number_at(o, "max", source, "successes.output_len.").value_or(0)));
  }
  if (ok.contains("throughput") && ok.at("throughput").is_object()) {
    s.throughput_req_s = number_at(ok.at("throughput"), "requests_per_sec", source, "successes.throughput.");
    s.output_tok_s = number_at(ok.at("throughput"), "output_tokens_per_sec", source, "successes.throughput.");
  }
  // The line-stamping client: half the inter-token gaps are the blank lines' microseconds, so the
  // median gap is far below the mean.
  const bool line_stamped = itl.mean && itl.p50 && *itl.p50 < 0.1 * *itl.mean;
  s.itl.mean = itl.mean;
  if (line_stamped && s.workload.output_len_mean > 1) {
    const double f = line_stamped_tpot_to_engine(1.0, s.workload.output_len_mean);
    scale(s.tpot, f);
    scale(s.itl, f);
    s.corrections.push_back(std::string(kLineStampedNote) + " (n = the mean output length, " +
                            core::format_double(s.workload.output_len_mean) + ")");
    s.corrections.push_back("inter-token latency percentiles dropped: the reported ones mix the blank lines' gaps in");
  } else {
    s.itl = itl;
  }
  return s;
}

MeasuredStage parse_vllm_bench_json(const std::string& text, const std::string& source) {
  const json doc = parse_json(text, source);
  MeasuredStage s;
  s.source = source;
  s.format = "vllm-bench";
  s.label = fs::path(source).filename().string();
  if (!doc.is_object()) throw core::InputError(source, 1, "", "expected a JSON object");
  if (doc.contains("model_id") && doc.at("model_id").is_string()) s.model = doc.at("model_id").get<std::string>();
  s.load.requests = static_cast<int64_t>(number_at(doc, "num_prompts", source, "").value_or(0));
  s.load.duration_s = number_at(doc, "duration", source, "").value_or(0);
  // request_rate is a number, or "inf" (all requests at once).
  if (doc.contains("request_rate")) {
    const json& r = doc.at("request_rate");
    if (r.is_string() && (r.get<std::string>() == "inf" || r.get<std::string>() == "Infinity")) {
      s.load.shape = ArrivalShape::kOffline;
    } else if (r.is_number() && r.get<double>() > 0) {
      s.load.rate = r.get<double>();
      s.load.shape = ArrivalShape::kPoisson;
    } else {
      throw core::InputError(source, 0, "request_rate", "expected a positive number or \"inf\"");
    }
  }
  if (const auto b = number_at(doc, "burstiness", source, ""); b && *b != 1.0 && s.load.shape == ArrivalShape::kPoisson) {
    if (!(*b > 0)) throw core::InputError(source, 0, "burstiness", "expected a positive number");
    s.load.shape = ArrivalShape::kGamma;
    s.load.burstiness = *b;
  }
  if (const auto c = number_at(doc, "max_concurrency", source, ""); c && *c >= 1) {
    s.load.concurrency = static_cast<int64_t>(*c);
    if (s.load.shape == ArrivalShape::kOffline) s.load.shape = ArrivalShape::kClosedLoop;
  }
  s.succeeded = static_cast<int64_t>(number_at(doc, "completed", source, "").value_or(0));
  s.failed = static_cast<int64_t>(number_at(doc, "failed", source, "").value_or(
      static_cast<double>(std::max<int64_t>(0, s.load.requests - s.succeeded))));
  auto metric = [&](const char* name) {
    MeasuredLatency l;
    const std::string n(name);
    auto ms = [&](const std::string& key) -> std::optional<double> {
      const auto v = number_at(doc, key, source, "");
      return v ? std::optional<double>(*v * 1e-3) : std::nullopt;
    };
    l.mean = ms("mean_" + n + "_ms");
    l.p50 = ms("median_" + n + "_ms");
    l.p90 = ms("p90_" + n + "_ms");
    l.p99 = ms("p99_" + n + "_ms");
    return l;
  };
  s.ttft = metric("ttft");
  s.tpot = metric("tpot");
  s.itl = metric("itl");
  s.e2e = metric("e2el");
  s.throughput_req_s = number_at(doc, "request_throughput", source, "");
  s.output_tok_s = number_at(doc, "output_throughput", source, "");
  auto int_array = [&](const char* key) {
    std::vector<int64_t> v;
    if (!doc.contains(key) || !doc.at(key).is_array()) return v;
    for (const json& x : doc.at(key)) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0)
        throw core::InputError(source, 0, key, "expected an array of non-negative integers");
      v.push_back(x.get<int64_t>());
    }
    return v;
  };
  s.workload.input_lens = int_array("input_lens");
  s.workload.output_lens = int_array("output_lens");
  if (s.workload.input_lens.size() != s.workload.output_lens.size())
    throw core::InputError(source, 0, "output_lens", "input_lens and output_lens differ in length");
  if (!s.workload.input_lens.empty()) {
    double in = 0, out = 0;
    for (size_t i = 0; i < s.workload.input_lens.size(); ++i) {
      in += static_cast<double>(s.workload.input_lens[i]);
      out += static_cast<double>(s.workload.output_lens[i]);
    }
    s.workload.prompt_len_mean = in / static_cast<double>(s.workload.input_lens.size());
    s.workload.output_len_mean = out / static_cast<double>(s.workload.output_lens.size());
  } else {
    const auto in = number_at(doc, "total_input_tokens", source, ""), out = number_at(doc, "total_output_tokens", source, "");
    if (in && s.succeeded > 0) s.workload.prompt_len_mean = *in / static_cast<double>(s.succeeded);
    if (out && s.succeeded > 0) s.workload.output_len_mean = *out / static_cast<double>(s.succeeded);
  }
  if (!s.ttft.any() && !s.e2e.any())
    throw core::InputError(source, 0, "mean_ttft_ms", "no latency figures: not a vllm bench serve result");
  return s;
}

std::vector<MeasuredStage> read_serving_results(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // An inference-perf results directory: its stage files, in stage order, each after the ones
    // before it.
    std::vector<std::pair<int64_t, std::string>> files;
    const std::regex stage_file(R"(stage_(\d+)_lifecycle_metrics\.json)");
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      std::smatch m;
      const std::string name = entry.path().filename().string();
      if (std::regex_match(name, m, stage_file)) files.emplace_back(std::stoll(m[1]), entry.path().string());
    }
    if (files.empty())
      throw core::InputError(path, 0, "",
                             "a directory without stage_N_lifecycle_metrics.json files (an inference-perf results "
                             "directory holds them)");
    std::sort(files.begin(), files.end());
    std::vector<MeasuredStage> out;
    for (const auto& [stage, file] : files) {
      MeasuredStage s = parse_inference_perf_json(calibration::read_text_file(file), file);
      s.experiment = fs::path(path).filename().string();
      s.stage = stage;
      s.label = s.experiment + " stage " + std::to_string(stage);
      for (const MeasuredStage& before : out) s.earlier.push_back(before.load);
      out.push_back(std::move(s));
    }
    return out;
  }
  const std::string text = calibration::read_text_file(path);
  size_t first = text.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  if (first != std::string::npos && text[first] == '{') {
    const json doc = parse_json(text, path);
    if (doc.contains("load_summary") || doc.contains("successes")) {
      MeasuredStage s = parse_inference_perf_json(text, path);
      s.experiment = s.label;
      return {s};
    }
    MeasuredStage s = parse_vllm_bench_json(text, path);
    s.experiment = s.label;
    return {s};
  }
  if (text.find('\t') != std::string::npos) return parse_serving_runs_table(text, path);
  throw core::InputError(path, 1, "",
                         "not a results file this version reads: expected a serving-runs table (tab-separated), an "
                         "inference-perf lifecycle-metrics JSON or a vllm bench serve result JSON");
}

}  // namespace servesim::experiments
