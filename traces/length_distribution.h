#pragma once
// Distributions of token counts (prompt and output lengths) for the workload generators. Family
// "length_distributions"; a generator declares `prompt` and `output` sections of this family.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sim/core/params.h"
#include "sim/core/rng.h"

namespace servesim::traces {

class LengthDistribution {
 public:
  virtual ~LengthDistribution() = default;
  // One length, >= 1.
  virtual int64_t sample(core::Rng& rng) = 0;

  // Joint sampling. A distribution that draws rows of a table (kind "empirical") names the table
  // (file and format) here and gives row values through value_at(); others return "". When a
  // generator's prompt and output name the same table, it draws one row per request for both, so
  // that the trace's prompt/output correlation survives (see LengthPair).
  virtual std::string table_key() const { return {}; }
  virtual size_t table_rows() const { return 0; }
  virtual int64_t value_at(size_t row) const {
    (void)row;
    return 0;
  }
  // Rows replayed in order (row i for the i-th draw, cycling) rather than drawn at random.
  virtual bool sequential() const { return false; }
};

using DistributionRegistry = core::Registry<LengthDistribution>;
DistributionRegistry& distribution_registry();

// The prompt and output distributions of a generator, with their own random streams (so that
// changing one does not change the other's draws), sampled jointly when both are rows of one table.
class LengthPair {
 public:
  // Reads the `prompt` and `output` sections of `p`.
  LengthPair(const core::Params& p, uint64_t seed);

  void sample(int64_t& prompt, int64_t& output) {
    if (joint_) {
      // The prompt stream draws the row, exactly as prompt_->sample() would have; in order when
      // the rows are replayed.
      const size_t row = prompt_->sequential() ? static_cast<size_t>(next_row_++ % rows_)
                                               : static_cast<size_t>(prompt_rng_.uniform_int(rows_));
      prompt = prompt_->value_at(row);
      output = output_->value_at(row);
    } else {
      prompt = prompt_->sample(prompt_rng_);
      output = output_->sample(output_rng_);
    }
  }
  bool joint() const { return joint_; }

 private:
  std::unique_ptr<LengthDistribution> prompt_;
  std::unique_ptr<LengthDistribution> output_;
  core::Rng prompt_rng_;
  core::Rng output_rng_;
  bool joint_ = false;
  uint64_t rows_ = 0;
  uint64_t next_row_ = 0;
};

// The section declarations a generator appends for its lengths.
core::ParamSpec prompt_section_spec();
core::ParamSpec output_section_spec();

}  // namespace servesim::traces
