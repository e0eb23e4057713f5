#pragma once
// Network topology presets ([network] preset = "dgx-h100", ...): the node and fabric layouts users
// run, each with the sources of its figures (docs/policies.md, "Topology presets"). A preset gives the [network] fields
// their values; any field the configuration writes overrides the preset's.

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hwmodels/gpu_spec.h"
#include "sim/cluster/network.h"
#include "sim/core/params.h"

namespace servesim::experiments {

struct NetworkPreset {
  const char* name;
  const char* description;
  const char* gpu;  // the GPU preset the node is built of (gpu.kind must match)
  // [network] fields and their values (integers and booleans as doubles).
  std::vector<std::pair<const char*, double>> fields;
};

std::span<const NetworkPreset> network_presets();
const NetworkPreset* find_network_preset(const std::string& name);  // ignores case; nullptr when absent

// The [network] fields with the preset applied (fields the configuration wrote win), in the
// configuration's units, as the topology and the analytic collective costs read them.
struct NetworkFields {
  int64_t gpus_per_node = 0, gpus_per_pcie_switch = 1, nics_per_node = 0, nodes_per_switch = 0;
  double nvlink_gb_s = 0;  // 0: the GPU's
  double nvlink_latency_us = 0, pcie_gb_s = 0, pcie_latency_us = 0, nic_gb_s = 0, nic_latency_us = 0;
  double spine_gb_s = 0;  // 0: non-blocking
  double host_gb_s = 0;   // 0: pcie_gb_s
  double switch_latency_us = 0;
  bool rails = false;
  double nvlink_bytes_per_s(const hwmodels::GpuSpec& gpu) const {
    return nvlink_gb_s > 0 ? nvlink_gb_s * 1e9 : gpu.interconnect_bandwidth;
  }
  sim::TopologyConfig topology(const hwmodels::GpuSpec& gpu, int64_t num_gpus) const;
};

// Refuses a preset whose GPU is not the run's (`gpu_kind`), naming the field.
NetworkFields resolve_network(const core::Params& net, const std::string& gpu_kind);

}  // namespace servesim::experiments
