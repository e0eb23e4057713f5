// servesim run: one simulation from a configuration file.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "experiments/prediction.h"
#include "experiments/replications.h"
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


// The measurement window (when not the default) and the stationarity check.
void print_steady_state(std::ostream& out, const RunResult& r) {
  const auto& s = r.summary;
  const auto& st = s.steady;
  const auto& m = r.measurement;
  auto pm = [](double v, double hw, int digits) {
    return fixed(v, digits) + (std::isnan(hw) ? std::string() : " +- " + fixed(hw, digits));
  };
  if (m.custom()) {
    std::string how = m.auto_warmup ? "warm-up found by MSER-5"
                      : m.warmup_s ? "warm-up " + core::format_double(*m.warmup_s) + " s"
                      : m.warmup_requests ? "warm-up " + std::to_string(*m.warmup_requests) + " requests"
                                          : "no warm-up";
    if (m.cooldown_s) how += ", cool-down " + core::format_double(*m.cooldown_s) + " s";
    if (m.cooldown_requests) how += ", cool-down " + std::to_string(*m.cooldown_requests) + " requests";
    out << "window       " << fixed(st.window_start_s, 2) << " s to " << fixed(st.window_start_s + s.arrival_window_s, 2)
        << " s (" << how << "): " << grouped(st.window_requests) << " requests; TTFT p50/p90/p99 "
        << fixed(st.ttft_ms.p50, 1) << "/" << fixed(st.ttft_ms.p90, 1) << "/" << fixed(st.ttft_ms.p99, 1)
        << " ms, TPOT p90 " << fixed(st.tpot_ms.p90, 2) << " ms, SLO attainment " << percent(st.slo_attainment) << "\n";
  }
  out << "intervals    95% by batch means (" << st.batches << " batches" << (m.custom() ? " of the window" : "")
      << "): TTFT mean " << pm(st.ttft_ms.mean, st.ttft_ms_mean_ci95, 1) << " ms, E2E mean "
      << pm(st.e2e_ms.mean, st.e2e_ms_mean_ci95, 1) << " ms, goodput " << pm(s.goodput_req_s_window, st.goodput_req_s_ci95, 2)
      << " req/s, SLO attainment " << pm(100 * st.slo_attainment, 100 * st.slo_attainment_ci95, 1) << "%\n";
  out << "steady state ";
  if (st.stationary)
    out << "stationary: after " << fixed(std::max(st.window_start_s, st.mser_warmup_s), 1) << " s, "
        << fixed(st.in_system_mean, 1) << " requests in the system (" << fixed(st.queued_mean, 1)
        << " waiting), trend " << (st.in_system_trend_req_s >= 0 ? "+" : "") << fixed(st.in_system_trend_req_s, 3)
        << "/s (t = " << fixed(st.in_system_trend_t, 1) << ")\n";
  else
    out << "NOT STATIONARY: the requests in the system still grow by " << fixed(st.in_system_trend_req_s, 2)
        << "/s at the end (t = " << fixed(st.in_system_trend_t, 1) << ", " << fixed(st.queued_mean, 1)
        << " waiting on average): not sustainable at this rate, or not settled in this run; the figures depend on "
           "the run's length\n";
}

void print_cluster(std::ostream& out, const RunResult& r) {
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
}

// Per request class ([[workload.classes]]): one row each, attainment against the class's own SLO.
void print_classes(std::ostream& out, const metrics::RunSummary& s) {
  if (s.classes.empty()) return;
  out << "\nclass            prio  tenant      requests  completed  rejected  timed out  failed   TTFT p50    p99  "
         "TPOT p99   E2E p99  attainment  goodput  SLO (TTFT / TPOT ms)\n";
  for (const auto& c : s.classes) {
    auto limit = [](double v) { return std::isnan(v) ? std::string("-") : core::format_double(v); };
    out << "  " << std::left << std::setw(14) << c.name.substr(0, 14) << std::right << std::setw(6) << c.priority << "  "
        << std::left << std::setw(10) << c.tenant.substr(0, 10) << std::right << std::setw(10) << grouped(c.requests)
        << std::setw(11) << grouped(c.completed) << std::setw(10) << grouped(c.rejected) << std::setw(11)
        << grouped(c.timed_out) << std::setw(8) << grouped(c.failed) << std::setw(11) << fixed(c.ttft_ms.p50, 1)
        << std::setw(7) << fixed(c.ttft_ms.p99, 0) << std::setw(10) << fixed(c.tpot_ms.p99, 2) << std::setw(10)
        << fixed(c.e2e_ms.p99, 0) << std::setw(12) << percent(c.slo_attainment) << std::setw(9)
        << fixed(c.goodput_req_s, 2) << "  " << limit(c.ttft_slo_ms) << " / " << limit(c.tpot_slo_ms) << "\n";
  }
}

