#pragma once
// Predicting a measured operator table with the roofline model: the evidence of how good a
// calibration profile (or the defaults) is.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "calibration/operator_csv.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/gpu_spec.h"

namespace servesim::calibration {

struct ValidationRow {
  int64_t line = 0;
  int64_t num_tokens = 0;
  int64_t tensor_parallel = 0;
  std::string op;
  double measured_ms = 0;
  double predicted_ms = 0;
};

struct Validation {
  double mape_overall = 0;                    // mean over every (row, operator) compared
  std::map<std::string, double> mape_by_op;   // mean absolute percentage error, as a fraction
  std::map<std::string, size_t> rows_by_op;
  std::vector<ValidationRow> rows;
  std::vector<std::string> skipped_ops;       // columns the model has no operator for
};

// Predicts every row with num_tokens >= min_tokens: one execution of each operator on
// num_tokens rows, on one GPU of the row's tensor-parallel group, with the profile's tables (or
// the [cost_model] defaults when `profile` is null). Throws core::Error when nothing is compared.
Validation validate_operator_table(const OperatorTable& table, const hwmodels::GpuSpec& gpu,
                                   const hwmodels::CalibrationProfile* profile, int64_t min_tokens = 1);

// Leave-one-model-out: for each model of `data`, fit a profile on the others and validate on it.
struct HeldOut {
  std::string model;
  Validation validation;
};
std::vector<HeldOut> leave_one_model_out(const OperatorData& data, const hwmodels::GpuSpec& gpu, int64_t min_tokens);

}  // namespace servesim::calibration
