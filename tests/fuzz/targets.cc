#include "tests/fuzz/targets.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <cstdio>
#include <fstream>
#include <set>
#include <utility>
#include <vector>

#include "calibration/operator_csv.h"
#include "calibration/step_latency_csv.h"
#include "experiments/cli/cli.h"
#include "experiments/experiment.h"
#include "experiments/run.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/hf_config.h"
#include "hwmodels/roofline.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/params.h"
#include "sim/metrics/summary.h"
#include "traces/arrival_source.h"
#include "traces/azure_csv.h"
#include "traces/length_distribution.h"
#include "traces/length_file.h"
#include "traces/line_reader.h"
#include "traces/mooncake_jsonl.h"
#include "traces/rate_profile.h"

namespace servesim::testing {
namespace {

// Large enough to reach every rule, small enough that one input runs in milliseconds.
constexpr int64_t kMaxRequestsPerRun = 40;
constexpr int64_t kMaxReplicas = 4;
constexpr int64_t kMaxTensorParallel = 8;
constexpr size_t kMaxRowsChecked = 100000;

// Reported bugs the oracle tolerates until they are fixed (each named by its finding, F1..F10 in the
// issue-7 notes), so that the CI short fuzz run stays a signal for new bugs. Set each to false with its fix.
struct KnownBugs {
  bool set_invalid_utf8 = false;        // F1 (fixed): a --set value with invalid UTF-8 escaped as toml::parse_error
  bool config_toml_line_break = false;  // F3 (fixed): toml++'s error text quoted a line break into the message
  bool profile_toml_line_break = false;  // F9 (fixed): the same in calibration profiles
  bool hf_message_form = false;         // F8, F10 (fixed): hf_config: line 0 for huge numbers; very long messages
};
constexpr KnownBugs kKnown;

[[noreturn]] void oracle(const std::string& what) { throw OracleFailure(what); }

std::string printable_for_oracle(const std::string& s) { return core::printable(s, 400); }

// `what` (a callable returning the message) runs only when the check fails: the fuzzer runs these
// checks millions of times.
template <class What>
void expect(bool ok, What&& what) {
  if (!ok) oracle(what());
}

void write_file(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) oracle("cannot write the scratch file " + path);
}

// What every refusal of an input file must look like: one paragraph that starts with the file's
// path and, for an InputError, a line number.
struct MessageRules {
  bool require_line = true;  // an InputError names a line (or, for something missing, the field)
  bool one_line = true;      // no line break in the message
  bool bounded = true;       // under 2,000 characters
};

void expect_names_file(const core::Error& e, const std::string& path, MessageRules rules = {}) {
  const std::string m = e.what();
  expect(m.rfind(path, 0) == 0, [&] { return std::string("the error does not start with the file's path: " + m); });
  expect(m.find('\n') == std::string::npos || !rules.one_line,
         [&] { return std::string("the error is not one paragraph: " + m); });
  expect(m.size() < 2000 || !rules.bounded,
         [&] { return std::string("the error is " + std::to_string(m.size()) + " characters long"); });
  const bool require_line = rules.require_line;
  if (const auto* in = dynamic_cast<const core::InputError*>(&e)) {
    expect(in->file() == path, [&] { return std::string("InputError names file '" + in->file() + "', not " + path); });
    // Something missing has no line; then the field must be named.
    expect(in->line() >= 1 || !in->field().empty() || !require_line,
           [&] { return std::string("InputError without a line or field: " + m); });
  }
}

// Every request a reader accepts: arrivals from 0, never decreasing; lengths >= 1.
struct RequestStreamCheck {
  int64_t previous_ns = 0;
  size_t count = 0;
  void operator()(const traces::RequestSpec& r) {
    expect(r.arrival.ns() >= previous_ns, [&] {
      return std::string("arrival " + std::to_string(r.arrival.ns()) + " ns after " + std::to_string(previous_ns) +
                         " ns: arrivals went back");
    });
    expect(count > 0 || r.arrival.ns() == 0, [&] {
      return std::string("the first request arrives at " + std::to_string(r.arrival.ns()) +
                         " ns, not at 0 (arrivals are offsets from the first)");
    });
    expect(r.prompt_tokens >= 1 && r.output_tokens >= 1, [&] {
      return std::string("accepted a request with " + std::to_string(r.prompt_tokens) + " prompt and " +
                         std::to_string(r.output_tokens) + " output tokens");
    });
    previous_ns = r.arrival.ns();
    ++count;
  }
};

// The lines a trace reader sees: split at '\n', one trailing '\r' and a leading byte-order mark
// removed, blank lines skipped.
std::vector<std::string_view> data_lines(std::string_view data) {
  std::vector<std::string_view> out;
  size_t start = 0;
  bool first = true;
  while (start < data.size()) {
    size_t nl = data.find('\n', start);
    if (nl == std::string_view::npos) nl = data.size();
    std::string_view line = data.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    first = false;
    if (!traces::is_blank(line)) out.push_back(line);
    start = nl + 1;
  }
  return out;
}

bool plain_ascii(std::string_view s) {
  for (char c : s)
    if (c < 0x20 || c > 0x7e || c == '\\') return false;
  return true;
}

// Differential check of the hand-written Mooncake parser against nlohmann::json: a line the reader
// accepts is valid JSON with the same four values. Only for lines of printable ASCII without
// escapes (the reader deliberately does not validate the insides of strings).
void compare_with_nlohmann(std::string_view line, const traces::RequestSpec& r, int64_t timestamp_ns) {
  if (!plain_ascii(line)) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::out_of_range&) {
    return;  // a number beyond double in a skipped value: valid JSON nlohmann cannot hold
  } catch (const nlohmann::json::exception& e) {
    oracle("the reader accepted a line nlohmann::json refuses (" + std::string(e.what()) +
           "): " + std::string(line.substr(0, 200)));
  }
  expect(j.is_object(), [&] { return std::string("accepted a line that is not a JSON object"); });
  auto int_of = [&](const char* key) -> int64_t {
    const auto& v = j.at(key);
    expect(v.is_number_integer(), [&] { return std::string(std::string(key) + " accepted but not a JSON integer"); });
    return v.get<int64_t>();
  };
  expect(int_of("input_length") == r.prompt_tokens,
         [&] { return std::string("input_length differs from nlohmann's"); });
  expect(int_of("output_length") == r.output_tokens,
         [&] { return std::string("output_length differs from nlohmann's"); });
  const auto& ts = j.at("timestamp");
  expect(ts.is_number(), [&] { return std::string("timestamp accepted but not a JSON number"); });
  if (ts.is_number_integer()) {
    expect(ts.get<int64_t>() * 1'000'000 == timestamp_ns,
           [&] { return std::string("timestamp differs from nlohmann's"); });
  } else {
    expect(std::llround(ts.get<double>() * 1e6) == timestamp_ns,
           [&] { return std::string("timestamp differs from nlohmann's"); });
  }
  const auto& h = j.at("hash_ids");
  expect(h.is_array() && h.size() == r.block_hashes.size(),
         [&] { return std::string("hash_ids differ from nlohmann's"); });
  for (size_t i = 0; i < h.size(); ++i)
    expect(h[i].is_number_unsigned() && h[i].get<uint64_t>() == r.block_hashes[i],
           [&] { return std::string("hash_ids[" + std::to_string(i) + "] differs from nlohmann's"); });
}

