// Kind "empirical": lengths drawn uniformly among the rows of a trace file (one column of it).
// Unlike the workloads, this holds the column in memory: one int64 per row.

#include <filesystem>
#include <memory>
#include <vector>

#include "traces/azure_csv.h"
#include "traces/length_distribution.h"
#include "traces/mooncake_jsonl.h"
#include "traces/workload_common.h"

namespace servesim::traces {
namespace {

template <class Reader>
std::vector<int64_t> load_column(const std::string& path, bool prompt) {
  // The workloads' own readers, so a file is validated the same way whichever uses it.
  Reader reader(path);
  RequestSpec r;
  std::vector<int64_t> values;
  while (reader.read(r)) values.push_back(prompt ? r.prompt_tokens : r.output_tokens);
  return values;
}

class EmpiricalDistribution final : public LengthDistribution {
 public:
  explicit EmpiricalDistribution(const core::Params& p) {
    const std::string path = readable_file(p, "path");
    const std::string& format = p.get_string("format");
    const bool prompt = p.get_string("field") == "prompt";
    values_ = format == "mooncake_jsonl" ? load_column<MooncakeJsonlReader>(path, prompt)
                                         : load_column<AzureCsvReader>(path, prompt);
    std::error_code ec;
    auto canonical = std::filesystem::weakly_canonical(path, ec);
    key_ = format + ":" + (ec ? path : canonical.string());
  }
  int64_t sample(core::Rng& rng) override { return values_[rng.uniform_int(values_.size())]; }
  std::string table_key() const override { return key_; }
  size_t table_rows() const override { return values_.size(); }
  int64_t value_at(size_t row) const override { return values_[row]; }

 private:
  std::vector<int64_t> values_;  // never empty: the readers refuse a file without requests
  std::string key_;
};

const bool kRegistered = distribution_registry().add(
    {"empirical",
     "lengths drawn uniformly among the rows of a trace file; when a generator's prompt and output "
     "are both empirical over the same path and format, each request takes both from one row, "
     "keeping the trace's prompt/output correlation",
     {core::ParamSpec::path("path", "the trace file"),
      core::ParamSpec::string("format", "azure_csv", "the trace's format")
          .one_of({"azure_csv", "mooncake_jsonl"}),
      core::ParamSpec::string("field", "",
                              "which length to take: prompt (ContextTokens, "
                              "input_length) or output (GeneratedTokens, output_length)")
          .one_of({"prompt", "output"})
          .required()}},
    [](const core::Params& p) -> std::unique_ptr<LengthDistribution> {
      return std::make_unique<EmpiricalDistribution>(p);
    });

}  // namespace
}  // namespace servesim::traces
