#include "experiments/run.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "hwmodels/cost_model.h"
#include "hwmodels/gpu_spec.h"
#include "hwmodels/model_spec.h"
#include "hwmodels/roofline.h"
#include "policies/router/router.h"
#include "policies/scheduler/batch_scheduler.h"
#include "sim/cluster/cluster.h"
#include "sim/core/config.h"
#include "sim/core/format.h"
#include "sim/core/rng.h"
#include "sim/engine/simulation.h"
#include "sim/metrics/collector.h"
#include "sim/metrics/csv_sink.h"
#include "sim/metrics/sqlite_sink.h"
#include "traces/arrival_source.h"

namespace servesim::experiments {

using core::ParamSpec;

const std::vector<core::ParamSpec>& run_schema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::integer("seed", 42, "", "seed of every random stream of the run (workload, router)")
          .range(0, static_cast<double>(INT64_MAX)),
      ParamSpec::section("workload", "workloads", "", "where requests come from: a trace or a generator"),
      ParamSpec::section("model", "models", "", "the served model (a preset; any field can be overridden)"),
      ParamSpec::section("gpu", "gpus", "", "the GPU type of every replica (a preset; fields can be overridden)"),
      ParamSpec::section("cost_model", "cost_models", "roofline", "how an iteration's duration is computed"),
      ParamSpec::table(
          "cluster",
          {
              ParamSpec::integer("replicas", 1, "replicas", "identical model replicas").range(1, 1 << 20),
              ParamSpec::integer("tensor_parallel", 1, "GPUs", "tensor-parallel degree of each replica")
                  .range(1, 1024),
              ParamSpec::integer("block_size", 16, "tokens", "tokens per paged KV-cache block").range(1, 1 << 16),
              ParamSpec::real("gpu_memory_utilization", 0.9, "fraction",
                              "share of GPU memory the engine may use (weights + activations + KV cache)")
                  .above(0)
                  .range(0, 1),
              ParamSpec::real("activation_reserve_gib", 2.0, "GiB",
                              "memory per GPU kept for activations, CUDA graphs and the runtime")
                  .range(0, 1e6),
          },
          "the replicas and their KV cache"),
      ParamSpec::section("router", "routers", "round_robin", "global policy that picks a replica per request"),
      ParamSpec::section("scheduler", "schedulers", "continuous", "per-replica batch scheduler"),
      ParamSpec::table(
          "slo",
          {
              ParamSpec::real("ttft_ms", 0, "ms", "time-to-first-token limit for goodput").above(0).optional(),
              ParamSpec::real("tpot_ms", 0, "ms", "time-per-output-token limit for goodput").above(0).optional(),
              ParamSpec::real("e2e_ms", 0, "ms", "end-to-end latency limit for goodput").above(0).optional(),
          },
          "latency limits a request must meet to count towards goodput (unset = no limit)"),
      ParamSpec::table(
          "output",
          {
              ParamSpec::real("sample_interval_ms", 1000, "ms",
                              "period of replica_timeseries samples (queue, batch, KV use); 0 = none")
                  .range(0, 1e12),
          },
          "what the run records besides per-request rows"),
  };
  return schema;
}

core::Params load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  return core::load_config(path, run_schema(), overrides);
}

std::string config_hash(const core::Params& config) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(core::fnv1a64(config.to_toml())));
  return buf;
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) { return core::format_double(std::round(bytes / kGiB * 100) / 100) + " GiB"; }

// KV blocks per replica, from what GPU memory leaves after weights and the activation reserve.
int64_t kv_blocks(const core::Params& cluster, const hwmodels::ModelSpec& model, const hwmodels::GpuSpec& gpu,
                  int64_t tp) {
  const int64_t block_size = cluster.get_int("block_size");
  const double util = cluster.get_float("gpu_memory_utilization");
  const double reserve = cluster.get_float("activation_reserve_gib") * kGiB;
  const double budget = gpu.memory_bytes * util - reserve;
  const double weights = hwmodels::weight_bytes_per_gpu(model, tp);
  const double kv_per_block = hwmodels::kv_bytes_per_token_per_gpu(model, tp) * static_cast<double>(block_size);
  const double left = budget - weights;
  if (left < kv_per_block)
    cluster.fail("tensor_parallel",
                 "model '" + model.name + "' does not fit GPU '" + gpu.name + "' at tensor_parallel = " +
                     std::to_string(tp) + ": its weights need " + gib(weights) + " per GPU, and " +
                     gib(gpu.memory_bytes) + " x gpu_memory_utilization " + core::format_double(util) +
                     " - activation_reserve_gib " + core::format_double(reserve / kGiB) + " leaves " +
                     gib(budget) + ", not enough for the weights and one KV block; raise tensor_parallel, "
                     "choose a GPU with more memory, or lower activation_reserve_gib");
  return static_cast<int64_t>(std::floor(left / kv_per_block));
}

}  // namespace

