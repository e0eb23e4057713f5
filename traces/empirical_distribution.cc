// Kind "empirical": lengths from one column of a trace or a length file, drawn uniformly among its
// rows or replayed in file order. Unlike the workloads, this holds the column in memory: one int64
// per row (for a trace, both its length columns: see TraceColumns).

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "sim/core/digest.h"

#include "traces/azure_csv.h"
#include "traces/length_distribution.h"
#include "traces/length_file.h"
#include "traces/mooncake_jsonl.h"
#include "traces/workload_common.h"

namespace servesim::traces {
namespace {

// Both length columns of a trace, read in one pass. The readers parse every field of a row whichever
// column is wanted, so an empirical prompt and output over one trace (S1's setting) would read and
// validate the file twice for the same rows; instead the first of them reads both columns and the
// second shares them (see trace_columns).
struct TraceColumns {
  std::vector<int64_t> prompt, output;
};

template <class Reader>
TraceColumns load_columns(const std::string& path) {
  // The workloads' own readers, so a file is validated the same way whichever uses it.
  Reader reader(path);
  RequestSpec r;
  TraceColumns t;
  while (reader.read(r)) {
    t.prompt.push_back(r.prompt_tokens);
    t.output.push_back(r.output_tokens);
  }
  return t;
}

// The columns of the trace at `path` in `format`, shared with any live distribution that read the
// same file version (device, inode, size, times) in the same format: a table lives as long as a
// distribution holds it, so the sharing spans a generator's prompt and output (and a sessions
// workload's sections), never a file that changed since. As core::file_digest's cache, it shares
// only a settled version (core::version_settled) that did not change while it was read.
// Thread-safe (a sweep builds points in parallel); two threads that miss at once each read the
// file, which gives the same values.
std::shared_ptr<const TraceColumns> trace_columns(const std::string& format, const std::string& path,
                                                  const std::string& canonical) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, core::FileVersion>, std::weak_ptr<const TraceColumns>> tables;
  const core::FileVersion version = core::file_version(path);
  const auto key = std::make_pair(format + ":" + canonical, version);
  bool cacheable = version != core::FileVersion{} && core::version_settled(version);
  if (cacheable) {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = tables.find(key);
    if (it != tables.end())
      if (auto table = it->second.lock()) return table;
  }
  auto table = std::make_shared<const TraceColumns>(format == "mooncake_jsonl"
                                                        ? load_columns<MooncakeJsonlReader>(path)
                                                        : load_columns<AzureCsvReader>(path));
  cacheable = cacheable && core::file_version(path) == version;
  if (cacheable) {
    const std::lock_guard<std::mutex> lock(mutex);
    std::erase_if(tables, [](const auto& entry) { return entry.second.expired(); });
    tables[key] = table;
  }
  return table;
}

// The names a length file's prompt and output columns go by in the tools that write them (vllm bench,
// inference-perf, GuideLLM, ShareGPT token-count exports, the traces).
const std::vector<std::string> kPromptNames = {"input_length", "prompt_len", "prompt_length", "prompt_tokens",
                                               "input_tokens", "input_len", "num_prompt_tokens", "ContextTokens"};
const std::vector<std::string> kOutputNames = {"output_length", "output_len", "completion_tokens", "output_tokens",
                                               "completion_length", "num_output_tokens", "GeneratedTokens"};

std::string names(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

class EmpiricalDistribution final : public LengthDistribution {
 public:
  explicit EmpiricalDistribution(const core::Params& p) {
    const std::string& format = p.get_string("format");
    const bool prompt = p.get_string("field") == "prompt";
    const bool trace = format == "azure_csv" || format == "mooncake_jsonl";
    if (trace && p.has("column"))
      p.fail("column", "a " + format + " trace has fixed columns; `column` applies to json, jsonl and csv files");
    const std::string order = p.has("order") ? p.get_string("order") : "random";
    sequential_ = order == "sequential";
    const std::string path = readable_file(p, "path");
    std::error_code ec;
    const auto resolved = std::filesystem::weakly_canonical(path, ec);
    const std::string canonical = ec ? path : resolved.string();
    if (trace) {
      table_ = trace_columns(format, path, canonical);
      values_ = prompt ? &table_->prompt : &table_->output;
    } else {
      const LengthFileFormat f = format == "json"    ? LengthFileFormat::kJson
                                 : format == "jsonl" ? LengthFileFormat::kJsonl
                                                     : LengthFileFormat::kCsv;
      own_ = read_length_column(path, f, p.has("column") ? p.get_string("column") : std::string(),
                                prompt ? kPromptNames : kOutputNames)
                 .values;
      values_ = &own_;
    }
    key_ = format + ":" + order + ":" + canonical;
  }
  int64_t sample(core::Rng& rng) override {
    if (sequential_) return (*values_)[next_++ % values_->size()];
    return (*values_)[rng.uniform_int(values_->size())];
  }
  std::string table_key() const override { return key_; }
  size_t table_rows() const override { return values_->size(); }
  int64_t value_at(size_t row) const override { return (*values_)[row]; }
  bool sequential() const override { return sequential_; }

 private:
  std::shared_ptr<const TraceColumns> table_;  // a trace's columns, shared
  std::vector<int64_t> own_;                   // a length file's column
  const std::vector<int64_t>* values_ = nullptr;  // never empty: the readers refuse a file without requests
  std::string key_;
  bool sequential_ = false;
  size_t next_ = 0;
};

const bool kRegistered = distribution_registry().add(
    {"empirical",
     "lengths from one column of a trace (azure_csv, mooncake_jsonl) or a length file (json: an array of objects, "
     "jsonl: an object per line, csv: a header and rows; ShareGPT-style token counts), drawn uniformly among the "
     "rows or replayed in file order; when a generator's prompt and output are both empirical over the same path, "
     "format and order, each request takes both from one row, keeping the file's prompt/output correlation",
     {core::ParamSpec::path("path", "the trace or length file"),
      core::ParamSpec::string("format", "azure_csv", "the file's format")
          .one_of({"azure_csv", "mooncake_jsonl", "json", "jsonl", "csv"}),
      core::ParamSpec::string("field", "",
                              "which length to take: prompt (ContextTokens, input_length, ...) or output "
                              "(GeneratedTokens, output_length, ...)")
          .one_of({"prompt", "output"})
          .required(),
      core::ParamSpec::string("column", "",
                              "json, jsonl, csv: the key or column holding the length; unset: the one the first "
                              "record has among, for prompts, " + names(kPromptNames) + "; for outputs, " +
                                  names(kOutputNames))
          .optional(),
      core::ParamSpec::string("order", "random",
                              "random (or unset): each length a uniform draw among the rows; sequential: the rows "
                              "in file order, from the first, starting over after the last")
          .one_of({"random", "sequential"})
          .optional()}},
    [](const core::Params& p) -> std::unique_ptr<LengthDistribution> {
      return std::make_unique<EmpiricalDistribution>(p);
    });

}  // namespace
}  // namespace servesim::traces
