// servesim fit: turn measurements into a calibration profile.
#include <boost/program_options.hpp>

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calibration/fit.h"
#include "calibration/microbench_samples.h"
#include "calibration/operator_csv.h"
#include "calibration/sample_store.h"
#include "calibration/shipped_profiles.h"
#include "calibration/step_latency_csv.h"
#include "experiments/cli/command.h"
#include "experiments/serving_fit.h"
#include "sim/core/output_file.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/gpu_spec.h"
#include "hwmodels/hf_config.h"
#include "sim/core/format.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

void print_profile_summary(std::ostream& out, const hwmodels::CalibrationProfile& p, const std::string& path) {
  out << "wrote " << path << " for " << p.gpu << ": " << p.description << "\n";
  auto line = [&](const char* what, bool have) { out << "  " << what << (have ? "  fitted\n" : "  -\n"); };
  line("gemm (compute over rows x weights, memory over bytes)", !p.gemm.empty());
  line("gemm_fp8", !p.gemm_fp8.empty());
  out << "  elementwise curves:";
  for (const auto& [kind, c] : p.elementwise) out << " " << kind;
  out << (p.elementwise.empty() ? " -" : "") << "\n";
  line("attention_prefill", !p.attention_prefill.empty());
  line("attention_decode (un-keyed)", !p.attention_decode.empty());
  out << "  attention_decode by head layout:";
  for (const auto& d : p.attention_decode_layouts) out << " [" << d.layout.name() << "]";
  out << (p.attention_decode_layouts.empty() ? " -" : "") << "\n";
  out << "  all_reduce GPU counts:";
  for (const auto& [n, ab] : p.all_reduce) out << " " << n;
  out << (p.all_reduce.empty() ? " -" : "") << "\n";
  line("send_recv", p.send_recv.has_value());
  line("host_copy", p.h2d_bandwidth.has_value());
  line("overhead", p.iteration_overhead_ms.has_value() || p.decode_iteration_overhead_ms.has_value());
}

std::string command_line(const std::vector<std::string>& args) {
  std::string s = "servesim fit";
  for (const auto& a : args) s += " " + a;
  return s;
}

// A step-latency row's model: a preset, or a config.json relative to the CSV's directory.
hwmodels::ModelSpec row_model(const std::string& model, const std::string& csv_path) {
  std::error_code ec;
  const std::filesystem::path beside = std::filesystem::path(csv_path).parent_path() / model;
  if (!hwmodels::find_model_preset(model) && std::filesystem::is_regular_file(beside, ec))
    return hwmodels::read_hf_config(beside.string());
  return hwmodels::model_by_name_or_file(model, "model column");
}