// The readers report arrivals as offsets from the first line: the raw timestamp of a line, for the
// differential check, is the offset plus the first line's.
template <class Reader>
void read_all(const std::string& path, std::vector<traces::RequestSpec>* keep) {
  Reader reader(path);
  traces::RequestSpec r;
  RequestStreamCheck check;
  while (reader.read(r)) {
    check(r);
    if (keep && keep->size() < kMaxRowsChecked) keep->push_back(r);
  }
  expect(check.count >= 1, [&] { return std::string("a reader accepted a file without requests"); });
}

bool is_bug(const core::Error& e) {
  const std::string m = e.what();
  return m.find("invariant violated") != std::string::npos || m.rfind("internal:", 0) == 0;
}

// Stage 2 of fuzz_config: runs a small validated configuration end to end with the checker on.
void run_small(const std::string& text, std::vector<std::string> overrides, const core::Params& p) {
  const core::Params& cluster = p.section("cluster");
  if (cluster.get_int("replicas") > kMaxReplicas || cluster.get_int("tensor_parallel") > kMaxTensorParallel) return;
  const core::Params& workload = p.section("workload");
  if (!workload.has("max_requests") || workload.get_int("max_requests") > kMaxRequestsPerRun)
    overrides.push_back("workload.max_requests=" + std::to_string(kMaxRequestsPerRun));
  // A sample every nanosecond of a long run is legitimate but slow; the sampler is not under test.
  const double interval_ms = p.section("output").get_float("sample_interval_ms");
  if (interval_ms != 0 && interval_ms < 1) overrides.push_back("output.sample_interval_ms=1");
  try {
    const core::Params capped = core::parse_config(text, "fuzz.toml", experiments::run_schema(), overrides);
    experiments::RunOutputs outputs;
    outputs.check = true;
    const experiments::RunResult result = experiments::run_simulation(capped, outputs);
    const auto& s = result.summary;
    expect(s.requests_completed + s.requests_rejected + s.requests_timed_out == s.requests_total,
           [&] { return std::string("completed + rejected + timed out != total in the summary"); });
    for (const auto& v : metrics::flatten(s))
      expect((v.nullable && std::isnan(v.value)) || (std::isfinite(v.value) && (v.value >= 0 || v.signed_value)), [&] {
        return std::string("summary value " + v.name + " = " + core::format_double(v.value) +
                           " (must be finite and >= 0, or unknown where nullable, or negative where signed)");
      });
  } catch (const core::Error& e) {
    if (is_bug(e)) oracle(std::string("a run broke an invariant: ") + e.what());
  }
}

}  // namespace

