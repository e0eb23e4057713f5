#pragma once
// Raw microbenchmark samples kept in SQLite beside the profile fitted to them, so a profile can be
// traced back to (and refitted from) its measurements. The database may be the results database of
// runs: the tables are separate (calibration_runs, calibration_samples).

#include <cstdint>
#include <string>

#include "calibration/microbench_samples.h"
#include "hwmodels/calibration_profile.h"

namespace servesim::calibration {

// Appends one calibration run (its profile as TOML) and every row of every raw file of `run`
// (each as a JSON object of its columns) in one transaction; returns the calibration run id.
// core::Error when the database cannot be written (nothing is written then).
int64_t store_microbench_samples(const std::string& db_path, const MicrobenchRun& run,
                                 const hwmodels::CalibrationProfile& profile);

}  // namespace servesim::calibration
