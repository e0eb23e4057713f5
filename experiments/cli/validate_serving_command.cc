// servesim validate-serving: real serving benchmark results beside the simulation of the same load.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "experiments/cli/command.h"
#include "experiments/prediction.h"
#include "experiments/validate_serving.h"
#include "sim/core/format.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

std::string show(const ComparedFigure& f) {
  if (f.metric == "throughput") return fixed(f.measured, 3) + " req/s";
  if (f.metric == "failed") return fixed(f.measured, 0);
  return fixed(f.measured * 1e3, 2) + " ms";
}
std::string show_sim(const ComparedFigure& f) {
  if (f.metric == "throughput") return fixed(f.simulated, 3) + " req/s";
  if (f.metric == "failed") return fixed(f.simulated, 0);
  return fixed(f.simulated * 1e3, 2) + " ms";
}
std::string signed_percent(double e) { return (e >= 0 ? "+" : "") + fixed(100 * e, 1) + "%"; }

// The figures the summary reports (mean absolute error over the stages the server kept up with).
const std::pair<const char*, const char*> kSummary[] = {
    {"ttft", "mean"}, {"ttft", "p90"}, {"ttft", "p99"}, {"tpot", "mean"}, {"itl", "mean"},
    {"e2e", "mean"},  {"e2e", "p90"},  {"e2e", "p99"},
};

