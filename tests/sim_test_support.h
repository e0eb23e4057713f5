#pragma once
// Small stand-ins for tests of the cluster and the policies: a workload from a vector and a cost
// model with hand-computable iteration times.

#include <memory>
#include <optional>
#include <vector>

#include "hwmodels/cost_model.h"
#include "sim/core/lifecycle.h"
#include "sim/core/rng.h"
#include "traces/arrival_source.h"

namespace servesim::testing {

class VectorSource final : public traces::ArrivalSource {
 public:
  explicit VectorSource(std::vector<traces::RequestSpec> specs,
                        std::optional<core::Duration> client_timeout = std::nullopt)
      : specs_(std::move(specs)), client_timeout_(client_timeout) {}
  bool next(traces::RequestSpec& out) override {
    if (i_ >= specs_.size()) return false;
    out = specs_[i_++];
    return true;
  }
  std::optional<core::Duration> client_timeout() const override { return client_timeout_; }
  const core::RequestClasses& classes() const override { return request_classes; }
  core::RequestClasses request_classes;  // what [[workload.classes]] would define (specs index it)

 private:
  std::vector<traces::RequestSpec> specs_;
  std::optional<core::Duration> client_timeout_;
  size_t i_ = 0;
};

inline traces::RequestSpec spec(double arrival_s, int64_t prompt, int64_t output) {
  traces::RequestSpec s;
  s.arrival = core::Time::from_ns(static_cast<int64_t>(arrival_s * 1e9));
  s.prompt_tokens = prompt;
  s.output_tokens = output;
  return s;
}

// `count` requests of random lengths (prompts 1-40, outputs 1-120 tokens) whose arrivals are
// uniform(0, max_gap_s) apart, drawn from `stream` of `seed`: the random workloads that check a
// fast path against the queue's way.
inline std::vector<traces::RequestSpec> random_specs(uint64_t seed, const char* stream, int count, double max_gap_s) {
  std::vector<traces::RequestSpec> specs;
  core::Rng rng(seed, stream);
  double t = 0;
  for (int i = 0; i < count; ++i) {
    t += max_gap_s * rng.uniform();
    specs.push_back(spec(t, 1 + static_cast<int64_t>(rng.uniform() * 40), 1 + static_cast<int64_t>(rng.uniform() * 120)));
  }
  return specs;
}

// Iteration time = base + per_token x tokens, exactly.
class LinearCostModel final : public hwmodels::StepCostModel {
 public:
  LinearCostModel(double base_s, double per_token_s) : base_(base_s), per_token_(per_token_s) {
    model_.name = "test";
    gpu_.name = "test";
  }
  hwmodels::StepCost step(const hwmodels::BatchShape& s) const override {
    shapes.push_back(s);
    hwmodels::StepCost c;
    c.seconds = base_ + per_token_ * static_cast<double>(s.tokens());
    c.flops = static_cast<double>(s.tokens());
    c.bytes = 1.0;
    return c;
  }
  const hwmodels::ModelSpec& model() const override { return model_; }
  hwmodels::ModelSpec& mutable_model() { return model_; }
  const hwmodels::GpuSpec& gpu() const override { return gpu_; }
  int64_t tensor_parallel() const override { return 1; }
  mutable std::vector<hwmodels::BatchShape> shapes;  // every shape asked for, in order

 private:
  double base_, per_token_;
  hwmodels::ModelSpec model_;
  hwmodels::GpuSpec gpu_;
};

// Records every signal, and checks the KV invariants on each replica state.
struct RecordingObserver final : core::LifecycleObserver {
  std::vector<core::RequestRecord> done;
  std::vector<core::IterationRecord> iterations;
  std::vector<int64_t> gaps;
  std::vector<int64_t> gap_tokens;  // parallel to gaps: tokens each delivered
  std::vector<uint64_t> preempted;
  std::vector<core::ReplicaState> states;
  std::vector<core::PrefixLookup> lookups;
  std::vector<core::KvTransfer> transfers;
  std::vector<core::FleetEvent> fleet;
  void on_fleet_event(const core::FleetEvent& e) override { fleet.push_back(e); }
  void on_prefix_lookup(const core::PrefixLookup& l) override { lookups.push_back(l); }
  void on_kv_transfer(const core::KvTransfer& t) override { transfers.push_back(t); }
  void on_request_done(const core::RequestRecord& r) override { done.push_back(r); }
  void on_iteration(const core::IterationRecord& it) override { iterations.push_back(it); }
  void on_token_gaps(std::span<const core::GapRun> runs) override {
    for (const core::GapRun& run : runs) {
      gaps.insert(gaps.end(), static_cast<size_t>(run.count), run.gap_ns);
      gap_tokens.insert(gap_tokens.end(), static_cast<size_t>(run.count), run.tokens);
    }
  }
  void on_preempt(uint64_t id, uint32_t, core::Time) override { preempted.push_back(id); }
  void on_replica_state(const core::ReplicaState& s) override { states.push_back(s); }
  const core::RequestRecord* find(uint64_t id) const {
    for (const auto& r : done)
      if (r.id == id) return &r;
    return nullptr;
  }
};

}  // namespace servesim::testing
