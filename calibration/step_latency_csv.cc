#include "calibration/step_latency_csv.h"

#include "calibration/csv.h"
#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::calibration {

std::vector<StepLatencyRow> parse_step_latency_csv(std::string_view text, const std::string& source) {
  const CsvTable t = parse_csv(text, source);
  const size_t model = t.require("model"), gpu = t.require("gpu"), tp = t.require("tp"), batch = t.require("batch"),
               prompt = t.require("prompt"), prefill = t.require("prefill_ms"), decode = t.require("decode_step_ms");
  std::vector<StepLatencyRow> out;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    StepLatencyRow row;
    row.line = t.lines[r];
    row.model = t.rows[r][model];
    row.gpu = core::to_lower(t.rows[r][gpu]);
    if (row.model.empty()) throw core::InputError(source, row.line, "model", "empty: name a preset or a config.json");
    if (row.gpu.empty()) throw core::InputError(source, row.line, "gpu", "empty: name a [gpu] preset");
    if (!out.empty() && row.gpu != out.front().gpu)
      throw core::InputError(source, row.line, "gpu",
                             "'" + row.gpu + "' after '" + out.front().gpu + "': one GPU type per file");
    auto bounded = [&](size_t c, int64_t hi) {
      const int64_t v = t.integer(r, c);
      if (v < 1 || v > hi)
        throw core::InputError(source, row.line, t.header[c], "expected 1.." + std::to_string(hi) + ", got " +
                                                                  std::to_string(v));
      return v;
    };
    row.tp = bounded(tp, 4096);
    row.batch = bounded(batch, 1 << 20);
    row.prompt = bounded(prompt, 1 << 24);
    auto time = [&](size_t c) -> std::optional<double> {
      if (t.rows[r][c].empty()) return std::nullopt;
      const double v = t.number(r, c);
      if (!(v > 0)) throw core::InputError(source, row.line, t.header[c], "a measured time must be positive");
      return v;
    };
    row.prefill_ms = time(prefill);
    row.decode_step_ms = time(decode);
    if (!row.prefill_ms && !row.decode_step_ms)
      throw core::InputError(source, row.line, "prefill_ms", "neither prefill_ms nor decode_step_ms is given");
    out.push_back(std::move(row));
  }
  if (out.empty()) throw core::InputError(source, 2, "", "no measurements");
  return out;
}

std::vector<StepLatencyRow> read_step_latency_csv(const std::string& path) {
  return parse_step_latency_csv(read_text_file(path), path);
}

}  // namespace servesim::calibration