void fuzz_config(std::string_view data, const std::string& /*scratch*/) {
  std::string text(data);
  std::vector<std::string> overrides;
  if (const size_t cut = text.find("\n#--set\n"); cut != std::string::npos) {
    std::string_view rest = std::string_view(text).substr(cut + 8);
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      if (nl != 0) overrides.emplace_back(rest.substr(0, nl));
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
    text.resize(cut + 1);
  }
  core::Params p;
  try {
    p = core::parse_config(text, "fuzz.toml", experiments::run_schema(), overrides);
  } catch (const core::ConfigError& e) {
    const std::string m = e.what();
    expect(m.rfind("fuzz.toml", 0) == 0 || m.rfind("--set", 0) == 0, [&] {
      return std::string("a configuration error that names neither the file nor the --set argument: " + m);
    });
    expect(m.find('\n') == std::string::npos || kKnown.config_toml_line_break,
           [&] { return std::string("a configuration error of more than one line: " + m); });
    return;
  } catch (const std::exception& e) {
    // Only --set values can reach toml++ outside parse_config's own handler (F1).
    if (kKnown.set_invalid_utf8 && !overrides.empty() && std::string(e.what()).find("utf-8") != std::string::npos)
      return;
    throw;
  }
  // The resolved configuration is what the results store and hash: it must read back as itself.
  const std::string once = p.to_toml();
  std::string twice;
  try {
    twice = core::parse_config(once, "resolved.toml", experiments::run_schema()).to_toml();
  } catch (const core::Error& e) {
    oracle(std::string("the resolved configuration does not parse back: ") + e.what() + "\n" + once);
  }
  expect(once == twice, [&] {
    return std::string("the resolved configuration changes when read back:\n" + once + "\n---\n" + twice);
  });
  run_small(text, overrides, p);
}

void fuzz_azure_csv(std::string_view data, const std::string& scratch) {
  write_file(scratch, data);
  try {
    read_all<traces::AzureCsvReader>(scratch, nullptr);
  } catch (const core::Error& e) {
    expect_names_file(e, scratch);
  }
}

void fuzz_mooncake_jsonl(std::string_view data, const std::string& scratch) {
  write_file(scratch, data);
  std::vector<traces::RequestSpec> rows;
  try {
    read_all<traces::MooncakeJsonlReader>(scratch, &rows);
  } catch (const core::Error& e) {
    expect_names_file(e, scratch);
    return;
  }
  // Accepted: every line against nlohmann::json. The raw timestamps are the offsets plus the first
  // line's, which the differential check recovers from the first line itself.
  const auto lines = data_lines(data);
  expect(lines.size() == rows.size() || rows.size() == kMaxRowsChecked, [&] {
    return std::string(std::to_string(lines.size()) + " non-blank lines but " + std::to_string(rows.size()) +
                       " requests");
  });
  if (lines.empty() || !plain_ascii(lines[0])) return;
  int64_t first_ns = 0;
  try {
    const auto j = nlohmann::json::parse(lines[0]);
    const auto& ts = j.at("timestamp");
    first_ns = ts.is_number_integer() ? ts.get<int64_t>() * 1'000'000 : std::llround(ts.get<double>() * 1e6);
  } catch (const nlohmann::json::out_of_range&) {
    return;  // as in compare_with_nlohmann
  } catch (const nlohmann::json::exception& e) {
    oracle("the reader accepted a first line nlohmann::json refuses (" + std::string(e.what()) + ")");
  }
  for (size_t i = 0; i < rows.size(); ++i) compare_with_nlohmann(lines[i], rows[i], rows[i].arrival.ns() + first_ns);
}

