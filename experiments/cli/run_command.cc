// servesim run: one simulation from a configuration file.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "experiments/run.h"
#include "sim/core/format.h"
#include "sim/core/output_file.h"
#include "sim/metrics/csv_sink.h"
#include "sim/metrics/sqlite_sink.h"
#include "sim/metrics/timeline.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

constexpr int64_t kMaxTimelineEvents = 1'000'000'000;


void print_summary(std::ostream& out, const RunResult& r, const std::string& config_path, const std::string& db,
                   const std::string& csv) {
  const auto& s = r.summary;
  out << "servesim " << SERVESIM_VERSION << "  " << config_path << "  (config " << r.info.config_hash << ", seed "
      << r.info.seed << ")\n";
  out << "cluster      " << r.model_kind << ":";
  for (size_t i = 0; i < r.pools.size(); ++i) {
    const auto& p = r.pools[i];
    out << (i ? " +" : "") << " " << p.replicas << " x " << (p.role == "unified" ? "" : p.role + " ") << p.gpu_kind
        << " (TP " << p.tensor_parallel;
    if (p.expert_parallel > 1)
      out << ", EP " << p.expert_parallel << " = " << p.attention_data_parallel << " attention ranks, "
          << p.redundant_experts << " redundant experts, expert load imbalance " << fixed(p.expert_imbalance, 3);
    out << ", " << grouped(static_cast<uint64_t>(p.kv_blocks_per_replica))
        << " KV blocks of " << r.block_size << " tokens, scheduler " << p.scheduler_kind << ")";
  }
  out << ", router " << r.router_kind << "\n";
  for (size_t i = 0; i < r.pools.size(); ++i) {
    const auto& p = r.pools[i];
    if (i > 0 && p.calibration == r.pools[0].calibration && p.engine_kind == r.pools[0].engine_kind) continue;
    out << (i == 0 ? "engine       " : "             ") << p.engine_kind << " on " << p.gpu_kind << ", calibration "
        << (p.calibration.empty() ? std::string("none (constant efficiencies)")
                                  : p.calibration + (p.calibration_default ? " (the GPU's shipped profile, used by "
                                                                             "default; calibration = \"none\" opts out)"
                                                                           : ""))
        << "\n";
  }
  out << "workload     " << r.workload_kind << ": " << grouped(s.requests_total) << " requests, "
      << grouped(s.requests_completed) << " completed, " << grouped(s.requests_rejected) << " rejected ("
      << s.rejected_context << " over the context, " << s.rejected_kv_capacity << " over the KV capacity), "
      << (s.requests_timed_out ? grouped(s.requests_timed_out) + " timed out (the client gave up), " : std::string())
      << grouped(s.preemptions) << " preemptions\n";
  const double eps = s.wall_seconds > 0 ? static_cast<double>(s.events) / s.wall_seconds : 0;
  out << "simulated    " << fixed(s.sim_seconds, 1) << " s in " << fixed(s.wall_seconds, 3) << " s wall ("
      << grouped(s.events) << " events, " << grouped(static_cast<uint64_t>(eps)) << " events/s, "
      << grouped(s.iterations) << " iterations)\n";
  out << "\nlatency (ms)      mean        p50        p90        p99\n";
  auto lat = [&](const char* name, const metrics::LatencyStats& l) {
    out << "  " << std::left << std::setw(8) << name << std::right;
    for (double v : {l.mean, l.p50, l.p90, l.p99}) out << std::setw(11) << fixed(v, 2);
    out << "\n";
  };
  lat("TTFT", s.ttft_ms);
  lat("TPOT", s.tpot_ms);
  lat("ITL", s.itl_ms);
  lat("E2E", s.e2e_ms);
  int64_t gpus = 0;
  for (const auto& p : r.pools)
    gpus += p.replicas * (p.expert_parallel > 1 ? p.expert_parallel : p.tensor_parallel);
  out << "\nthroughput   " << fixed(s.throughput_req_s, 3) << " req/s, " << fixed(s.throughput_output_tok_s, 1)
      << " output tok/s (" << fixed(s.throughput_output_tok_s / static_cast<double>(gpus), 1) << " per GPU of "
      << gpus << ") over the whole run; " << fixed(s.throughput_req_s_window, 3) << " req/s, "
      << fixed(s.throughput_output_tok_s_window, 1) << " tok/s over the " << fixed(s.arrival_window_s, 1)
      << " s arrival window\n";
  std::string limits;
  if (r.slo.ttft_ms) limits += "TTFT <= " + core::format_double(*r.slo.ttft_ms) + " ms";
  if (r.slo.tpot_ms) limits += std::string(limits.empty() ? "" : ", ") + "TPOT <= " + core::format_double(*r.slo.tpot_ms) + " ms";
  if (r.slo.e2e_ms) limits += std::string(limits.empty() ? "" : ", ") + "E2E <= " + core::format_double(*r.slo.e2e_ms) + " ms";
  out << "goodput      " << fixed(s.goodput_req_s, 3) << " req/s (" << fixed(s.goodput_req_s_window, 3)
      << " over the arrival window) under " << (limits.empty() ? "no SLO" : limits) << " (SLO attainment "
      << percent(s.slo_attainment) << ")\n";
  out << "cost         $" << fixed(s.cost_usd_per_mtok_output, 4) << " per 1M output tokens ($"
      << fixed(s.cost_usd_per_mtok_output_window, 4) << " over the arrival window; " << fixed(s.gpu_hours, 3)
      << " GPU-hours at $" << fixed(r.usd_per_gpu_hour, 2) << "/h = $" << fixed(s.cost_usd, 2) << ")\n";
  out << "utilisation  MFU " << percent(s.mfu_mean) << ", MBU " << percent(s.mbu_mean) << ", KV cache "
      << percent(s.kv_util_mean) << ", mean batch " << fixed(s.mean_batch_size, 1) << ", "
      << fixed(s.mean_requests_in_system, 1) << " requests in the system on average\n";
  if (s.prefix_prompt_blocks > 0)
    out << "prefix cache " << percent(s.prefix_block_hit_rate) << " of prompt blocks found cached, "
        << percent(s.prefix_token_hit_rate) << " of prompt tokens not recomputed, " << fixed(s.prefix_saved_tflop, 1)
        << " TFLOP of prefill saved\n";
  if (s.kv_transfers > 0)
    out << "kv transfer  " << grouped(s.kv_transfers) << " prefill -> decode transfers, " << fixed(s.kv_transfer_gb, 1)
        << " GB, " << fixed(s.kv_transfer_ms.mean, 2) << " ms mean, " << fixed(s.kv_transfer_ms.p99, 2) << " ms p99\n";
  if (!s.fleet.empty()) {
    auto get = [&](const char* name) {
      for (const auto& v : s.fleet)
        if (v.name == name) return v.value;
      return 0.0;
    };
    out << "fleet        " << grouped(static_cast<uint64_t>(get("replica_failures"))) << " replica failures ("
        << grouped(static_cast<uint64_t>(get("replica_repairs"))) << " repaired, " << fixed(get("replica_down_seconds"), 1)
        << " replica-seconds down), " << grouped(static_cast<uint64_t>(get("requests_rerouted")))
        << " requests rerouted and recomputed, " << grouped(static_cast<uint64_t>(get("requests_failed")))
        << " failed, " << grouped(static_cast<uint64_t>(get("replica_speed_changes"))) << " straggler events\n";
  }
  if (!db.empty()) out << "results      run " << r.info.run_id << " in " << db << "\n";
  if (!csv.empty()) out << "csv          " << csv << "/{runs,requests,replica_timeseries}.csv\n";
}