void print_summary(std::ostream& out, const RunResult& r, const std::string& config_path, const std::string& db,
                   const std::string& csv) {
  const auto& s = r.summary;
  out << "servesim " << SERVESIM_VERSION << "  " << config_path << "  (config " << r.info.config_hash << ", seed "
      << r.info.seed << ")\n";
  print_cluster(out, r);
  out << "workload     " << r.workload_kind << ": " << grouped(s.requests_total) << " requests, "
      << grouped(s.requests_completed) << " completed, " << grouped(s.requests_rejected) << " rejected ("
      << s.rejected_context << " over the context, " << s.rejected_kv_capacity << " over the KV capacity"
      << (s.rejected_admission ? ", " + grouped(s.rejected_admission) + " shed by admission control" : std::string())
      << "), "
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
  if (s.percentiles == "sketch")
    out << "percentiles  sketch: each TTFT, TPOT and E2E percentile within " << fixed(s.percentile_relative_error * 100, 2)
        << "% of the exact one (means exact; [output] percentiles)\n";
  else
    out << "percentiles  exact (ITL from a log histogram, within 0.1%)\n";
  int64_t gpus = 0;
  for (const auto& p : r.pools)
    gpus += p.replicas * (p.expert_parallel > 1 ? p.expert_parallel : p.tensor_parallel);
  const std::string window = r.measurement.custom() ? "measurement window" : "arrival window";
  out << "\nthroughput   " << fixed(s.throughput_req_s, 3) << " req/s, " << fixed(s.throughput_output_tok_s, 1)
      << " output tok/s (" << fixed(s.throughput_output_tok_s / static_cast<double>(gpus), 1) << " per GPU of "
      << gpus << ") over the whole run; " << fixed(s.throughput_req_s_window, 3) << " req/s, "
      << fixed(s.throughput_output_tok_s_window, 1) << " tok/s over the " << fixed(s.arrival_window_s, 1)
      << " s " << window << "\n";
  std::string limits;
  if (r.slo.ttft_ms) limits += "TTFT <= " + core::format_double(*r.slo.ttft_ms) + " ms";
  if (r.slo.tpot_ms) limits += std::string(limits.empty() ? "" : ", ") + "TPOT <= " + core::format_double(*r.slo.tpot_ms) + " ms";
  if (r.slo.e2e_ms) limits += std::string(limits.empty() ? "" : ", ") + "E2E <= " + core::format_double(*r.slo.e2e_ms) + " ms";
  out << "goodput      " << fixed(s.goodput_req_s, 3) << " req/s (" << fixed(s.goodput_req_s_window, 3)
      << " over the " << window << ") under " << (limits.empty() ? "no SLO" : limits) << " (SLO attainment "
      << percent(s.slo_attainment) << ")\n";
  // Priced KV tiers (kv_tiers.*.usd_per_gb_hour): the line says what the cost includes.
  double tier_usd = 0;
  std::string tiers;
  for (const auto& v : s.fleet)
    for (const char* tier : {"host", "nvme", "store"})
      if (v.name == std::string("kv_") + tier + "_cost_usd") {
        tier_usd += v.value;
        tiers += std::string(tiers.empty() ? "" : ", ") + tier + " $" + fixed(v.value, 2);
      }
  out << "cost         $" << fixed(s.cost_usd_per_mtok_output, 4) << " per 1M output tokens ($"
      << fixed(s.cost_usd_per_mtok_output_window, 4) << " over the " << window << "; " << fixed(s.gpu_hours, 3)
      << " GPU-hours at $" << fixed(r.usd_per_gpu_hour, 2) << "/h = $";
  if (tiers.empty())
    out << fixed(s.cost_usd, 2) << ")\n";
  else
    out << fixed(s.cost_usd - tier_usd, 2) << ", + KV tiers $" << fixed(tier_usd, 2) << " (" << tiers << ") = $"
        << fixed(s.cost_usd, 2) << ")\n";
  print_steady_state(out, r);
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
  if (s.pull_waits > 0)
    out << "pull waits   " << grouped(s.pull_waits) << " transfers waited for decode KV blocks, "
        << fixed(s.pull_wait_s, 2) << " s in all, " << fixed(s.pull_wait_max_ms, 1) << " ms longest, "
        << s.pulls_waiting_peak << " waiting at most\n";
  if (r.decoding_kind != "none")
    out << "speculation  " << r.decoding_kind << ": " << fixed(s.spec_mean_accepted_length, 2)
        << " tokens per verify step (" << percent(s.spec_acceptance_rate) << " of " << grouped(static_cast<uint64_t>(s.spec_draft_tokens))
        << " draft tokens accepted), " << fixed(s.tokens_per_gap, 2) << " tokens per streamed chunk (one ITL gap)\n";
  auto fleet_value = [&](const char* name) -> std::optional<double> {
    for (const auto& v : s.fleet)
      if (v.name == name) return v.value;
    return std::nullopt;
  };
  if (fleet_value("kv_host_loads")) {
    auto get = [&](const char* name) { return fleet_value(name).value_or(0.0); };
    out << "kv tiers     HBM " << percent(get("kv_hbm_token_hit_rate")) << " + host "
        << percent(get("kv_host_token_hit_rate")) << " of prompt tokens; "
        << grouped(static_cast<uint64_t>(get("kv_host_loads"))) << " host loads (" << fixed(get("kv_host_load_gb"), 1)
        << " GB, " << fixed(get("kv_host_load_seconds"), 2) << " s waiting, " << fixed(get("kv_host_saved_tflop"), 1)
        << " TFLOP of prefill saved), " << grouped(static_cast<uint64_t>(get("kv_host_declined")))
        << " host hits recomputed; " << grouped(static_cast<uint64_t>(get("kv_host_stores"))) << " stores ("
        << fixed(get("kv_host_store_gb"), 1) << " GB), " << grouped(static_cast<uint64_t>(get("kv_host_evictions")))
        << " host evictions\n";
  }
  if (fleet_value("kv_store_loads")) {
    auto get = [&](const char* name) { return fleet_value(name).value_or(0.0); };
    out << "kv store     " << percent(get("kv_store_token_hit_rate")) << " of prompt tokens from the shared store ("
        << percent(get("kv_hbm_token_hit_rate")) << " HBM); " << grouped(static_cast<uint64_t>(get("kv_store_loads")))
        << " store loads (" << grouped(static_cast<uint64_t>(get("kv_store_cross_replica_loads")))
        << " with units another replica wrote; " << fixed(get("kv_store_load_gb"), 1) << " GB, "
        << fixed(get("kv_store_load_seconds"), 2) << " s of copies), "
        << grouped(static_cast<uint64_t>(get("kv_store_declined"))) << " store hits recomputed; "
        << grouped(static_cast<uint64_t>(get("kv_store_stores"))) << " stores (" << fixed(get("kv_store_store_gb"), 1)
        << " GB), " << grouped(static_cast<uint64_t>(get("kv_store_evictions"))) << " store evictions\n";
    if (fleet_value("kv_store_prefetches"))
      out << "kv prefetch  " << grouped(static_cast<uint64_t>(get("kv_store_prefetches")))
          << " queued requests prefetched store units into host memory (" << fixed(get("kv_store_prefetch_gb"), 1)
          << " GB arrived, " << grouped(static_cast<uint64_t>(get("kv_store_prefetch_cut_tokens")))
          << " tokens cut off); " << grouped(static_cast<uint64_t>(get("kv_store_prefetch_waits")))
          << " waited for theirs at the head of the queue (" << fixed(get("kv_store_prefetch_wait_seconds"), 2)
          << " s)\n";
  }
  if (fleet_value("kv_nvme_loads")) {
    auto get = [&](const char* name) { return fleet_value(name).value_or(0.0); };
    out << "kv nvme      " << percent(get("kv_nvme_token_hit_rate")) << " of prompt tokens from local NVMe ("
        << percent(get("kv_hbm_token_hit_rate")) << " HBM); " << grouped(static_cast<uint64_t>(get("kv_nvme_loads")))
        << " NVMe loads (" << fixed(get("kv_nvme_load_gb"), 1) << " GB, " << fixed(get("kv_nvme_load_seconds"), 2)
        << " s of copies, " << fixed(get("kv_nvme_saved_tflop"), 1) << " TFLOP of prefill saved), "
        << grouped(static_cast<uint64_t>(get("kv_nvme_declined"))) << " NVMe hits recomputed; "
        << grouped(static_cast<uint64_t>(get("kv_nvme_stores"))) << " stores (" << fixed(get("kv_nvme_store_gb"), 1)
        << " GB), " << grouped(static_cast<uint64_t>(get("kv_nvme_evictions"))) << " NVMe evictions\n";
  }
  if (fleet_value("kv_reloads")) {
    auto get = [&](const char* name) { return fleet_value(name).value_or(0.0); };
    out << "kv reloads   " << grouped(static_cast<uint64_t>(get("kv_reloads")))
        << " admissions again after a recompute preemption or a failover hit "
        << grouped(static_cast<uint64_t>(get("kv_reload_hit_tokens"))) << " tokens (host "
        << grouped(static_cast<uint64_t>(get("kv_host_reload_tokens"))) << ", store "
        << grouped(static_cast<uint64_t>(get("kv_store_reload_tokens"))) << ", NVMe "
        << grouped(static_cast<uint64_t>(get("kv_nvme_reload_tokens"))) << "; not in the hit rates above)\n";
  }
  // An autoscaled run (no [faults] with it) has its own line below.
  const bool elastic = fleet_value("replica_provisions").has_value();
  if (fleet_value("replica_failures")) {
    auto get = [&](const char* name) { return fleet_value(name).value_or(0.0); };
    // Autoscaled: the fleet line only when something failed or slowed ([faults] with the autoscaler).
    if (!elastic || get("replica_failures") > 0 || get("replica_speed_changes") > 0 || get("link_failures") > 0 ||
        get("link_speed_changes") > 0)
      out << "fleet        " << grouped(static_cast<uint64_t>(get("replica_failures"))) << " replica failures ("
        << grouped(static_cast<uint64_t>(get("replica_repairs"))) << " repaired, " << fixed(get("replica_down_seconds"), 1)
        << " replica-seconds down), " << grouped(static_cast<uint64_t>(get("requests_rerouted")))
        << " requests rerouted and recomputed, " << grouped(static_cast<uint64_t>(get("requests_failed")))
        << " failed, " << grouped(static_cast<uint64_t>(get("replica_speed_changes"))) << " straggler events"
        << (fleet_value("link_failures") ? ", " + grouped(static_cast<uint64_t>(get("link_failures"))) +
                                               " link failures (" + grouped(static_cast<uint64_t>(get("link_repairs"))) +
                                               " repaired)"
                                         : std::string())
        << (fleet_value("link_speed_changes")
                ? ", " + grouped(static_cast<uint64_t>(get("link_speed_changes"))) + " link speed changes"
                : std::string())
        << "\n";
    if (elastic)
      out << "autoscaling  " << grouped(static_cast<uint64_t>(get("replica_provisions"))) << " replicas provisioned, "
          << grouped(static_cast<uint64_t>(get("replica_drains"))) << " drained; " << fixed(get("replicas_mean"), 2)
          << " replicas provisioned on average (peak " << grouped(static_cast<uint64_t>(get("replicas_peak")))
          << "), " << fixed(get("provisioned_gpu_hours"), 3) << " GPU-hours provisioned\n";
    if (elastic && fleet_value("decode_provisioned_gpu_hours"))  // disaggregated: per pool
      out << "  by pool    prefill " << grouped(static_cast<uint64_t>(get("prefill_replica_provisions")))
          << " provisioned, " << fixed(get("prefill_replicas_mean"), 2) << " replicas on average, "
          << fixed(get("prefill_provisioned_gpu_hours"), 3) << " GPU-hours; decode "
          << grouped(static_cast<uint64_t>(get("decode_replica_provisions"))) << " provisioned, "
          << fixed(get("decode_replicas_mean"), 2) << " replicas on average, "
          << fixed(get("decode_provisioned_gpu_hours"), 3) << " GPU-hours\n";
  }
  if (const auto clients = fleet_value("client_requests")) {
    auto get = [&](const char* name) { return fleet_value(name).value_or(0.0); };
    auto ms = [&](const char* name) {
      const double v = get(name);
      return std::isnan(v) ? std::string("-") : fixed(v, 1);
    };
    out << "clients      " << grouped(static_cast<uint64_t>(*clients)) << " client requests sent "
        << grouped(static_cast<uint64_t>(get("retry_attempts"))) << " retries (" << fixed(get("retry_amplification"), 2)
        << " attempts each); " << percent(get("client_success_rate")) << " answered, "
        << grouped(static_cast<uint64_t>(get("client_gave_up"))) << " gave up; within the SLO from the first send "
        << percent(get("client_slo_attainment")) << ", TTFT p50 / p99 " << ms("client_ttft_ms_p50") << " / "
        << ms("client_ttft_ms_p99") << " ms, E2E p50 / p99 " << ms("client_e2e_ms_p50") << " / "
        << ms("client_e2e_ms_p99") << " ms\n";
  }
  print_classes(out, s);
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
  j["decoding"] = r.decoding_kind;
  j["percentiles"] = s.percentiles;
  j["percentile_relative_error"] = s.percentile_relative_error;
  const std::pair<std::string, const metrics::LatencyStats*> latencies[] = {
      {"ttft_ms", &s.ttft_ms},          {"tpot_ms", &s.tpot_ms},          {"itl_ms", &s.itl_ms},
      {"e2e_ms", &s.e2e_ms},            {"ttft_ms_window", &s.steady.ttft_ms}, {"tpot_ms_window", &s.steady.tpot_ms},
      {"e2e_ms_window", &s.steady.e2e_ms}};
  // Everything the database stores, with each latency's statistics as one nested object.
  for (const auto& v : metrics::flatten(s)) {
    bool is_latency = false;
    for (const auto& [prefix, stats] : latencies) {
      bool match = false;
      for (const char* stat : {"_mean", "_p50", "_p90", "_p99"}) match = match || v.name == prefix + stat;
      if (!match) continue;
      is_latency = true;
      if (!j.contains(prefix))
        j[prefix] = {{"mean", stats->mean}, {"p50", stats->p50}, {"p90", stats->p90}, {"p99", stats->p99}};
    }
    if (is_latency) continue;
    if (v.integer) j[v.name] = static_cast<int64_t>(v.value); else j[v.name] = v.value;
  }
  if (s.rejected_admission > 0) j["rejected_admission"] = s.rejected_admission;
  if (!s.fleet.empty()) {  // fleet dynamics and client retries (the fleet_metrics table)
    nlohmann::ordered_json fleet;
    for (const auto& v : s.fleet) {
      if (v.nullable && std::isnan(v.value))
        fleet[v.name] = nullptr;
      else if (v.integer)
        fleet[v.name] = static_cast<int64_t>(v.value);
      else
        fleet[v.name] = v.value;
    }
    j["fleet"] = fleet;
  }
  if (!s.classes.empty()) {
    nlohmann::ordered_json classes = nlohmann::ordered_json::array();
    for (const auto& c : s.classes) {
      nlohmann::ordered_json e;
      e["class"] = c.name;
      e["tenant"] = c.tenant;
      for (const auto& v : metrics::flatten(c)) {
        if (v.nullable && std::isnan(v.value))
          e[v.name] = nullptr;
        else if (v.integer)
          e[v.name] = static_cast<int64_t>(v.value);
        else
          e[v.name] = v.value;
      }
      classes.push_back(e);
    }
    j["classes"] = classes;
  }
  return j;
}

