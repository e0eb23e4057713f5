#include "calibration/shipped_profiles.h"

#include <cstdlib>
#include <filesystem>

#include "sim/core/format.h"

namespace servesim::calibration {

std::string executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::vector<std::string> profile_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("SERVESIM_PROFILE_DIR"); env && *env) dirs.emplace_back(env);
  if (const std::string exe = executable_dir(); !exe.empty()) {
    dirs.push_back((std::filesystem::path(exe) / ".." / "calibration" / "profiles").lexically_normal().string());
    dirs.push_back((std::filesystem::path(exe) / ".." / "share" / "servesim" / "profiles").lexically_normal().string());
  }
  return dirs;
}

std::vector<std::string> microbench_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("SERVESIM_MICROBENCH"); env && *env) out.emplace_back(env);
  if (const std::string exe = executable_dir(); !exe.empty()) {
    out.push_back((std::filesystem::path(exe) / "calibration" / "servesim-microbench").string());
    out.push_back((std::filesystem::path(exe) / "servesim-microbench").string());
  }
  return out;
}

std::optional<std::string> shipped_profile(const std::string& gpu_name) {
  std::error_code ec;
  for (const std::string& dir : profile_search_path()) {
    const std::filesystem::path p = std::filesystem::path(dir) / (core::to_lower(gpu_name) + ".toml");
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return std::nullopt;
}

}  // namespace servesim::calibration