int fit_step_latencies(const std::string& path, std::string base_arg, bool cuda_graphs, const std::string& out_path,
                       const std::vector<std::string>& args, std::ostream& out) {
  const std::vector<calibration::StepLatencyRow> rows = calibration::read_step_latency_csv(path);
  const hwmodels::GpuSpec& gpu = hwmodels::gpu_preset(rows.front().gpu, "gpu column");
  std::vector<hwmodels::ModelSpec> models;
  for (const auto& r : rows) models.push_back(row_model(r.model, path));
  std::optional<hwmodels::CalibrationProfile> base;
  if (base_arg.empty()) {
    const std::optional<std::string> shipped = hwmodels::shipped_profile(gpu.name);
    if (!shipped)
      throw UsageError("no shipped calibration profile for " + gpu.name + " (searched " +
                       [] {
                         std::string dirs;
                         for (const auto& d : hwmodels::profile_search_path()) dirs += (dirs.empty() ? "" : ", ") + d;
                         return dirs;
                       }() +
                       "); pass --base PROFILE.toml, or --base none for the constant efficiencies");
    base_arg = *shipped;
  }
  if (base_arg != "none") {
    base = hwmodels::read_calibration_profile(base_arg);
    if (core::to_lower(base->gpu) != gpu.name)
      throw UsageError("--base: the profile describes GPU '" + base->gpu + "' but " + path + " measures " + gpu.name);
  }
  const calibration::OverheadFit fit =
      calibration::fit_step_latencies(rows, models, gpu, base ? &*base : nullptr, cuda_graphs);
  hwmodels::CalibrationProfile p = fit.profile;
  p.source = (p.source.empty() ? "" : p.source + "; then ") + command_line(args);
  p.description = (base ? p.description + "; " : std::string("constant efficiencies; ")) +
                  "engine overheads fitted to " + std::to_string(fit.rows.size()) + " step latencies of " + path;
  hwmodels::write_calibration_profile(p, out_path);
  out << "wrote " << out_path << " for " << gpu.name << " (base: " << base_arg << ")\n";
  out << "  prefill: " << core::format_double(p.iteration_overhead_ms.value_or(0)) << " ms per iteration, "
      << core::format_double(p.layer_overhead_us.value_or(0)) << " us per layer"
      << (fit.prefill_per_layer ? "" : " (one layer count: per-layer not separable, folded into per-iteration)") << "\n";
  out << "  decode:  " << core::format_double(p.decode_iteration_overhead_ms.value_or(0)) << " ms per iteration, "
      << core::format_double(p.decode_layer_overhead_us.value_or(0)) << " us per layer"
      << (fit.decode_per_layer ? "" : " (one layer count: per-layer not separable, folded into per-iteration)") << "\n\n";
  out << "  line  model                phase      measured   physics    fitted     held out (ms)\n";
  for (const auto& r : fit.rows)
    out << "  " << std::setw(4) << r.line << "  " << std::left << std::setw(20) << r.model.substr(0, 20) << " "
        << std::setw(8) << r.phase << std::right << std::setw(11) << fixed(r.measured_ms, 3) << std::setw(11)
        << fixed(r.physics_ms, 3) << std::setw(11) << fixed(r.predicted_ms, 3) << std::setw(11)
        << fixed(r.held_out_ms, 3) << "\n";
  out << "\n  MAPE " << percent(fit.mape) << " fitted on all rows; " << percent(fit.held_out_mape)
      << " predicting each row from a fit on the others\n";
  return 0;
}

int fit_microbench(const std::string& dir, const std::string& gpu_name, const std::string& db, const std::string& out_path,
                   const std::vector<std::string>& args, std::ostream& out) {
  const calibration::MicrobenchRun run = calibration::read_microbench_dir(dir);
  std::string name = gpu_name.empty() ? calibration::gpu_of_run(run) : gpu_name;
  if (name.empty())
    throw UsageError("cannot tell which GPU " + dir + " measured (device '" +
                     (run.device.count("name") ? run.device.at("name") : std::string("?")) +
                     "' is not in the catalogue): pass --gpu NAME");
  const hwmodels::GpuSpec& gpu = hwmodels::gpu_preset(name);
  const hwmodels::CalibrationProfile p = calibration::fit_microbench_profile(run, gpu, command_line(args));
  hwmodels::write_calibration_profile(p, out_path);
  print_profile_summary(out, p, out_path);
  if (!db.empty()) {
    const int64_t id = calibration::store_microbench_samples(db, run, p);
    out << "raw samples stored in " << db << " (calibration_id " << id << ")\n";
  }
  return 0;
}

// The mean |error| of a figure over `c`'s stages the server kept up with, as a percentage ("-" when none).
std::string mae_text(const std::vector<StageComparison>& c, const char* metric, const char* stat) {
  const auto e = mean_abs_error(c, metric, stat);
  return e ? percent(*e) : std::string("-");
}