// The headline figures of replications: name in the summary, label, decimals, scale.
struct ReplicatedRow {
  const char* name;
  const char* label;
  int digits;
  double scale;
};
constexpr ReplicatedRow kReplicatedRows[] = {
    {"requests_total", "requests", 0, 1},
    {"window_requests", "requests in the window", 0, 1},
    {"ttft_ms_window_mean", "TTFT mean (ms)", 1, 1},
    {"ttft_ms_window_p50", "TTFT p50 (ms)", 1, 1},
    {"ttft_ms_window_p90", "TTFT p90 (ms)", 1, 1},
    {"ttft_ms_window_p99", "TTFT p99 (ms)", 1, 1},
    {"tpot_ms_window_p50", "TPOT p50 (ms)", 2, 1},
    {"tpot_ms_window_p90", "TPOT p90 (ms)", 2, 1},
    {"tpot_ms_window_p99", "TPOT p99 (ms)", 2, 1},
    {"itl_ms_p99", "ITL p99 (ms, whole run)", 2, 1},
    {"e2e_ms_window_p50", "E2E p50 (ms)", 1, 1},
    {"e2e_ms_window_p90", "E2E p90 (ms)", 1, 1},
    {"e2e_ms_window_p99", "E2E p99 (ms)", 1, 1},
    {"throughput_req_s_window", "throughput (req/s)", 3, 1},
    {"throughput_output_tok_s_window", "output tokens/s", 1, 1},
    {"goodput_req_s_window", "goodput (req/s)", 3, 1},
    {"slo_attainment_window", "SLO attainment (%)", 2, 100},
    {"cost_usd_per_mtok_output_window", "$ per 1M output tokens", 4, 1},
    {"in_system_mean", "requests in the system", 1, 1},
};

