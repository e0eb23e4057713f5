#pragma once
// Real serving benchmark results, read into one shape so a simulation of the same load can be set
// beside them (servesim validate-serving, servesim fit --from-serving-runs).
//
// Formats read (detected from the content; docs/validation.md gives each field's use):
// - the serving-runs table (tab-separated, one row per load stage of an experiment, as in
//   ../shared/reference-data/serving-runs/stages.tsv);
// - inference-perf's lifecycle-metrics JSON: a stage file (stage_N_lifecycle_metrics.json, with
//   load_summary.requested_rate and send_duration), a summary file (summary_lifecycle_metrics.json:
//   no load figures, so the rate and duration must come from flags), or a directory holding them;
// - `vllm bench serve --save-result` JSON (request_rate, burstiness, max_concurrency, num_prompts,
//   duration, the mean/median/std/pNN of ttft, tpot, itl and e2el in ms; with --save-detailed the
//   per-request input_lens, output_lens, ttfts and itls, which are used when present).
//
// Every measured figure is converted to one definition, where a client measures it (docs/
// validation.md): TTFT from the send to the first token, E2E from the send to the last token, TPOT
// = (E2E - TTFT) / (output tokens - 1) per request, ITL the gaps between tokens. Where a tool's
// figure means something else it is corrected and the correction named in `corrections` (the
// inference-perf client stamps every streamed line, and each event is followed by a blank line, so
// its time per output token is (last - first) / (2n + 1): the engine's is that x (2n + 1) / (n - 1)).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace servesim::experiments {

// Latency statistics in seconds; a figure the file does not give is unset.
struct MeasuredLatency {
  std::optional<double> mean, p50, p90, p99;
  bool any() const { return mean || p50 || p90 || p99; }
};

// How requests arrived in one load stage.
enum class ArrivalShape : uint8_t {
  kPoissonFixedCount,  // inference-perf "constant": rate x duration exponential gaps scaled to the duration
  kPoisson,            // Poisson at the rate (vllm bench serve, burstiness 1)
  kGamma,              // gamma gaps (vllm bench serve --burstiness b: cv = 1 / sqrt(b))
  kConstant,           // evenly spaced
  kOffline,            // every request at time 0 (request rate inf)
  kClosedLoop,         // a fixed number of concurrent clients (--max-concurrency)
};
std::string_view arrival_shape_name(ArrivalShape shape);

struct LoadStage {
  double rate = 0;           // req/s (0 with kOffline and kClosedLoop without a rate)
  double duration_s = 0;     // 0 when unknown
  int64_t requests = 0;      // sent
  ArrivalShape shape = ArrivalShape::kPoissonFixedCount;
  double burstiness = 1;     // kGamma
  int64_t concurrency = 0;   // kClosedLoop (vllm bench serve combines it with a rate)
};

// The requests' content.
struct MeasuredWorkload {
  // inference-perf's shared-prefix pool: groups x prompts per group, a system prompt shared by its
  // group plus a question; 0 when the file does not say.
  int64_t groups = 0, prompts_per_group = 0, system_prompt_len = 0, question_len = 0;
  // Prompt lengths as measured (the template adds tokens to system + question).
  double prompt_len_mean = 0, prompt_len_min = 0, prompt_len_max = 0;
  // Output tokens: the requested max_tokens when the benchmark ignored EOS, else the mean.
  int64_t max_tokens = 0;
  double output_len_mean = 0;
  // Per-request lengths (vllm bench serve --save-detailed), replayed in order when present.
  std::vector<int64_t> input_lens, output_lens;
};

struct MeasuredStage {
  std::string source;      // the file (and line) it came from
  std::string format;      // "serving-runs", "inference-perf", "vllm-bench"
  std::string label;       // "llama-2-7b-tp1-general stage 1"
  std::string experiment;  // the run the stage belongs to (stages of one experiment run back to back)
  int64_t stage = 0;       // its index in the experiment
  // The deployment, as far as the file says.
  std::string model;       // Hugging Face id ("meta-llama/Llama-2-7b-hf") or what the tool wrote
  std::string gpu;         // servesim GPU preset name, "" when not said
  int64_t tensor_parallel = 0, max_model_len = 0, max_num_batched_tokens = 0, max_num_seqs = 0;
  MeasuredWorkload workload;
  // The stages that ran before this one in the same experiment (their requests warm the prefix
  // cache), then this one.
  std::vector<LoadStage> earlier;
  LoadStage load;
  // What was measured.
  int64_t succeeded = 0, failed = 0;
  MeasuredLatency ttft, tpot, itl, e2e;  // seconds, harmonised (see above)
  std::optional<double> throughput_req_s, output_tok_s;
  std::vector<std::string> corrections;  // every conversion applied, in words
  // Requests failed (client time-outs): the server could not keep up with the load.
  bool overloaded() const { return failed > 0; }
};

// Reads every stage a results file (or an inference-perf results directory) holds. Throws
// core::InputError naming the file, the line when there is one, and the field.
std::vector<MeasuredStage> read_serving_results(const std::string& path);

// Parsers of each format, for tests and fuzzing: `source` names the text in errors.
std::vector<MeasuredStage> parse_serving_runs_table(const std::string& text, const std::string& source);
MeasuredStage parse_inference_perf_json(const std::string& text, const std::string& source);
MeasuredStage parse_vllm_bench_json(const std::string& text, const std::string& source);

// The engine's time per output token from a client that stamps every streamed line (the
// inference-perf client): reported x (2n + 1) / (n - 1) for n output tokens.
double line_stamped_tpot_to_engine(double reported_s, double output_tokens);

}  // namespace servesim::experiments