int fit_serving(const std::vector<std::string>& files, const std::string& gpu_name, std::string base_arg,
                const std::string& engine, bool leave_one_out, int64_t coverage_draws, int jobs, const std::string& out_path,
                const std::vector<std::string>& args, std::ostream& out) {
  std::vector<MeasuredStage> stages;
  for (const std::string& f : files)
    for (MeasuredStage& s : read_serving_results(f)) stages.push_back(std::move(s));
  std::string gpu = gpu_name;
  for (const MeasuredStage& s : stages) {
    if (gpu.empty()) gpu = s.gpu;
    if (!gpu_name.empty() || s.gpu.empty() || s.gpu == gpu) continue;
    throw UsageError("the results measure more than one GPU (" + gpu + ", " + s.gpu + " in " + s.source +
                     "): fit one GPU at a time, or name it with --gpu");
  }
  if (gpu.empty()) throw UsageError("the results do not say which GPU they measured: pass --gpu NAME");
  const hwmodels::GpuSpec& g = hwmodels::gpu_preset(gpu, "--gpu");
  if (base_arg.empty()) {
    const std::optional<std::string> shipped = hwmodels::shipped_profile(g.name);
    if (!shipped)
      throw UsageError("no shipped calibration profile for " + g.name +
                       ": pass --base PROFILE.toml (the kernel tables the engine terms are fitted on)");
    base_arg = *shipped;
  }
  hwmodels::CalibrationProfile profile = hwmodels::read_calibration_profile(base_arg);
  if (core::to_lower(profile.gpu) != g.name)
    throw UsageError("--base: the profile describes GPU '" + profile.gpu + "' but the results measure " + g.name);
  ServingFitOptions o;
  o.validate.engine = engine;
  o.validate.gpu = g.name;
  o.validate.calibration = base_arg;
  o.leave_one_out = leave_one_out;
  o.jobs = jobs;
  o.progress = [&](const std::string& line) { out << "  " << line << "\n" << std::flush; };
  out << "fitting engine '" << engine << "' on " << stages.size() << " stages of " << files.size() << " file"
      << (files.size() == 1 ? "" : "s") << " (base profile " << base_arg << ")\n";
  const ServingFitResult r = fit_serving_runs(stages, o);
  apply_to_profile(r.params, engine, profile);
  profile.uncertainty = r.uncertainty;
  profile.source = (profile.source.empty() ? "" : profile.source + "; then ") + command_line(args);
  profile.description += "; engine '" + engine + "' terms fitted to " + std::to_string(stages.size()) +
                         " real serving stages";
  hwmodels::write_calibration_profile(profile, out_path);
  const ServingFitParams& p = r.params;
  out << "wrote " << out_path << ": [engine." << engine << "] api_server_ms " << core::format_double(p.api_server_ms)
      << " (fixed), stream_ms " << core::format_double(p.stream_ms) << ", first_token_ms "
      << core::format_double(p.first_token_ms) << ", sample_ms " << core::format_double(p.sample_ms)
      << ", async_scheduling " << (p.async_scheduling ? "true" : "false") << "; [attention] decode_memory_efficiency "
      << core::format_double(p.decode_efficiency) << "\n\n";
  out << "mean |error| over the stages the server kept up with     ttft mean  ttft p90  tpot mean  itl mean  e2e mean  e2e p90\n";
  auto row = [&](const std::string& name, const std::vector<StageComparison>& c) {
    out << "  " << std::left << std::setw(55) << name << std::right << std::setw(9) << mae_text(c, "ttft", "mean")
        << std::setw(10) << mae_text(c, "ttft", "p90") << std::setw(11) << mae_text(c, "tpot", "mean") << std::setw(10)
        << mae_text(c, "itl", "mean") << std::setw(10) << mae_text(c, "e2e", "mean") << std::setw(9)
        << mae_text(c, "e2e", "p90") << "\n";
  };
  row("fitted on every experiment", r.in_sample);
  if (leave_one_out) {
    for (const ServingFitResult::Fold& f : r.folds) row("  predicted without " + f.experiment, f.predicted);
    row("leave one experiment out (every stage held out)", r.held_out());
  }
  // The overloaded stages: the fact of overload and the failures under the client time-out.
  for (const StageComparison& c : leave_one_out ? r.held_out() : r.in_sample)
    if (c.measured.overloaded())
      out << "  overloaded " << c.measured.label << ": " << c.measured.failed << " failed, simulated "
          << c.simulated.failed << "\n";
  const hwmodels::CalibrationUncertainty& u = r.uncertainty;
  out << "\n[uncertainty] from " << u.residuals << (u.held_out ? " held-out" : " in-sample")
      << " stage residuals: step time RMS " << fixed(100 * u.step_log_rms, 2) << "%, client path RMS "
      << fixed(u.frontend_rms_s * 1e3, 2) << " ms, correlation " << fixed(u.correlation, 2) << "\n";
  if (coverage_draws > 0) {
    // Each experiment's stages predicted by the fold fitted without it, with the uncertainty of the
    // other experiments' held-out residuals.
    std::map<std::string, std::vector<std::string>> fold_sets;
    for (const ServingFitResult::Fold& f : r.folds) fold_sets[f.experiment] = f.params.overrides();
    const CoverageResult c = prediction_coverage(
        stages, r.held_out(), [&](const std::string& e) { return fold_sets.at(e); }, o.validate, coverage_draws, 0.9,
        jobs);
    out << "\ncoverage of the 90% prediction intervals, leave one experiment out (" << coverage_draws
        << " draws each):\n";
    for (const CoveredFigure& f : c.figures) {
      // TTFT and ITL in ms, E2E in s.
      const bool ms = f.metric != "e2e";
      const double k = ms ? 1e3 : 1.0;
      const int digits = ms ? 2 : 3;
      out << "  " << std::left << std::setw(44) << f.stage << std::setw(10) << (f.metric + " " + f.stat) << std::right
          << " measured " << std::setw(9) << fixed(f.measured * k, digits) << (ms ? " ms" : " s ") << "  interval ["
          << fixed(f.lo * k, digits) << ", " << fixed(f.hi * k, digits) << "]" << (f.covered() ? "" : "  OUTSIDE")
          << "\n";
    }
    out << "  covered " << c.covered << " of " << c.figures.size() << " (" << fixed(100 * c.fraction(), 1) << "%)\n";
  }
  return 0;
}