void print_replications(std::ostream& out, const ReplicationResult& r, const std::string& config_path,
                        const std::string& db, const std::string& csv) {
  const RunResult& first = r.runs.front();
  const size_t n = r.runs.size();
  out << "servesim " << SERVESIM_VERSION << "  " << config_path << "  (" << n << " replications, seeds "
      << first.info.seed << " to " << r.runs.back().info.seed << ": "
      << (r.resampled ? "each replays a block bootstrap of the trace" : "arrivals and lengths drawn afresh") << ")\n";
  print_cluster(out, first);
  size_t stationary = 0;
  for (const auto& run : r.runs) stationary += run.summary.steady.stationary ? 1 : 0;
  out << "\n" << std::left << std::setw(32) << (first.measurement.custom() ? "measurement window" : "arrival window")
      << std::right << std::setw(15) << "mean" << std::setw(25) << "95% interval" << "    (Student t over the " << n
      << " replications)\n";
  for (const ReplicatedRow& row : kReplicatedRows) {
    const ReplicatedMetric* m = find_metric(r.metrics, row.name);
    if (!m) continue;
    const metrics::Interval& i = m->interval;
    std::ostringstream interval;
    if (i.known())
      interval << "[" << fixed(i.lo() * row.scale, row.digits) << ", " << fixed(i.hi() * row.scale, row.digits) << "]";
    else
      interval << "-";
    out << "  " << std::left << std::setw(30) << row.label << std::right << std::setw(15)
        << fixed(i.mean * row.scale, row.digits) << std::setw(25) << interval.str() << "\n";
  }
  out << "\nsteady state " << stationary << " of " << n << " replications stationary";
  if (stationary < n) out << "; the others' queues still grow at the end: not sustainable at this rate";
  out << "\n";
  if (!db.empty())
    out << "results      runs " << r.runs.front().info.run_id << " to " << r.runs.back().info.run_id << " in " << db << "\n";
  if (!csv.empty()) out << "csv          " << csv << "/{runs,requests,replica_timeseries}.csv\n";
}

