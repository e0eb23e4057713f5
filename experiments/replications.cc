#include "experiments/replications.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <exception>
#include <memory>

#include "experiments/experiment.h"
#include "sim/core/error.h"
#include "sim/metrics/buffer_sink.h"
#include "sim/metrics/csv_sink.h"
#include "sim/metrics/sqlite_sink.h"

namespace servesim::experiments {
namespace {

// Hands every row to several sinks in order; the first to number the run numbers it for the rest.
class Tee final : public metrics::ResultSink {
 public:
  explicit Tee(const std::vector<std::unique_ptr<metrics::ResultSink>>& sinks) : sinks_(sinks) {}
  void begin_run(metrics::RunInfo& info) override {
    for (const auto& s : sinks_) s->begin_run(info);
    run_id_ = info.run_id;
  }
  void add_request(const core::RequestRecord& r, const metrics::RequestMetrics& m) override {
    for (const auto& s : sinks_) s->add_request(r, m);
  }
  void add_sample(const metrics::ReplicaSample& sample) override {
    for (const auto& s : sinks_) s->add_sample(sample);
  }
  void add_replica_stats(const metrics::ReplicaStats& stats) override {
    for (const auto& s : sinks_) s->add_replica_stats(stats);
  }
  void end_run(const metrics::RunSummary& summary) override {
    for (const auto& s : sinks_) s->end_run(summary);
  }
  int64_t run_id() const { return run_id_; }

 private:
  const std::vector<std::unique_ptr<metrics::ResultSink>>& sinks_;
  int64_t run_id_ = 0;
};

}  // namespace

bool replays_trace(const core::Params& config) {
  // The workload kinds that read arrivals from a file and draw nothing from the seed. A new replay
  // kind belongs here, or its replications repeat one run.
  const std::string kind = config.section("workload").kind();
  return kind == "azure_csv" || kind == "mooncake_jsonl";
}

std::vector<std::string> replication_overrides(const core::Params& config, int64_t index) {
  const core::Params& workload = config.section("workload");
  if (workload.given("seed"))
    workload.fail("seed", "the workload's own seed fixes its draws, so every replication would repeat one run; "
                          "remove workload.seed (replications vary the run's seed)");
  std::vector<std::string> out = {"seed=" + std::to_string(config.get_int("seed") + index)};
  if (replays_trace(config) && !config.section("replication").given("resample_trace"))
    out.push_back("replication.resample_trace=true");
  return out;
}

std::vector<ReplicatedMetric> across_replications(const std::vector<metrics::RunSummary>& runs) {
  std::vector<ReplicatedMetric> out;
  for (size_t r = 0; r < runs.size(); ++r) {
    const auto values = metrics::flatten(runs[r]);
    if (r == 0)
      for (const auto& v : values) out.push_back({v.name, {}, {}});
    for (size_t k = 0; k < values.size(); ++k) out[k].values.push_back(values[k].value);
  }
  for (auto& m : out) {
    std::vector<double> known;
    for (double v : m.values)
      if (!std::isnan(v)) known.push_back(v);
    m.interval = metrics::t_interval(known);
  }
  return out;
}

const ReplicatedMetric* find_metric(const std::vector<ReplicatedMetric>& metrics, const std::string& name) {
  for (const auto& m : metrics)
    if (m.name == name) return &m;
  return nullptr;
}

std::vector<RunResult> run_in_order(const std::vector<core::Params>& configs, const ReplicationOptions& options,
                                    const std::function<std::string(size_t)>& what) {
  const size_t n = configs.size();
  std::vector<RunResult> runs(n);
  std::vector<std::unique_ptr<metrics::BufferSink>> buffers(n);
  std::vector<std::exception_ptr> errors(n);
  // Rows are kept only to be written; with no database and no CSV, nothing is kept.
  const bool keep = !options.db_path.empty() || !options.csv_dir.empty();
  tbb::task_arena arena(resolve_jobs(options.jobs));
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, n, [&](size_t i) {
      try {
        RunOutputs outputs;
        if (keep) {
          buffers[i] = std::make_unique<metrics::BufferSink>();
          outputs.sinks = {buffers[i].get()};
        }
        outputs.check = options.check;
        runs[i] = run_simulation(configs[i], outputs);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  });
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const core::ConfigError&) {
      throw;
    } catch (const std::exception& e) {
      throw core::Error(what(i) + ": " + e.what());
    }
  }
  // Written in order, each a run of its own, numbered by the database (the CSV rows take the same
  // number, as in servesim run).
  std::vector<std::unique_ptr<metrics::ResultSink>> sinks;
  if (!options.db_path.empty()) sinks.push_back(std::make_unique<metrics::SqliteSink>(options.db_path));
  if (!options.csv_dir.empty()) sinks.push_back(std::make_unique<metrics::CsvSink>(options.csv_dir));
  if (!sinks.empty()) {
    Tee tee(sinks);
    for (size_t i = 0; i < n; ++i) {
      buffers[i]->replay(tee);
      runs[i].info.run_id = tee.run_id();
      buffers[i].reset();
    }
  }
  return runs;
}

ReplicationResult run_replications(const std::function<core::Params(const std::vector<std::string>&)>& load,
                                   const ReplicationOptions& options) {
  if (options.count < 2) throw core::Error("--replications needs at least 2 (one run has no spread to measure)");
  const core::Params base = load({});
  ReplicationResult result;
  result.resampled = replays_trace(base) && !base.section("replication").given("resample_trace");
  const size_t n = static_cast<size_t>(options.count);
  std::vector<core::Params> configs;
  for (size_t i = 0; i < n; ++i) configs.push_back(load(replication_overrides(base, static_cast<int64_t>(i))));
  result.runs = run_in_order(configs, options, [&](size_t i) {
    return "replication " + std::to_string(i) + " (seed " + std::to_string(configs[i].get_int("seed")) + ")";
  });
  std::vector<metrics::RunSummary> summaries;
  for (const auto& r : result.runs) summaries.push_back(r.summary);
  result.metrics = across_replications(summaries);
  return result;
}

}  // namespace servesim::experiments
