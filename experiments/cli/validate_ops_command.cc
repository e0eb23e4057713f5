// servesim validate-ops: predict a measured operator table (Vidur's mlp.csv) and report the error.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "calibration/operator_csv.h"
#include "calibration/validate.h"
#include "experiments/cli/command.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/gpu_spec.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

int cmd_validate_ops(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  po::options_description opts("servesim validate-ops options");
  std::string profile, gpu_name, calibration;
  int64_t min_tokens = 1;
  opts.add_options()
      ("help,h", "this help")
      ("profile", po::value<std::string>(&profile), "measured operator table (Vidur mlp.csv)")
      ("gpu", po::value<std::string>(&gpu_name), "GPU the table was measured on (a [gpu] preset name)")
      ("calibration", po::value<std::string>(&calibration), "calibration profile to predict with (default: the "
                                                            "roofline's constant efficiencies)")
      ("min-tokens", po::value<int64_t>(&min_tokens)->default_value(1), "compare rows with at least this many tokens")
      ("json", "print one JSON object: mape_overall, mape_by_op (percent), rows");
  const po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    out << "usage: servesim validate-ops --profile mlp.csv --gpu NAME [--calibration PROFILE.toml] [--json]\n\n"
        << opts << "\n";
    return 0;
  }
  if (profile.empty() || gpu_name.empty())
    throw UsageError("validate-ops needs --profile mlp.csv and --gpu NAME (servesim validate-ops --help)");
  require_option("--min-tokens", static_cast<double>(min_tokens), 1, 4294967296.0, "tokens of the rows compared");
  const hwmodels::GpuSpec& gpu = hwmodels::gpu_preset(gpu_name);
  const calibration::OperatorTable table = calibration::read_operator_csv(profile);
  std::optional<hwmodels::CalibrationProfile> cal;
  if (!calibration.empty()) cal = hwmodels::read_calibration_profile(calibration);
  const calibration::Validation v =
      calibration::validate_operator_table(table, gpu, cal ? &*cal : nullptr, min_tokens);

  constexpr double kPercent = 100.0;
  if (vm.count("json")) {
    nlohmann::ordered_json j;
    j["profile"] = profile;
    j["gpu"] = gpu.name;
    j["calibration"] = calibration.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(calibration);
    j["min_tokens"] = min_tokens;
    j["mape_overall"] = v.mape_overall * kPercent;
    j["mape_by_op"] = nlohmann::ordered_json::object();
    for (const auto& [op, mape] : v.mape_by_op) j["mape_by_op"][op] = mape * kPercent;
    j["skipped_ops"] = v.skipped_ops;
    j["rows"] = nlohmann::ordered_json::array();
    for (const auto& r : v.rows)
      j["rows"].push_back({{"line", r.line}, {"num_tokens", r.num_tokens}, {"tensor_parallel", r.tensor_parallel},
                           {"op", r.op}, {"measured_ms", r.measured_ms}, {"predicted_ms", r.predicted_ms}});
    out << j.dump() << "\n";
    return 0;
  }
  out << "validate-ops  " << profile << " on " << gpu.name << " with "
      << (calibration.empty() ? std::string("the default efficiencies") : calibration) << ", rows with >= "
      << min_tokens << " tokens\n\n";
  out << "  " << std::left << std::setw(26) << "operator" << std::right << std::setw(8) << "rows" << std::setw(10)
      << "MAPE" << "\n";
  for (const auto& [op, mape] : v.mape_by_op)
    out << "  " << std::left << std::setw(26) << op << std::right << std::setw(8) << v.rows_by_op.at(op)
        << std::setw(10) << percent(mape) << "\n";
  out << "  " << std::left << std::setw(26) << "overall" << std::right << std::setw(8) << v.rows.size()
      << std::setw(10) << percent(v.mape_overall) << "\n";
  if (!v.skipped_ops.empty()) {
    out << "\nnot compared (no such operator in the model):";
    for (const auto& op : v.skipped_ops) out << " " << op;
    out << "\n";
  }
  return 0;
}

const bool kRegistered = register_command(
    {"validate-ops", "--profile mlp.csv --gpu NAME [--calibration PROFILE.toml] [--min-tokens N] [--json]",
     "predict every row of a measured operator table (Vidur format) and print the mean absolute\n"
     "percentage error per operator and overall",
     cmd_validate_ops});

}  // namespace
}  // namespace servesim::experiments
