#include "policies/decoding/decoding_method.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hwmodels/roofline.h"
#include "sim/core/format.h"

namespace servesim::policies {

DecodingRegistry& decoding_registry() {
  static DecodingRegistry registry("decoding",
                                   "speculative decoding methods: who drafts, how many tokens, how many are accepted");
  return registry;
}

// ---- Acceptance ---------------------------------------------------------------------------------

Acceptance Acceptance::per_position(std::vector<double> conditional) {
  Acceptance a;
  a.conditional_ = std::move(conditional);
  a.max_drafts_ = std::numeric_limits<int64_t>::max();
  return a;
}

Acceptance Acceptance::from_accepted_lengths(const std::vector<double>& weights) {
  // P(A >= j) from the tail sums; p_j = P(A >= j) / P(A >= j - 1).
  Acceptance a;
  const int64_t k = static_cast<int64_t>(weights.size()) - 1;
  std::vector<double> tail(weights.size() + 1, 0.0);
  for (int64_t j = k; j >= 0; --j) tail[static_cast<size_t>(j)] = tail[static_cast<size_t>(j) + 1] + weights[static_cast<size_t>(j)];
  for (int64_t j = 1; j <= k; ++j) {
    const double before = tail[static_cast<size_t>(j) - 1], at = tail[static_cast<size_t>(j)];
    a.conditional_.push_back(before > 0 ? at / before : 0.0);
  }
  a.max_drafts_ = k;
  return a;
}

double Acceptance::conditional(int64_t j) const {
  if (j < 1 || j > max_drafts_ || conditional_.empty()) return 0.0;
  const size_t i = std::min(static_cast<size_t>(j - 1), conditional_.size() - 1);
  return conditional_[i];
}

int64_t Acceptance::draw(int64_t drafts, core::Rng& rng) const {
  int64_t a = 0;
  while (a < drafts && rng.uniform() < conditional(a + 1)) ++a;
  return a;
}

double Acceptance::expected_tokens(int64_t k) const {
  double tokens = 1.0, reach = 1.0;
  for (int64_t j = 1; j <= k; ++j) {
    reach *= conditional(j);
    tokens += reach;
  }
  return tokens;
}

// ---- DraftSchedule ------------------------------------------------------------------------------

DraftSchedule DraftSchedule::fixed(int64_t k) {
  DraftSchedule s;
  s.fixed_ = s.max_ = k;
  return s;
}

DraftSchedule DraftSchedule::by_batch(std::vector<std::pair<int64_t, int64_t>> steps) {
  DraftSchedule s;
  s.steps_ = std::move(steps);
  for (const auto& [batch, k] : s.steps_) s.max_ = std::max(s.max_, k);
  return s;
}

int64_t DraftSchedule::at(int64_t batch) const {
  if (steps_.empty()) return fixed_;
  for (const auto& [max_batch, k] : steps_)
    if (batch <= max_batch) return k;
  return 0;
}

// ---- Drafters -----------------------------------------------------------------------------------

void use_full_attention(hwmodels::ModelSpec& m) {
  m.attention_pattern.clear();
  m.sliding_window = 0;
  m.linear_num_key_heads = m.linear_num_value_heads = m.linear_key_head_dim = m.linear_value_head_dim = 0;
  m.linear_conv_kernel = 0;
  m.index_topk = m.index_n_heads = m.index_head_dim = 0;
}

double drafter_weight_bytes_per_gpu(const Drafter& d, int64_t tp) {
  const hwmodels::ModelSpec& m = d.spec;
  double bytes = hwmodels::weight_bytes_per_gpu(m, tp);
  if (d.shares_vocab_weights) {
    // The embedding, the LM head and the final norm are the target's; the head adds its fusion
    // projection (2h x h, whole on every GPU) and the layers.
    const double h = static_cast<double>(m.hidden_size);
    bytes -= ((m.embedding_params() + m.lm_head_params()) / static_cast<double>(tp) + h) * m.activation_bytes;
    if (m.draft_head) bytes += 2.0 * h * h * m.activation_bytes;
  }
  // Layers loaded beyond those one pass runs (MTP modules used in turn).
  if (d.kv_layers > m.num_layers) {
    hwmodels::ModelSpec one = m;
    one.num_layers = 1;
    hwmodels::ModelSpec two = m;
    two.num_layers = 2;
    const double per_layer = hwmodels::weight_bytes_per_gpu(two, tp) - hwmodels::weight_bytes_per_gpu(one, tp);
    bytes += per_layer * static_cast<double>(d.kv_layers - m.num_layers);
  }
  return bytes;
}

double drafter_kv_bytes_per_token_per_gpu(const Drafter& d, int64_t tp) {
  hwmodels::ModelSpec m = d.spec;
  m.num_layers = std::max<int64_t>(d.kv_layers, m.num_layers);
  return hwmodels::kv_bytes_per_token_per_gpu(m, tp);
}

// ---- Parameters ---------------------------------------------------------------------------------

std::vector<core::ParamSpec> with_speculation_params(std::vector<core::ParamSpec> own) {
  using core::ParamSpec;
  std::vector<ParamSpec> common = {
      ParamSpec::integer("k", 0, "tokens", "draft tokens proposed per sequence per step (num_speculative_tokens)")
          .range(1, 64)
          .optional(),
      ParamSpec::real_list("k_schedule", {}, "tokens",
                           "draft tokens per step by batch size, instead of k: k_schedule[i] when the replica "
                           "holds at most k_schedule_batch[i] requests; beyond the last threshold, none")
          .range(0, 64)
          .optional(),
      ParamSpec::real_list("k_schedule_batch", {}, "requests",
                           "the batch-size thresholds of k_schedule, increasing")
          .range(1, 1 << 20)
          .optional(),
      ParamSpec::real_list("acceptance", {}, "probability",
                           "per-position acceptance: [p1, p2, ...], p_j = P(draft j accepted | drafts before it "
                           "were), the last repeating; measure it on the workload you simulate")
          .range(0, 1)
          .optional(),
      ParamSpec::real_list("accepted_length_weights", {}, "",
                           "instead of acceptance: an empirical distribution of accepted drafts, [w0, w1, ..., wK] "
                           "= how often 0, 1, ..., K of K drafts were accepted (k must not exceed K)")
          .at_least(0)
          .optional(),
  };
  own.insert(own.end(), common.begin(), common.end());
  return own;
}

namespace {
int64_t whole(const core::Params& p, std::string_view key, double v, size_t i) {
  if (v != std::floor(v))
    p.fail(key, "element " + std::to_string(i) + " is " + core::format_double(v) + "; expected whole numbers");
  return static_cast<int64_t>(v);
}
}  // namespace

DraftSchedule schedule_from(const core::Params& p, int64_t default_k) {
  const bool fixed = p.has("k"), scheduled = p.has("k_schedule"), batches = p.has("k_schedule_batch");
  if (fixed && scheduled)
    p.fail("k_schedule", "give either k (a fixed number of draft tokens) or k_schedule (by batch size), not both");
  if (scheduled != batches)
    p.fail(scheduled ? "k_schedule" : "k_schedule_batch",
           "k_schedule and k_schedule_batch go together: k_schedule[i] draft tokens for batches of up to "
           "k_schedule_batch[i] requests");
  if (scheduled) {
    const std::vector<double>& ks = p.get_float_list("k_schedule");
    const std::vector<double>& bs = p.get_float_list("k_schedule_batch");
    if (ks.empty()) p.fail("k_schedule", "is empty; give at least one (batch, k) step");
    if (ks.size() != bs.size())
      p.fail("k_schedule_batch", "has " + std::to_string(bs.size()) + " thresholds for the " +
                                     std::to_string(ks.size()) + " values of k_schedule; they must pair up");
    std::vector<std::pair<int64_t, int64_t>> steps;
    for (size_t i = 0; i < ks.size(); ++i) {
      const int64_t b = whole(p, "k_schedule_batch", bs[i], i), k = whole(p, "k_schedule", ks[i], i);
      if (i > 0 && b <= steps.back().first)
        p.fail("k_schedule_batch", "thresholds must increase; element " + std::to_string(i) + " (" +
                                       std::to_string(b) + ") follows " + std::to_string(steps.back().first));
      steps.emplace_back(b, k);
    }
    return DraftSchedule::by_batch(std::move(steps));
  }
  if (fixed) return DraftSchedule::fixed(p.get_int("k"));
  if (default_k > 0) return DraftSchedule::fixed(default_k);
  p.fail("k", "missing: set k (draft tokens per step, e.g. k = 3) or k_schedule with k_schedule_batch");
}

Acceptance acceptance_from(const core::Params& p, const DraftSchedule& schedule) {
  const bool vector = p.has("acceptance"), lengths = p.has("accepted_length_weights");
  if (vector && lengths)
    p.fail("accepted_length_weights", "give either acceptance (per position) or accepted_length_weights, not both");
  if (!vector && !lengths)
    p.fail("acceptance",
           "missing: how the target accepts the drafts depends on the drafter and the workload; give acceptance "
           "= [p1, p2, ...] (e.g. acceptance = [0.8]) or accepted_length_weights = [w0, w1, ..., wK]");
  if (vector) {
    const std::vector<double>& a = p.get_float_list("acceptance");
    if (a.empty()) p.fail("acceptance", "is empty; give at least one probability");
    return Acceptance::per_position(a);
  }
  const std::vector<double>& w = p.get_float_list("accepted_length_weights");
  if (w.size() < 2) p.fail("accepted_length_weights", "needs at least two weights (0 and 1 accepted of 1 draft)");
  double sum = 0;
  for (double v : w) sum += v;
  if (!(sum > 0)) p.fail("accepted_length_weights", "the weights sum to 0");
  const int64_t k_measured = static_cast<int64_t>(w.size()) - 1;
  if (schedule.max() > k_measured)
    p.fail("accepted_length_weights",
           "describes at most " + std::to_string(k_measured) + " accepted drafts (K = " + std::to_string(k_measured) +
               "), but the method proposes up to " + std::to_string(schedule.max()) +
               "; give weights for 0.." + std::to_string(schedule.max()) + " or lower k");
  return Acceptance::from_accepted_lengths(w);
}

namespace {

[[maybe_unused]] const bool kRegistered = decoding_registry().add(
    {"none", "no speculative decoding: one token per sequence per step", {}},
    [](const core::Params&, const DecodingContext&) { return std::unique_ptr<DecodingMethod>(); });

}  // namespace

}  // namespace servesim::policies