int cmd_fit(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  po::options_description opts("servesim fit options");
  std::string operator_dir, microbench_dir, step_csv, base, gpu_name, out_path, db;
  std::vector<std::string> exclude, serving_runs;
  std::string engine = "vllm-v1";
  int jobs = 0;
  opts.add_options()
      ("help,h", "this help")
      ("from-operator-csv", po::value<std::string>(&operator_dir),
       "directory of measured operator tables in the Vidur format (operator-profiles/, or one GPU's tables)")
      ("from-microbench", po::value<std::string>(&microbench_dir),
       "directory of raw samples written by the CUDA microbenchmarks (calibration/microbench/)")
      ("from-step-latencies", po::value<std::string>(&step_csv),
       "CSV model,gpu,tp,batch,prompt,prefill_ms,decode_step_ms of a real engine: fits its overheads only")
      ("from-serving-runs", po::value<std::vector<std::string>>(&serving_runs)->multitoken()->composing(),
       "real serving benchmark results (the serving-runs table, inference-perf or vllm bench serve JSON): fits the "
       "engine's client path, sampling time, async scheduling and the decode attention efficiency")
      ("engine", po::value<std::string>(&engine)->default_value(engine), "--from-serving-runs: the [engine] kind fitted")
      ("leave-one-out", "--from-serving-runs: also predict each experiment from a fit without it")
      ("coverage-draws", po::value<int64_t>()->default_value(0),
       "--from-serving-runs --leave-one-out: check the 90% prediction intervals' coverage with N draws per held-out "
       "experiment")
      ("jobs,j", po::value<int>(&jobs)->default_value(0), "--from-serving-runs: stages simulated in parallel (0 = all cores)")
      ("gpu", po::value<std::string>(&gpu_name), "the GPU the measurements were taken on (a [gpu] preset name)")
      ("exclude-model", po::value<std::vector<std::string>>(&exclude)->composing(),
       "--from-operator-csv: leave this model's table out (its directory name; repeatable)")
      ("base", po::value<std::string>(&base),
       "--from-step-latencies, --from-serving-runs: the profile to add overheads to (default: the shipped profile of the file's GPU; "
       "'none': constant efficiencies)")
      ("cuda-graphs", "--from-step-latencies: the engine replays decode iterations as CUDA graphs (as in runs with "
                      "cuda_graphs = true)")
      ("db", po::value<std::string>(&db), "--from-microbench: also keep the raw samples in this SQLite database")
      ("out", po::value<std::string>(&out_path), "the profile to write (TOML)");
  const po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    out << "usage: servesim fit --from-operator-csv DIR --gpu NAME --out PROFILE.toml\n"
           "       servesim fit --from-microbench RAW_DIR [--gpu NAME] [--db FILE] --out PROFILE.toml\n"
           "       servesim fit --from-step-latencies FILE.csv [--base PROFILE.toml] [--cuda-graphs] --out PROFILE.toml\n"
           "       servesim fit --from-serving-runs RESULTS... [--gpu NAME] [--base PROFILE.toml] [--leave-one-out] "
           "--out PROFILE.toml\n\n"
        << opts << "\n";
    return 0;
  }
  const int sources = !operator_dir.empty() + !microbench_dir.empty() + !step_csv.empty() + !serving_runs.empty();
  if (sources != 1)
    throw UsageError(
        "fit needs exactly one of --from-operator-csv, --from-microbench, --from-step-latencies, --from-serving-runs");
  if (jobs < 0) throw UsageError("--jobs cannot be negative");
  if (out_path.empty()) throw UsageError("fit needs --out PROFILE.toml");
  core::PathPlan plan;
  plan.input(operator_dir, "--from-operator-csv");
  plan.input(microbench_dir, "--from-microbench");
  plan.input(step_csv, "--from-step-latencies");
  for (const std::string& f : serving_runs) plan.input(f, "--from-serving-runs");
  if (base != "none") plan.input(base, "--base");
  plan.output(out_path, "--out");
  plan.output(db, "--db");
  plan.check();
  const int64_t coverage_draws = vm["coverage-draws"].as<int64_t>();
  if (!vm["coverage-draws"].defaulted() && (serving_runs.empty() || !vm.count("leave-one-out") || coverage_draws < 10 ||
                                           coverage_draws > 10000))
    throw UsageError("--coverage-draws N (10 <= N <= 10000) goes with --from-serving-runs --leave-one-out, got " +
                     std::to_string(coverage_draws));
  if (!serving_runs.empty())
    return fit_serving(serving_runs, gpu_name, base == "none" ? "" : base, engine, vm.count("leave-one-out") > 0,
                       coverage_draws, jobs, out_path, args, out);
  if (!step_csv.empty()) return fit_step_latencies(step_csv, base, vm.count("cuda-graphs") > 0, out_path, args, out);
  if (!microbench_dir.empty()) return fit_microbench(microbench_dir, gpu_name, db, out_path, args, out);
  if (gpu_name.empty()) throw UsageError("fit --from-operator-csv needs --gpu NAME: the GPU the tables were measured on");
  const hwmodels::GpuSpec& gpu = hwmodels::gpu_preset(gpu_name);
  const calibration::OperatorData data = calibration::read_operator_dir(operator_dir, gpu.name, exclude);
  const hwmodels::CalibrationProfile p = calibration::fit_operator_profile(data, gpu, command_line(args));
  hwmodels::write_calibration_profile(p, out_path);
  print_profile_summary(out, p, out_path);
  return 0;
}

const bool kRegistered = register_command(
    {"fit",
     "(--from-operator-csv DIR --gpu NAME | --from-microbench RAW_DIR [--db FILE] | --from-step-latencies FILE.csv "
     "[--base PROFILE] | --from-serving-runs RESULTS... [--leave-one-out]) --out PROFILE.toml",
     "fit a calibration profile to measurements: operator tables or the CUDA microbenchmarks' raw\n"
     "samples (efficiency tables, launch, all-reduce), a real engine's step latencies (overheads), or\n"
     "real serving runs (the engine's client path, sampling, async scheduling, decode attention)",
     cmd_fit});

}  // namespace
}  // namespace servesim::experiments