void fuzz_empirical(std::string_view data, const std::string& scratch) {
  if (data.empty()) return;
  const auto mode = static_cast<unsigned char>(data[0]);
  const std::string format = (mode & 1) ? "mooncake_jsonl" : "azure_csv";
  const bool joint = mode & 4;
  write_file(scratch, data.substr(1));

  // The rows as the reader gives them, for checking what the distribution draws.
  std::set<std::pair<int64_t, int64_t>> rows;
  bool readable = true;
  try {
    std::vector<traces::RequestSpec> all;
    if (mode & 1)
      read_all<traces::MooncakeJsonlReader>(scratch, &all);
    else
      read_all<traces::AzureCsvReader>(scratch, &all);
    for (const auto& r : all) rows.emplace(r.prompt_tokens, r.output_tokens);
  } catch (const core::Error&) {
    readable = false;
  }

  auto section = [&](const std::string& name, const std::string& field) {
    return "[" + name + "]\nkind = \"empirical\"\npath = " + core::toml_quote(scratch) + "\nformat = \"" + format +
           "\"\nfield = \"" + field + "\"\n";
  };
  try {
    if (joint) {
      const std::vector<core::ParamSpec> schema = {traces::prompt_section_spec(), traces::output_section_spec()};
      const core::Params p =
          core::parse_config(section("prompt", "prompt") + section("output", "output"), "fuzz.toml", schema);
      traces::LengthPair pair(p, mode);
      expect(readable, [&] { return std::string("the empirical distribution accepted a file its reader refuses"); });
      expect(pair.joint(), [&] { return std::string("prompt and output over one file are not sampled jointly"); });
      for (int i = 0; i < 16; ++i) {
        int64_t prompt = 0, output = 0;
        pair.sample(prompt, output);
        expect(rows.count({prompt, output}) == 1 || rows.size() >= kMaxRowsChecked, [&] {
          return std::string("joint sample (" + std::to_string(prompt) + ", " + std::to_string(output) +
                             ") is no row of the file");
        });
      }
    } else {
      const std::string field = (mode & 2) ? "output" : "prompt";
      const std::vector<core::ParamSpec> schema = {
          core::ParamSpec::section("lengths", "length_distributions", "", "the distribution under test")};
      const core::Params p = core::parse_config(section("lengths", field), "fuzz.toml", schema);
      auto dist = traces::distribution_registry().make(p.section("lengths"));
      expect(readable, [&] { return std::string("the empirical distribution accepted a file its reader refuses"); });
      expect(dist->table_rows() >= 1, [&] { return std::string("an empirical distribution without rows"); });
      core::Rng rng(mode, "fuzz");
      for (int i = 0; i < 16; ++i) {
        const int64_t v = dist->sample(rng);
        bool found = rows.size() >= kMaxRowsChecked;
        for (const auto& [prompt, output] : rows) found = found || v == (field == "output" ? output : prompt);
        expect(found, [&] { return std::string("sampled length " + std::to_string(v) + " is no row's " + field); });
      }
    }
  } catch (const core::ConfigError& e) {
    // The path is checked where the configuration names it; the rest is the reader's refusal.
    expect(!readable || std::string(e.what()).find("empty path") != std::string::npos,
           [&] { return std::string(std::string("a readable file refused with a configuration error: ") + e.what()); });
  } catch (const core::Error& e) {
    expect(!readable, [&] { return std::string(std::string("a readable file refused: ") + e.what()); });
    expect_names_file(e, scratch);
  }
}

