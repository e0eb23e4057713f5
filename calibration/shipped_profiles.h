#pragma once
// Where the calibration profiles shipped with servesim (calibration/profiles/<gpu>.toml) are found
// at run time, and where the calibrate command finds the microbenchmark binary built beside it.

#include <optional>
#include <string>
#include <vector>

namespace servesim::calibration {

// The directories searched for shipped profiles, in order: $SERVESIM_PROFILE_DIR, then
// <executable>/../calibration/profiles (a build directory inside the source tree), then
// <executable>/../share/servesim/profiles (an installation).
std::vector<std::string> profile_search_path();
// The shipped profile of a GPU preset (<dir>/<gpu>.toml in the first directory that has it).
std::optional<std::string> shipped_profile(const std::string& gpu_name);
// The directory of the running executable ("" when it cannot be told).
std::string executable_dir();
// Where the microbenchmark binary built beside servesim may be, in search order:
// $SERVESIM_MICROBENCH, <executable>/calibration/servesim-microbench (a meson build directory),
// <executable>/servesim-microbench (an installation).
std::vector<std::string> microbench_candidates();

}  // namespace servesim::calibration
