#pragma once
// servesim report: plots (PNG and SVG, drawn by gnuplot) and an index.html from a results database.
//
// Runs are grouped into configurations: runs whose resolved configurations differ only in the
// arrival-rate knob (workload.rate, workload.rate_scale) and the seeds form one configuration,
// labelled by the keys that differ between configurations. Plots:
//   goodput.{png,svg}         goodput vs offered arrival rate, one line per configuration
//   slo_attainment.{png,svg}  SLO attainment vs offered arrival rate, with the target as a line
//   ttft_cdf, tpot_cdf        CDFs of TTFT and TPOT, one representative run per configuration (the
//                             one whose offered rate is nearest a common reference rate)
//   timeline_N.{png,svg}      per-replica queue length and KV-cache use over time for
//                             configuration N's representative run
// The data behind each plot is in DIR/data/ and the gnuplot script in DIR/plots.gp, so a plot can
// be restyled and redrawn with `gnuplot DIR/plots.gp`.

#include <cstdint>
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
};

// One configuration's runs at one knob value, pooled over seeds.
struct ReportPoint {
  std::optional<double> knob;
  double offered_req_s = 0;      // mean over the runs
  double goodput_req_s = 0;      // mean
  double slo_attainment = 0;     // pooled: meeting / total
  std::vector<size_t> runs;      // indices into ReportData::runs
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
};

// Reads the runs and groups them. Throws core::Error naming the file when it holds no runs.
ReportData load_report(const ReportOptions& options);

// Writes DIR/data/*, DIR/plots.gp, runs gnuplot (PNG + SVG) and writes DIR/index.html. Returns the
// image files (PNG) written, relative to DIR. Throws core::Error when gnuplot is missing or fails.
std::vector<std::string> write_report(const ReportData& data, const ReportOptions& options);

}  // namespace servesim::experiments
