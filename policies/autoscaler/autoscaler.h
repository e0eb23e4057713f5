#pragma once
// Autoscaling policies ([autoscaler], family "autoscalers"; docs/fleet.md "Autoscaling"): how many
// replicas a pool wants (a unified cluster's, or a disaggregated cluster's prefill or decode pool),
// asked every interval_s. The interface is sim::Autoscaler (sim/cluster/autoscaling.h); the
// mechanism that provisions and drains replicas is part of sim::Cluster (sim/cluster/autoscaling.cc).
// Kinds, one per .cc beside this header: target_utilisation, slo, schedule, tpot (decode pools).
// Every kind takes the common keys of common_params() (the evaluation interval, min/max replicas,
// stabilisation window, cooldown, and the cold start), which experiments/run.cc reads into
// sim::AutoscalePlan and sim::ColdStart.

#include <vector>

#include "sim/cluster/autoscaling.h"
#include "sim/core/params.h"

namespace servesim::policies {

// Family "autoscalers". No factory arguments.
using AutoscalerRegistry = core::Registry<sim::Autoscaler>;
AutoscalerRegistry& autoscaler_registry();

// The keys every kind takes, followed by the kind's own.
std::vector<core::ParamSpec> autoscaler_params(std::vector<core::ParamSpec> own);

// The default weight-loading bandwidth of a source, in GB/s per GPU: "nvme" 6, "host_cache" the
// host link (network.pcie_gb_s), "remote" the GPU's NIC (network.nic_gb_s).
double default_load_gb_s(const std::string& source, double pcie_gb_s, double nic_gb_s);

}  // namespace servesim::policies
