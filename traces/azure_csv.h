#pragma once
// Reader of the Azure LLM inference trace format (2023): CSV with a header naming the columns
// TIMESTAMP (wall-clock datetime), ContextTokens (prompt) and GeneratedTokens (output), in any order,
// among others. Used by the `azure_csv` workload and by `empirical` length distributions.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "traces/arrival_source.h"
#include "traces/field_parse.h"
#include "traces/line_reader.h"
#include "traces/request_classes.h"

namespace servesim::traces {

class AzureCsvReader {
 public:
  // Opens the file and reads the header and the first request: a missing column, an empty file or
  // a file without requests is a core::InputError here, before anything runs.
  // With `classes` (the workload's, when it defines any), an optional `class` column names each
  // request's class; without, the column is not read.
  explicit AzureCsvReader(std::string path, const ClassAssigner* classes = nullptr);

  // The next request, its arrival the offset from the first row's timestamp (exact integer ns);
  // false at the end. Malformed rows are core::InputErrors naming the file, line and column.
  bool read(RequestSpec& out);
  const std::string& path() const { return lines_.path(); }

 private:
  void parse_row(std::string_view line, RequestSpec& out);

  LineReader lines_;
  std::vector<std::string> columns_;  // header names, for messages
  size_t timestamp_col_ = 0;
  size_t prompt_col_ = 0;
  size_t output_col_ = 0;
  const ClassAssigner* classes_ = nullptr;
  size_t class_col_ = 0;  // columns_.size() when there is none
  DatetimeColumn timestamps_;
  int64_t first_ns_ = 0;     // the first row's datetime, ns since 1970
  int64_t previous_ns_ = 0;  // the previous row's
  std::string previous_text_;
  bool have_previous_ = false;
  bool pending_ = false;  // the constructor has read the first row into pending_request_
  RequestSpec pending_request_;
};

}  // namespace servesim::traces