void fuzz_length_file(std::string_view data, const std::string& scratch) {
  if (data.empty()) return;
  const auto mode = static_cast<unsigned char>(data[0]);
  const traces::LengthFileFormat format = (mode & 3) == 1   ? traces::LengthFileFormat::kJsonl
                                          : (mode & 3) == 2 ? traces::LengthFileFormat::kCsv
                                                            : traces::LengthFileFormat::kJson;
  const std::vector<std::string> candidates =
      (mode & 4) ? std::vector<std::string>{"output_len", "completion_tokens"}
                 : std::vector<std::string>{"prompt_len", "input_length", "prompt_tokens"};
  const std::string column = (mode & 8) ? "n" : "";
  const std::string_view body = data.substr(1);
  write_file(scratch, body);
  traces::LengthColumn got;
  try {
    got = traces::read_length_column(scratch, format, column, candidates);
  } catch (const core::InputError& e) {
    expect_names_file(e, scratch);
    return;
  }
  expect(!got.values.empty(), [&] { return std::string("a length file accepted without rows"); });
  for (int64_t v : got.values)
    expect(v >= 1, [&] { return std::string("accepted a length of " + std::to_string(v)); });
  // (A CSV column matches in any case.)
  expect(column.empty() || got.column == column ||
             (format == traces::LengthFileFormat::kCsv && core::to_lower(got.column) == column),
         [&] { return std::string("read column '" + got.column + "' instead of '" + column + "'"); });
  // A JSON array the reader accepted is JSON, and its objects hold the values read (printable ASCII
  // without escapes only: the reader does not decode the insides of strings).
  if (format != traces::LengthFileFormat::kJson) return;
  std::string_view text = body;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  // (Line breaks only as line ends: a control character inside a string is not checked either.)
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    if (c != '\n' && (c < 0x20 || c > 0x7e || c == '\\')) return;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::out_of_range&) {
    return;  // a number beyond double in a key the reader skips (JSON itself sets no limit)
  } catch (const nlohmann::json::exception& e) {
    oracle("the length-file reader accepted what nlohmann::json refuses (" + std::string(e.what()) + ")");
  }
  expect(j.is_array() && j.size() == got.values.size(), [&] {
    return std::string("read " + std::to_string(got.values.size()) + " rows of a JSON value of " +
                       std::to_string(j.size()) + " elements");
  });
  for (size_t i = 0; i < got.values.size(); ++i) {
    const auto& v = j[i].at(got.column);
    expect(v.is_number_integer() && v.get<int64_t>() == got.values[i], [&] {
      return std::string("row " + std::to_string(i) + ": read " + std::to_string(got.values[i]) + ", the file says " +
                         v.dump());
    });
  }
}

// Issue 3's readers parse text in memory and promise core::InputError naming the source and
// nothing else: any other exception escapes and fails the oracle.
void fuzz_hf_config(std::string_view data, const std::string& /*scratch*/) {
  const std::string source = "config.json";
  hwmodels::ModelSpec m;
  try {
    m = hwmodels::parse_hf_config(data, source, "", data.size() % 2 == 1);
  } catch (const core::InputError& e) {
    MessageRules rules;
    rules.require_line = rules.bounded = !kKnown.hf_message_form;
    expect_names_file(e, source, rules);
    return;
  }
  // Accepted: a model the cost model can use at TP 1.
  expect(m.num_layers >= 1 && m.max_context >= 1, [&] {
    return std::string("accepted a model with " + std::to_string(m.num_layers) + " layers and a context of " +
                       std::to_string(m.max_context));
  });
  const double kv = hwmodels::kv_bytes_per_token_per_gpu(m, 1);
  const double weights = hwmodels::weight_bytes_per_gpu(m, 1);
  // A model of linear-attention layers only caches no tokens, only a state per sequence.
  const double state = hwmodels::kv_groups_per_gpu(m, 1).state_bytes;
  expect(std::isfinite(kv) && std::isfinite(state) && (kv > 0 || state > 0), [&] {
    return std::string("accepted a model with " + std::to_string(kv) + " KV bytes per token and " +
                       std::to_string(state) + " bytes of state");
  });
  expect(std::isfinite(weights) && weights > 0,
         [&] { return std::string("accepted a model with " + std::to_string(weights) + " weight bytes"); });
}

