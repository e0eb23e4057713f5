#include "calibration/validate.h"

#include <cmath>
#include <memory>

#include "calibration/fit.h"
#include "hwmodels/roofline.h"
#include "hwmodels/roofline_cost_model.h"
#include "sim/core/error.h"

namespace servesim::calibration {

Validation validate_operator_table(const OperatorTable& table, const hwmodels::GpuSpec& gpu,
                                   const hwmodels::CalibrationProfile* profile, int64_t min_tokens) {
  hwmodels::RooflineParams params;
  hwmodels::ProfileUse use;
  if (profile) use = hwmodels::apply_profile_scalars(*profile, params, [](std::string_view) { return false; });
  std::map<int64_t, std::unique_ptr<hwmodels::RooflineCostModel>> models;
  Validation v;
  std::map<std::string, double> sums;
  double total = 0;
  for (const std::string& op : table.ops) {
    const hwmodels::RooflineCostModel probe(table.model, gpu, 1, params, profile, use);
    if (!probe.operator_seconds(op, 1)) v.skipped_ops.push_back(op);
  }
  for (const OperatorRow& row : table.rows) {
    if (row.num_tokens < min_tokens) continue;
    auto it = models.find(row.tensor_parallel);
    if (it == models.end()) {
      if (const std::string why = hwmodels::tp_problem(table.model, row.tensor_parallel); !why.empty())
        throw core::InputError(table.source, row.line, "num_tensor_parallel_workers", why);
      it = models
               .emplace(row.tensor_parallel, std::make_unique<hwmodels::RooflineCostModel>(
                                                 table.model, gpu, row.tensor_parallel, params, profile, use))
               .first;
    }
    for (const auto& [op, measured] : row.median_ms) {
      const std::optional<double> predicted = it->second->operator_seconds(op, static_cast<double>(row.num_tokens));
      if (!predicted) continue;
      ValidationRow r{row.line, row.num_tokens, row.tensor_parallel, op, measured, *predicted * 1e3};
      const double ape = std::fabs(r.predicted_ms - measured) / measured;
      sums[op] += ape;
      ++v.rows_by_op[op];
      total += ape;
      v.rows.push_back(std::move(r));
    }
  }
  if (v.rows.empty())
    throw core::Error(table.source + ": no row with num_tokens >= " + std::to_string(min_tokens) +
                      " and an operator the model knows");
  for (const auto& [op, sum] : sums) v.mape_by_op[op] = sum / static_cast<double>(v.rows_by_op[op]);
  v.mape_overall = total / static_cast<double>(v.rows.size());
  return v;
}

std::vector<HeldOut> leave_one_model_out(const OperatorData& data, const hwmodels::GpuSpec& gpu, int64_t min_tokens) {
  if (data.tables.size() < 2) throw core::Error("leave-one-model-out needs measured tables of at least two models");
  std::vector<HeldOut> out;
  for (size_t i = 0; i < data.tables.size(); ++i) {
    OperatorData rest = data;
    rest.tables.erase(rest.tables.begin() + static_cast<std::ptrdiff_t>(i));
    const hwmodels::CalibrationProfile profile = fit_operator_profile(rest, gpu, "leave-one-model-out");
    out.push_back({data.tables[i].model_name, validate_operator_table(data.tables[i], gpu, &profile, min_tokens)});
  }
  return out;
}

}  // namespace servesim::calibration