nlohmann::ordered_json summary_json(const RunResult& r, const std::string& db) {
  const auto& s = r.summary;
  nlohmann::ordered_json j;
  j["run_id"] = r.info.run_id;
  j["config_hash"] = r.info.config_hash;
  j["seed"] = r.info.seed;
  j["version"] = r.info.version;
  j["db"] = db.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(db);
  j["wall_seconds"] = s.wall_seconds;
  nlohmann::ordered_json pools = nlohmann::ordered_json::array();
  for (const auto& p : r.pools)
    pools.push_back({{"role", p.role},
                     {"replicas", p.replicas},
                     {"gpu", p.gpu_kind},
                     {"tensor_parallel", p.tensor_parallel},
                     {"expert_parallel", p.expert_parallel},
                     {"attention_data_parallel", p.attention_data_parallel},
                     {"redundant_experts", p.redundant_experts},
                     {"expert_imbalance", p.expert_imbalance},
                     {"engine", p.engine_kind},
                     {"calibration", p.calibration.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(p.calibration)},
                     {"calibration_default", p.calibration_default}});
  j["pools"] = pools;
  const std::pair<const char*, const metrics::LatencyStats*> latencies[] = {
      {"ttft_ms", &s.ttft_ms}, {"tpot_ms", &s.tpot_ms}, {"itl_ms", &s.itl_ms}, {"e2e_ms", &s.e2e_ms}};
  // Everything the database stores, with each latency's statistics as one nested object.
  for (const auto& v : metrics::flatten(s)) {
    bool is_latency = false;
    for (const auto& [prefix, stats] : latencies) {
      if (v.name.rfind(prefix, 0) != 0) continue;
      is_latency = true;
      if (!j.contains(prefix))
        j[prefix] = {{"mean", stats->mean}, {"p50", stats->p50}, {"p90", stats->p90}, {"p99", stats->p99}};
    }
    if (is_latency) continue;
    if (v.integer) j[v.name] = static_cast<int64_t>(v.value); else j[v.name] = v.value;
  }
  return j;
}

