// Admission kinds: queue_length (the picked replica's waiting queue) and predicted_ttft (the picked
// replica's prefill backlog through its cost model). Both read only what a real router observes:
// queue lengths, the prompt tokens it has sent that are not prefilled yet, and the replica's step
// costs (known from profiling); never output lengths.
#include "policies/router/admission.h"

#include <cmath>
#include <vector>

#include "sim/core/error.h"

namespace servesim::policies {

double prefill_ms_per_token(const sim::Replica& replica, int64_t chunk_tokens) {
  const double s = replica.prefill_seconds(chunk_tokens);
  if (!(s > 0) || !std::isfinite(s))
    throw core::Error("internal: a prefill chunk of " + std::to_string(chunk_tokens) + " tokens costs " +
                      std::to_string(s) + " s on replica " + std::to_string(replica.index()));
  return s * 1e3 / static_cast<double>(chunk_tokens);
}

AdmissionRegistry& admission_registry() {
  static AdmissionRegistry registry("admission",
                                    "admission control at the router: whether a request may join the replica the "
                                    "router picked, or is shed (outcome rejected_admission); per class by "
                                    "admit_fraction ([[workload.classes]])");
  return registry;
}

namespace {

using core::ParamSpec;

// The fraction of the limit at which each class is shed (1 without classes).
class ClassFractions {
 public:
  void bind(std::span<const core::RequestClass> classes) {
    fractions_.clear();
    for (const auto& c : classes) fractions_.push_back(c.admit_fraction);
  }
  double of(const sim::Request& r) const {
    return r.request_class < fractions_.size() ? fractions_[r.request_class] : 1.0;
  }

 private:
  std::vector<double> fractions_;
};

// Shed when the picked replica's waiting queue holds max_queued x admit_fraction requests or more.
class QueueLengthAdmission final : public sim::Admission {
 public:
  explicit QueueLengthAdmission(double max_queued) : max_queued_(max_queued) {}
  void bind(std::span<sim::Replica* const>, std::span<const core::RequestClass> classes) override {
    fractions_.bind(classes);
  }
  bool admit(const sim::Request& r, std::span<const sim::ReplicaLoad> replicas, uint32_t target) override {
    return static_cast<double>(replicas[target].queued) < max_queued_ * fractions_.of(r);
  }

 private:
  double max_queued_;
  ClassFractions fractions_;
};

// Predicted TTFT on the picked replica: its prompt tokens waiting to be prefilled plus this prompt,
// at the replica's prefill rate (the GPU time of a chunk_tokens chunk alone, per token). A lower
// bound (decodes batched with the prefills and engine overheads are left out), and exact enough to
// rank a backlog. Shed when it exceeds max_ttft_ms x admit_fraction.
class PredictedTtftAdmission final : public sim::Admission {
 public:
  PredictedTtftAdmission(double max_ttft_ms, int64_t chunk_tokens) : max_ttft_ms_(max_ttft_ms), chunk_(chunk_tokens) {}
  void bind(std::span<sim::Replica* const> replicas, std::span<const core::RequestClass> classes) override {
    fractions_.bind(classes);
    ms_per_token_.clear();
    for (const sim::Replica* r : replicas) ms_per_token_.push_back(prefill_ms_per_token(*r, chunk_));
  }
  bool admit(const sim::Request& r, std::span<const sim::ReplicaLoad> replicas, uint32_t target) override {
    const double tokens = static_cast<double>(replicas[target].prefill_tokens_waiting + r.prompt_tokens);
    return tokens * ms_per_token_[target] <= max_ttft_ms_ * fractions_.of(r);
  }

 private:
  double max_ttft_ms_;
  int64_t chunk_;
  std::vector<double> ms_per_token_;  // per replica of the pool
  ClassFractions fractions_;
};

const bool kQueueLength = admission_registry().add(
    {"queue_length",
     "shed a request when the replica the router picked has max_queued x its class's admit_fraction requests or "
     "more waiting",
     {ParamSpec::integer("max_queued", 64, "requests", "waiting requests at which the picked replica sheds the "
                                                       "classes whose admit_fraction is 1")
          .range(1, 1e9)
          .required()}},
    [](const core::Params& p) {
      return std::make_unique<QueueLengthAdmission>(static_cast<double>(p.get_int("max_queued")));
    });

const bool kPredictedTtft = admission_registry().add(
    {"predicted_ttft",
     "shed a request when its predicted TTFT on the picked replica (the prompt tokens waiting there plus its own, "
     "at the replica's prefill rate from its cost model) exceeds max_ttft_ms x its class's admit_fraction",
     {ParamSpec::real("max_ttft_ms", 1000, "ms", "the predicted TTFT above which the classes whose admit_fraction "
                                                 "is 1 are shed")
          .range(1e-3, 1e10)
          .required(),
      ParamSpec::integer("chunk_tokens", 2048, "tokens",
                         "the prefill chunk whose GPU time per token is the replica's prefill rate")
          .range(1, 1 << 20)}},
    [](const core::Params& p) {
      return std::make_unique<PredictedTtftAdmission>(p.get_float("max_ttft_ms"), p.get_int("chunk_tokens"));
    });

}  // namespace
}  // namespace servesim::policies