void fuzz_calibration_profile(std::string_view data, const std::string& /*scratch*/) {
  const std::string source = "profile.toml";
  hwmodels::CalibrationProfile p;
  try {
    p = hwmodels::parse_calibration_profile(data, source);
  } catch (const core::InputError& e) {
    MessageRules rules;
    rules.one_line = !kKnown.profile_toml_line_break;
    expect_names_file(e, source, rules);
    return;
  }
  // Accepted: the profile prints to text that reads back to the same profile.
  const std::string once = hwmodels::calibration_profile_toml(p);
  std::string twice;
  try {
    twice = hwmodels::calibration_profile_toml(hwmodels::parse_calibration_profile(once, "written.toml"));
  } catch (const core::Error& e) {
    oracle(std::string("a written profile does not read back: ") + e.what() + "\n" + once);
  }
  expect(once == twice,
         [&] { return std::string("a profile changes when written and read back:\n" + once + "\n---\n" + twice); });
}

// The first byte 0x01 selects a network (collective) CSV, anything else an operator table (mlp.csv).
void fuzz_operator_csv(std::string_view data, const std::string& /*scratch*/) {
  const bool collective = !data.empty() && data[0] == '\x01';
  const std::string source = collective ? "all_reduce.csv" : "mlp.csv";
  try {
    if (collective) {
      for (const auto& row : calibration::parse_collective_csv(data.substr(1), source))
        expect(row.gpus >= 1 && std::isfinite(row.bytes) && row.bytes >= 0 && std::isfinite(row.median_ms) &&
                   row.median_ms >= 0,
               [&] {
                 return std::string("accepted collective row at line " + std::to_string(row.line) + " with " +
                                    std::to_string(row.gpus) + " GPUs, " + std::to_string(row.bytes) + " bytes, " +
                                    std::to_string(row.median_ms) + " ms");
               });
    } else {
      const calibration::OperatorTable t = calibration::parse_operator_csv(data, source, "fuzz-model");
      expect(!t.rows.empty() && !t.ops.empty(),
             [&] { return std::string("accepted an operator table without rows or operators"); });
      for (const auto& row : t.rows) {
        expect(row.num_tokens >= 1 && row.tensor_parallel >= 1, [&] {
          return std::string("accepted line " + std::to_string(row.line) + " with num_tokens " +
                             std::to_string(row.num_tokens) + " and TP " + std::to_string(row.tensor_parallel));
        });
        for (const auto& entry : row.median_ms) {
          const auto& op = entry.first;  // named, not bound: clang 14 lambdas cannot capture bindings
          const double ms = entry.second;
          expect(std::isfinite(ms) && ms >= 0, [&] {
            return std::string("accepted " + op + " = " + std::to_string(ms) + " ms at line " +
                               std::to_string(row.line));
          });
        }
      }
    }
  } catch (const core::InputError& e) {
    expect_names_file(e, source);
  }
}

void fuzz_step_latency_csv(std::string_view data, const std::string& /*scratch*/) {
  const std::string source = "steps.csv";
  try {
    const auto rows = calibration::parse_step_latency_csv(data, source);
    expect(!rows.empty(), [&] { return std::string("accepted a step-latency file without rows"); });
    for (const auto& r : rows) {
      const std::string at = "line " + std::to_string(r.line);
      expect(r.tp >= 1 && r.batch >= 1 && r.prompt >= 1,
             [&] { return std::string("accepted " + at + " with tp, batch or prompt < 1"); });
      expect(r.prefill_ms || r.decode_step_ms, [&] { return std::string("accepted " + at + " without any time"); });
      for (const auto& t : {r.prefill_ms, r.decode_step_ms})
        expect(!t || (std::isfinite(*t) && *t > 0),
               [&] { return std::string("accepted " + at + " with a time of " + std::to_string(t.value_or(0))); });
      expect(r.gpu == rows.front().gpu, [&] { return std::string("accepted rows of two GPUs"); });
    }
  } catch (const core::InputError& e) {
    expect_names_file(e, source);
  }
}

