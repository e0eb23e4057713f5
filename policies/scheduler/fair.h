#pragma once
// Fair sharing across tenants (scheduler policy = "fair"): virtual token counters, as the Virtual
// Token Counter scheduler of the LLM fairness literature (Sheng et al., "Fairness in Serving Large
// Language Models", OSDI 2024) defines them.
//
// Each replica's scheduler keeps one counter per tenant (Request::tenant: its class's tenant): the
// service the tenant has had here, prompt_weight per prefill token plus output_weight per decode,
// charged when an iteration is planned. Before each plan the waiting queue is ordered: repeatedly
// the earliest waiting request of the tenant whose counter (plus what this ordering has already
// given it: its requests' pending prefill tokens x prompt_weight) is lowest, ties to the earlier
// request; the scheduler then admits from the head as it would in FCFS. A tenant that had nothing
// here at the last plan and has a request now is lifted to the lowest counter among the tenants
// that are still active (never lowered): a tenant cannot bank service while it sends nothing and
// then take the replica for itself. What it gives: two tenants that both keep requests waiting get
// service that differs by a bounded amount (about one request's weighted tokens), whatever one of
// them sends. Runs without classes have a single tenant, and fair is FCFS.

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/cluster/replica.h"
#include "sim/core/params.h"

namespace servesim::policies {

class FairShare {
 public:
  FairShare(double prompt_weight, double output_weight) : prompt_weight_(prompt_weight), output_weight_(output_weight) {}
  // Lifts the tenants that have just become active, then puts the waiting queue in fair order.
  void order_waiting(sim::Replica& replica);
  // Charges a planned iteration to its tenants.
  void charge(sim::Replica& replica, const sim::IterationPlan& plan);
  double counter(uint16_t tenant) const { return tenant < counter_.size() ? counter_[tenant] : 0.0; }

 private:
  void grow(uint16_t tenant);
  double prompt_weight_, output_weight_;
  std::vector<double> counter_;
  std::vector<uint8_t> active_;  // had a request (waiting or running) here at the last plan
  // Scratch, reused between plans.
  std::vector<uint8_t> now_;
  std::vector<std::vector<sim::RequestId>> queues_;
  std::vector<size_t> heads_;
  std::vector<double> projected_;
  std::vector<sim::RequestId> order_;
};

// A scheduler's own parameters followed by those of the waiting-queue policy (policy,
// fair_prompt_weight, fair_output_weight), the same on every scheduler that takes them.
std::vector<core::ParamSpec> with_policy_params(std::vector<core::ParamSpec> params);

// The scheduler section's fair sharing: a FairShare when policy = "fair", else none; the weights
// without the policy are an error at the key.
std::optional<FairShare> fair_share(const core::Params& scheduler);

}  // namespace servesim::policies
