#pragma once
// Fair sharing across tenants (scheduler policy = "fair"): virtual token counters, as the Virtual
// Token Counter scheduler of the LLM fairness literature (Sheng et al., "Fairness in Serving Large
// Language Models", OSDI 2024) defines them.
//
// Each replica's scheduler keeps one counter per tenant (Request::tenant: its class's tenant): the
// service the tenant has had here, prompt_weight per prefill token plus output_weight per decode,
// divided by the tenant's weight ([[workload.classes]] weight: weighted VTC, a tenant of weight 2
// is served twice as much), charged when an iteration is planned. With fair_scope = "cluster" every
// replica's scheduler charges and reads one set of counters (a shared counter service). Before each
// plan the waiting queue is ordered: repeatedly the earliest waiting request of the tenant whose
// counter (plus what this ordering has already given it: its requests' pending prefill tokens x
// prompt_weight / weight) is lowest, ties to the earlier request; the scheduler then admits from
// the head as it would in FCFS. A tenant that had nothing here at the last plan and has a request
// now is lifted to the lowest counter among the tenants that are still active (never lowered): a
// tenant cannot bank service while it sends nothing and then take the replica for itself. What it
// gives: two tenants that both keep requests waiting get service that differs by a bounded amount
// (about one request's weighted tokens), whatever one of them sends. Runs without classes have a
// single tenant, and fair is FCFS.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sim/cluster/replica.h"
#include "policies/scheduler/batch_scheduler.h"
#include "sim/core/params.h"

namespace servesim::policies {

class FairShare {
 public:
  // `tenant_weights`: per tenant (Request::tenant), empty = all 1; `counters`: the tenants'
  // counters, shared with other replicas' schedulers for a cluster-wide scope.
  FairShare(double prompt_weight, double output_weight, const std::vector<double>& tenant_weights,
            std::shared_ptr<std::vector<double>> counters, bool cluster_wide);
  // Lifts the tenants that have just become active, then puts the waiting queue in fair order.
  void order_waiting(sim::Replica& replica);
  // Charges a planned iteration to its tenants.
  void charge(sim::Replica& replica, const sim::IterationPlan& plan);
  double counter(uint16_t tenant) const { return tenant < counter_->size() ? (*counter_)[tenant] : 0.0; }
  bool cluster_wide() const { return cluster_wide_; }

 private:
  void grow(uint16_t tenant);
  double per_service(uint16_t tenant) const { return tenant < inverse_weight_.size() ? inverse_weight_[tenant] : 1.0; }
  double prompt_weight_, output_weight_;
  std::vector<double> inverse_weight_;           // per tenant: 1 / its weight
  std::shared_ptr<std::vector<double>> counter_;  // per tenant; shared across replicas when cluster-wide
  bool cluster_wide_;
  std::vector<uint8_t> active_;  // had a request (waiting or running) here at the last plan
  // Scratch, reused between plans.
  std::vector<uint8_t> now_;
  std::vector<std::vector<sim::RequestId>> queues_;
  std::vector<size_t> heads_;
  std::vector<double> projected_;
  std::vector<sim::RequestId> order_;
};

// A scheduler's own parameters followed by those of the waiting-queue policy (policy,
// priority_preemption, fair_prompt_weight, fair_output_weight, fair_scope), the same on every
// scheduler that takes them.
std::vector<core::ParamSpec> with_policy_params(std::vector<core::ParamSpec> params);

// The scheduler section's fair sharing: a FairShare when policy = "fair", else none; the weights
// or the scope without the policy are an error at the key. The tenants' weights come from the
// context, and a cluster-wide scope's counters from its shared state.
std::optional<FairShare> fair_share(const core::Params& scheduler, const SchedulerContext& ctx);

// Whether priority_preemption = "admit" (an error at the key without policy = "priority").
bool preempt_to_admit(const core::Params& scheduler);

}  // namespace servesim::policies
