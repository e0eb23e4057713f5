#pragma once
// Where the calibrate command finds the microbenchmark binary built beside it. (The shipped
// profiles' search path is hwmodels::profile_search_path: runs select a GPU's shipped profile by
// default, so the lookup lives with the profile format.)

#include <string>
#include <vector>

namespace servesim::calibration {

// Where the microbenchmark binary built beside servesim may be, in search order:
// $SERVESIM_MICROBENCH, <executable>/calibration/servesim-microbench (a meson build directory),
// <executable>/servesim-microbench (an installation).
std::vector<std::string> microbench_candidates();

}  // namespace servesim::calibration