namespace {

constexpr const char* kFuzzBase =
    "seed = 5\n[workload]\nkind = \"poisson\"\nrate = 20\nmax_requests = 20\n[workload.prompt]\nkind = \"uniform\"\n"
    "min = 10\nmax = 200\n[workload.output]\nkind = \"uniform\"\nmin = 1\nmax = 20\n[model]\nkind = \"llama-3-8b\"\n"
    "[gpu]\nkind = \"h100-sxm\"\n[slo]\nttft_ms = 500\n[output]\nsample_interval_ms = 0\n";

// A one-paragraph, bounded message that names where the input came from.
void expect_sane_message(const std::string& m, const std::vector<std::string>& sources) {
  expect(m.find('\n') == std::string::npos, [&] { return "an error of more than one line: " + m; });
  expect(m.size() < 2000, [&] { return "an error of " + std::to_string(m.size()) + " characters"; });
  bool named = false;
  for (const auto& s : sources) named = named || m.rfind(s, 0) == 0 || m.find(s) != std::string::npos;
  expect(named, [&] { return "an error that names none of its sources: " + m; });
}

}  // namespace

void fuzz_experiment(std::string_view data, const std::string& scratch) {
  const std::filesystem::path dir = std::filesystem::path(scratch).parent_path();
  const std::string base = (dir / "base.toml").string();
  write_file(base, kFuzzBase);
  const std::string text(data);
  auto parse = [&] { return experiments::Experiment::parse(text, "exp.toml", dir.string()); };
  experiments::Experiment e;
  try {
    e = parse();
  } catch (const core::ConfigError& err) {
    expect_sane_message(err.what(), {"exp.toml", base, "--set"});
    return;
  } catch (const core::Error& err) {
    if (is_bug(err)) oracle(std::string("an internal error parsing an experiment: ") + err.what());
    expect_sane_message(err.what(), {"exp.toml", dir.string()});
    return;
  }
  expect(!e.points().empty() && e.points().size() <= 1'000'000,
         [&] { return "an experiment of " + std::to_string(e.points().size()) + " points accepted"; });
  if (e.points().size() > 8) return;
  try {
    e.check(1);
  } catch (const core::ConfigError& err) {
    // Located at the user's input, which a message may quote (even "invariant violated"): not a bug.
    expect_sane_message(err.what(), {"exp.toml", base, "point "});
    return;
  } catch (const core::Error& err) {
    if (is_bug(err)) oracle(std::string("an internal error checking an experiment: ") + err.what());
    expect_sane_message(err.what(), {"exp.toml", base, "point "});
    return;
  }
  experiments::Experiment again = parse();
  again.check(1);
  expect(again.identity() == e.identity(), [&] { return std::string("the same experiment has two identities"); });
}

