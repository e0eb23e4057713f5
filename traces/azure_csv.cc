#include "traces/azure_csv.h"

#include <memory>

#include "sim/core/error.h"
#include "sim/core/format.h"
#include "traces/field_parse.h"
#include "traces/workload_common.h"

namespace servesim::traces {

namespace {
constexpr const char* kTimestamp = "TIMESTAMP";
constexpr const char* kContext = "ContextTokens";
constexpr const char* kGenerated = "GeneratedTokens";
constexpr const char* kClass = "class";  // optional: the request's class ([[workload.classes]])
constexpr const char* kExpectedHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";

// The header's columns for a message: each through excerpt(), so binary or control bytes in a
// file that is not a CSV cannot cut the message short or reach the terminal raw.
std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + excerpt(v[i]);
  return out;
}
}  // namespace

AzureCsvReader::AzureCsvReader(std::string path, const ClassAssigner* classes)
    : lines_(std::move(path)), classes_(classes) {
  std::string_view header;
  if (!lines_.next_data_line(header))
    throw core::InputError(lines_.path(), 1, "",
                           std::string("empty file, expected header ") + kExpectedHeader);
  const int64_t header_line = lines_.line_number();
  size_t start = 0;
  for (;;) {
    const size_t comma = header.find(',', start);
    columns_.emplace_back(
        trim(header.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  auto find = [&](const char* name) {
    size_t found = columns_.size();
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (core::to_lower(columns_[i]) != core::to_lower(name)) continue;
      if (found != columns_.size())
        throw core::InputError(lines_.path(), header_line, name,
                               "column appears twice in the header (" + join(columns_) + ")");
      found = i;
    }
    if (found == columns_.size())
      throw core::InputError(lines_.path(), header_line, name,
                             std::string("missing column '") + name + "' in the header; found: " +
                                 join(columns_) + " (expected " + kExpectedHeader + ", in any order)");
    return found;
  };
  timestamp_col_ = find(kTimestamp);
  prompt_col_ = find(kContext);
  output_col_ = find(kGenerated);
  class_col_ = columns_.size();  // none
  if (classes_) {
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (core::to_lower(columns_[i]) != kClass) continue;
      if (class_col_ != columns_.size())
        throw core::InputError(lines_.path(), header_line, kClass,
                               "column appears twice in the header (" + join(columns_) + ")");
      class_col_ = i;
    }
  }

  std::string_view first;
  if (!lines_.next_data_line(first))
    throw core::InputError(lines_.path(), header_line, "",
                           "no requests: the file has a header but no data rows");
  parse_row(first, pending_request_);
  pending_ = true;
}

bool AzureCsvReader::read(RequestSpec& out) {
  if (pending_) {
    pending_ = false;
    out.arrival = pending_request_.arrival;
    out.prompt_tokens = pending_request_.prompt_tokens;
    out.output_tokens = pending_request_.output_tokens;
    out.block_hashes.clear();
    out.session = 0;
    if (classes_) out.request_class = pending_request_.request_class;
    return true;
  }
  std::string_view line;
  if (!lines_.next_data_line(line)) return false;
  parse_row(line, out);
  return true;
}

void AzureCsvReader::parse_row(std::string_view line, RequestSpec& out) {
  const int64_t line_no = lines_.line_number();
  std::string_view timestamp, prompt, output, cls;
  size_t col = 0;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    const std::string_view field =
        line.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (col == timestamp_col_) timestamp = field;
    if (col == prompt_col_) prompt = field;
    if (col == output_col_) output = field;
    if (col == class_col_) cls = field;
    ++col;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (col != columns_.size()) {
    const std::string counts = "expected " + std::to_string(columns_.size()) +
                               " comma-separated fields as in the header, got " + std::to_string(col);
    if (col < columns_.size())
      throw core::InputError(lines_.path(), line_no, columns_[col],
                             counts + " (no value for '" + columns_[col] + "' and after)");
    throw core::InputError(lines_.path(), line_no, "", counts);
  }

  const FieldRef ts_at{lines_.path(), line_no, kTimestamp};
  const int64_t ns = timestamps_.parse(timestamp, ts_at);
  if (have_previous_ && ns < previous_ns_)
    field_error(ts_at, "timestamp goes backwards: " + std::string(trim(timestamp)) + " < previous " +
                           previous_text_ + " (requests must be in arrival order)");
  if (!have_previous_) {
    first_ns_ = ns;
    have_previous_ = true;
  }
  int64_t offset = 0;
  if (__builtin_sub_overflow(ns, first_ns_, &offset))
    field_error(ts_at, "timestamp is more than 292 years after the first row's");
  previous_ns_ = ns;
  previous_text_.assign(trim(timestamp));

  out.arrival = core::Time::from_ns(offset);
  out.prompt_tokens = parse_length(prompt, {lines_.path(), line_no, kContext});
  out.output_tokens = parse_length(output, {lines_.path(), line_no, kGenerated});
  out.block_hashes.clear();
  out.session = 0;
  if (classes_)  // -1 without a class column: the source draws the class from the shares
    out.request_class =
        class_col_ != columns_.size() ? resolve_class(*classes_, trim(cls), {lines_.path(), line_no, kClass}) : -1;
}

namespace {

class AzureCsvSource final : public ShapedSource {
 public:
  AzureCsvSource(const core::Params& p, uint64_t seed, std::string path)
      : ShapedSource(p, seed), reader_(std::move(path), class_table()) {}

 protected:
  bool next_raw(RequestSpec& out) override { return reader_.read(out); }
  std::string describe() const override { return "trace file " + reader_.path(); }

 private:
  AzureCsvReader reader_;
};

const bool kRegistered = workload_registry().add(
    {"azure_csv",
     "replays an Azure LLM inference trace (2023 format: CSV with columns TIMESTAMP, ContextTokens, "
     "GeneratedTokens); arrivals are offsets from the first row",
     with_common_params({core::ParamSpec::path(
         "path", "the trace CSV (header naming TIMESTAMP, ContextTokens, GeneratedTokens, any order)")})},
    [](const core::Params& p, uint64_t seed) -> std::unique_ptr<ArrivalSource> {
      return std::make_unique<AzureCsvSource>(p, seed, readable_file(p, "path"));
    });

}  // namespace

}  // namespace servesim::traces
