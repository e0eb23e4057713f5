// servesim calibrate: run the CUDA microbenchmarks built beside servesim on this machine's GPU and
// fit a calibration profile to their raw samples.
#include <boost/program_options.hpp>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "calibration/microbench_samples.h"
#include "calibration/sample_store.h"
#include "calibration/shipped_profiles.h"
#include "experiments/cli/command.h"
#include "sim/core/output_file.h"
#include "experiments/process.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/gpu_spec.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

// The exit codes of servesim-microbench (calibration/microbench/main.cu).
constexpr int kMicrobenchNoGpu = 3;
constexpr int kMicrobenchSomeFailed = 4;

std::string find_microbench(const std::string& given) {
  std::error_code ec;
  if (!given.empty()) {
    if (!std::filesystem::is_regular_file(given, ec)) throw UsageError("--microbench: no such file " + given);
    return given;
  }
  for (const std::string& c : calibration::microbench_candidates())
    if (std::filesystem::is_regular_file(c, ec)) return c;
  std::string looked;
  for (const std::string& c : calibration::microbench_candidates()) looked += "\n  " + c;
  throw core::Error(
      "the CUDA microbenchmarks are not built beside this servesim (looked for:" + looked +
      "\n). servesim builds them when nvcc is found (meson -Dcalibration=enabled makes that required); on a GPU "
      "machine with only the CUDA toolkit, run calibration/microbench/build_and_run.sh OUT_DIR there and then "
      "servesim fit --from-microbench OUT_DIR --out PROFILE.toml anywhere");
}

int cmd_calibrate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description opts("servesim calibrate options");
  std::string out_path, raw_dir, gpu_name, microbench, db;
  opts.add_options()
      ("help,h", "this help")
      ("out", po::value<std::string>(&out_path), "the profile to write (TOML)")
      ("raw-dir", po::value<std::string>(&raw_dir), "where the raw samples go (default: PROFILE.toml.raw/)")
      ("gpu", po::value<std::string>(&gpu_name), "the GPU's [gpu] preset name (default: told from the device name)")
      ("quick", "a short smoke run (few shapes, few repetitions): not for a profile you will use")
      ("microbench", po::value<std::string>(&microbench), "the servesim-microbench binary (default: built beside servesim)")
      ("db", po::value<std::string>(&db), "also keep the raw samples in this SQLite database");
  const po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    out << "usage: servesim calibrate --out PROFILE.toml [--raw-dir DIR] [--gpu NAME] [--db FILE]\n\n" << opts << "\n";
    return 0;
  }
  if (out_path.empty()) throw UsageError("calibrate needs --out PROFILE.toml");
  if (!gpu_name.empty()) gpu_name = hwmodels::gpu_preset(gpu_name).name;
  if (raw_dir.empty()) raw_dir = out_path + ".raw";
  core::PathPlan plan;
  plan.input(microbench, "--microbench");
  plan.output(out_path, "--out");
  plan.output(raw_dir, "--raw-dir");
  plan.output(db, "--db");
  plan.check();
  const std::string bin = find_microbench(microbench);

  std::vector<std::string> argv = {bin, "--out", raw_dir};
  if (!gpu_name.empty()) argv.insert(argv.end(), {"--gpu", gpu_name});
  if (vm.count("quick")) argv.push_back("--quick");
  err << "servesim calibrate: running " << bin << " (minutes on a GPU) ...\n";
  const ProcessResult r = run_process(argv);
  err << r.err;
  if (r.exit_code == kMicrobenchNoGpu)
    throw core::Error("no CUDA GPU is visible on this machine (" + bin +
                      " found none); run calibrate on the GPU machine, or bring raw samples from one to servesim fit "
                      "--from-microbench");
  if (r.exit_code != 0 && r.exit_code != kMicrobenchSomeFailed)
    throw core::Error(bin + " failed with exit code " + std::to_string(r.exit_code) + "; its output is above");
  if (r.exit_code == kMicrobenchSomeFailed)
    err << "servesim calibrate: some benchmarks failed; fitting what was measured\n";

  const calibration::MicrobenchRun run = calibration::read_microbench_dir(raw_dir);
  const std::string name = gpu_name.empty() ? calibration::gpu_of_run(run) : gpu_name;
  if (name.empty())
    throw UsageError("the device '" + (run.device.count("name") ? run.device.at("name") : std::string("?")) +
                     "' is not in the GPU catalogue: pass --gpu NAME (the raw samples are in " + raw_dir + ")");
  const hwmodels::GpuSpec& gpu = hwmodels::gpu_preset(name);
  std::string command = "servesim calibrate";
  for (const auto& a : args) command += " " + a;
  const hwmodels::CalibrationProfile p = calibration::fit_microbench_profile(run, gpu, command);
  hwmodels::write_calibration_profile(p, out_path);
  out << "wrote " << out_path << " for " << p.gpu << ": " << p.description << "\nraw samples in " << raw_dir << "\n";
  if (!db.empty())
    out << "raw samples stored in " << db << " (calibration_id " << calibration::store_microbench_samples(db, run, p)
        << ")\n";
  return 0;
}

const bool kRegistered = register_command(
    {"calibrate", "--out PROFILE.toml [--raw-dir DIR] [--gpu NAME] [--quick] [--db FILE]",
     "run the CUDA microbenchmarks built beside servesim on this machine's GPU and fit a calibration\n"
     "profile (fails with a clear message where no GPU or no microbenchmark binary is available)",
     cmd_calibrate});

}  // namespace
}  // namespace servesim::experiments