void fuzz_command_line(std::string_view data, const std::string& scratch) {
  if (data.empty()) return;
  const std::filesystem::path dir = std::filesystem::path(scratch).parent_path();
  static const char* kCommands[] = {"run", "sweep", "merge", "list", "estimate", "report"};
  const std::string command = kCommands[static_cast<unsigned char>(data[0]) % 6];
  std::vector<std::string> args = {"servesim", command};
  std::string_view rest = data.substr(1);
  while (!rest.empty() && args.size() < 24) {
    const size_t nl = rest.find('\n');
    std::string arg(rest.substr(0, std::min<size_t>(nl, 512)));
    // Everything the command writes stays in the scratch directory; --set values only read.
    if (arg.rfind("--set", 0) != 0 && args.back() != "--set")
      for (char& c : arg)
        if (c == '/') c = '_';
    args.push_back(arg);
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  if (command == "run") args.insert(args.end(), {"--set", "workload.max_requests=20", "--set", "output.sample_interval_ms=0"});
  if (command == "report") args.push_back("--no-plots");
  if (!std::filesystem::exists(dir / "run.toml")) {
    write_file((dir / "run.toml").string(), kFuzzBase);
    write_file((dir / "exp.toml").string(),
               "base = \"run.toml\"\n[[axis]]\nkey = \"router.kind\"\nvalues = [\"round_robin\", \"random\"]\n");
  }
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  std::ostringstream out, err;
  int code = -1;
  try {
    code = experiments::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  } catch (...) {
    std::filesystem::current_path(before);
    throw;
  }
  std::filesystem::current_path(before);
  expect(code == 0 || code == 1 || code == 2, [&] { return "exit code " + std::to_string(code); });
  if (code == 0) return;
  std::string m = err.str();
  while (!m.empty() && m.back() == '\n') m.pop_back();
  const std::string last = m.substr(m.rfind('\n') == std::string::npos ? 0 : m.rfind('\n') + 1);
  expect(last.rfind("servesim: ", 0) == 0, [&] { return "a failure that does not end in a servesim: line: " + m; });
  expect(last.size() < 4000, [&] { return "an error line of " + std::to_string(last.size()) + " characters"; });
  // "internal:" opens the message of a bug (the user's arguments, quoted later on, may say anything).
  // An input or configuration error opens with the path or key the user gave, which may itself
  // read "internal:" (a fuzzed path did); a bug is a plain error.
  std::string body = last.substr(10);
  bool user_error = false;
  for (const char* kind : {"error: ", "input error: ", "configuration error: "})
    if (body.rfind(kind, 0) == 0) {
      user_error = kind[0] != 'e';
      body = body.substr(std::string(kind).size());
    }
  expect(user_error || body.rfind("internal:", 0) != 0, [&] { return "an internal error reached the user: " + last; });
  for (unsigned char ch : last)
    expect(ch >= 0x20 && ch != 0x7f, [&] { return "a control character in the message: " + printable_for_oracle(last); });
}

// A rate table (traces/rate_profile.cc): a mode byte (bit 0: step, bit 1: repeat), then the CSV. Refused:
// the error names the file. Accepted: factors are >= 0, the integral never decreases, and the inverse
// of the integral is non-decreasing and consistent with it (F(F^-1(s)) = s to rounding).
void fuzz_rate_table(std::string_view data, const std::string& scratch) {
  if (data.empty()) return;
  const auto mode = static_cast<unsigned char>(data[0]);
  write_file(scratch, data.substr(1));
  const std::string toml = "[p]\nkind = \"table\"\npath = " + core::toml_quote(scratch) + "\ninterpolation = \"" +
                           ((mode & 1) ? "step" : "linear") + "\"\nrepeat = " + ((mode & 2) ? "true" : "false") + "\n";
  const std::vector<core::ParamSpec> schema = {
      core::ParamSpec::section("p", "rate_profiles", "", "the rate profile under test")};
  std::unique_ptr<traces::RateProfile> profile;
  try {
    const core::Params p = core::parse_config(toml, "fuzz.toml", schema);
    profile = traces::rate_profile_registry().make(p.section("p"));
  } catch (const core::ConfigError& e) {
    expect(std::string(e.what()).find("empty path") != std::string::npos,
           [&] { return std::string("a written file refused with a configuration error: ") + e.what(); });
    return;
  } catch (const core::Error& e) {
    expect_names_file(e, scratch);
    return;
  }
  double last_t = 0, last_f = 0;
  for (double s : {0.0, 1e-9, 1e-3, 0.5, 1.0, 7.0, 60.0, 3600.0, 86400.0, 1e6, 1e8}) {
    const double t = profile->inverse(s);
    expect(t >= last_t, [&] { return "inverse decreases at s = " + core::format_double(s); });
    if (!std::isfinite(t)) break;
    last_t = t;
    const double f = profile->integral(t);
    expect(f >= last_f - 1e-9 * std::max(1.0, f), [&] { return "the integral decreases at t = " + core::format_double(t); });
    last_f = f;
    expect(std::fabs(f - s) <= 1e-6 * std::max(1.0, s), [&] {
      return "F(F^-1(" + core::format_double(s) + ")) = " + core::format_double(f);
    });
    expect(profile->factor(t) >= 0, [&] { return "a negative factor at t = " + core::format_double(t); });
  }
}

std::span<const FuzzTarget> fuzz_targets() {
  static const FuzzTarget kTargets[] = {
      {"config", fuzz_config},
      {"azure_csv", fuzz_azure_csv},
      {"mooncake_jsonl", fuzz_mooncake_jsonl},
      {"empirical", fuzz_empirical},
      {"length_file", fuzz_length_file},
      {"rate_table", fuzz_rate_table},
      {"hf_config", fuzz_hf_config},
      {"calibration_profile", fuzz_calibration_profile},
      {"operator_csv", fuzz_operator_csv},
      {"step_latency_csv", fuzz_step_latency_csv},
      {"experiment", fuzz_experiment},
      {"command_line", fuzz_command_line},
  };
  return kTargets;
}

const FuzzTarget* find_fuzz_target(std::string_view name) {
  for (const auto& t : fuzz_targets())
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace servesim::testing
