#pragma once
// Builds models, GPUs and cost models from inline TOML, the way the simulator's config does.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwmodels/cost_model.h"
#include "hwmodels/expert_parallel.h"
#include "hwmodels/gpu_spec.h"
#include "hwmodels/model_spec.h"
#include "hwmodels/roofline_cost_model.h"
#include "sim/core/config.h"

namespace servesim::hwmodels::hwtest {

inline std::vector<core::ParamSpec> hw_schema() {
  using core::ParamSpec;
  return {ParamSpec::section("model", "models", "", "m"), ParamSpec::section("gpu", "gpus", "", "g"),
          ParamSpec::section("cost_model", "cost_models", "roofline", "c")};
}

inline core::Params parse_hw(const std::string& text) {
  return core::parse_config(text, "t.toml", hw_schema());
}

struct Hw {
  std::unique_ptr<ModelSpec> model;
  std::unique_ptr<GpuSpec> gpu;
  std::unique_ptr<StepCostModel> cost;
};

// A decode-only iteration of `seqs` sequences, each attending over `context_each` tokens.
inline BatchShape decode(int64_t seqs, int64_t context_each) {
  BatchShape s;
  s.decode_seqs = seqs;
  s.decode_context_tokens = seqs * context_each;
  return s;
}

// The operator `name` of a breakdown, or null.
inline const OperatorCost* find_op(const std::vector<OperatorCost>& ops, std::string_view name) {
  for (const auto& op : ops)
    if (op.name == name) return &op;
  return nullptr;
}

// `text` holds [model], [gpu] and optionally [cost_model].
inline Hw build_hw(const std::string& text, int64_t tp = 1) {
  const core::Params root = parse_hw(text);
  Hw hw;
  hw.model = model_registry().make(root.section("model"));
  hw.gpu = gpu_registry().make(root.section("gpu"));
  // The profile a [cost_model] calibration key names (the tests never pick a shipped one).
  std::optional<CalibrationProfile> profile;
  const core::Params& cm = root.section("cost_model");
  if (cm.has("calibration"))
    if (const std::optional<std::string> path = selected_calibration(cm, hw.gpu->name))
      profile = read_calibration_profile(*path);
  hw.cost = cost_model_registry().make(cm, *hw.model, *hw.gpu, tp, profile ? &*profile : nullptr, ExpertParallelism{});
  return hw;
}

inline std::string hw_config(const std::string& model, const std::string& gpu,
                             const std::string& extra_model_keys = "") {
  return "[model]\nkind = \"" + model + "\"\n" + extra_model_keys + "\n[gpu]\nkind = \"" + gpu + "\"\n";
}

}  // namespace servesim::hwmodels::hwtest