int cmd_validate_serving(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  po::options_description opts("servesim validate-serving options");
  std::vector<std::string> files;
  ValidateOptions o;
  int jobs = 0;
  int64_t draws = 0;
  std::string only;
  opts.add_options()
      ("help,h", "this help")
      ("results", po::value<std::vector<std::string>>(&files), "results files or inference-perf results directories")
      ("engine", po::value<std::string>(&o.engine)->default_value(o.engine), "the [engine] kind to simulate with")
      ("gpu", po::value<std::string>(&o.gpu), "GPU preset (required when the results do not say)")
      ("model", po::value<std::string>(&o.model), "[model] preset or config.json (default: mapped from the results)")
      ("tp", po::value<int64_t>(&o.tensor_parallel)->default_value(0), "tensor parallelism (default: the results')")
      ("calibration", po::value<std::string>(&o.calibration),
       "calibration profile, or none (default: the GPU's shipped profile)")
      ("set", po::value<std::vector<std::string>>(&o.sets)->composing(), "override a key of every simulation")
      ("seed", po::value<uint64_t>(&o.seed)->default_value(o.seed), "the simulations' seed")
      ("client-timeout", po::value<double>(&o.client_timeout_s)->default_value(o.client_timeout_s),
       "seconds after which the load generator gave up on a request (0 = never)")
      ("rate", po::value<double>(&o.rate), "arrival rate when a file does not say it (req/s)")
      ("duration", po::value<double>(&o.duration_s), "stage duration when a file does not say it (s)")
      ("stage", po::value<std::string>(&only), "only stages whose label contains this text")
      ("jobs,j", po::value<int>(&jobs)->default_value(0), "stages simulated in parallel (0 = all cores)")
      ("prediction-draws", po::value<int64_t>(&draws)->default_value(0),
       "also simulate every stage under N draws of the calibration error (the profile's [uncertainty]) and say "
       "whether each measured figure lies in its 90% prediction interval")
      ("print-config", "print each stage's simulation as a run configuration (servesim run can run it) and stop")
      ("json", "print one JSON object");
  const po::variables_map vm = parse_options(args, opts, "results", -1);
  if (vm.count("help")) {
    out << "usage: servesim validate-serving RESULTS... [--engine vllm-v1] [--gpu G] [--model M] [--json]\n\n" << opts
        << "\n";
    return 0;
  }
  if (files.empty()) throw UsageError("validate-serving needs a results file (servesim validate-serving --help)");
  if (o.client_timeout_s < 0 || o.rate < 0 || o.duration_s < 0 || jobs < 0)
    throw UsageError("--client-timeout, --rate, --duration and --jobs cannot be negative");
  std::vector<MeasuredStage> stages;
  for (const std::string& f : files)
    for (MeasuredStage& s : read_serving_results(f))
      if (only.empty() || s.label.find(only) != std::string::npos) stages.push_back(std::move(s));
  if (stages.empty()) throw UsageError("no stage matches --stage '" + only + "'");
  if (vm.count("print-config")) {
    for (const MeasuredStage& s : stages)
      out << "# " << s.label << " (" << s.source << ")\n" << stage_config(s, o) << "\n";
    return 0;
  }
  if (draws != 0 && (draws < 10 || draws > 10000))
    throw UsageError("--prediction-draws needs 10 to 10000 draws (the interval's ends are quantiles of them), got " +
                     std::to_string(draws));
  const std::vector<StageComparison> comparisons = validate_stages(stages, o, jobs);
  // With draws: each figure's 90% prediction interval (empty without).
  std::vector<std::vector<FigureInterval>> intervals;
  hwmodels::CalibrationUncertainty u;
  if (draws > 0) {
    u = stage_uncertainty(stages, o);
    intervals = figure_intervals(comparisons, validate_draws(stages, o, u, draws, jobs), 0.9);
  }
  // Figures of the stages the server kept up with inside their interval, and how many there are.
  int64_t inside = 0, checked = 0;
  for (size_t i = 0; i < intervals.size(); ++i) {
    if (!comparisons[i].comparable()) continue;
    for (size_t k = 0; k < comparisons[i].figures.size(); ++k) {
      const ComparedFigure& f = comparisons[i].figures[k];
      if (f.metric == "throughput" || f.metric == "failed") continue;
      ++checked;
      inside += intervals[i][k].contains(f.measured) ? 1 : 0;
    }
  }

  if (vm.count("json")) {
    nlohmann::ordered_json j;
    j["engine"] = o.engine;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const StageComparison& c : comparisons) {
      nlohmann::ordered_json s;
      s["label"] = c.measured.label;
      s["source"] = c.measured.source;
      s["format"] = c.measured.format;
      s["overloaded"] = c.measured.overloaded();
      s["saturation_mismatch"] = c.saturation_mismatch;
      s["corrections"] = c.measured.corrections;
      nlohmann::ordered_json figures = nlohmann::ordered_json::array();
      const size_t i = static_cast<size_t>(&c - comparisons.data());
      for (size_t k = 0; k < c.figures.size(); ++k) {
        const ComparedFigure& f = c.figures[k];
        nlohmann::ordered_json fig = {{"metric", f.metric},       {"stat", f.stat}, {"measured", f.measured},
                                      {"simulated", f.simulated}, {"error", f.error()}};
        if (!intervals.empty()) {
          const FigureInterval& iv = intervals[i][k];
          fig["low"] = std::isfinite(iv.lo) ? nlohmann::ordered_json(iv.lo) : nlohmann::ordered_json();
          fig["high"] = std::isfinite(iv.hi) ? nlohmann::ordered_json(iv.hi) : nlohmann::ordered_json();
          fig["inside"] = iv.contains(f.measured);
        }
        figures.push_back(fig);
      }
      s["figures"] = figures;
      s["simulated_completed"] = c.simulated.completed;
      s["simulated_failed"] = c.simulated.failed;
      list.push_back(s);
    }
    j["stages"] = list;
    nlohmann::ordered_json summary;
    for (const auto& [metric, stat] : kSummary)
      if (const auto e = mean_abs_error(comparisons, metric, stat))
        summary[std::string(metric) + "_" + stat + "_mae"] = *e;
    j["summary"] = summary;
    if (!intervals.empty())
      j["prediction"] = {{"draws", draws},       {"level", 0.9},
                         {"inside", inside},     {"figures", checked},
                         {"residuals", u.residuals}, {"step_log_rms", u.step_log_rms},
                         {"frontend_rms_ms", u.frontend_rms_s * 1e3}};
    out << j.dump() << "\n";
    return 0;
  }
  out << "validate-serving: " << comparisons.size() << " stages, engine " << o.engine << "\n";
  for (const StageComparison& c : comparisons) {
    const MeasuredStage& m = c.measured;
    out << "\n" << m.label << " (" << m.format << ", " << fixed(m.load.rate, 3) << " req/s for "
        << fixed(m.load.duration_s, 0) << " s";
    if (!m.earlier.empty()) out << ", after " << m.earlier.size() << " earlier stage" << (m.earlier.size() > 1 ? "s" : "");
    out << (m.overloaded() ? "; overloaded: " + std::to_string(m.failed) + " requests failed" : "") << ")\n";
    out << "  " << std::left << std::setw(18) << "figure" << std::right << std::setw(14) << "measured" << std::setw(14)
        << "simulated" << std::setw(10) << "error" << (intervals.empty() ? "" : "   90% prediction interval") << "\n";
    const size_t i = static_cast<size_t>(&c - comparisons.data());
    for (size_t k = 0; k < c.figures.size(); ++k) {
      const ComparedFigure& f = c.figures[k];
      out << "  " << std::left << std::setw(18) << (f.metric + " " + f.stat) << std::right << std::setw(14) << show(f)
          << std::setw(14) << show_sim(f) << std::setw(10) << signed_percent(f.error());
      if (!intervals.empty()) {
        ComparedFigure lo = f, hi = f;
        lo.simulated = intervals[i][k].lo;
        hi.simulated = intervals[i][k].hi;
        out << "   [" << show_sim(lo) << ", " << show_sim(hi) << "]"
            << (intervals[i][k].contains(f.measured) ? "" : "  outside");
      }
      out << "\n";
    }
    if (c.saturation_mismatch)
      out << "  ! the simulation " << (m.overloaded() ? "kept up" : "was overloaded") << " where the server "
          << (m.overloaded() ? "was overloaded" : "kept up") << "\n";
  }
  out << "\nmean |error| over the " << std::count_if(comparisons.begin(), comparisons.end(),
                                                       [](const StageComparison& c) { return c.comparable(); })
      << " stages the server kept up with:";
  for (const auto& [metric, stat] : kSummary)
    if (const auto e = mean_abs_error(comparisons, metric, stat)) out << " " << metric << " " << stat << " " << percent(*e) << ";";
  out << "\n";
  if (!intervals.empty())
    out << "prediction: " << inside << " of " << checked << " latency figures of those stages inside their 90% "
        << "prediction interval (" << draws << " draws of the calibration error: " << u.residuals << " residuals, step "
        << fixed(100 * u.step_log_rms, 2) << "%, client path " << fixed(u.frontend_rms_s * 1e3, 2) << " ms)\n";
  std::vector<std::string> notes;  // each correction once
  for (const StageComparison& c : comparisons)
    for (const std::string& note : c.measured.corrections) {
      const std::string line = "note (" + c.measured.format + "): " + note;
      if (std::find(notes.begin(), notes.end(), line) == notes.end()) notes.push_back(line);
    }
  for (const std::string& line : notes) out << line << "\n";
  return 0;
}

const bool kRegistered = register_command(
    {"validate-serving", "RESULTS... [--engine vllm-v1] [--gpu G] [--model M] [--tp N] [--stage TEXT] [--json]",
     "simulate the load of real serving benchmark results (the serving-runs table, inference-perf lifecycle\n"
     "metrics, vllm bench serve JSON) and compare TTFT, TPOT, ITL, E2E and throughput, stage by stage",
     cmd_validate_serving});

}  // namespace
}  // namespace servesim::experiments