int cmd_run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description opts("servesim run options");
  std::vector<std::string> sets;
  std::string db = "results.db", csv, config, timeline;
  int64_t timeline_max_events = static_cast<int64_t>(metrics::TimelineRecorder::kDefaultMaxEvents);
  opts.add_options()
      ("help,h", "this help")
      ("config", po::value<std::string>(&config), "the run configuration (TOML)")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override one key, section.key=value (repeatable; TOML value syntax, bare words are strings)")
      ("db", po::value<std::string>(&db)->default_value("results.db"), "SQLite results database (created if missing)")
      ("no-db", "do not write a results database")
      ("csv", po::value<std::string>(&csv), "also write runs.csv, requests.csv, replica_timeseries.csv to this directory")
      ("json", "print the summary as one JSON object on stdout instead of the table")
      ("check", "check the simulator's invariants at every signal (slower; a violation is an error, exit 1)")
      ("timeline", po::value<std::string>(&timeline),
       "write a Chrome/Perfetto trace-event JSON of each replica's iterations and request spans to this file")
      ("timeline-max-events", po::value<int64_t>(&timeline_max_events)->default_value(timeline_max_events),
       "keep at most this many trace events, 0 to 1,000,000,000 (the first ones in simulated time; the file says "
       "how many were dropped)");
  const po::variables_map vm = parse_options(args, opts, "config");
  if (vm.count("help")) {
    out << "usage: servesim run CONFIG.toml [options]\n\n" << opts << "\n";
    return 0;
  }
  if (config.empty()) throw UsageError("run needs a configuration file: servesim run CONFIG.toml");
  if (vm.count("no-db") && !vm["db"].defaulted())
    throw UsageError("--db " + db + " and --no-db contradict each other: give one of them");
  if (vm.count("no-db")) db.clear();
  if (db.empty() && vm.count("db") && !vm["db"].defaulted())
    throw UsageError("--db needs a file name (or --no-db for no database)");
  if (vm.count("timeline-max-events") && !vm["timeline-max-events"].defaulted() && timeline.empty())
    throw UsageError("--timeline-max-events " + std::to_string(timeline_max_events) +
                     " without --timeline FILE: there is no timeline to limit");
  if (timeline_max_events < 0 || timeline_max_events > kMaxTimelineEvents)
    throw UsageError("--timeline-max-events " + std::to_string(timeline_max_events) + ": valid: 0 to " +
                     std::to_string(kMaxTimelineEvents) + " trace events (64 bytes of memory each)");
  core::Params params = load_run_config(config, sets);

  // No output may overwrite an input or another output; none of another kind is replaced.
  core::PathPlan plan;
  plan.input(config, "the configuration");
  params.for_each_path([&](const core::Params& section, const std::string& name) {
    plan.input(section.get_string(name), "'" + section.key_path(name) + "'");
  });
  plan.output(db, "--db");
  if (!db.empty()) plan.output(db + "-journal", "--db's journal");
  plan.output_files(csv, metrics::CsvSink::file_names(), "--csv");
  plan.output(timeline, "--timeline");
  plan.check();
  if (!db.empty()) metrics::check_results_database(db);
  if (!timeline.empty())
    core::check_replaceable(timeline, metrics::kTimelineWhat, core::starts_with(metrics::kTimelinePrefix));

  RunOutputs outputs;
  outputs.db_path = db;
  outputs.csv_dir = csv;
  outputs.check = vm.count("check") > 0;
  metrics::TimelineRecorder timeline_recorder(static_cast<uint64_t>(timeline_max_events));
  std::unique_ptr<core::AtomicFile> timeline_file;
  if (!timeline.empty()) {
    outputs.observers.push_back(&timeline_recorder);
    // Written before the database commits and put in place after: a failure (a full disk) leaves
    // neither the run in the database nor a truncated timeline, so a re-run adds no duplicate.
    outputs.stage = [&](const metrics::RunInfo& info) {
      timeline_file = std::make_unique<core::AtomicFile>(timeline, metrics::kTimelineWhat,
                                                         core::starts_with(metrics::kTimelinePrefix));
      timeline_recorder.write(timeline_file->stream(), info);
      timeline_file->finish();
    };
    outputs.publish = [&] { timeline_file->publish(); };
  }
  RunResult result = run_simulation(params, outputs);
  if (!timeline.empty()) {
    err << "timeline     " << timeline << ": " << timeline_recorder.events_kept() << " trace events"
        << (timeline_recorder.events_dropped()
                ? ", " + std::to_string(timeline_recorder.events_dropped()) + " dropped over --timeline-max-events"
                : "")
        << "\n";
  }
  if (vm.count("json")) {
    out << summary_json(result, db).dump() << "\n";
  } else {
    print_summary(out, result, config, db, csv);
  }
  return 0;
}


const bool kRegistered = register_command(
    {"run", "CONFIG.toml [--set section.key=value ...] [--db FILE] [--no-db] [--csv DIR] [--json] [--check] [--timeline FILE]",
     "simulate the serving cluster a configuration describes; print a summary and write the results\n"
     "(runs, requests, replica_timeseries) to the SQLite database",
     cmd_run});

}  // namespace
}  // namespace servesim::experiments
