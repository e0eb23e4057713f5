#pragma once
// servesim report: plots (PNG and SVG, drawn by gnuplot) and an index.html from a results database.
//
// Runs are grouped into configurations: runs whose resolved configurations differ only in the
// arrival-rate knob (workload.rate, workload.rate_scale) and the seeds form one configuration,
// labelled by the keys that differ between configurations. Plots:
//   goodput.{png,svg}         goodput vs offered arrival rate, one line per configuration, each
//                             point with its 95% interval (across the runs at that point, seeds or
//                             replications; for a single run, its window's batch-means interval)
//   slo_attainment.{png,svg}  SLO attainment vs offered arrival rate, with the target as a line
//                             and the same intervals
//   ttft_cdf, tpot_cdf        CDFs of TTFT and TPOT, one representative run per configuration (the
//                             one whose offered rate is nearest a common reference rate), with the
//                             SLO limit and the attainment target drawn
//   ttft_cdf_at_K, tpot_cdf_at_K  the same at each knob value every configuration ran (at most 6):
//                             configurations compared at the same rate
//   capacity.{png,svg}        for a capacity search's database: the sustainable rate per
//                             configuration with its interval, and the cliff (experiment key
//                             capacity_result, written by servesim capacity)
//   timeline_N.{png,svg}      per-replica queue length and KV-cache use over time for
//                             configuration N's representative run
// The data behind each plot is in DIR/data/ and the gnuplot script in DIR/plots.gp, so a plot can
// be restyled and redrawn with `gnuplot DIR/plots.gp`.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "experiments/results_db.h"

namespace servesim::experiments {

struct ReportOptions {
  std::string db_path;
  std::string out_dir;
  std::optional<double> reference_rate;  // offered req/s the CDFs and timelines are taken at (default: the median)
  double target = 0.9;                   // drawn on the SLO-attainment plot
  size_t max_timelines = 12;             // configurations that get a timeline figure
  size_t max_timeline_replicas = 16;     // replicas drawn per timeline
  bool run_gnuplot = true;               // false: write data, script and index.html only
};

struct ReportRun {
  int64_t run_id = 0;
  uint64_t seed = 0;
  std::string configuration;     // the grouping key
  std::optional<double> knob;    // workload.rate or workload.rate_scale
  double offered_req_s = 0;
  uint64_t requests_total = 0, requests_meeting_slo = 0;
  double goodput_req_s = 0, slo_attainment = 0;
  double ttft_ms_p50 = 0, ttft_ms_p90 = 0, ttft_ms_p99 = 0, tpot_ms_p50 = 0, tpot_ms_p90 = 0, tpot_ms_p99 = 0;
  double throughput_output_tok_s = 0, cost_usd_per_mtok_output = 0;
  // The run's [slo] limits (unset: none).
  std::optional<double> ttft_slo_ms, tpot_slo_ms;
  // Batch-means 95% half-widths of the window's goodput and attainment (NaN: unknown).
  double goodput_ci95 = std::numeric_limits<double>::quiet_NaN();
  double slo_attainment_ci95 = std::numeric_limits<double>::quiet_NaN();
};

// One configuration's runs at one knob value, pooled over seeds.
struct ReportPoint {
  std::optional<double> knob;
  double offered_req_s = 0;      // mean over the runs
  double goodput_req_s = 0;      // mean
  double slo_attainment = 0;     // pooled: meeting / total
  // 95% intervals (NaN: unknown): the Student-t interval of the runs' values when there are two or
  // more, else the single run's batch-means half-width around the plotted value.
  double goodput_lo = std::numeric_limits<double>::quiet_NaN(), goodput_hi = std::numeric_limits<double>::quiet_NaN();
  double slo_attainment_lo = std::numeric_limits<double>::quiet_NaN();
  double slo_attainment_hi = std::numeric_limits<double>::quiet_NaN();
  std::vector<size_t> runs;      // indices into ReportData::runs
};

// One configuration's answer from a capacity search (servesim capacity --db).
struct CapacityRow {
  std::string label;
  std::string status;
  std::optional<double> sustainable, lo, hi, cliff_from, margin;
  double lowest_failing = std::numeric_limits<double>::infinity();
  int64_t replications = 0;
};

// One request class of one run (table class_stats; runs with [[workload.classes]]).
struct ReportClassRow {
  int64_t run_id = 0;
  std::string name, tenant;
  int64_t priority = 0;
  uint64_t requests = 0, completed = 0, rejected_admission = 0;
  double ttft_ms_p99 = 0, tpot_ms_p99 = 0, goodput_req_s = 0, slo_attainment = 0;
};

// One figure of a run's fleet_metrics table (autoscaling, faults, client retries, the host KV tier).
struct ReportFleetRow {
  int64_t run_id = 0;
  std::string name;
  double value = 0;
};

struct ReportSeries {
  std::string label;
  std::vector<ReportPoint> points;  // by offered rate
  size_t representative = 0;        // index into ReportData::runs
};

struct ReportData {
  std::string db_path;
  ExperimentRecord experiment;   // empty identity for a database of plain runs
  std::string knob;              // the knob the runs vary ("" if none)
  double reference_rate = 0;
  std::vector<ReportRun> runs;
  std::vector<ReportSeries> series;
  std::vector<CapacityRow> capacity;  // a capacity search's answer, when the database holds one
  std::vector<ReportClassRow> classes;  // per run and class, when the database has class_stats
  std::vector<ReportFleetRow> fleet;    // per run, in the order written, when it has fleet_metrics
  std::string capacity_knob;
  double capacity_target = 0;
};

// Reads the runs and groups them. Throws core::Error naming the file when it holds no runs.
ReportData load_report(const ReportOptions& options);

// Writes DIR/data/*, DIR/plots.gp, runs gnuplot (PNG + SVG) and writes DIR/index.html. Returns the
// image files (PNG) written, relative to DIR. Throws core::Error when gnuplot is missing or fails.
std::vector<std::string> write_report(const ReportData& data, const ReportOptions& options);

}  // namespace servesim::experiments
