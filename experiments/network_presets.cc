#include "experiments/network_presets.h"

#include <algorithm>
#include <cctype>

#include "sim/core/error.h"

namespace servesim::experiments {

// Figures and their sources: docs/policies.md ("Topology presets"). Bandwidths are one direction, in
// GB/s; latencies in us. NVLink bandwidth is the GPU preset's (nvlink_gb_s), so a preset names its
// GPU and a run on another GPU is refused.
std::span<const NetworkPreset> network_presets() {
  // DGX H100 and DGX H200 share their node and fabric; only the GPU differs.
  static const std::vector<std::pair<const char*, double>> kDgxHopper = {
      {"gpus_per_node", 8}, {"gpus_per_pcie_switch", 2}, {"pcie_gb_s", 50},         {"pcie_latency_us", 1},
      {"nics_per_node", 8}, {"nic_gb_s", 50},            {"nic_latency_us", 1},     {"rails", 1},
      {"nodes_per_switch", 32}, {"switch_latency_us", 1}};
  static const std::vector<NetworkPreset> kPresets = {
      {"dgx-a100",
       "NVIDIA DGX A100 nodes: 8 A100 80GB on NVSwitch (NVLink 3), 4 PCIe Gen4 switches each shared by 2 GPUs and "
       "their 2 ConnectX-6 NICs (200 Gb/s HDR InfiniBand, one per GPU), rail-optimised leaves of 20 nodes (a "
       "DGX SuperPOD scalable unit)",
       "a100-80gb-sxm",
       {{"gpus_per_node", 8},
        {"gpus_per_pcie_switch", 2},
        {"pcie_gb_s", 25},
        {"pcie_latency_us", 1},
        {"nics_per_node", 8},
        {"nic_gb_s", 25},
        {"nic_latency_us", 1},
        {"rails", 1},
        {"nodes_per_switch", 20},
        {"switch_latency_us", 1}}},
      {"dgx-h100",
       "NVIDIA DGX H100 nodes: 8 H100 SXM on NVSwitch (NVLink 4, 900 GB/s per GPU both ways), PCIe Gen5 switches "
       "each shared by 2 GPUs and their 2 ConnectX-7 NICs (400 Gb/s NDR InfiniBand, one per GPU), rail-optimised "
       "leaves of 32 nodes (a DGX SuperPOD scalable unit) under a non-blocking spine",
       "h100-sxm",
       kDgxHopper},
      {"dgx-h200",
       "NVIDIA DGX H200 nodes: the DGX H100 layout with H200 GPUs (same NVLink 4, NVSwitch, ConnectX-7 rails and "
       "PCIe Gen5 switches)",
       "h200",
       kDgxHopper},
      {"gb200-nvl72",
       "NVIDIA GB200 NVL72 racks: 72 B200 GPUs in one NVLink 5 domain (1.8 TB/s per GPU both ways, through the "
       "rack's NVLink switch trays), one 400 Gb/s ConnectX-7 per GPU on PCIe Gen5, rail-optimised leaves of 8 racks",
       "b200",
       {{"gpus_per_node", 72},
        {"gpus_per_pcie_switch", 1},
        {"pcie_gb_s", 50},
        {"pcie_latency_us", 1},
        {"nics_per_node", 72},
        {"nic_gb_s", 50},
        {"nic_latency_us", 1},
        {"rails", 1},
        {"nodes_per_switch", 8},
        {"switch_latency_us", 1}}},
  };
  return kPresets;
}

const NetworkPreset* find_network_preset(const std::string& name) {
  auto lower = [](std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  for (const NetworkPreset& p : network_presets())
    if (lower(p.name) == lower(name)) return &p;
  return nullptr;
}

NetworkFields resolve_network(const core::Params& net, const std::string& gpu_kind) {
  const NetworkPreset* preset = nullptr;
  if (net.has("preset")) {
    preset = find_network_preset(net.get_string("preset"));
    if (!preset) net.fail("preset", "unknown network preset '" + net.get_string("preset") + "'");
    std::string kind = gpu_kind;
    for (auto& ch : kind) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (kind != preset->gpu)
      net.fail("preset", std::string("network preset '") + preset->name + "' is a node of " + preset->gpu +
                             " GPUs, but the pool's gpu.kind is '" + gpu_kind +
                             "': use that GPU's preset (docs/policies.md, \"Topology presets\") or write the [network] fields without one");
  }
  // A field's value: written by the configuration, else the preset's, else the schema's default.
  auto from_preset = [&](const char* name, double& v) {
    if (!preset || net.given(name)) return false;
    for (const auto& [field, value] : preset->fields)
      if (std::string_view(field) == name) {
        v = value;
        return true;
      }
    return false;
  };
  auto real = [&](const char* name) {
    double v = 0;
    return from_preset(name, v) ? v : net.get_float(name);
  };
  auto count = [&](const char* name) {
    double v = 0;
    return from_preset(name, v) ? static_cast<int64_t>(v) : net.get_int(name);
  };
  NetworkFields f;
  f.gpus_per_node = count("gpus_per_node");
  f.nvlink_gb_s = net.has("nvlink_gb_s") ? net.get_float("nvlink_gb_s") : 0;
  f.nvlink_latency_us = real("nvlink_latency_us");
  f.pcie_gb_s = real("pcie_gb_s");
  f.pcie_latency_us = real("pcie_latency_us");
  double v = 0;
  f.gpus_per_pcie_switch = from_preset("gpus_per_pcie_switch", v) ? static_cast<int64_t>(v)
                           : net.has("gpus_per_pcie_switch")     ? net.get_int("gpus_per_pcie_switch")
                                                                 : 1;
  f.nics_per_node = count("nics_per_node");
  f.nic_gb_s = real("nic_gb_s");
  f.nic_latency_us = real("nic_latency_us");
  f.nodes_per_switch = count("nodes_per_switch");
  f.rails = from_preset("rails", v) ? v != 0 : net.has("rails") && net.get_bool("rails");
  f.spine_gb_s = net.has("spine_gb_s") ? net.get_float("spine_gb_s") : 0;
  f.switch_latency_us = real("switch_latency_us");
  f.host_gb_s = net.has("host_gb_s") ? net.get_float("host_gb_s") : 0;
  return f;
}

sim::TopologyConfig NetworkFields::topology(const hwmodels::GpuSpec& gpu, int64_t num_gpus) const {
  sim::TopologyConfig t;
  t.num_gpus = num_gpus;
  t.gpus_per_node = gpus_per_node;
  t.nvlink_bytes_per_s = nvlink_bytes_per_s(gpu);
  t.nvlink_latency_s = nvlink_latency_us * 1e-6;
  t.pcie_bytes_per_s = pcie_gb_s * 1e9;
  t.pcie_latency_s = pcie_latency_us * 1e-6;
  t.gpus_per_pcie_switch = gpus_per_pcie_switch;
  t.nics_per_node = nics_per_node;
  t.nic_bytes_per_s = nic_gb_s * 1e9;
  t.nic_latency_s = nic_latency_us * 1e-6;
  t.nodes_per_switch = nodes_per_switch;
  t.rails = rails;
  t.spine_bytes_per_s = spine_gb_s * 1e9;
  t.switch_latency_s = switch_latency_us * 1e-6;
  t.host_bytes_per_s = host_gb_s * 1e9;
  return t;
}

}  // namespace servesim::experiments
