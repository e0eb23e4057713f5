#include "traces/length_distribution.h"

namespace servesim::traces {

DistributionRegistry& distribution_registry() {
  static DistributionRegistry registry("length_distributions",
                                       "token-count distributions of generated prompts and outputs");
  return registry;
}

LengthPair::LengthPair(const core::Params& p, uint64_t seed)
    : prompt_(distribution_registry().make(p.section("prompt"))),
      output_(distribution_registry().make(p.section("output"))),
      prompt_rng_(seed, "prompt"),
      output_rng_(seed, "output") {
  const std::string key = prompt_->table_key();
  joint_ = !key.empty() && key == output_->table_key() && prompt_->table_rows() == output_->table_rows() &&
           prompt_->table_rows() > 0;
  rows_ = joint_ ? prompt_->table_rows() : 0;
}

// Joint sampling is documented where users read parameters: `servesim list` and config errors.
static constexpr const char* kJointNote =
    "; an empirical prompt and output over the same file, format and order are sampled jointly (one "
    "row per request)";

core::ParamSpec prompt_section_spec() {
  return core::ParamSpec::section("prompt", "length_distributions", "",
                                  std::string("prompt length distribution (tokens)") + kJointNote);
}

core::ParamSpec output_section_spec() {
  return core::ParamSpec::section("output", "length_distributions", "",
                                  std::string("output length distribution (tokens)") + kJointNote);
}

}  // namespace servesim::traces