nlohmann::ordered_json replications_json(const ReplicationResult& r, const std::string& db) {
  nlohmann::ordered_json j;
  j["replications"] = r.runs.size();
  j["resampled_trace"] = r.resampled;
  j["interval"] = "95% Student t over replications";
  nlohmann::ordered_json seeds = nlohmann::ordered_json::array(), ids = nlohmann::ordered_json::array();
  int64_t stationary = 0;
  for (const auto& run : r.runs) {
    seeds.push_back(run.info.seed);
    ids.push_back(run.info.run_id);
    stationary += run.summary.steady.stationary ? 1 : 0;
  }
  j["seeds"] = seeds;
  j["db"] = db.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(db);
  j["run_ids"] = ids;
  j["stationary_replications"] = stationary;
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); };
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  for (const ReplicatedMetric& m : r.metrics) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (double v : m.values) values.push_back(number(v));
    metrics[m.name] = {{"mean", number(m.interval.mean)},
                       {"ci95_low", number(m.interval.lo())},
                       {"ci95_high", number(m.interval.hi())},
                       {"half_width", number(m.interval.half_width)},
                       {"values", values}};
  }
  j["metrics"] = metrics;
  return j;
}

void print_prediction(std::ostream& out, const PredictionResult& r, const std::string& config_path,
                      const std::string& db, const std::string& csv) {
  const size_t n = r.draws.size();
  const hwmodels::CalibrationUncertainty& u = r.source.uncertainty;
  const std::string pct = fixed(100 * r.level, 0) + "%";
  out << "servesim " << SERVESIM_VERSION << "  " << config_path << "  (the run as configured and " << n
      << " draws of the calibration error, seed " << r.point.info.seed << ")\n";
  print_cluster(out, r.point);
  out << "calibration  " << r.source.profile << ": " << u.residuals << (u.held_out ? " held-out" : " in-sample")
      << " residuals of its serving fit; step time RMS " << fixed(100 * u.step_log_rms, 2) << "%, client path RMS "
      << fixed(u.frontend_rms_s * 1e3, 2) << " ms, correlation " << fixed(u.correlation, 2) << "\n";
  out << "\n" << std::left << std::setw(32) << (r.point.measurement.custom() ? "measurement window" : "arrival window")
      << std::right << std::setw(15) << "as configured" << std::setw(25) << pct + " prediction" << "    (quantiles of the "
      << n << " draws)\n";
  for (const ReplicatedRow& row : kReplicatedRows) {
    const PredictedMetric* m = find_predicted(r.metrics, row.name);
    if (!m) continue;
    std::ostringstream interval;
    if (std::isfinite(m->lo))
      interval << "[" << fixed(m->lo * row.scale, row.digits) << ", " << fixed(m->hi * row.scale, row.digits) << "]";
    else
      interval << "-";
    out << "  " << std::left << std::setw(30) << row.label << std::right << std::setw(15)
        << (std::isfinite(m->point) ? fixed(m->point * row.scale, row.digits) : std::string("-")) << std::setw(25)
        << interval.str() << "\n";
  }
  const double tail = (1 - r.level) / 2;
  const hwmodels::CalibrationDraw lo = hwmodels::calibration_quantile(u, tail), hi = hwmodels::calibration_quantile(u, 1 - tail);
  out << "\nthe interval's ends as settings (for a capacity search or a sweep axis): prediction.step_scale = "
      << fixed(lo.step_scale, 4) << " / " << fixed(hi.step_scale, 4) << " with prediction.frontend_offset_ms = "
      << fixed(lo.frontend_offset_s * 1e3, 2) << " / " << fixed(hi.frontend_offset_s * 1e3, 2) << "\n";
  if (std::isnan(r.p_meets_slo))
    out << "P(meets the SLO): - (no [slo] set)\n";
  else
    out << "P(meets the SLO) " << fixed(100 * r.p_meets_slo, 0) << "%: the draws whose window SLO attainment is at "
        << "least " << fixed(100 * r.slo_target, 1) << "%\n";
  if (!db.empty())
    out << "results      runs " << r.point.info.run_id << " (as configured) and " << r.draws.front().info.run_id << " to "
        << r.draws.back().info.run_id << " (the draws) in " << db << "\n";
  if (!csv.empty()) out << "csv          " << csv << "/{runs,requests,replica_timeseries}.csv\n";
}

