#pragma once
// Step latencies measured on a real serving engine: the input of
// `servesim fit --from-step-latencies`. Header `model,gpu,tp,batch,prompt,prefill_ms,decode_step_ms`:
// one prefill pass of `batch` prompts of `prompt` tokens, and one decode iteration of `batch`
// sequences at context `prompt`. Either time may be left empty when it was not measured.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::calibration {

struct StepLatencyRow {
  int64_t line = 0;
  std::string model;  // a [model] preset name or a config.json path
  std::string gpu;    // a [gpu] preset name
  int64_t tp = 1;
  int64_t batch = 1;
  int64_t prompt = 1;
  std::optional<double> prefill_ms;
  std::optional<double> decode_step_ms;
};

// Parses the CSV; every row must name the same GPU and measure at least one of the two times.
// Throws core::InputError naming the file, the line and the column; nothing else. The fuzz entry
// point for this reader.
std::vector<StepLatencyRow> parse_step_latency_csv(std::string_view text, const std::string& source_name);
std::vector<StepLatencyRow> read_step_latency_csv(const std::string& path);

}  // namespace servesim::calibration
