#include "policies/autoscaler/autoscaler.h"

namespace servesim::policies {

AutoscalerRegistry& autoscaler_registry() {
  static AutoscalerRegistry registry("autoscalers",
                                     "autoscaling policies: the replica count a pool wants (a unified cluster's, or "
                                     "a disaggregated cluster's prefill or decode pool), asked every interval_s; "
                                     "replicas are provisioned (cold start, then up) or drained");
  return registry;
}

std::vector<core::ParamSpec> autoscaler_params(std::vector<core::ParamSpec> own) {
  using core::ParamSpec;
  std::vector<ParamSpec> p = {
      ParamSpec::integer("max_replicas", 1, "replicas",
                         "the most replicas the pool may have; all are built, those not in service are off and "
                         "cost nothing (cluster.replicas, or the pool's replicas when disaggregated, is the count in service at "
                         "the start)")
          .range(1, 4096)
          .required(),
      ParamSpec::integer("min_replicas", 1, "replicas", "the fewest replicas in service (starting or up)")
          .range(1, 4096),
      ParamSpec::real("interval_s", 15, "s",
                      "time between evaluations of the policy (Kubernetes HPA's sync period is 15 s)")
          .range(1e-3, 1e9),
      ParamSpec::real("stabilization_s", 300, "s",
                      "scale down only to the highest count wanted over this window (HPA's downscale "
                      "stabilisation, default 300 s); scale-up is immediate")
          .range(0, 1e9),
      ParamSpec::real("cooldown_s", 0, "s", "at least this long between two scaling actions").range(0, 1e9),
      ParamSpec::real("provision_s", 30, "s",
                      "cold start, first part: from the decision to a started serving engine (machine or pod, "
                      "container, engine start), before the weights load")
          .range(0, 1e9),
      ParamSpec::string("weights_source", "nvme",
                        "where a new replica loads its weights from: nvme (local NVMe, 6 GB/s per GPU), host_cache "
                        "(host memory over PCIe, network.pcie_gb_s), remote (storage over the GPU's NIC, "
                        "network.nic_gb_s)")
          .one_of({"nvme", "host_cache", "remote"}),
      ParamSpec::real("load_gb_s", 0, "GB/s",
                      "the bandwidth at which each GPU loads its shard of the weights, instead of the source's "
                      "default")
          .range(1e-6, 1e6)
          .optional(),
      ParamSpec::real("warmup_s", 10, "s",
                      "cold start, last part: CUDA-graph capture and warm-up after the weights are loaded")
          .range(0, 1e9),
  };
  p.insert(p.end(), own.begin(), own.end());
  return p;
}

double default_load_gb_s(const std::string& source, double pcie_gb_s, double nic_gb_s) {
  if (source == "host_cache") return pcie_gb_s;
  if (source == "remote") return nic_gb_s;
  return 6.0;
}

}  // namespace servesim::policies