nlohmann::ordered_json prediction_json(const PredictionResult& r, const std::string& db) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); };
  const hwmodels::CalibrationUncertainty& u = r.source.uncertainty;
  nlohmann::ordered_json j;
  j["prediction_draws"] = r.draws.size();
  j["level"] = r.level;
  j["interval"] = "quantiles of the draws of the calibration error";
  j["calibration"] = {{"profile", r.source.profile},         {"residuals", u.residuals},
                      {"held_out", u.held_out},             {"step_log_rms", u.step_log_rms},
                      {"frontend_rms_ms", u.frontend_rms_s * 1e3}, {"correlation", u.correlation}};
  nlohmann::ordered_json draws = nlohmann::ordered_json::array(), ids = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.draws.size(); ++i) {
    draws.push_back({{"step_scale", r.errors[i].step_scale}, {"frontend_offset_ms", r.errors[i].frontend_offset_s * 1e3}});
    ids.push_back(r.draws[i].info.run_id);
  }
  j["draws"] = draws;
  j["db"] = db.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(db);
  j["run_id"] = r.point.info.run_id;
  j["draw_run_ids"] = ids;
  const double tail = (1 - r.level) / 2;
  const hwmodels::CalibrationDraw lo = hwmodels::calibration_quantile(u, tail), hi = hwmodels::calibration_quantile(u, 1 - tail);
  j["interval_ends"] = {{"step_scale", {lo.step_scale, hi.step_scale}},
                        {"frontend_offset_ms", {lo.frontend_offset_s * 1e3, hi.frontend_offset_s * 1e3}}};
  j["slo_target"] = r.slo_target;
  j["p_meets_slo"] = number(r.p_meets_slo);
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  for (const PredictedMetric& m : r.metrics) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (double v : m.values) values.push_back(number(v));
    metrics[m.name] = {{"value", number(m.point)}, {"low", number(m.lo)}, {"high", number(m.hi)}, {"draws", values}};
  }
  j["metrics"] = metrics;
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
       "how many were dropped)")
      ("replications", po::value<int64_t>(),
       "run N independent replications (seed, seed + 1, ...; a trace replays block bootstraps of itself) and report "
       "each figure's mean with a 95% interval")
      ("prediction-draws", po::value<int64_t>(),
       "also run N draws of the calibration error (the GPU profile's [uncertainty]: the serving fit's residuals) and "
       "report each figure with its prediction interval and the probability of meeting the SLO")
      ("prediction-level", po::value<double>()->default_value(0.9), "with --prediction-draws: the intervals' level")
      ("slo-target", po::value<double>()->default_value(0.9),
       "with --prediction-draws: the window SLO attainment that counts as meeting the SLO")
      ("jobs,j", po::value<int>()->default_value(0),
       "with --replications or --prediction-draws: simulations in parallel (0 = all cores)");
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
  // Replications and prediction draws: each run is the configuration with the command's --set
  // overrides and its own, run on --jobs threads into the same outputs.
  const auto load_with = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> all = sets;
    all.insert(all.end(), extra.begin(), extra.end());
    return load_run_config(config, all);
  };
  const auto outputs_of_runs = [&](ReplicationOptions& o) {
    o.jobs = vm["jobs"].as<int>();
    if (o.jobs < 0) throw UsageError("--jobs must be 0 (all cores) or positive");
    o.db_path = db;
    o.csv_dir = csv;
    o.check = vm.count("check") > 0;
  };
  if (vm.count("prediction-draws")) {
    if (vm.count("replications"))
      throw UsageError("--prediction-draws and --replications: give one (the draws keep the seed, so that only the "
                       "calibration error moves)");
    if (!timeline.empty()) throw UsageError("--timeline records one run; drop it or --prediction-draws");
    PredictionOptions options;
    options.draws = vm["prediction-draws"].as<int64_t>();
    options.level = vm["prediction-level"].as<double>();
    options.slo_target = vm["slo-target"].as<double>();
    if (!(options.slo_target >= 0 && options.slo_target <= 1))
      throw UsageError("--slo-target is a fraction in [0, 1], got " + core::format_double(options.slo_target));
    outputs_of_runs(options.run);
    const PredictionResult r = run_prediction(load_with, options);
    if (vm.count("json"))
      out << prediction_json(r, db).dump() << "\n";
    else
      print_prediction(out, r, config, db, csv);
    return 0;
  }
  if (!vm["prediction-level"].defaulted() || !vm["slo-target"].defaulted())
    throw UsageError("--prediction-level and --slo-target go with --prediction-draws N");
  if (vm.count("replications")) {
    ReplicationOptions options;
    options.count = vm["replications"].as<int64_t>();
    if (options.count < 2) throw UsageError("--replications needs at least 2, got " + std::to_string(options.count));
    if (!timeline.empty()) throw UsageError("--timeline records one run; drop it or --replications");
    outputs_of_runs(options);
    const ReplicationResult r = run_replications(load_with, options);
    if (vm.count("json"))
      out << replications_json(r, db).dump() << "\n";
    else
      print_replications(out, r, config, db, csv);
    return 0;
  }
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
    {"run", "CONFIG.toml [--set section.key=value ...] [--db FILE] [--no-db] [--csv DIR] [--json] [--check] [--timeline FILE] [--replications N [--jobs N]]",
     "simulate the serving cluster a configuration describes; print a summary and write the results\n"
     "(runs, requests, replica_timeseries) to the SQLite database",
     cmd_run});

}  // namespace
}  // namespace servesim::experiments
