#pragma once
// Reader of the Mooncake trace format (FAST '25): one JSON object per line with `timestamp` (ms),
// `input_length`, `output_length` and `hash_ids` (ids of the prompt's prefix blocks; equal ids are
// reusable KV). Used by the `mooncake_jsonl` workload and by `empirical` length distributions.

#include <cstdint>
#include <string>

#include "traces/arrival_source.h"
#include "traces/line_reader.h"
#include "traces/request_classes.h"

namespace servesim::traces {

class MooncakeJsonlReader {
 public:
  // Opens the file and reads the first request: an empty file is a core::InputError here.
  // With `classes` (the workload's, when it defines any), an optional `class` key (a string; null or
  // "" for none) names each request's class; without, the key is skipped as any other.
  explicit MooncakeJsonlReader(std::string path, const ClassAssigner* classes = nullptr);

  // The next request, its arrival the offset from the first line's timestamp; false at the end.
  // Malformed lines are core::InputErrors naming the file, line and key.
  bool read(RequestSpec& out);
  const std::string& path() const { return lines_.path(); }

 private:
  void parse_line(std::string_view line, RequestSpec& out);

  LineReader lines_;
  const ClassAssigner* classes_ = nullptr;
  int64_t first_ns_ = 0;
  int64_t previous_ns_ = 0;
  std::string previous_text_;
  bool have_previous_ = false;
  bool pending_ = false;  // the constructor has read the first line into pending_request_
  RequestSpec pending_request_;
};

}  // namespace servesim::traces
