#include "experiments/bench.h"

#include <sys/resource.h>

#include <chrono>
#include <filesystem>

#include "experiments/capacity.h"
#include "experiments/run.h"
#include "experiments/sweep.h"
#include "sim/core/rng.h"
#include "sim/core/config.h"
#include "sim/core/error.h"

namespace servesim::experiments {

namespace {

// S4 and S6: Poisson requests on 1,000 Llama-3-8B replicas on H100 at about 80% load, `requests` of them.
std::string s4_config(int64_t requests) {
  return R"(seed = 1
[workload]
kind = "poisson"
rate = 8000.0
max_requests = )" + std::to_string(requests) + R"(
[workload.prompt]
kind = "lognormal"
mean = 600
sd = 400
min = 16
max = 4000
[workload.output]
kind = "lognormal"
mean = 150
sd = 120
min = 1
max = 800
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 1000
[router]
kind = "round_robin"
[output]
sample_interval_ms = 0
)";
}

}  // namespace

const std::vector<BenchScenario>& bench_scenarios() {
  static const std::vector<BenchScenario> scenarios = {
      {"S1",
       "10,000 requests, lengths sampled from the Azure conv trace, Poisson 2 req/s, one Llama-2-7B "
       "replica on A100, continuous batching with at most 128 sequences (Vidur's benchmark setting)",
       "azure-2023/AzureLLMInferenceTrace_conv.csv",
       R"(seed = 1
[workload]
kind = "poisson"
rate = 2.0
max_requests = 10000
[workload.prompt]
kind = "empirical"
path = "@TRACES@/azure-2023/AzureLLMInferenceTrace_conv.csv"
field = "prompt"
[workload.output]
kind = "empirical"
path = "@TRACES@/azure-2023/AzureLLMInferenceTrace_conv.csv"
field = "output"
[model]
kind = "llama-2-7b"
[gpu]
kind = "a100-80gb-sxm"
[scheduler]
kind = "continuous"
max_num_seqs = 128
[output]
sample_interval_ms = 0
)"},
      {"S2", "the whole Azure conv trace (19,366 requests), 4 replicas of Llama-3-8B on H100, least_outstanding",
       "azure-2023/AzureLLMInferenceTrace_conv.csv",
       R"(seed = 1
[workload]
kind = "azure_csv"
path = "@TRACES@/azure-2023/AzureLLMInferenceTrace_conv.csv"
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 4
[router]
kind = "least_outstanding"
[output]
sample_interval_ms = 0
)"},
      {"S3",
       "the Mooncake conversation trace (12,031 requests), 16 replicas of Llama-3-8B (128k) on H100, prefix "
       "caching, prefix_affinity, chunked prefill",
       "mooncake-fast25/conversation_trace.jsonl",
       R"(seed = 1
[workload]
kind = "mooncake_jsonl"
path = "@TRACES@/mooncake-fast25/conversation_trace.jsonl"
[model]
kind = "llama-3-8b"
max_context = 131072
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 16
prefix_caching = true
[router]
kind = "prefix_affinity"
[scheduler]
kind = "chunked"
max_num_batched_tokens = 8192
[output]
sample_interval_ms = 0
)"},
      {"S4",
       "10,000,000 Poisson requests on 1,000 replicas of Llama-3-8B on H100 at about 80% load "
       "(--requests scales it)",
       "",
       s4_config(10000000)},
      {"S6",
       "100,000,000 Poisson requests on 1,000 replicas of Llama-3-8B on H100 at about 80% load (S4 ten "
       "times longer): past 10 M completed requests the percentiles go into sketches ([output] percentiles = "
       "\"auto\"), so memory stays bounded (--requests scales it)",
       "",
       s4_config(100000000)},
  };
  return scenarios;
}

const BenchScenario* find_bench_scenario(const std::string& name) {
  for (const auto& s : bench_scenarios())
    if (s.name == name) return &s;
  return nullptr;
}

BenchSample run_bench_sweep(const std::string& experiments_dir, int jobs) {
  const std::string path = experiments_dir + "/sweeps/bench64.toml";
  if (!std::filesystem::exists(path))
    throw core::Error("scenario S5 needs " + path + " (run from the project root, or point --experiments at it)");
  Experiment experiment = Experiment::load(path);
  std::string tmpl = (std::filesystem::temp_directory_path() / "servesim-bench-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw core::Error("bench: cannot create a temporary directory");
  SweepOptions options;
  options.db_path = tmpl + "/bench64.db";
  options.jobs = jobs;
  // CPU seconds beside the wall time: on a shared machine the wall time of --jobs 2 depends on what
  // else runs, while 2 x CPU(--jobs 1) / CPU(--jobs 2) bounds the speed-up an idle machine can give.
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  const double cpu_start = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  const SweepStats stats = run_sweep(experiment, options);
  BenchSample b;
  b.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  b.cpu_seconds = cpu_seconds() - cpu_start;
  for (const auto& [index, figures] : stats.results) b.requests += figures.requests_total;
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  b.peak_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
  return b;
}

BenchSample run_bench_capacity(const std::string& experiments_dir) {
  const std::string path = experiments_dir + "/sweeps/bench_capacity.toml";
  if (!std::filesystem::exists(path))
    throw core::Error("scenario S7 needs " + path + " (run from the project root, or point --experiments at it)");
  Experiment experiment = Experiment::load(path);
  CapacityOptions options;
  options.jobs = 1;  // one core: the figure is the search's own speed
  const auto start = std::chrono::steady_clock::now();
  const CapacityResult result = run_capacity(experiment, options);
  BenchSample b;
  b.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  b.runs = static_cast<uint64_t>(result.runs);
  b.configurations = result.configurations.size();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  b.peak_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
  return b;
}

BenchSample run_bench_scenario(const BenchScenario& s, const std::string& traces_dir, int64_t requests) {
  if (!s.trace.empty()) {
    const std::string path = traces_dir + "/" + s.trace;
    if (!std::filesystem::exists(path))
      throw core::Error("scenario " + s.name + " needs the trace " + path +
                        " (third-party data, not in this repository: see the README for where to get it, "
                        "or point --traces at the directory holding azure-2023/ and mooncake-fast25/)");
  }
  std::string text = s.config;
  for (size_t at; (at = text.find("@TRACES@")) != std::string::npos;) text.replace(at, 8, traces_dir);
  std::vector<std::string> sets;
  if (requests > 0) sets.push_back("workload.max_requests=" + std::to_string(requests));
  const core::Params config = core::parse_config(text, "bench " + s.name, run_schema(), sets);
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_simulation(config, RunOutputs{});
  BenchSample b;
  b.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  b.requests = r.summary.requests_total;
  b.iterations = r.summary.iterations;
  b.events = r.summary.events;
  b.sim_seconds = r.summary.sim_seconds;
  b.percentiles = r.summary.percentiles;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  b.peak_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  return b;
}

}  // namespace servesim::experiments