RunResult run_simulation(const core::Params& config, const RunOutputs& outputs) {
  RunResult result;
  const uint64_t seed = static_cast<uint64_t>(config.get_int("seed"));

  // ---- Build everything first: every configuration error surfaces before anything is written.
  std::unique_ptr<hwmodels::ModelSpec> model = hwmodels::model_registry().make(config.section("model"));
  std::unique_ptr<hwmodels::GpuSpec> gpu = hwmodels::gpu_registry().make(config.section("gpu"));
  const core::Params& cluster_cfg = config.section("cluster");
  const int64_t replicas = cluster_cfg.get_int("replicas");
  const int64_t tp = cluster_cfg.get_int("tensor_parallel");
  if (std::string why = hwmodels::tp_problem(*model, tp); !why.empty()) cluster_cfg.fail("tensor_parallel", why);
  const int64_t blocks = kv_blocks(cluster_cfg, *model, *gpu, tp);

  std::unique_ptr<hwmodels::StepCostModel> cost =
      hwmodels::cost_model_registry().make(config.section("cost_model"), *model, *gpu, tp);
  policies::SchedulerContext sched_ctx;
  sched_ctx.max_context = model->max_context;
  std::vector<std::unique_ptr<sim::BatchScheduler>> schedulers;
  for (int64_t i = 0; i < replicas; ++i)
    schedulers.push_back(policies::scheduler_registry().make(config.section("scheduler"), sched_ctx));
  std::unique_ptr<sim::Router> router = policies::router_registry().make(config.section("router"), seed);
  std::unique_ptr<traces::ArrivalSource> source =
      traces::workload_registry().make(config.section("workload"), seed);

  const core::Params& slo_cfg = config.section("slo");
  metrics::Slo slo;
  if (slo_cfg.has("ttft_ms")) slo.ttft_ms = slo_cfg.get_float("ttft_ms");
  if (slo_cfg.has("tpot_ms")) slo.tpot_ms = slo_cfg.get_float("tpot_ms");
  if (slo_cfg.has("e2e_ms")) slo.e2e_ms = slo_cfg.get_float("e2e_ms");

  metrics::CollectorConfig collector_cfg;
  collector_cfg.slo = slo;
  collector_cfg.sample_interval_ns =
      std::llround(config.section("output").get_float("sample_interval_ms") * 1e6);
  for (int64_t i = 0; i < replicas; ++i) {
    metrics::ReplicaHardware hw;
    hw.gpus = static_cast<double>(tp);
    hw.peak_flops = gpu->peak_flops * static_cast<double>(tp);
    hw.hbm_bandwidth = gpu->hbm_bandwidth * static_cast<double>(tp);
    hw.usd_per_hour = gpu->price_usd_per_hour * static_cast<double>(tp);
    collector_cfg.replicas.push_back(hw);
  }

  // ---- Outputs: opened now, committed only when the run has finished cleanly.
  std::vector<std::unique_ptr<metrics::ResultSink>> sinks;
  if (!outputs.db_path.empty()) sinks.push_back(std::make_unique<metrics::SqliteSink>(outputs.db_path));
  if (!outputs.csv_dir.empty()) sinks.push_back(std::make_unique<metrics::CsvSink>(outputs.csv_dir));
  std::vector<metrics::ResultSink*> sink_ptrs;
  for (auto& s : sinks) sink_ptrs.push_back(s.get());

  result.info.config_toml = config.to_toml();
  result.info.config_hash = config_hash(config);
  result.info.seed = seed;
  result.info.version = SERVESIM_VERSION;
  for (auto* s : sink_ptrs) s->begin_run(result.info);

  // ---- Run.
  metrics::MetricsCollector collector(collector_cfg, sink_ptrs);
  sim::Simulation simulation;
  sim::Cluster cluster(simulation, *source, std::move(router), collector, static_cast<size_t>(replicas));
  sim::ReplicaConfig replica_cfg;
  replica_cfg.kv_blocks = blocks;
  replica_cfg.block_size = cluster_cfg.get_int("block_size");
  replica_cfg.max_context = model->max_context;
  for (int64_t i = 0; i < replicas; ++i) cluster.add_replica(replica_cfg, *cost, std::move(schedulers[i]));

  const auto wall_start = std::chrono::steady_clock::now();
  cluster.start();
  simulation.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  cluster.check_drained();

  result.summary = collector.finish(simulation.now(), simulation.events_processed(), wall);
  if (result.summary.requests_total == 0)
    throw core::Error("the workload produced no requests (check its window, max_requests and input file)");
  for (auto* s : sink_ptrs) s->end_run(result.summary);

  result.workload_kind = config.section("workload").kind();
  result.model_kind = config.section("model").kind();
  result.gpu_kind = config.section("gpu").kind();
  result.router_kind = config.section("router").kind();
  result.scheduler_kind = config.section("scheduler").kind();
  result.replicas = replicas;
  result.tensor_parallel = tp;
  result.kv_blocks_per_replica = blocks;
  result.block_size = replica_cfg.block_size;
  result.usd_per_gpu_hour = gpu->price_usd_per_hour;
  result.slo = slo;
  return result;
}

}  // namespace servesim::experiments
