#include "calibration/shipped_profiles.h"

#include <cstdlib>
#include <filesystem>

#include "hwmodels/calibration_profile.h"

namespace servesim::calibration {

std::vector<std::string> microbench_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("SERVESIM_MICROBENCH"); env && *env) out.emplace_back(env);
  if (const std::string exe = hwmodels::executable_dir(); !exe.empty()) {
    out.push_back((std::filesystem::path(exe) / "calibration" / "servesim-microbench").string());
    out.push_back((std::filesystem::path(exe) / "servesim-microbench").string());
  }
  return out;
}

}  // namespace servesim::calibration
