#pragma once
// Speculative decoding methods: the [decoding] kinds. The replica drives them through
// sim::Speculator (sim/cluster/speculator.h); each kind here also says what its drafter is, so that
// the run can cost the drafter's passes (hwmodels::SpeculativeCostModel) and give its weights and KV
// their share of GPU memory.
//
// Kinds (docs/models.md): none, draft_model (a separate small model with its own KV), draft_head
// (EAGLE-style: decoder layers on the target's hidden state), mtp (the model's own multi-token
// prediction modules, config.json num_nextn_predict_layers) and ngram (prompt lookup: no model,
// matches from the workload's repetitiveness). Every kind takes the draft tokens per step (`k`, or a
// schedule by batch size) and how the target accepts them (a per-position acceptance vector or an
// empirical distribution of accepted lengths).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hwmodels/model_spec.h"
#include "sim/cluster/speculator.h"
#include "sim/core/params.h"

namespace servesim::policies {

// How many of k drafts the target accepts. Acceptance is sequential: draft j is accepted with
// probability p_j given that drafts 1..j-1 were, and the first rejection ends the run (the
// rejection sampler keeps the longest accepted prefix). From a per-position vector (the last value
// repeating), or from an empirical distribution of accepted lengths measured at K drafts, whose
// conditional probabilities reproduce it exactly at k = K and give min(A, k) for k < K.
class Acceptance {
 public:
  static Acceptance per_position(std::vector<double> conditional);
  // weights[j] = how often j of the K = weights.size() - 1 drafts were accepted.
  static Acceptance from_accepted_lengths(const std::vector<double>& weights);

  // P(draft j accepted | drafts 1..j-1 accepted), j >= 1.
  double conditional(int64_t j) const;
  // The most drafts it describes (INT64_MAX for a per-position vector).
  int64_t max_drafts() const { return max_drafts_; }
  int64_t draw(int64_t drafts, core::Rng& rng) const;
  // Expected tokens one verification of k drafts emits: 1 + E[accepted] (for constant p:
  // (1 - p^(k+1)) / (1 - p)).
  double expected_tokens(int64_t k) const;

 private:
  std::vector<double> conditional_;
  int64_t max_drafts_ = 0;
};

// Draft tokens per step: fixed, or by the number of requests on the replica (engines shorten
// speculation as batches grow, where verification stops being free): batches up to max_batch[i]
// take k[i]; larger ones than the last threshold do not speculate.
class DraftSchedule {
 public:
  static DraftSchedule fixed(int64_t k);
  static DraftSchedule by_batch(std::vector<std::pair<int64_t, int64_t>> max_batch_and_k);
  int64_t at(int64_t batch) const;
  int64_t max() const { return max_; }

 private:
  std::vector<std::pair<int64_t, int64_t>> steps_;  // empty: fixed
  int64_t fixed_ = 0;
  int64_t max_ = 0;
};

// What a method's drafter is, for the cost model and the memory budget.
struct Drafter {
  hwmodels::ModelSpec spec;           // what one pass runs (num_layers: the layers of a pass)
  bool shares_vocab_weights = false;  // embedding and LM head are the target's (heads, MTP)
  bool reads_hidden_states = false;   // drafts from the target's hidden states (heads, MTP)
  int64_t kv_layers = 0;              // layers loaded, whose KV it keeps (>= spec.num_layers)
};

// Makes `m` a stack of full-attention layers (a head or MTP module built from a hybrid or sparse
// target: the drafter's own attention is modelled as full attention over the context).
void use_full_attention(hwmodels::ModelSpec& m);

// The drafter's weights resident on each GPU of a TP group, beyond the target's.
double drafter_weight_bytes_per_gpu(const Drafter& d, int64_t tp);
// The drafter's KV-cache bytes per token on each GPU (kept beside the target's for every token).
double drafter_kv_bytes_per_token_per_gpu(const Drafter& d, int64_t tp);

class DecodingMethod : public sim::Speculator {
 public:
  DecodingMethod(std::string name, DraftSchedule schedule, Acceptance acceptance)
      : name_(std::move(name)), schedule_(std::move(schedule)), acceptance_(std::move(acceptance)) {}

  const std::string& name() const { return name_; }
  // The model that drafts; nullopt when none does (n-gram lookup).
  const std::optional<Drafter>& drafter() const { return drafter_; }
  const Acceptance& acceptance() const { return acceptance_; }
  const DraftSchedule& schedule() const { return schedule_; }

  int64_t draft_tokens(int64_t batch) const override { return schedule_.at(batch); }
  int64_t max_draft_tokens() const override { return schedule_.max(); }
  int64_t propose(const sim::Request& /*r*/, int64_t k, core::Rng& /*rng*/) const override { return k; }
  int64_t accept(const sim::Request& /*r*/, int64_t drafts, core::Rng& rng) const override {
    return acceptance_.draw(drafts, rng);
  }
  bool drafter_runs() const override { return drafter_.has_value(); }
  bool catches_up() const override { return drafter_ && drafter_->reads_hidden_states; }

 protected:
  std::optional<Drafter> drafter_;

 private:
  std::string name_;
  DraftSchedule schedule_;
  Acceptance acceptance_;
};

// What a method needs of the run when it is built.
struct DecodingContext {
  const hwmodels::ModelSpec* target = nullptr;
  // The workload's [workload] repetition, when it sets one (n-gram drafting).
  std::optional<double> workload_repetition;
};

// Family "decoding". A kind's factory returns null for no speculation (kind "none").
using DecodingRegistry = core::Registry<DecodingMethod, const DecodingContext&>;
DecodingRegistry& decoding_registry();

// The parameters every speculative kind shares (k, k_schedule, k_schedule_batch, acceptance,
// accepted_length_weights), after `own`.
std::vector<core::ParamSpec> with_speculation_params(std::vector<core::ParamSpec> own);
// Reads them. `default_k` is used when neither k nor k_schedule is given (0: one of them is
// required). Errors name the key.
DraftSchedule schedule_from(const core::Params& p, int64_t default_k = 0);
Acceptance acceptance_from(const core::Params& p, const DraftSchedule& schedule);

}  // namespace servesim::policies
