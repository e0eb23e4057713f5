#include "experiments/run.h"
#include "experiments/network_presets.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "hwmodels/calibration_profile.h"
#include "hwmodels/cost_model.h"
#include "hwmodels/engine/engine_model.h"
#include "hwmodels/expert_parallel.h"
#include "hwmodels/gpu_spec.h"
#include "hwmodels/model_spec.h"
#include "hwmodels/roofline.h"
#include "hwmodels/speculative_cost_model.h"
#include "hwmodels/uncertainty.h"
#include "policies/autoscaler/autoscaler.h"
#include "policies/decoding/decoding_method.h"
#include "policies/kvtier/kvtier.h"
#include "policies/router/admission.h"
#include "policies/router/router.h"
#include "policies/scheduler/batch_scheduler.h"
#include "sim/cluster/cluster.h"
#include "sim/core/config.h"
#include "sim/core/format.h"
#include "sim/core/rng.h"
#include "sim/engine/simulation.h"
#include "sim/metrics/collector.h"
#include "sim/metrics/csv_sink.h"
#include "sim/metrics/invariant_checker.h"
#include "sim/metrics/observer_fanout.h"
#include "sim/metrics/sqlite_sink.h"
#include "traces/arrival_source.h"
#include "traces/block_bootstrap.h"

namespace servesim::experiments {

using core::ParamSpec;

// [cluster.prefill] / [cluster.decode]: one pool of a disaggregated cluster.
static ParamSpec pool_table(const std::string& role, const std::string& description) {
  return ParamSpec::table(
             role,
             {
                 ParamSpec::integer("replicas", 1, "replicas", "replicas in the " + role + " pool").range(1, 1 << 20).required(),
                 ParamSpec::integer("tensor_parallel", 1, "GPUs", "tensor-parallel degree; unset = cluster.tensor_parallel")
                     .range(1, 1024)
                     .optional(),
                 ParamSpec::integer("expert_parallel", 1, "GPUs",
                                    "expert-parallel degree of this pool's replicas; unset = cluster.expert_parallel")
                     .range(1, 1 << 16)
                     .optional(),
                 ParamSpec::integer("attention_data_parallel", 1, "ranks",
                                    "attention data-parallel ranks; unset = cluster.attention_data_parallel")
                     .range(1, 1 << 16)
                     .optional(),
                 ParamSpec::integer("redundant_experts", 0, "experts",
                                    "redundant expert replicas; unset = cluster.redundant_experts")
                     .range(0, 1 << 20)
                     .optional(),
                 ParamSpec::section("gpu", "gpus", "", "GPU type of this pool; unset = [gpu]").optional(),
                 ParamSpec::section("scheduler", "schedulers", "", "batch scheduler of this pool; unset = [scheduler]")
                     .optional(),
                 ParamSpec::section("autoscaler", "autoscalers", "",
                                    "autoscaling of this pool, with the keys of [autoscaler]: max_replicas replicas "
                                    "are built, this pool's replicas are in service at the start (unset: a fixed "
                                    "pool; docs/fleet.md, \"Autoscaling disaggregated pools\")")
                     .optional(),
             },
             description)
      .optional();
}

const std::vector<core::ParamSpec>& run_schema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::integer("seed", 42, "", "seed of every random stream of the run (workload, router)")
          .range(0, static_cast<double>(INT64_MAX)),
      ParamSpec::section("workload", "workloads", "", "where requests come from: a trace or a generator"),
      ParamSpec::section("model", "models", "", "the served model (a preset; any field can be overridden)"),
      ParamSpec::section("gpu", "gpus", "", "the GPU type of every replica (a preset; fields can be overridden)"),
      ParamSpec::section("cost_model", "cost_models", "roofline", "how an iteration's GPU time is computed"),
      ParamSpec::section("engine", "engines", "vllm-v1",
                         "the serving engine around the GPU: client path (API server, streaming), host work per "
                         "iteration, CUDA graphs"),
      ParamSpec::table(
          "cluster",
          {
              ParamSpec::integer("replicas", 1, "replicas", "identical model replicas (unified: each prefills and decodes)")
                  .range(1, 1 << 20),
              ParamSpec::integer("tensor_parallel", 1, "GPUs",
                                 "tensor-parallel degree of each replica (of each attention rank with expert_parallel)")
                  .range(1, 1024),
              // Optional, so that configurations without expert parallelism resolve (and hash) as before.
              ParamSpec::integer("expert_parallel", 1, "GPUs",
                                 "expert parallelism: GPUs one replica spans, its routed experts spread whole over "
                                 "them and its attention run as expert_parallel / tensor_parallel data-parallel ranks "
                                 "(each with its own requests and KV cache); unset = 1, no expert parallelism")
                  .range(1, 1 << 16)
                  .optional(),
              ParamSpec::integer("attention_data_parallel", 1, "ranks",
                                 "attention data-parallel ranks of an expert-parallel replica; unset = expert_parallel / "
                                 "tensor_parallel (if given, it must be that)")
                  .range(1, 1 << 16)
                  .optional(),
              ParamSpec::integer("redundant_experts", 0, "experts",
                                 "extra replicas of the most loaded experts (EPLB); (routed experts + redundant) must "
                                 "split evenly over expert_parallel GPUs; unset = 0")
                  .range(0, 1 << 20)
                  .optional(),
              ParamSpec::integer("block_size", 16, "tokens", "tokens per paged KV-cache block").range(1, 1 << 16),
              ParamSpec::real("gpu_memory_utilization", 0.9, "fraction",
                              "share of GPU memory the engine may use (weights + activations + KV cache)")
                  .range(0.01, 1),
              ParamSpec::real("activation_reserve_gib", 2.0, "GiB",
                              "memory per GPU kept for activations, CUDA graphs and the runtime")
                  .range(0, 1e5),
              ParamSpec::boolean("prefix_caching", false,
                                 "share KV of common prompt prefixes between requests (needs a workload "
                                 "with prefix block hashes: mooncake_jsonl, sessions or shared_prefix)"),
              ParamSpec::string("preemption", "recompute",
                                "what preemption does to a request's KV: drop it and prefill again, or "
                                "swap it to host memory over network.pcie_gb_s")
                  .one_of({"recompute", "swap"}),
              ParamSpec::real("swap_space_gib", 4.0, "GiB",
                              "host memory per GPU for swapped-out KV (vLLM's swap_space); when full, "
                              "preemption falls back to recompute")
                  .range(0, 1e5),
              // Optional, so that configurations that do not set it resolve (and hash) as before.
              ParamSpec::string("swap_copies", "flows",
                                "preemption = swap: how the swap copies take their time: flows = on the cluster's "
                                "[network] topology, each GPU's share of the KV between it and its node's host, "
                                "sharing the PCIe links max-min with KV-tier copies and PD transfers, the next "
                                "step waiting for them to drain (flows given here builds the topology for a "
                                "unified cluster that has none); analytic = bytes / network.pcie_gb_s added to "
                                "the next step; unset = kv_tiers.copies where given, else flows where the "
                                "cluster has a topology, analytic where it has none (docs/policies.md)")
                  .one_of({"flows", "analytic"})
                  .optional(),
              ParamSpec::string("pd_pull", "reserve_first",
                                "disaggregation: reserve_first = a decode replica reserves a request's blocks "
                                "before pulling its KV, which its prefill replica holds until then "
                                "(backpressure; vLLM NixlConnector, SGLang, Dynamo); push = the transfer starts "
                                "at once and the request waits for blocks at the decode replica; unset = "
                                "reserve_first")
                  .one_of({"reserve_first", "push"})
                  .optional(),
              pool_table("prefill", "prefill/decode disaggregation: the prefill pool (with [cluster.decode])"),
              pool_table("decode", "prefill/decode disaggregation: the decode pool (with [cluster.prefill])"),
          },
          "the replicas and their KV cache"),
      ParamSpec::table(
          "kv_tiers",
          {
              // Optional, so that configurations that do not set it resolve (and hash) as before.
              ParamSpec::string("copies", "flows",
                                "how the tiers' copies (loads, writes, prefetches) take their time: flows = on the "
                                "cluster's [network] topology, sharing its links max-min with each other and with "
                                "PD transfers (a unified cluster with a tier builds the topology too); analytic = "
                                "bytes / the tier's bandwidth + latency, no link shared (docs/kv-tiers.md, \"One "
                                "fabric\"); unset = flows")
                  .one_of({"flows", "analytic"})
                  .optional(),
              ParamSpec::table(
                  "host",
                  {
                      ParamSpec::real("capacity_gb", 256, "GB",
                                      "host memory per replica for prefix KV (1e9 bytes; whole replica, every GPU's "
                                      "share), in blocks of cluster.block_size tokens")
                          .range(1e-3, 1e6),
                      ParamSpec::real("bandwidth_gb_s", 25, "GB/s",
                                      "GPU <-> host copy bandwidth per GPU, one direction (PCIe Gen5 x16: 64 "
                                      "theoretical, ~25-50 effective for KV copies); each GPU copies its share "
                                      "in parallel")
                          .range(0.01, 1e4),
                      ParamSpec::real("latency_us", 10, "us", "fixed time of one load (setup, launch)").range(0, 1e7),
                      ParamSpec::real("usd_per_gb_hour", 0.005, "USD/GB-h",
                                      "price of host memory per GB per hour (a cloud instance's DRAM: ~0.003-0.006); cost_usd adds capacity_gb x this x the hours each replica's GPUs are billed (docs/kv-tiers.md, "
                                      "\"Cost\"); unset = not priced")
                          .range(0, 1)
                          .optional(),
                      ParamSpec::section("write", "kv_tier_writes", "on_eviction",
                                         "when a prefix unit is written to host memory"),
                      ParamSpec::section("eviction", "kv_tier_evictions", "lru", "what the full host tier evicts"),
                      ParamSpec::section("load", "kv_tier_loads", "cost",
                                         "whether a prefix hit in host memory is loaded or recomputed"),
                  },
                  "a host-DRAM KV tier per replica below HBM: prefix units HBM evicts (or all, write_through) "
                  "are kept there and loaded back on a later prefix hit (needs cluster.prefix_caching; docs/kv-tiers.md)")
                  .optional(),
              ParamSpec::table(
                  "store",
                  {
                      ParamSpec::real("capacity_gb", 4096, "GB",
                                      "the whole store, shared by every replica (1e9 bytes), in blocks of "
                                      "cluster.block_size tokens")
                          .range(1e-3, 1e8),
                      ParamSpec::real("bandwidth_gb_s", 40, "GB/s",
                                      "a GPU's path to the store (its NIC share, one direction; 400 Gb/s RDMA: 50 "
                                      "theoretical); each GPU of a replica copies its share in parallel")
                          .range(0.01, 1e4),
                      ParamSpec::real("total_bandwidth_gb_s", 0, "GB/s",
                                      "the store's bandwidth for one copy of a whole replica's bytes (0 = no limit); "
                                      "a copy takes max(bytes per GPU / bandwidth_gb_s, bytes / this) + latency; on "
                                      "a network topology, the store's link to the spine, shared by every copy "
                                      "(0 = non-blocking)")
                          .range(0, 1e6),
                      ParamSpec::real("latency_us", 100, "us",
                                      "fixed time of one load (lookup, RDMA setup)").range(0, 1e7),
                      ParamSpec::real("usd_per_gb_hour", 0.005, "USD/GB-h",
                                      "price of the store per GB of capacity per hour (memory servers: ~0.004-0.01); cost_usd adds capacity_gb x this x the run's hours, once (docs/kv-tiers.md, "
                                      "\"Cost\"); unset = not priced")
                          .range(0, 1)
                          .optional(),
                      ParamSpec::section("write", "kv_tier_writes", "on_eviction",
                                         "when a prefix unit is written to the store (on_eviction: when the lowest "
                                         "local tier, host if configured else HBM, evicts it)"),
                      ParamSpec::section("eviction", "kv_tier_evictions", "lru", "what the full store evicts"),
                      ParamSpec::section("load", "kv_tier_loads", "cost",
                                         "whether a prefix hit in the store is loaded or recomputed"),
                      ParamSpec::section("prefetch", "kv_tier_prefetches", "none",
                                         "copying a queued request's store units into host memory before it is "
                                         "scheduled (needs [kv_tiers.host]); unset = none")
                          .optional(),
                      ParamSpec::integer("replicas_per_store", 1, "replicas",
                                         "several stores: the tier's replicas (disaggregated: the prefill pool's) in "
                                         "index order form groups of this many (the last may be smaller), each with "
                                         "its own store of these settings (e.g. one per rack); units are shared "
                                         "within a group only; unset = one store for every replica")
                          .range(1, 1 << 20)
                          .optional(),
                      ParamSpec::string("attach", "spine",
                                        "on a network topology, where each store's link attaches: the spine, or "
                                        "the leaf switch of its group's first node (a rack-local store whose "
                                        "copies do not cross the spine); unset = spine")
                          .one_of({"spine", "leaf"})
                          .optional(),
                  },
                  "a KV store on the network shared by every replica (Mooncake store, LMCache server): units a "
                  "replica writes there are loaded by any replica on a later prefix hit (needs cluster.prefix_caching; "
                  "disaggregated: the prefill replicas'; docs/kv-tiers.md)")
                  .optional(),
              ParamSpec::table(
                  "nvme",
                  {
                      ParamSpec::real("capacity_gb", 2000, "GB",
                                      "local NVMe per replica for prefix KV (1e9 bytes; whole replica, every GPU's "
                                      "share), in blocks of cluster.block_size tokens")
                          .range(1e-3, 1e8),
                      ParamSpec::real("read_gb_s", 6, "GB/s",
                                      "the replica's share of its node's SSD read bandwidth, for the whole "
                                      "replica's bytes (a node's NVMe is shared by its GPUs: node read GB/s / "
                                      "replicas on the node)")
                          .range(0.01, 1e4),
                      ParamSpec::real("write_gb_s", 3, "GB/s",
                                      "the replica's share of its node's SSD write bandwidth (SSDs write slower "
                                      "than they read)")
                          .range(0.01, 1e4),
                      ParamSpec::real("latency_us", 100, "us", "fixed time of one load (one I/O batch)")
                          .range(0, 1e7),
                      ParamSpec::real("usd_per_gb_hour", 0.005, "USD/GB-h",
                                      "price of local NVMe per GB per hour (instance or block SSD: ~0.0001-0.0003); cost_usd adds capacity_gb x this x the hours each replica's GPUs are billed (docs/kv-tiers.md, "
                                      "\"Cost\"); unset = not priced")
                          .range(0, 1)
                          .optional(),
                      ParamSpec::real("pcie_gb_s", 25, "GB/s",
                                      "host bounce buffer -> GPU copy bandwidth per GPU (unset: the host tier's "
                                      "bandwidth_gb_s, the same link, or 25 without a host tier)")
                          .range(0.01, 1e4)
                          .optional(),
                      ParamSpec::section("write", "kv_tier_writes", "on_eviction",
                                         "when a prefix unit is written to NVMe (on_eviction: when host memory "
                                         "evicts it, or HBM without a host tier)"),
                      ParamSpec::section("eviction", "kv_tier_evictions", "lru", "what the full NVMe tier evicts"),
                      ParamSpec::section("load", "kv_tier_loads", "cost",
                                         "whether a prefix hit on NVMe is loaded or recomputed"),
                  },
                  "a local-NVMe KV tier per replica below host DRAM (SGLang HiCache's file backend, LMCache's "
                  "local disk): units host memory (or HBM) evicts are kept there and loaded back through a host "
                  "bounce buffer (needs cluster.prefix_caching; docs/kv-tiers.md)")
                  .optional(),
          },
          "KV-cache tiers below GPU memory (issue 16: host DRAM and NVMe per replica, a shared store)")
          .optional(),
      ParamSpec::table(
          "network",
          {
              ParamSpec::string("preset", "",
                                "a node and fabric layout users run (docs/policies.md, \"Topology presets\"): its values for the fields "
                                "below, which the configuration can still override; unset: the defaults below")
                  .one_of({"dgx-a100", "dgx-h100", "dgx-h200", "gb200-nvl72"})
                  .optional(),
              ParamSpec::integer("gpus_per_node", 8, "GPUs", "GPUs per node, joined by NVLink through an NVSwitch")
                  .range(1, 1024),
              ParamSpec::real("nvlink_gb_s", 0, "GB/s", "NVLink bandwidth per GPU, one direction; unset = the GPU's nvlink_gb_s")
                  .range(0.1, 1e5)
                  .optional(),
              ParamSpec::real("nvlink_latency_us", 1, "us", "latency of a GPU - NVSwitch hop").range(0, 1e6),
              ParamSpec::real("pcie_gb_s", 50, "GB/s",
                              "GPU - NIC and GPU - host bandwidth, one direction (PCIe Gen5 x16: 64 theoretical)")
                  .range(0.1, 1e4),
              ParamSpec::real("pcie_latency_us", 1, "us", "latency of a PCIe hop").range(0, 1e6),
              ParamSpec::integer("gpus_per_pcie_switch", 1, "GPUs",
                                 "GPUs (and their NICs) behind one PCIe switch, each by its own PCIe link; 1 = each "
                                 "GPU's PCIe link goes straight to its NIC (unset: 1, or the preset's)")
                  .range(1, 1024)
                  .optional(),
              ParamSpec::integer("nics_per_node", 8, "NICs", "NICs per node; GPU i uses NIC i mod nics_per_node")
                  .range(1, 1024),
              ParamSpec::real("nic_gb_s", 50, "GB/s",
                              "NIC - switch bandwidth, one direction (400 Gb/s InfiniBand NDR or RoCE = 50)")
                  .range(0.1, 1e4),
              ParamSpec::real("nic_latency_us", 2, "us", "latency of a NIC - leaf switch hop (InfiniBand ~1-2, RoCE ~2-5)")
                  .range(0, 1e6),
              ParamSpec::integer("nodes_per_switch", 32, "nodes", "nodes per leaf switch; leaf switches join through a spine")
                  .range(1, 1 << 20),
              ParamSpec::boolean("rails", false,
                                 "rail-optimised fabric: each group of nodes_per_switch nodes has one leaf per NIC "
                                 "index (NIC k of every node on leaf k); false: one leaf per group (unset: false, "
                                 "or the preset's)")
                  .optional(),
              ParamSpec::real("spine_gb_s", 0, "GB/s",
                              "leaf - spine uplink bandwidth, one direction; unset = non-blocking (sum of the leaf's NICs)")
                  .range(0.1, 1e6)
                  .optional(),
              ParamSpec::real("switch_latency_us", 1, "us", "latency of a leaf - spine hop").range(0, 1e6),
              ParamSpec::real("host_gb_s", 0, "GB/s",
                              "each node's host (CPU root complex and DRAM) - PCIe switch link (or - GPU PCIe "
                              "endpoint, with gpus_per_pcie_switch = 1), one direction; host KV-tier loads and "
                              "stores cross it (docs/kv-tiers.md); unset = pcie_gb_s")
                  .range(0.1, 1e4)
                  .optional(),
              ParamSpec::boolean("layerwise_kv_transfer", false,
                                 "stream each layer's KV during the last prefill iteration (overlaps the transfer "
                                 "with the prefill) instead of sending it after"),
          },
          "the cluster network KV transfers between prefill and decode replicas cross"),
      ParamSpec::table(
          "moe",
          {
              ParamSpec::real("routing_skew", 0, "",
                              "expert load skew: the r-th most popular routed expert gets a share of the token visits "
                              "proportional to r^-routing_skew (Zipf; 0 = uniform)")
                  .range(0, 16),
              ParamSpec::path("expert_shares_file",
                              "per-expert loads instead of routing_skew: one non-negative number per routed expert "
                              "and line (token counts or shares, normalised), '#' comments")
                  .optional(),
              ParamSpec::string("placement", "",
                                "where the experts sit: contiguous (by id) or eplb (redundant replicas to the most "
                                "loaded experts, replicas packed onto GPUs by load); unset = eplb with "
                                "redundant_experts, else contiguous")
                  .one_of({"contiguous", "eplb"})
                  .optional(),
              ParamSpec::string("kernels", "auto",
                                "all-to-all kernels: normal (one RDMA copy per token and remote node, NVLink "
                                "forwarding), low_latency (one copy per token and expert), auto (normal for steps "
                                "with prefill, low_latency for decode-only steps)")
                  .one_of({"auto", "normal", "low_latency"}),
              ParamSpec::string("overlap", "none",
                                "two_batch: two micro-batches, each one's dispatch and combine hidden behind the "
                                "other's compute (the step takes the longer of the two); none: they add up")
                  .one_of({"none", "two_batch"}),
              ParamSpec::string("dispatch_dtype", "fp8",
                                "precision tokens are dispatched in (fp8 adds a 4-byte scale per 128 values); combine "
                                "returns bf16")
                  .one_of({"fp8", "bf16"}),
              ParamSpec::boolean("routing_noise", true,
                                 "the busiest GPU's load includes the step's sampling fluctuation (its mean plus "
                                 "sqrt(mean x 2 ln GPUs)), not only the placement's skew"),
          },
          "mixture-of-experts serving with expert_parallel > 1: expert load, placement and the all-to-all kernels")
          .optional(),
      ParamSpec::section("router", "routers", "round_robin",
                         "global policy that picks a replica per request (the prefill replica when disaggregated)"),
      ParamSpec::section("admission", "admission", "",
                         "admission control at the router: shed requests (outcome rejected_admission) when the picked "
                         "replica's queue or predicted TTFT is over a limit, per request class by admit_fraction "
                         "(unset: every request is admitted)")
          .optional(),
      ParamSpec::section("autoscaler", "autoscalers", "",
                         "autoscaling of a unified pool (disaggregated pools: [cluster.prefill.autoscaler], "
                         "[cluster.decode.autoscaler]): max_replicas replicas are built, cluster.replicas are in "
                         "service at the start, and the policy provisions (after a cold start) or drains replicas; "
                         "cost counts the GPU time provisioned (unset: a fixed pool)")
          .optional(),
      ParamSpec::section("decode_router", "routers", "least_outstanding",
                         "disaggregated only: picks the decode replica for each prefilled request"),
      ParamSpec::section("scheduler", "schedulers", "continuous", "per-replica batch scheduler"),
      ParamSpec::section("decoding", "decoding", "none",
                         "speculative decoding: who drafts (a draft model, an EAGLE-style head, the model's MTP "
                         "modules, n-gram lookup), how many tokens per step and how many the target accepts")
          .optional(),
      ParamSpec::table(
          "slo",
          {
              ParamSpec::real("ttft_ms", 0, "ms", "time-to-first-token limit for goodput").range(1e-3, 1e10).optional(),
              ParamSpec::real("tpot_ms", 0, "ms", "time-per-output-token limit for goodput").range(1e-3, 1e10).optional(),
              ParamSpec::real("e2e_ms", 0, "ms", "end-to-end latency limit for goodput").range(1e-3, 1e10).optional(),
          },
          "latency limits a request must meet to count towards goodput (unset = no limit)"),
      ParamSpec::table(
          "faults",
          {
              ParamSpec::string("on_failure", "recompute",
                                "what becomes of the requests a failed replica held (their KV is lost): recompute = "
                                "routed again and prefilled from scratch on a replica that is up (tokens already "
                                "streamed stay with the client); fail = they fail (outcome 'failed')")
                  .one_of({"recompute", "fail"}),
              ParamSpec::integer("max_reroutes", 3, "times",
                                 "recompute: a request lost with failed replicas more often than this fails instead "
                                 "(a retry budget; it also bounds a run whose failures come faster than its longest "
                                 "prefill)")
                  .range(0, 1000),
              ParamSpec::real("mtbf_s", 0, "s",
                              "mean time between failures of each replica: exponential times to failure drawn "
                              "from the run's seed (stream faults/<replica>); unset = no drawn failures")
                  .range(1e-3, 1e12)
                  .optional(),
              ParamSpec::real("mttr_s", 0, "s", "mean time to repair of a drawn failure (exponential); needs mtbf_s")
                  .range(1e-3, 1e12)
                  .optional(),
              ParamSpec::real("node_mtbf_s", 0, "s",
                              "mean time between failures of each node (all the replicas with a GPU on it fail "
                              "together): exponential times drawn from the run's seed (stream faults/node/<node>); "
                              "unset = no drawn node failures")
                  .range(1e-3, 1e12)
                  .optional(),
              ParamSpec::real("node_mttr_s", 0, "s",
                              "mean time to repair of a drawn node failure (exponential); the node's next failure "
                              "is drawn from its repair; needs node_mtbf_s")
                  .range(1e-3, 1e12)
                  .optional(),
              ParamSpec::table_list(
                  "events",
                  {
                      ParamSpec::integer("replica", 0, "", "the replica (0-based, as in replica_stats)")
                          .range(0, 1 << 20)
                          .optional(),
                      ParamSpec::integer("node", 0, "",
                                         "kind = \"fail\" instead of replica: every replica with a GPU on this node "
                                         "(0-based; GPUs fill nodes of network.gpus_per_node in replica order) fails "
                                         "at once")
                          .range(0, 1 << 20)
                          .optional(),
                      ParamSpec::real("at_s", 0, "s", "when it happens (simulated seconds from the start)")
                          .range(0, 1e12)
                          .required(),
                      ParamSpec::string("kind", "fail",
                                        "fail: the replica goes down (its requests lose their KV); slow: it runs "
                                        "at `speed` of its speed from at_s on (a straggler; speed = 1 heals it); "
                                        "link: the network link `link` fails (flows take other paths)")
                          .one_of({"fail", "slow", "link"}),
                      ParamSpec::string("link", "",
                                        "kind = \"link\": the link, both directions, by its name in the topology "
                                        "(\"node 0 nic 0 - leaf\", \"leaf 0 - spine\", \"gpu 3 pcie\", "
                                        "\"gpu 3 nvlink\")")
                          .optional(),
                      ParamSpec::real("repair_s", 0, "s",
                                      "fail: down for this long, then back with an empty cache; unset = for good")
                          .range(0, 1e12)
                          .optional(),
                      ParamSpec::real("speed", 1, "fraction",
                                      "slow: the fraction of its speed the replica runs at (iterations take "
                                      "1/speed as long); link: the link is degraded to this fraction of its "
                                      "bandwidth instead of cut (repair_s heals it; speed = 1 heals it too)")
                          .range(1e-3, 1)
                          .optional(),
                  },
                  "fault events at given times ([[faults.events]])")
                  .optional(),
              ParamSpec::table_list(
                  "link_mtbf",
                  {
                      ParamSpec::string("links", "",
                                        "the links that fail: a class (\"nvlink\", \"pcie\", \"nic\", \"spine\") "
                                        "or link names separated by commas (\"node 0 nic 0 - leaf, leaf 0 - spine\"); "
                                        "each fails independently (stream faults/link/<name>)")
                          .required(),
                      ParamSpec::real("mtbf_s", 0, "s", "mean time between failures of each of the links (exponential)")
                          .range(1e-3, 1e12)
                          .optional(),
                      ParamSpec::real("mttr_s", 0, "s",
                                      "mean time to repair of each failure (exponential); the link's next failure is "
                                      "drawn from its repair")
                          .range(1e-3, 1e12)
                          .optional(),
                  },
                  "drawn link failures by link class ([[faults.link_mtbf]])")
                  .optional(),
          },
          "fault injection: replica failures (given times or MTBF/MTTR) and stragglers (unified clusters)")
          .optional(),
      ParamSpec::table(
          "retries",
          {
              ParamSpec::integer("max_attempts", 1, "attempts",
                                 "attempts per client request, the first included (1 = no retries; the OpenAI "
                                 "Python client's default max_retries = 2 is 3 attempts)")
                  .range(1, 100),
              ParamSpec::real("backoff_s", 0.5, "s", "delay before the first retry, from when the client learns of the failure")
                  .range(0, 1e9),
              ParamSpec::real("multiplier", 2, "", "each further retry waits this many times longer (exponential back-off)")
                  .range(1, 1000),
              ParamSpec::real("max_backoff_s", 8, "s", "the longest delay before a retry (before jitter)").range(0, 1e9),
              ParamSpec::real("jitter", 0.25, "fraction",
                              "each delay is multiplied by (1 - jitter x U), U uniform in [0, 1) (stream 'retries' of "
                              "the run's seed): 0 = none, 1 = full jitter")
                  .range(0, 1),
              ParamSpec::boolean("after_timeout", true, "retry a request whose client timed out (workload client_timeout_s)"),
              ParamSpec::boolean("after_shed", true, "retry a request shed by admission control (HTTP 429/503)"),
              ParamSpec::boolean("after_failure", true,
                                 "retry a request lost with a failed replica ([faults] on_failure = \"fail\")"),
          },
          "client retries: a failed request (timed out, shed, lost with a replica) is sent again as a new request "
          "after an exponential back-off (a closed-loop client retries before its next request); requests that can "
          "never fit are not retried")
          .optional(),
      ParamSpec::table(
          "output",
          {
              ParamSpec::real("sample_interval_ms", 1000, "ms",
                              "period of replica_timeseries samples (queue, batch, KV use); 0 = none")
                  .range(0, 1e12),
              ParamSpec::string("percentiles", "auto",
                                "how latency percentiles are computed: \"exact\" keeps every completed request's "
                                "TTFT, TPOT and E2E (24 bytes per request); \"sketch\" keeps a log-bucket sketch "
                                "(each percentile within 1/512 = 0.2% of the exact one, means exact, bounded "
                                "memory); \"auto\" (the default) is exact up to exact_percentiles_max completed "
                                "requests and then switches to the sketch")
                  .one_of({"auto", "exact", "sketch"})
                  .optional(),
              ParamSpec::integer("exact_percentiles_max", 10000000, "requests",
                                 "percentiles = \"auto\": past this many completed requests the exact values go "
                                 "into the sketch and are freed")
                  .range(1, static_cast<double>(INT64_MAX))
                  .optional(),
          },
          "what the run records besides per-request rows"),
      ParamSpec::table(
          "measurement",
          {
              ParamSpec::real("warmup_s", 0, "s",
                              "leave out of the window's figures the requests arriving before this simulated time")
                  .range(0, 1e12)
                  .optional(),
              ParamSpec::integer("warmup_requests", 0, "requests", "leave out the first N arrivals instead")
                  .range(0, static_cast<double>(INT64_MAX))
                  .optional(),
              ParamSpec::real("cooldown_s", 0, "s",
                              "leave out the requests arriving in the last T simulated seconds before the last arrival")
                  .range(0, 1e12)
                  .optional(),
              ParamSpec::integer("cooldown_requests", 0, "requests", "leave out the last N arrivals instead")
                  .range(0, static_cast<double>(INT64_MAX))
                  .optional(),
              ParamSpec::boolean("auto_warmup", false,
                                 "end the warm-up where MSER-5 finds the requests in the system settled (instead of "
                                 "warmup_s or warmup_requests)"),
              ParamSpec::integer("batches", 20, "batches",
                                 "batches of the batch-means intervals and of the stationarity test")
                  .range(4, 1000),
          },
          "the measurement window (default: the arrival window [0, last arrival]) the *_window figures, "
          "their batch-means intervals and the stationarity check cover"),
      ParamSpec::table(
          "replication",
          {
              ParamSpec::boolean("resample_trace", false,
                                 "replay a block bootstrap of the workload's stream, drawn from the run's seed, instead "
                                 "of the stream itself (what makes replications of a trace replay differ; servesim run "
                                 "--replications sets it for traces)"),
              ParamSpec::real("block_s", 60, "s", "block length of the bootstrap, in the trace's own time (before rate_scale)")
                  .above(0)
                  .range(0, 1e9),
          },
          "how a replication of the run differs from another (generators: by the seed alone)"),
      ParamSpec::table(
          "prediction",
          {
              ParamSpec::real("step_scale", 1, "x",
                              "every step's GPU time times this (one draw of the calibration error: servesim run "
                              "--prediction-draws sets it per draw from the profile's [uncertainty]; set by hand, "
                              "a what-if: 1.1 = every kernel 10% slower)")
                  .above(0)
                  .range(0, 100),
              ParamSpec::real("frontend_offset_ms", 0, "ms",
                              "added to the engine's ingress time (API server, tokenisation), the total kept at or "
                              "above zero: the client-path share of the calibration error")
                  .range(-1e6, 1e6),
          },
          "a run's step-cost and client-path error (docs/experiments.md, \"Prediction intervals\")")
          .optional(),
  };
  return schema;
}

core::Params load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    return core::load_config(path, run_schema(), overrides);
  } catch (const core::ConfigError& e) {
    // An experiment file given to `run`: say what it is and which command runs it, rather than
    // "'axis': unknown key".
    static const std::vector<std::string> kExperimentKeys = {"axis", "base", "seeds", "repetitions", "infeasible",
                                                             "capacity"};
    const bool in_file = e.where().file == path;
    if (in_file && std::find(kExperimentKeys.begin(), kExperimentKeys.end(), e.key()) != kExperimentKeys.end())
      throw core::ConfigError(e.where(), e.key(),
                              "this is an experiment file (it has '" + e.key() +
                                  "'), not a run configuration: run its points with servesim sweep " + path +
                                  " --db RESULTS.db (or find their capacity with servesim capacity " + path + ")");
    throw;
  }
}

std::map<std::string, std::string> calibration_profiles(const core::Params& config) {
  const core::Params& cluster = config.section("cluster");
  const core::Params& cost_cfg = config.section("cost_model");
  std::map<std::string, std::string> out;
  auto pool = [&](const std::string& name, const core::Params& pool_cfg) {
    const core::Params& gpu_cfg = pool_cfg.has("gpu") ? pool_cfg.section("gpu") : config.section("gpu");
    const std::unique_ptr<hwmodels::GpuSpec> gpu = hwmodels::gpu_registry().make(gpu_cfg);
    out[name] = hwmodels::selected_calibration(cost_cfg, gpu->name).value_or("");
  };
  if (cluster.has("prefill") || cluster.has("decode")) {
    for (const char* role : {"prefill", "decode"})
      if (cluster.has(role)) pool(std::string("cluster.") + role, cluster.section(role));
  } else {
    pool("cluster", cluster);
  }
  return out;
}

std::map<std::string, core::FileDigest> input_files(const core::Params& config) {
  std::map<std::string, core::FileDigest> files;
  config.for_each_path([&](const core::Params& section, const std::string& name) {
    const std::string& path = section.get_string(name);
    if (files.count(path)) return;
    try {
      files[path] = core::file_digest(path, "'" + section.key_path(name) + "'");
    } catch (const core::Error&) {
      // Unreadable: building the run reports it where the configuration names it.
    }
  });
  return files;
}

std::string config_hash(const core::Params& config, const std::map<std::string, core::FileDigest>& files) {
  const std::string identity = config.to_identity_toml([&](const std::string& path) {
    const auto it = files.find(path);
    return it == files.end() ? std::string("unreadable") : it->second.digest;
  });
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(core::fnv1a64(identity)));
  return buf;
}

std::string config_hash(const core::Params& config) { return config_hash(config, input_files(config)); }

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMaxKvBlocks = 1e12;
constexpr double kMaxKvTokens = 1e15;

std::string gib(double bytes) { return core::format_double(std::round(bytes / kGiB * 100) / 100) + " GiB"; }

// The cache's layer groups on one GPU of a TP group, as the replica's KV cache counts them. A
// speculative drafter's KV (full attention layers) sits beside the target's in every block (one page
// table for both, as engines allocate them).
sim::KvLayout kv_layout(const hwmodels::ModelSpec& model, int64_t tp, const policies::DecodingMethod* decoding) {
  const hwmodels::KvGroups g = hwmodels::kv_groups_per_gpu(model, tp);
  sim::KvLayout l;
  l.full_bytes_per_token = g.full_bytes_per_token;
  l.window_bytes_per_token = g.window_bytes_per_token;
  l.window = g.window;
  l.state_bytes = g.state_bytes;
  if (decoding && decoding->drafter())
    l.full_bytes_per_token += policies::drafter_kv_bytes_per_token_per_gpu(*decoding->drafter(), tp);
  return l;
}

// KV blocks per replica, from what GPU memory leaves after weights (a drafter's too) and the
// activation reserve: one GPU's worth per attention rank (each expert-parallel rank keeps its own
// requests' KV). A hybrid model's block is block_size tokens of its per-token layers (full and window).
int64_t kv_blocks(const core::Params& cluster, const core::Params& pool, const core::Params& gpu_cfg,
                  const hwmodels::ModelSpec& model, const hwmodels::GpuSpec& gpu, int64_t tp,
                  const hwmodels::ExpertParallelism& ep, const policies::DecodingMethod* decoding) {
  const int64_t block_size = cluster.get_int("block_size");
  const double util = cluster.get_float("gpu_memory_utilization");
  const double reserve = cluster.get_float("activation_reserve_gib") * kGiB;
  const double budget = gpu.memory_bytes * util - reserve;
  double weights = hwmodels::weight_bytes_per_gpu(model, tp, ep.degree, ep.redundant_experts);
  double left = hwmodels::kv_budget_bytes_per_gpu(gpu, model, tp, util, reserve, ep.degree, ep.redundant_experts);
  double kv_per_token = hwmodels::kv_bytes_per_token_per_gpu(model, tp);
  if (decoding && decoding->drafter()) {
    const double draft_weights = policies::drafter_weight_bytes_per_gpu(*decoding->drafter(), tp);
    weights += draft_weights;
    left -= draft_weights;
    kv_per_token += policies::drafter_kv_bytes_per_token_per_gpu(*decoding->drafter(), tp);
  }
  const sim::KvLayout layout = kv_layout(model, tp, decoding);
  const double kv_per_block =
      layout.hybrid() ? layout.block_bytes(block_size) : kv_per_token * static_cast<double>(block_size);
  const std::string parallel = ep.enabled() ? "expert_parallel = " + std::to_string(ep.degree) +
                                                  " (attention tensor_parallel = " + std::to_string(tp) + ")"
                                            : "tensor_parallel = " + std::to_string(tp);
  if (left < kv_per_block)
    pool.fail(ep.enabled() ? "expert_parallel" : "tensor_parallel",
                 "model '" + model.name + "' does not fit GPU '" + gpu.name + "' at " + parallel +
                     ": its weights" + (decoding && decoding->drafter() ? " and its drafter's" : "") +
                     " need " + gib(weights) + " per GPU, and " +
                     gib(gpu.memory_bytes) + " x gpu_memory_utilization " + core::format_double(util) +
                     " - activation_reserve_gib " + core::format_double(reserve / kGiB) + " leaves " +
                     gib(budget) + ", not enough for the weights and one KV block; raise " +
                     (ep.enabled() ? "expert_parallel" : "tensor_parallel") +
                     ", choose a GPU with more memory, or lower activation_reserve_gib");
  // Block and token counts are int64 all the way down (tokens = blocks x block_size): a cache larger
  // than any GPU memory would overflow them, so it is refused with the keys that made it.
  const double blocks =
      std::floor(left / kv_per_block) * static_cast<double>(hwmodels::attention_ranks(ep.degree, tp));
  if (!(blocks <= kMaxKvBlocks) || !(blocks * static_cast<double>(block_size) <= kMaxKvTokens))
    gpu_cfg.fail("memory_gib",
              "the KV cache would hold " + core::format_double(blocks) + " blocks of " + std::to_string(block_size) +
                  " tokens per replica (gpu.memory_gib = " + core::format_double(gpu.memory_bytes / kGiB) +
                  ", model KV bytes per token per GPU = " + core::format_double(kv_per_token) + "), more than the " +
                  core::format_double(kMaxKvBlocks) + " blocks and " + core::format_double(kMaxKvTokens) +
                  " tokens servesim counts; check gpu.memory_gib, the model's kv_bytes and cluster.block_size");
  return static_cast<int64_t>(blocks);
}

// An iteration longer than this is no GPU's: a value of the [gpu] or [cost_model] sections is out of
// proportion (each is within its range, but not together), and the run would be meaningless.
constexpr double kMaxIterationSeconds = 1e6;

// Times a prefill of the model's context (at most 8192 tokens) and a one-sequence decode, and refuses
// a pool whose iterations could not be a real engine's.
void check_iteration_times(const core::Params& config, const core::Params& pool, const hwmodels::StepCostModel& cost,
                           int64_t max_context) {
  hwmodels::BatchShape prefill;
  prefill.prefill_seqs = 1;
  prefill.prefill_tokens = std::min<int64_t>(max_context, 8192);
  prefill.prefill_logits = 1;
  prefill.prefill_attention_pairs = prefill.prefill_tokens * (prefill.prefill_tokens + 1) / 2;
  hwmodels::BatchShape decode;
  decode.decode_seqs = 1;
  decode.decode_context_tokens = 1;
  for (const auto& [shape, what] : {std::pair{prefill, "a prefill of " + std::to_string(prefill.prefill_tokens) + " tokens"},
                                    std::pair{decode, std::string("a one-token decode")}}) {
    const double s = cost.step(shape).seconds;
    if (s > 0 && s <= kMaxIterationSeconds) continue;
    const core::Params& gpu = pool.has("gpu") ? pool.section("gpu") : config.section("gpu");
    std::string values;
    for (const char* key : {"peak_tflops", "hbm_bandwidth_gb_s"})
      values += std::string(values.empty() ? "" : ", ") + gpu.key_path(key) + " = " + core::format_double(gpu.get_float(key));
    throw core::ConfigError(gpu.where(), gpu.path(),
                            what + " would take " + core::format_double(s) + " s on this GPU (" + values +
                                ", and the [cost_model] efficiencies and overheads): no engine's iteration takes "
                                "more than " + core::format_double(kMaxIterationSeconds) +
                                " s or no time at all; bring the [gpu] and [cost_model] values into proportion");
  }
}

// [measurement] as the collector takes it; contradictory keys are errors at the key.
metrics::MeasurementConfig measurement_config(const core::Params& m) {
  metrics::MeasurementConfig c;
  if (m.has("warmup_s")) c.warmup_s = m.get_float("warmup_s");
  if (m.has("warmup_requests")) c.warmup_requests = m.get_int("warmup_requests");
  if (m.has("cooldown_s")) c.cooldown_s = m.get_float("cooldown_s");
  if (m.has("cooldown_requests")) c.cooldown_requests = m.get_int("cooldown_requests");
  c.auto_warmup = m.get_bool("auto_warmup");
  c.batches = m.get_int("batches");
  if (c.warmup_s && c.warmup_requests)
    m.fail("warmup_requests", "give the warm-up by time (warmup_s) or by requests (warmup_requests), not both");
  if (c.auto_warmup && (c.warmup_s || c.warmup_requests))
    m.fail("auto_warmup", "auto_warmup finds the warm-up's end itself; remove warmup_s / warmup_requests, or set "
                          "auto_warmup = false");
  if (c.cooldown_s && c.cooldown_requests)
    m.fail("cooldown_requests", "give the cool-down by time (cooldown_s) or by requests (cooldown_requests), not both");
  return c;
}

}  // namespace

namespace {

// The KV tiers' per-run figures, summed over the replicas, as optional metrics (the fleet_metrics
// table, like client retries'), so that runs without a tier keep their layout. With --check, every
// replica's HBM cache and tiers are checked for conservation first.
//
// One tier's rows, kv_<tier>_*: its hits, loads, saves, declines, stores, evictions and what it
// holds at the end; `after_hits` and `after_loaded` go after the hit tokens and the loaded tokens
// (the host tier's HBM hit rate, the store's cross-replica counts), where the rows always were.
void push_tier_rows(std::vector<metrics::NamedValue>& out, const std::string& tier, double hits, double prompt,
                    const sim::KvTierStats& t, double units, double blocks,
                    std::initializer_list<metrics::NamedValue> after_hits,
                    std::initializer_list<metrics::NamedValue> after_loaded) {
  const std::string p = "kv_" + tier + "_";
  auto count = [&](const char* name, double v) { out.push_back(metrics::NamedValue{p + name, v, true}); };
  auto real = [&](const char* name, double v) { out.push_back(metrics::NamedValue{p + name, v, false}); };
  count("hit_tokens", hits);
  for (const metrics::NamedValue& v : after_hits) out.push_back(v);
  real("token_hit_rate", prompt > 0 ? hits / prompt : 0);
  count("loads", static_cast<double>(t.loads));
  count("loaded_tokens", static_cast<double>(t.loaded_tokens));
  for (const metrics::NamedValue& v : after_loaded) out.push_back(v);
  real("load_gb", t.load_bytes * 1e-9);
  real("load_seconds", t.load_seconds);
  real("saved_prefill_seconds", t.saved_prefill_seconds);
  real("saved_tflop", t.saved_flops * 1e-12);
  count("declined", static_cast<double>(t.declined));
  count("declined_tokens", static_cast<double>(t.declined_tokens));
  count("stores", static_cast<double>(t.stores));
  real("store_gb", t.store_bytes * 1e-9);
  real("store_seconds", t.store_seconds);
  count("evictions", static_cast<double>(t.evictions));
  count("dropped", static_cast<double>(t.dropped));
  count("units_at_end", units);
  count("blocks_at_end", blocks);
}

void append_kv_tier_metrics(const sim::Cluster& cluster, metrics::RunSummary& s, bool check) {
  sim::KvTierStats t, nt;
  int64_t host_units = 0, host_blocks = 0, nvme_units = 0, nvme_blocks = 0;
  const bool host = !cluster.replicas().empty() && cluster.replicas()[0]->host_tier();
  const bool nvme = !cluster.replicas().empty() && cluster.replicas()[0]->nvme_tier();
  for (const auto& r : cluster.replicas()) {
    if (check) r->kv_cache().check();
    if (const sim::NvmeKvTier* n = r->nvme_tier()) {
      if (check) n->check();
      nt.add(n->totals());
      nvme_units += static_cast<int64_t>(n->units());
      nvme_blocks += n->used();
    }
    if (!r->host_tier()) continue;
    if (check) r->host_tier()->check();
    t.add(r->host_tier()->stats());
    host_units += static_cast<int64_t>(r->host_tier()->units());
    host_blocks += r->host_tier()->used();
  }
  auto count = [](std::string name, double v) { return metrics::NamedValue{std::move(name), v, true}; };
  auto real = [](std::string name, double v) { return metrics::NamedValue{std::move(name), v, false}; };
  const auto tier_hits = s.prefix_host_hit_tokens + s.prefix_store_hit_tokens + s.prefix_nvme_hit_tokens;
  const auto hbm_hit = static_cast<double>(s.prefix_hit_tokens - tier_hits);
  const auto prompt = static_cast<double>(s.prefix_prompt_tokens);
  s.fleet.push_back(count("kv_hbm_hit_tokens", hbm_hit));
  if (host)
    push_tier_rows(s.fleet, "host", static_cast<double>(s.prefix_host_hit_tokens), prompt, t,
                   static_cast<double>(host_units), static_cast<double>(host_blocks),
                   {real("kv_hbm_token_hit_rate", prompt > 0 ? hbm_hit / prompt : 0)}, {});
  else
    s.fleet.push_back(real("kv_hbm_token_hit_rate", prompt > 0 ? hbm_hit / prompt : 0));
  const sim::SharedKvStore* store = cluster.kv_store();
  if (store) {
    // Totals over the stores (one per group of replicas with kv_tiers.store.replicas_per_store).
    sim::StoreStats st;
    int64_t store_units = 0, store_blocks = 0;
    for (const auto& one : cluster.kv_stores()) {
      if (check) one->check();
      for (const sim::StoreStats& r : one->per_replica()) st.add(r);
      st.evictions += one->totals().evictions;
      st.dropped += one->totals().dropped;
      store_units += static_cast<int64_t>(one->units());
      store_blocks += one->used();
    }
    push_tier_rows(s.fleet, "store", static_cast<double>(s.prefix_store_hit_tokens), prompt, st,
                   static_cast<double>(store_units), static_cast<double>(store_blocks), {},
                   {count("kv_store_cross_replica_loads", static_cast<double>(st.cross_loads)),
                    count("kv_store_cross_replica_tokens", static_cast<double>(st.cross_tokens))});
    if (store->prefetch())
      for (const metrics::NamedValue& v : {
               count("kv_store_prefetches", static_cast<double>(st.prefetches)),
               count("kv_store_prefetched_tokens", static_cast<double>(st.prefetched_tokens)),
               real("kv_store_prefetch_gb", st.prefetch_bytes * 1e-9),
               count("kv_store_prefetch_cut_tokens", static_cast<double>(st.prefetch_cut_tokens)),
               count("kv_store_prefetch_waits", static_cast<double>(st.prefetch_waits)),
               real("kv_store_prefetch_wait_seconds", st.prefetch_wait_seconds),
           })
        s.fleet.push_back(v);
  }
  if (nvme)
    push_tier_rows(s.fleet, "nvme", static_cast<double>(s.prefix_nvme_hit_tokens), prompt, nt,
                   static_cast<double>(nvme_units), static_cast<double>(nvme_blocks), {}, {});
  // Requests admitted again after a recompute preemption or a failover, their hits decided again
  // (docs/kv-tiers.md, "Preemption"): only in runs that had one, so that the others keep their rows.
  if (s.prefix_reloads > 0) {
    s.fleet.push_back(count("kv_reloads", static_cast<double>(s.prefix_reloads)));
    s.fleet.push_back(count("kv_reload_hit_tokens", static_cast<double>(s.prefix_reload_hit_tokens)));
    if (host) s.fleet.push_back(count("kv_host_reload_tokens", static_cast<double>(s.prefix_host_reload_tokens)));
    if (store) s.fleet.push_back(count("kv_store_reload_tokens", static_cast<double>(s.prefix_store_reload_tokens)));
    if (nvme) s.fleet.push_back(count("kv_nvme_reload_tokens", static_cast<double>(s.prefix_nvme_reload_tokens)));
  }
  // Per replica (whole run, not the measurement window): "replica<i>.<figure>", after the totals.
  for (const auto& r : cluster.replicas()) {
    const std::string p = "replica" + std::to_string(r->index()) + ".";
    if (const sim::HostKvTier* h = r->host_tier()) {
      const sim::KvTierStats& x = h->stats();
      s.fleet.push_back(count(p + "kv_host_loaded_tokens", static_cast<double>(x.loaded_tokens)));
      s.fleet.push_back(count(p + "kv_host_loads", static_cast<double>(x.loads)));
      s.fleet.push_back(real(p + "kv_host_load_gb", x.load_bytes * 1e-9));
      s.fleet.push_back(real(p + "kv_host_store_gb", x.store_bytes * 1e-9));
    }
    if (const sim::SharedKvStore* own = r->kv_store(); own && r->index() < own->per_replica().size()) {
      const sim::StoreStats& x = own->per_replica()[r->index()];
      s.fleet.push_back(count(p + "kv_store_loaded_tokens", static_cast<double>(x.loaded_tokens)));
      s.fleet.push_back(count(p + "kv_store_cross_replica_tokens", static_cast<double>(x.cross_tokens)));
      s.fleet.push_back(count(p + "kv_store_loads", static_cast<double>(x.loads)));
      s.fleet.push_back(real(p + "kv_store_load_gb", x.load_bytes * 1e-9));
      s.fleet.push_back(real(p + "kv_store_store_gb", x.store_bytes * 1e-9));
      if (store->prefetch())
        s.fleet.push_back(count(p + "kv_store_prefetched_tokens", static_cast<double>(x.prefetched_tokens)));
    }
    if (const sim::NvmeKvTier* n = r->nvme_tier()) {
      const sim::KvTierStats& x = n->stats();
      s.fleet.push_back(count(p + "kv_nvme_loaded_tokens", static_cast<double>(x.loaded_tokens)));
      s.fleet.push_back(count(p + "kv_nvme_loads", static_cast<double>(x.loads)));
      s.fleet.push_back(real(p + "kv_nvme_load_gb", x.load_bytes * 1e-9));
      s.fleet.push_back(real(p + "kv_nvme_store_gb", x.store_bytes * 1e-9));
    }
  }
  // Per store, with more than one (kv_tiers.store.replicas_per_store): "store<g>.<figure>", after the
  // replicas' rows (whole run).
  if (cluster.kv_stores().size() > 1)
    for (size_t g = 0; g < cluster.kv_stores().size(); ++g) {
      const sim::SharedKvStore& one = *cluster.kv_stores()[g];
      sim::StoreStats x;
      for (const sim::StoreStats& r : one.per_replica()) x.add(r);
      const std::string p = "store" + std::to_string(g) + ".";
      s.fleet.push_back(count(p + "kv_store_loaded_tokens", static_cast<double>(x.loaded_tokens)));
      s.fleet.push_back(count(p + "kv_store_cross_replica_tokens", static_cast<double>(x.cross_tokens)));
      s.fleet.push_back(count(p + "kv_store_loads", static_cast<double>(x.loads)));
      s.fleet.push_back(real(p + "kv_store_load_gb", x.load_bytes * 1e-9));
      s.fleet.push_back(count(p + "kv_store_stores", static_cast<double>(one.totals().stores)));
      s.fleet.push_back(real(p + "kv_store_store_gb", one.totals().store_bytes * 1e-9));
      s.fleet.push_back(count(p + "kv_store_evictions", static_cast<double>(one.totals().evictions)));
      s.fleet.push_back(count(p + "kv_store_units_at_end", static_cast<double>(one.units())));
      s.fleet.push_back(count(p + "kv_store_blocks_at_end", static_cast<double>(one.used())));
    }
}

// Swap preemption on a cluster with a network topology (either cluster.swap_copies): per run and per
// replica that decodes, the swap copies, their GB (every GPU's share) and the seconds they held steps
// (flows: the wait for them to drain; analytic: the time added), appended to `fleet` (table
// fleet_metrics). Nothing without a topology, so that those runs keep their results byte for byte.
void append_swap_metrics(const sim::Cluster& cluster, metrics::RunSummary& s) {
  sim::Replica::SwapStats total;
  for (const auto& r : cluster.replicas()) {
    const sim::Replica::SwapStats& x = r->swap_stats();
    total.swap_outs += x.swap_outs;
    total.swap_ins += x.swap_ins;
    total.out_bytes += x.out_bytes;
    total.in_bytes += x.in_bytes;
    total.wait_seconds += x.wait_seconds;
  }
  auto rows = [&s](const std::string& p, const sim::Replica::SwapStats& x) {
    s.fleet.push_back({p + "swap_outs", static_cast<double>(x.swap_outs), true});
    s.fleet.push_back({p + "swap_ins", static_cast<double>(x.swap_ins), true});
    s.fleet.push_back({p + "swap_out_gb", x.out_bytes * 1e-9, false});
    s.fleet.push_back({p + "swap_in_gb", x.in_bytes * 1e-9, false});
    s.fleet.push_back({p + "swap_wait_s", x.wait_seconds, false});
  };
  rows("", total);
  for (const auto& r : cluster.replicas())  // a prefill replica never swaps (its requests do not decode there)
    if (r->role() != sim::ReplicaRole::kPrefill)
      rows("replica" + std::to_string(r->index()) + ".", r->swap_stats());
}

// A KV tier's price: [kv_tiers.<tier>] has usd_per_gb_hour (docs/kv-tiers.md, "Cost").
bool tier_priced(const core::Params& config, const char* tier) {
  return config.has("kv_tiers") && config.section("kv_tiers").has(tier) &&
         config.section("kv_tiers").section(tier).has("usd_per_gb_hour");
}

// The tier's USD per hour, capacity_gb x usd_per_gb_hour (per replica for host and NVMe, the whole
// store for the store); 0 when the tier is absent or not priced.
double tier_usd_per_hour(const core::Params& config, const char* tier, bool present) {
  if (!present || !tier_priced(config, tier)) return 0;
  const core::Params& h = config.section("kv_tiers").section(tier);
  return h.get_float("capacity_gb") * h.get_float("usd_per_gb_hour");
}

// [kv_tiers.store]: refused where it is not modelled; capacity in the replicas' HBM blocks (a block
// sits on one attention rank of tp GPUs); an expert-parallel replica's copies spread over its
// `ranks` x tp GPUs (sim::tier_copy_share).
sim::StoreSpec store_spec(const core::Params& config, const hwmodels::ModelSpec& model, int64_t tp,
                          const policies::DecodingMethod* decoding, int64_t ranks, bool prefix_caching,
                          int64_t block_size) {
  const core::Params& h = config.section("kv_tiers").section("store");
  if (!prefix_caching)
    h.fail("capacity_gb",
           "a shared KV store keeps prefix units, which need cluster.prefix_caching = true (and a workload with "
           "prefix block hashes)");
  const sim::KvLayout layout = kv_layout(model, tp, decoding);
  const double block_bytes = layout.block_bytes(block_size);
  const double replica_block_bytes = block_bytes * static_cast<double>(tp);
  sim::StoreSpec spec;
  spec.capacity_blocks = static_cast<int64_t>(std::floor(h.get_float("capacity_gb") * 1e9 / replica_block_bytes));
  if (spec.capacity_blocks < 1)
    h.fail("capacity_gb", "holds no KV block (" + core::format_double(replica_block_bytes) +
                              " bytes per block per replica); give at least that much");
  const sim::TierCopyShare share = sim::tier_copy_share(block_bytes, tp, ranks);
  spec.block_bytes_per_gpu = share.block_bytes_per_gpu;
  spec.gpus = share.gpus;
  spec.link_bytes_per_s = h.get_float("bandwidth_gb_s") * 1e9;
  spec.total_bytes_per_s = h.get_float("total_bandwidth_gb_s") * 1e9;
  spec.latency_s = h.get_float("latency_us") * 1e-6;
  spec.write = policies::kv_tier_write_registry().make(h.section("write"));
  spec.eviction = policies::kv_tier_eviction_registry().make(h.section("eviction"));
  spec.load = policies::kv_tier_load_registry().make(h.section("load"));
  if (h.has("prefetch")) {
    spec.prefetch = policies::kv_tier_prefetch_registry().make(h.section("prefetch"));
    if (spec.prefetch && !config.section("kv_tiers").has("host"))
      h.section("prefetch").fail("kind", "a prefetch copies store units into host memory: it needs [kv_tiers.host]");
  }
  return spec;
}

// kv_tiers.store.replicas_per_store (0 when unset: one store for every replica of the tier).
int64_t replicas_per_store(const core::Params& config) {
  const core::Params& h = config.section("kv_tiers").section("store");
  return h.has("replicas_per_store") ? h.get_int("replicas_per_store") : 0;
}

// How many stores the tier's `replicas` (disaggregated: the prefill pool's) have: one per group.
int64_t store_groups(const core::Params& config, int64_t replicas) {
  const int64_t n = replicas_per_store(config);
  return n > 0 ? (replicas + n - 1) / n : 1;
}

// replicas_per_store in [1, the tier's replicas]; attach = "leaf" needs a network topology.
void check_store_groups(const core::Params& h, int64_t replicas, bool disaggregated, bool topology) {
  if (h.has("replicas_per_store") && h.get_int("replicas_per_store") > replicas)
    h.fail("replicas_per_store",
           "groups of " + std::to_string(h.get_int("replicas_per_store")) + " replicas, but the store is used by " +
               std::to_string(replicas) +
               (disaggregated ? " prefill replicas (cluster.prefill.replicas; decode replicas use no store)"
                              : " replicas (cluster.replicas, or autoscaler.max_replicas)") +
               "; give at most that (or leave it unset for one store)");
  if (h.has("attach") && h.get_string("attach") == "leaf" && !topology)
    h.fail("attach",
           "attach = \"leaf\" places each store on a leaf switch of the cluster's network topology, and this "
           "cluster has none (kv_tiers.copies = \"analytic\" builds none for the tiers); use copies = \"flows\" (the "
           "default) or remove attach");
}

// Where each store attaches on the topology (TopologyConfig::store_at): empty for one store on the
// spine (as without these keys); else per group of replicas_per_store replicas of the first pool,
// -1 (the spine) or, with attach = "leaf", the node of the group's first GPU, whose leaf must hold
// every GPU of the group.
std::vector<int64_t> store_attachments(const core::Params& h, const sim::TopologyConfig& topo,
                                       const std::vector<std::vector<int64_t>>& placement, int64_t replicas,
                                       bool disaggregated) {
  check_store_groups(h, replicas, disaggregated, true);
  const int64_t n = h.has("replicas_per_store") ? h.get_int("replicas_per_store") : replicas;
  const int64_t groups = (replicas + n - 1) / n;
  const bool leaf = h.has("attach") && h.get_string("attach") == "leaf";
  if (!leaf && groups == 1) return {};
  std::vector<int64_t> at;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = placement[static_cast<size_t>(g * n)][0] / topo.gpus_per_node;
    if (leaf) {
      const int64_t last_replica = std::min(replicas, (g + 1) * n) - 1;
      for (int64_t r = g * n; r <= last_replica; ++r)
        for (int64_t gpu : placement[static_cast<size_t>(r)])
          if (gpu / topo.gpus_per_node / topo.nodes_per_switch != first / topo.nodes_per_switch)
            h.fail("attach",
                   "store " + std::to_string(g) + "'s replicas (" + std::to_string(g * n) + " to " +
                       std::to_string(last_replica) + ") sit under more than one leaf switch (nodes " +
                       std::to_string(first) + " and " + std::to_string(gpu / topo.gpus_per_node) + ", " +
                       std::to_string(topo.nodes_per_switch) + (topo.nodes_per_switch == 1 ? " node" : " nodes") +
                       " per leaf: network.nodes_per_switch or the preset's), so a store on one leaf is not "
                       "rack-local for them; give kv_tiers.store.replicas_per_store groups that fit a leaf, or attach "
                       "= \"spine\"");
    }
    at.push_back(leaf ? first : -1);
  }
  return at;
}

// [kv_tiers.nvme]: refused where it is not modelled; capacity in the replica's HBM blocks; the
// bounce buffer's PCIe link is the host tier's when there is one (`host`: its spec, or null); an
// expert-parallel replica's copies spread over its `ranks` x tp GPUs (sim::tier_copy_share).
std::shared_ptr<const sim::NvmeTierSpec> nvme_spec(const core::Params& config, const hwmodels::ModelSpec& model,
                                                   int64_t tp, const policies::DecodingMethod* decoding, int64_t ranks,
                                                   bool prefix_caching, int64_t block_size,
                                                   const sim::HostTierSpec* host) {
  const core::Params& h = config.section("kv_tiers").section("nvme");
  if (!prefix_caching)
    h.fail("capacity_gb",
           "an NVMe KV tier keeps prefix units, which need cluster.prefix_caching = true (and a workload with "
           "prefix block hashes)");
  if (host && h.has("pcie_gb_s"))
    h.fail("pcie_gb_s",
           "NVMe loads reach the GPU through host memory over the host tier's PCIe link: with [kv_tiers.host], set "
           "kv_tiers.host.bandwidth_gb_s instead");
  const sim::KvLayout layout = kv_layout(model, tp, decoding);
  const double block_bytes = layout.block_bytes(block_size);
  const double replica_block_bytes = block_bytes * static_cast<double>(tp);
  auto spec = std::make_shared<sim::NvmeTierSpec>();
  spec->capacity_blocks = static_cast<int64_t>(std::floor(h.get_float("capacity_gb") * 1e9 / replica_block_bytes));
  if (spec->capacity_blocks < 1)
    h.fail("capacity_gb", "holds no KV block (" + core::format_double(replica_block_bytes) +
                              " bytes per block per replica); give at least that much");
  const sim::TierCopyShare share = sim::tier_copy_share(block_bytes, tp, ranks);
  spec->block_bytes_per_gpu = share.block_bytes_per_gpu;
  spec->gpus = share.gpus;
  spec->read_bytes_per_s = h.get_float("read_gb_s") * 1e9;
  spec->write_bytes_per_s = h.get_float("write_gb_s") * 1e9;
  spec->pcie_bytes_per_s = host ? host->link_bytes_per_s : (h.has("pcie_gb_s") ? h.get_float("pcie_gb_s") : 25) * 1e9;
  spec->latency_s = h.get_float("latency_us") * 1e-6;
  spec->write = policies::kv_tier_write_registry().make(h.section("write"));
  spec->eviction = policies::kv_tier_eviction_registry().make(h.section("eviction"));
  spec->load = policies::kv_tier_load_registry().make(h.section("load"));
  return spec;
}

// One pool of identical replicas: the unified pool, or the prefill or decode pool.
struct Pool {
  std::string name;                  // "cluster", "cluster.prefill", "cluster.decode"
  const core::Params* cfg = nullptr; // where its replicas and tensor_parallel were set
  int64_t replicas = 0;
  int64_t tp = 1;
  hwmodels::ExpertParallelism ep;    // degree 1: none
  int64_t ranks = 1;                 // attention data-parallel ranks per replica
  double expert_imbalance = 1;       // the placement's busiest-GPU load over the mean
  int64_t gpus() const { return ep.enabled() ? ep.degree : tp; }
  std::unique_ptr<hwmodels::GpuSpec> gpu;
  std::string gpu_kind;
  std::string calibration;           // the profile's path; "" = none
  bool calibration_default = false;  // the GPU's shipped profile, chosen because none was named
  std::unique_ptr<hwmodels::StepCostModel> cost;
  std::unique_ptr<hwmodels::EngineModel> engine;
  int64_t kv_blocks = 0;
  const core::Params* scheduler = nullptr;
  std::string scheduler_kind;
};

// The routed experts' shares of the token visits ([moe] routing_skew or expert_shares_file), read
// once per run; empty = uniform.
std::vector<double> expert_shares(const core::Params& config, const hwmodels::ModelSpec& model) {
  if (!config.has("moe") || !model.is_moe()) return {};
  const core::Params& moe = config.section("moe");
  if (moe.has("expert_shares_file")) {
    if (moe.given("routing_skew"))
      moe.fail("routing_skew", "give routing_skew or expert_shares_file, not both");
    return hwmodels::read_expert_shares(moe.get_string("expert_shares_file"), model.num_experts);
  }
  const double skew = moe.get_float("routing_skew");
  return skew > 0 ? hwmodels::zipf_expert_shares(model.num_experts, skew) : std::vector<double>{};
}

// A pool's expert parallelism: its degree and redundancy (the pool's keys, else [cluster]'s), [moe]
// and the fabric of [network]. Errors name the key to blame.
hwmodels::ExpertParallelism expert_parallelism(const core::Params& pool_cfg, const core::Params& cluster_cfg,
                                               const core::Params& config, const hwmodels::ModelSpec& model,
                                               const hwmodels::GpuSpec& gpu, int64_t tp,
                                               const std::vector<double>& shares) {
  // The section that set a key: the pool's, else [cluster] (which blames its own line or header).
  auto from = [&](const char* key) -> const core::Params& { return pool_cfg.has(key) ? pool_cfg : cluster_cfg; };
  hwmodels::ExpertParallelism ep;
  const core::Params& degree_cfg = from("expert_parallel");
  ep.degree = degree_cfg.has("expert_parallel") ? degree_cfg.get_int("expert_parallel") : 1;
  const core::Params& redundant_cfg = from("redundant_experts");
  ep.redundant_experts = redundant_cfg.has("redundant_experts") ? redundant_cfg.get_int("redundant_experts") : 0;
  const core::Params& dp_cfg = from("attention_data_parallel");
  if (dp_cfg.has("attention_data_parallel")) {
    const int64_t dp = dp_cfg.get_int("attention_data_parallel");
    if (!ep.enabled() && dp > 1)
      dp_cfg.fail("attention_data_parallel",
                  "attention data parallelism runs inside an expert-parallel replica; set expert_parallel = " +
                      std::to_string(dp * tp) + " (attention_data_parallel x tensor_parallel), or use " +
                      std::to_string(dp) + " x more replicas");
    if (ep.enabled() && dp * tp != ep.degree)
      dp_cfg.fail("attention_data_parallel",
                  std::to_string(dp) + " ranks x tensor_parallel " + std::to_string(tp) + " = " +
                      std::to_string(dp * tp) + " GPUs, but expert_parallel = " + std::to_string(ep.degree) +
                      ": an expert-parallel replica's GPUs are its attention ranks x their tensor parallelism");
  }
  const core::Params* moe = config.has("moe") ? &config.section("moe") : nullptr;
  ep.expert_shares = shares;
  ep.eplb = ep.redundant_experts > 0;
  if (moe) {
    if (moe->has("placement")) ep.eplb = moe->get_string("placement") == "eplb";
    const std::string& kernels = moe->get_string("kernels");
    ep.kernels = kernels == "normal"        ? hwmodels::EpKernels::kNormal
                 : kernels == "low_latency" ? hwmodels::EpKernels::kLowLatency
                                            : hwmodels::EpKernels::kAuto;
    ep.two_batch_overlap = moe->get_string("overlap") == "two_batch";
    const bool fp8 = moe->get_string("dispatch_dtype") == "fp8";
    ep.dispatch_bytes = fp8 ? 1.0 : 2.0;
    ep.dispatch_scales = fp8;
    ep.routing_noise = moe->get_bool("routing_noise");
  }
  const NetworkFields net = resolve_network(
      config.section("network"), (pool_cfg.has("gpu") ? pool_cfg.section("gpu") : config.section("gpu")).kind());
  ep.gpus_per_node = net.gpus_per_node;
  ep.nvlink_bytes_per_s = net.nvlink_bytes_per_s(gpu);
  // GPU -> NVSwitch -> GPU; GPU -> PCIe (-> PCIe switch -> PCIe) -> NIC -> leaf (-> spine -> leaf) -> NIC
  // -> PCIe (-> PCIe switch -> PCIe) -> GPU, as the topology builds them (sim/cluster/network.cc). An
  // exchange goes to the same local rank of the next node: the same rail.
  ep.nvlink_latency_s = 2.0 * net.nvlink_latency_us * 1e-6;
  const bool across_leaves = ep.nodes() > net.nodes_per_switch;
  const double pcie_us = net.gpus_per_pcie_switch > 1 ? 2.0 * net.pcie_latency_us : net.pcie_latency_us;
  ep.scaleout_latency_s = 2.0 * (pcie_us + net.nic_latency_us + (across_leaves ? net.switch_latency_us : 0.0)) * 1e-6;
  // Every GPU of a node sends at once: its NIC's share (GPUs share NICs when there are fewer).
  const double nic_share =
      std::min(1.0, static_cast<double>(net.nics_per_node) / static_cast<double>(ep.gpus_per_node));
  ep.scaleout_bytes_per_s = std::min(net.pcie_gb_s, net.nic_gb_s * nic_share) * 1e9;
  if (const std::string why = hwmodels::ep_problem(model, tp, ep); !why.empty()) {
    const size_t colon = why.find(": ");
    const std::string key = why.substr(0, colon), message = why.substr(colon + 2);
    if (key == "expert_shares" && moe) {
      if (moe->has("expert_shares_file")) moe->fail("expert_shares_file", message);
      moe->fail("routing_skew", message + "; lower routing_skew");
    }
    from(key.c_str()).fail(key, message);
  }
  return ep;
}

Pool build_pool(const std::string& name, const core::Params& pool_cfg, const core::Params& config,
                const core::Params& cluster_cfg, const hwmodels::ModelSpec& model, int64_t replicas, int64_t tp,
                const std::vector<double>& shares, const policies::DecodingMethod* decoding) {
  Pool p;
  p.name = name;
  p.cfg = &pool_cfg;
  p.replicas = replicas;
  p.tp = tp;
  const core::Params& gpu_cfg = pool_cfg.has("gpu") ? pool_cfg.section("gpu") : config.section("gpu");
  p.gpu = hwmodels::gpu_registry().make(gpu_cfg);
  p.gpu_kind = gpu_cfg.kind();
  if (std::string why = hwmodels::tp_problem(model, tp); !why.empty()) pool_cfg.fail("tensor_parallel", why);
  p.ep = expert_parallelism(pool_cfg, cluster_cfg, config, model, *p.gpu, tp, shares);
  p.ranks = hwmodels::attention_ranks(p.ep.degree, tp);
  if (p.ep.enabled()) p.expert_imbalance = hwmodels::place_experts(model, p.ep).imbalance;
  const hwmodels::ModelSpec* drafter = decoding && decoding->drafter() ? &decoding->drafter()->spec : nullptr;
  if (drafter) {
    const core::Params& dec = config.section("decoding");
    if (std::string why = hwmodels::tp_problem(*drafter, tp); !why.empty())
      dec.fail(dec.kind() == "draft_model" ? "model" : "kind", "the drafter at the target's tensor parallelism: " + why);
    // The drafter's passes would run on every attention rank of an expert-parallel replica; that
    // split is not modelled (n-gram drafting, which runs no model, is).
    if (p.ep.enabled())
      dec.fail("kind", "a drafter (" + dec.kind() + ") in an expert-parallel replica (" + name +
                           ".expert_parallel = " + std::to_string(p.ep.degree) +
                           ") is not modelled; use kind = \"ngram\" or no expert parallelism");
  }
  p.kv_blocks = kv_blocks(cluster_cfg, pool_cfg, gpu_cfg, model, *p.gpu, tp, p.ep, decoding);
  const core::Params& cost_cfg = config.section("cost_model");
  std::optional<hwmodels::CalibrationProfile> profile;
  if (const std::optional<std::string> path = hwmodels::selected_calibration(cost_cfg, p.gpu->name)) {
    profile = hwmodels::read_calibration_profile(*path);
    p.calibration = *path;
    p.calibration_default = !cost_cfg.has("calibration");
  }
  if (!profile && !cost_cfg.has("calibration") && hwmodels::has_shipped_profile(p.gpu->name)) {
    // Runs on, as the user may mean it, but not silently (once per process: a sweep's points too).
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::string dirs;
      for (const std::string& d : hwmodels::profile_search_path()) dirs += (dirs.empty() ? "" : ", ") + d;
      std::cerr << "servesim: warning: the shipped calibration profile of " << p.gpu->name
                << " was not found (searched: " << (dirs.empty() ? "nowhere" : dirs)
                << "), so this run uses the roofline model's constant efficiencies, not the fit to measurements "
                   "(docs/calibration.md): run the binary from its build directory or installation, set "
                   "SERVESIM_PROFILE_DIR to the source tree's calibration/profiles, or set [cost_model] calibration = "
                   "\"none\" to choose constant efficiencies\n";
    });
  }
  const hwmodels::CalibrationProfile* selected = profile ? &*profile : nullptr;
  p.cost = hwmodels::cost_model_registry().make(cost_cfg, model, *p.gpu, tp, selected, p.ep);
  p.engine = hwmodels::engine_registry().make(config.section("engine"), selected);
  // The drafter's passes are costed like the target's steps: the same cost model kind and profile,
  // applied to the drafter's architecture.
  if (drafter)
    p.cost = std::make_unique<hwmodels::SpeculativeCostModel>(
        std::move(p.cost), hwmodels::cost_model_registry().make(cost_cfg, *drafter, *p.gpu, tp, selected, hwmodels::ExpertParallelism{}),
        p.engine.get());
  if (config.has("prediction")) {
    const core::Params& pred = config.section("prediction");
    const double scale = pred.get_float("step_scale");
    if (scale != 1.0) p.cost = std::make_unique<hwmodels::ScaledCostModel>(std::move(p.cost), scale);
    p.engine->api_server_s = std::max(0.0, p.engine->api_server_s + pred.get_float("frontend_offset_ms") * 1e-3);
  }
  check_iteration_times(config, pool_cfg, *p.cost, model.max_context);
  p.engine->data_parallel = p.ranks;
  p.scheduler = pool_cfg.has("scheduler") ? &pool_cfg.section("scheduler") : &config.section("scheduler");
  p.scheduler_kind = p.scheduler->kind();
  return p;
}

NetworkFields network_fields(const core::Params& config, const Pool& pool) {
  return resolve_network(config.section("network"), pool.gpu_kind);
}

// [[faults.link_mtbf]]: drawn link failures, one entry per link that a class or list names.
std::vector<sim::LinkMtbf> link_mtbf(const core::Params& f, const sim::Network* network) {
  std::vector<sim::LinkMtbf> out;
  std::unordered_map<std::string, std::string> taken;  // link name -> the key that named it
  for (const core::Params& m : f.list("link_mtbf")) {
    if (!m.has("mtbf_s") || !m.has("mttr_s"))
      m.fail(m.has("mtbf_s") ? "mtbf_s" : "mttr_s", "give mtbf_s and mttr_s together (drawn link failures need both)");
    if (!network)
      m.fail("links", "this cluster has no network: links carry prefill -> decode KV transfers ([cluster.prefill] "
                      "and [cluster.decode]), the all-to-alls of expert-parallel replicas larger than a node and the "
                      "copies of KV tiers");
    const sim::Topology& topo = network->topology();
    const std::string& spec = m.get_string("links");
    std::vector<std::string> names;
    if (spec == "nvlink" || spec == "pcie" || spec == "nic" || spec == "spine") {
      names = topo.link_class(spec);
      if (names.empty())
        m.fail("links", "no link of class " + core::in_quotes(spec) + " in this topology" +
                            (spec == "spine" ? " (its nodes fill one leaf switch: network.nodes_per_switch)" : ""));
    } else {
      for (size_t at = 0; at <= spec.size();) {
        size_t end = spec.find(',', at);
        if (end == std::string::npos) end = spec.size();
        std::string name = spec.substr(at, end - at);
        name.erase(0, name.find_first_not_of(' '));
        name.erase(name.find_last_not_of(' ') + 1);
        if (topo.links_named(name).empty())
          m.fail("links", "no link class or network link is named " + core::in_quotes(name) +
                              "; give a class (\"nvlink\", \"pcie\", \"nic\", \"spine\") or link names like " +
                              topo.link_name_examples() + ", separated by commas");
        names.push_back(name);
        at = end + 1;
      }
    }
    for (const std::string& name : names) {
      const auto [it, fresh] = taken.emplace(name, m.key_path("links"));
      if (!fresh)
        m.fail("links", "link " + core::in_quotes(name) + " is named by " + it->second +
                            " too: give each link one MTBF");
      out.push_back(sim::LinkMtbf{topo.links_named(name), name, m.get_float("mtbf_s"), m.get_float("mttr_s")});
    }
  }
  return out;
}

// [faults]: fault injection, checked against the cluster it applies to.
sim::FaultPlan faults(const core::Params& config, bool /*disaggregated*/, int64_t replicas, uint64_t seed,
                      const std::vector<std::vector<int64_t>>& placement, int64_t gpus_per_node,
                      const sim::Network* network) {
  sim::FaultPlan plan;
  if (!config.has("faults")) return plan;
  const core::Params& f = config.section("faults");
  plan.recompute = f.get_string("on_failure") == "recompute";
  plan.max_reroutes = static_cast<uint32_t>(f.get_int("max_reroutes"));
  plan.seed = seed;
  if (f.has("mtbf_s") != f.has("mttr_s"))
    f.fail(f.has("mtbf_s") ? "mtbf_s" : "mttr_s", "give mtbf_s and mttr_s together (drawn failures need both)");
  if (f.has("mtbf_s")) {
    plan.mtbf_s = f.get_float("mtbf_s");
    plan.mttr_s = f.get_float("mttr_s");
  }
  // The nodes the replicas fill (GPUs fill nodes in replica order) and the replicas with a GPU on each.
  const int64_t nodes = placement.empty() || placement.back().empty() ? 1 : placement.back().back() / gpus_per_node + 1;
  auto replicas_on = [&](int64_t node) {
    std::vector<uint32_t> on;
    for (size_t i = 0; i < placement.size(); ++i)
      for (int64_t g : placement[i])
        if (g / gpus_per_node == node) {
          on.push_back(static_cast<uint32_t>(i));
          break;
        }
    return on;
  };
  if (f.has("node_mtbf_s") != f.has("node_mttr_s"))
    f.fail(f.has("node_mtbf_s") ? "node_mtbf_s" : "node_mttr_s",
           "give node_mtbf_s and node_mttr_s together (drawn node failures need both)");
  if (f.has("node_mtbf_s")) {
    plan.node_mtbf_s = f.get_float("node_mtbf_s");
    plan.node_mttr_s = f.get_float("node_mttr_s");
    for (int64_t n = 0; n < nodes; ++n) plan.node_replicas.push_back(replicas_on(n));
  }
  if (f.has("events")) {
    for (const core::Params& e : f.list("events")) {
      sim::FaultEvent ev;
      if (e.get_string("kind") == "link") {
        if (!e.has("link")) e.fail("kind", "kind = \"link\" needs link, the name of the network link that fails");
        for (const char* other : {"replica", "node"})
          if (e.has(other)) e.fail(other, std::string(other) + " is not for kind = \"link\" (a link names its link)");
        const std::string name = e.get_string("link");
        if (!network)
          e.fail("link", "this cluster has no network: links carry prefill -> decode KV transfers ([cluster.prefill] "
                         "and [cluster.decode]), the all-to-alls of expert-parallel replicas larger than a node, the "
                         "copies of KV tiers ([kv_tiers] unless kv_tiers.copies = \"analytic\") and swap preemption's "
                         "copies (cluster.swap_copies = \"flows\")");
        // With speed: the link is degraded (runs at that fraction of its bandwidth), not cut.
        ev.kind = e.has("speed") ? sim::FaultEvent::Kind::kLinkSpeed : sim::FaultEvent::Kind::kLink;
        if (e.has("speed")) ev.speed = e.get_float("speed");
        if (e.has("speed") && ev.speed == 1 && e.has("repair_s"))
          e.fail("repair_s", "speed = 1 heals the link: there is nothing to repair after it");
        ev.links = network->topology().links_named(name);
        if (ev.links.empty())
          e.fail("link", "no network link is named " + core::in_quotes(name) + "; links are named like " +
                             network->topology().link_name_examples());
        ev.link_name = name;
        ev.at = core::Time() + core::Duration::from_seconds(e.get_float("at_s"));
        if (e.has("repair_s")) ev.repair = core::Duration::from_seconds(e.get_float("repair_s"));
        plan.events.push_back(ev);
        continue;
      }
      if (e.has("link")) e.fail("link", "link is for kind = \"link\"");
      if (e.has("replica") == e.has("node"))
        e.fail(e.has("node") ? "node" : "replica",
               "give the replica that fails or the node whose replicas fail (one of replica and node)");
      if (e.has("node")) {
        // Every replica with a GPU on the node (GPUs fill nodes in replica order).
        const int64_t node = e.get_int("node");
        const std::vector<uint32_t> on = replicas_on(node);
        if (on.empty())
          e.fail("node", "node " + std::to_string(node) + " does not exist: the cluster's replicas fill " +
                             std::to_string(nodes) + (nodes == 1 ? " node (0)" : " nodes (0 to " +
                             std::to_string(nodes - 1) + ")") + " of network.gpus_per_node = " +
                             std::to_string(gpus_per_node) + " GPUs");
        if (e.get_string("kind") == "slow")
          e.fail("node", "a node fails (kind = \"fail\"); a straggler is one replica (give replica)");
        ev.replica = on.front();
        ev.with.assign(on.begin() + 1, on.end());
      }
      const int64_t r = ev.with.empty() && !e.has("node") ? e.get_int("replica") : ev.replica;
      if (r >= replicas)
        e.fail("replica", "replica " + std::to_string(r) + " does not exist: the cluster has " +
                              std::to_string(replicas) + (replicas == 1 ? " replica (0)" : " replicas (0 to " +
                              std::to_string(replicas - 1) + ")"));
      ev.replica = static_cast<uint32_t>(r);
      ev.at = core::Time() + core::Duration::from_seconds(e.get_float("at_s"));
      const bool slow = e.get_string("kind") == "slow";
      ev.kind = slow ? sim::FaultEvent::Kind::kSlow : sim::FaultEvent::Kind::kFail;
      if (slow) {
        if (e.has("repair_s")) e.fail("repair_s", "a slow replica is not down: repair_s is for kind = \"fail\" (heal a straggler with another event of speed = 1)");
        if (!e.has("speed")) e.fail("speed", "kind = \"slow\" needs speed, the fraction of its speed the replica runs at");
        ev.speed = e.get_float("speed");
      } else {
        if (e.has("speed"))
          e.fail("speed", "speed is for kind = \"slow\" (a straggler) or kind = \"link\" (a degraded link); a failed "
                          "replica runs at none");
        if (e.has("repair_s")) ev.repair = core::Duration::from_seconds(e.get_float("repair_s"));
      }
      plan.events.push_back(ev);
    }
  }
  if (f.has("link_mtbf")) plan.link_mtbf = link_mtbf(f, network);
  return plan;
}

// [retries]: client retries (a closed-loop client retries before its think time and next request).
sim::RetryPolicy retries(const core::Params& config, uint64_t seed) {
  sim::RetryPolicy policy;
  if (!config.has("retries")) return policy;
  const core::Params& r = config.section("retries");
  policy.max_attempts = static_cast<uint32_t>(r.get_int("max_attempts"));
  policy.backoff_s = r.get_float("backoff_s");
  policy.multiplier = r.get_float("multiplier");
  policy.max_backoff_s = r.get_float("max_backoff_s");
  policy.jitter = r.get_float("jitter");
  policy.after_timeout = r.get_bool("after_timeout");
  policy.after_shed = r.get_bool("after_shed");
  policy.after_failure = r.get_bool("after_failure");
  policy.seed = seed;
  if (policy.max_backoff_s < policy.backoff_s)
    r.fail("max_backoff_s", "max_backoff_s (" + core::format_double(policy.max_backoff_s) +
                                ") is below backoff_s (" + core::format_double(policy.backoff_s) +
                                "): the first retry would already wait longer than the longest back-off");
  if (policy.any() && !policy.after_timeout && !policy.after_shed && !policy.after_failure)
    r.fail("max_attempts", "retries are on but after_timeout, after_shed and after_failure are all false: nothing "
                           "would be retried");
  return policy;
}

// [autoscaler] (a unified cluster) or [cluster.prefill.autoscaler] / [cluster.decode.autoscaler] (a
// pool of a disaggregated one, `a`): the policy, and the mechanism's plan with its cold start, checked
// against the pool it applies to. `count` holds the pool's `replicas` (the count in service at the start).
std::unique_ptr<sim::Autoscaler> autoscaling(const core::Params& config, const core::Params& a, const core::Params& count,
                                             const Pool& pool, const hwmodels::ModelSpec& model,
                                             const policies::DecodingMethod* decoding, sim::ReplicaRole role,
                                             sim::AutoscalePlan& plan) {
  const std::string& kind = a.kind();
  if (role == sim::ReplicaRole::kUnified && kind == "tpot")
    a.fail("kind", "the tpot kind scales the decode pool of a disaggregated cluster ([cluster.decode.autoscaler]); "
                   "a unified pool's replicas prefill too: use slo (predicted TTFT) or target_utilisation");
  if (role == sim::ReplicaRole::kPrefill && kind == "tpot")
    a.fail("kind", "the tpot kind predicts a decode pool's iteration time, and a prefill pool only prefills: use slo "
                   "(predicted TTFT) or target_utilisation here, tpot in [cluster.decode.autoscaler]");
  if (role == sim::ReplicaRole::kDecode && kind == "slo")
    a.fail("kind", "the slo kind predicts TTFT from the prefill backlog, and a decode pool has none: use tpot "
                   "(max_tpot_ms against the predicted decode iteration) or target_utilisation here, slo in "
                   "[cluster.prefill.autoscaler]");
  const int64_t initial = count.get_int("replicas");
  const int64_t lo = a.get_int("min_replicas"), hi = a.get_int("max_replicas");
  if (lo > hi)
    a.fail("min_replicas", "min_replicas " + std::to_string(lo) + " is above max_replicas " + std::to_string(hi));
  if (initial < lo || initial > hi)
    count.fail("replicas", "with [" + a.path() + "] " + count.key_path("replicas") +
                               " is the count in service at the start, which must lie in [min_replicas, "
                               "max_replicas] = [" + std::to_string(lo) + ", " + std::to_string(hi) + "]; got " +
                               std::to_string(initial));
  const NetworkFields net = network_fields(config, pool);
  sim::ColdStart cold;
  cold.provision_s = a.get_float("provision_s");
  cold.warmup_s = a.get_float("warmup_s");
  // The pool's own shard of the weights (each pool may have its TP, EP and GPU).
  cold.weight_bytes_per_gpu = hwmodels::weight_bytes_per_gpu(model, pool.tp, pool.ep.degree, pool.ep.redundant_experts);
  if (decoding && decoding->drafter())
    cold.weight_bytes_per_gpu += policies::drafter_weight_bytes_per_gpu(*decoding->drafter(), pool.tp);
  cold.load_bytes_per_s = (a.has("load_gb_s") ? a.get_float("load_gb_s")
                                              : policies::default_load_gb_s(a.get_string("weights_source"),
                                                                            net.pcie_gb_s, net.nic_gb_s)) *
                          1e9;
  const double cold_s = cold.seconds();
  if (!(cold_s < 1e9))
    a.fail("load_gb_s", "a cold start of " + core::format_double(cold_s) + " s is not a usable length");
  plan.initial = static_cast<uint32_t>(initial);
  plan.min_replicas = static_cast<uint32_t>(lo);
  plan.max_replicas = static_cast<uint32_t>(hi);
  plan.interval = core::Duration::from_seconds(a.get_float("interval_s"));
  plan.stabilization = core::Duration::from_seconds(a.get_float("stabilization_s"));
  plan.cooldown = core::Duration::from_seconds(a.get_float("cooldown_s"));
  plan.cold_start = core::Duration::from_seconds(cold_s);
  return policies::autoscaler_registry().make(a);
}

}  // namespace

RunResult run_simulation(const core::Params& config, const RunOutputs& outputs) {
  RunResult result;
  const uint64_t seed = static_cast<uint64_t>(config.get_int("seed"));

  // ---- Build everything first: every configuration error surfaces before anything is written.
  std::unique_ptr<hwmodels::ModelSpec> model = hwmodels::model_registry().make(config.section("model"));
  std::unique_ptr<policies::DecodingMethod> decoding;
  if (config.has("decoding")) {
    policies::DecodingContext ctx;
    ctx.target = model.get();
    if (const core::Params& wl = config.section("workload"); wl.has("repetition"))
      ctx.workload_repetition = wl.get_float("repetition");
    decoding = policies::decoding_registry().make(config.section("decoding"), ctx);
  }
  const core::Params& cluster_cfg = config.section("cluster");
  const core::Params& net_cfg = config.section("network");
  const bool disaggregated = cluster_cfg.has("prefill") || cluster_cfg.has("decode");
  const std::vector<double> shares = expert_shares(config, *model);
  std::vector<Pool> pools;
  if (disaggregated) {
    for (const char* role : {"prefill", "decode"})
      if (!cluster_cfg.has(role))
        cluster_cfg.fail(cluster_cfg.has("prefill") ? "prefill" : "decode",
                         std::string("prefill/decode disaggregation needs both [cluster.prefill] and "
                                     "[cluster.decode]; [cluster.") + role + "] is missing");
    if (cluster_cfg.given("replicas"))
      cluster_cfg.fail("replicas",
                       "with [cluster.prefill] and [cluster.decode] each pool sets its own replicas; remove "
                       "cluster.replicas");
    for (const char* role : {"prefill", "decode"}) {
      const core::Params& pc = cluster_cfg.section(role);
      const int64_t tp = pc.has("tensor_parallel") ? pc.get_int("tensor_parallel") : cluster_cfg.get_int("tensor_parallel");
      // Autoscaled ([cluster.<role>.autoscaler]): every replica the pool may have is built.
      const int64_t built = pc.has("autoscaler") ? pc.section("autoscaler").get_int("max_replicas") : pc.get_int("replicas");
      pools.push_back(build_pool(std::string("cluster.") + role, pc, config, cluster_cfg, *model, built, tp, shares,
                                 decoding.get()));
    }
  } else {
    // Autoscaled: every replica the pool may have is built; cluster.replicas are in service at first.
    const int64_t built = config.has("autoscaler") ? config.section("autoscaler").get_int("max_replicas")
                                                   : cluster_cfg.get_int("replicas");
    pools.push_back(build_pool("cluster", cluster_cfg, config, cluster_cfg, *model, built,
                               cluster_cfg.get_int("tensor_parallel"), shares, decoding.get()));
  }
  int64_t replicas = 0;
  for (const auto& p : pools) replicas += p.replicas;

  // GPUs in order, pool after pool; a TP group never spans two nodes; an expert-parallel replica
  // larger than a node takes whole nodes (ep_problem saw that it is a multiple of one).
  const NetworkFields net = network_fields(config, pools[0]);
  for (size_t i = 1; i < pools.size(); ++i) network_fields(config, pools[i]);  // a preset fits every pool's GPU
  const int64_t gpus_per_node = net.gpus_per_node;
  std::vector<std::vector<int64_t>> placement;
  int64_t next_gpu = 0;
  bool multi_node_replicas = false;
  for (const auto& p : pools) {
    if (p.tp > gpus_per_node)
      p.cfg->fail("tensor_parallel", "a replica of " + std::to_string(p.tp) + " GPUs does not fit a node of " +
                                         std::to_string(gpus_per_node) + " (network.gpus_per_node)");
    const int64_t size = p.gpus();
    multi_node_replicas = multi_node_replicas || size > gpus_per_node;
    for (int64_t i = 0; i < p.replicas; ++i) {
      if (next_gpu % gpus_per_node + std::min(size, gpus_per_node) > gpus_per_node)
        next_gpu += gpus_per_node - next_gpu % gpus_per_node;
      std::vector<int64_t> gpus;
      for (int64_t g = 0; g < size; ++g) gpus.push_back(next_gpu + g);
      next_gpu += size;
      placement.push_back(std::move(gpus));
    }
  }
  // The network carries KV transfers between pools, the cross-node all-to-alls of expert-parallel
  // replicas and the KV tiers' copies (kv_tiers.copies = "flows", the default): a unified cluster
  // with a tier has a topology too, for its tiers' traffic alone (docs/kv-tiers.md, "One fabric").
  const bool any_tier = config.has("kv_tiers") && (config.section("kv_tiers").has("host") ||
                                                   config.section("kv_tiers").has("nvme") ||
                                                   config.section("kv_tiers").has("store"));
  const bool tier_flows = any_tier && (!config.section("kv_tiers").has("copies") ||
                                       config.section("kv_tiers").get_string("copies") == "flows");
  // Swap preemption's copies (cluster.swap_copies): flows wherever the cluster has a topology unless
  // told analytic, by swap_copies or, without it, by kv_tiers.copies (one switch for every host copy).
  const core::Params& cluster_section = config.section("cluster");
  const bool swapping = cluster_section.get_string("preemption") == "swap";
  if (cluster_section.has("swap_copies") && !swapping)
    cluster_section.fail("swap_copies", "swap_copies applies to preemption = \"swap\"; remove it or set preemption");
  const bool swap_flows =
      swapping && (cluster_section.has("swap_copies")
                       ? cluster_section.get_string("swap_copies") == "flows"
                       : !(config.has("kv_tiers") && config.section("kv_tiers").has("copies") &&
                           config.section("kv_tiers").get_string("copies") == "analytic"));
  const bool swap_topology = swap_flows && cluster_section.has("swap_copies");  // asked for by name
  std::unique_ptr<sim::Network> network;
  sim::Simulation simulation;
  if (disaggregated || multi_node_replicas || tier_flows || swap_topology) {
    sim::TopologyConfig topology = net.topology(*pools[0].gpu, next_gpu);
    // A shared KV store is an endpoint on the spine, its link the store's own bandwidth
    // (kv_tiers.store.total_bandwidth_gb_s; 0 = non-blocking): docs/kv-tiers.md, "One fabric".
    if (tier_flows && config.section("kv_tiers").has("store")) {
      topology.store = true;
      topology.store_bytes_per_s = config.section("kv_tiers").section("store").get_float("total_bandwidth_gb_s") * 1e9;
      topology.store_at = store_attachments(config.section("kv_tiers").section("store"), topology, placement,
                                            pools[0].replicas, disaggregated);
    }
    // A local NVMe tier (the first pool's replicas: unified or prefill): each node's SSDs a vertex
    // behind its host, their read (write) link the sum of the read_gb_s (write_gb_s) shares of the
    // replicas on the node, split by GPU for a replica across nodes (docs/kv-tiers.md, "One fabric").
    if (tier_flows && config.section("kv_tiers").has("nvme")) {
      const core::Params& nv = config.section("kv_tiers").section("nvme");
      const double read = nv.get_float("read_gb_s") * 1e9, write = nv.get_float("write_gb_s") * 1e9;
      const size_t nodes = static_cast<size_t>((next_gpu + gpus_per_node - 1) / gpus_per_node);
      topology.nvme_read_bytes_per_s.assign(nodes, 0.0);
      topology.nvme_write_bytes_per_s.assign(nodes, 0.0);
      topology.nvme_latency_s = nv.get_float("latency_us") * 1e-6;
      for (int64_t i = 0; i < pools[0].replicas; ++i) {
        const auto& gpus = placement[static_cast<size_t>(i)];
        for (int64_t g : gpus) {
          const auto node = static_cast<size_t>(g / gpus_per_node);
          topology.nvme_read_bytes_per_s[node] += read / static_cast<double>(gpus.size());
          topology.nvme_write_bytes_per_s[node] += write / static_cast<double>(gpus.size());
        }
      }
    }
    network = std::make_unique<sim::Network>(simulation, sim::Topology(topology));
  }

  std::unique_ptr<sim::Router> router = policies::router_registry().make(config.section("router"), seed);
  std::unique_ptr<sim::Admission> admission =
      config.has("admission") ? policies::admission_registry().make(config.section("admission")) : nullptr;
  std::unique_ptr<sim::Router> decode_router;
  if (disaggregated) decode_router = policies::router_registry().make(config.section("decode_router"), seed + 1);
  std::unique_ptr<traces::ArrivalSource> source =
      traces::workload_registry().make(config.section("workload"), seed);
  if (const core::Params& rep = config.section("replication"); rep.get_bool("resample_trace")) {
    // Blocks of block_s in the trace's time are block_s / rate_scale in the stream's.
    const double block_s = rep.get_float("block_s") / config.section("workload").get_float("rate_scale");
    if (block_s * 1e9 < 1 || block_s >= 9.2e9)
      rep.fail("block_s", "a block of " + core::format_double(block_s) + " s after rate_scale is not a usable length");
    source = std::make_unique<traces::BlockBootstrapSource>(std::move(source), std::llround(block_s * 1e9), seed);
  }
  policies::SchedulerContext sched_ctx;
  sched_ctx.max_context = model->max_context;
  sched_ctx.tenant_weights = core::tenant_weights(source->classes());
  std::vector<std::unique_ptr<sim::BatchScheduler>> schedulers;
  for (const auto& p : pools) {
    sched_ctx.data_parallel = p.ranks;
    for (int64_t i = 0; i < p.replicas; ++i)
      schedulers.push_back(policies::scheduler_registry().make(*p.scheduler, sched_ctx));
  }
  const bool prefix_caching = cluster_cfg.get_bool("prefix_caching");
  if (prefix_caching && source->hash_block_tokens() > 0 &&
      source->hash_block_tokens() % cluster_cfg.get_int("block_size") != 0)
    cluster_cfg.fail("block_size",
                     "prefix caching shares whole hash blocks of " + std::to_string(source->hash_block_tokens()) +
                         " tokens (the workload's block size), which block_size " +
                         std::to_string(cluster_cfg.get_int("block_size")) +
                         " does not divide; make the hash block a multiple of the KV block");
  // KV tiers keep prefix units (the workload's hash blocks): a workload without block hashes has none.
  if (prefix_caching && source->hash_block_tokens() <= 0 && config.has("kv_tiers"))
    for (const char* tier : {"host", "nvme", "store"})
      if (config.section("kv_tiers").has(tier))
        config.section("kv_tiers").section(tier).fail(
            "capacity_gb",
            "a KV tier keeps prefix units (the workload's hash blocks), and this workload has no block hashes: use "
            "a trace that carries them (mooncake_jsonl's hash_ids) or a workload that makes them (sessions, "
            "shared_prefix)");

  std::shared_ptr<const sim::HostTierSpec> host_tier;
  if (config.has("kv_tiers") && config.section("kv_tiers").has("host")) {
    const core::Params& h = config.section("kv_tiers").section("host");
    if (!prefix_caching)
      h.fail("capacity_gb",
             "a host KV tier keeps prefix units, which need cluster.prefix_caching = true (and a workload with "
             "prefix block hashes)");
    // Disaggregated: the tier is the prefill replicas' (pools[0]); decode replicas have none
    // (docs/kv-tiers.md, "On a disaggregated cluster"). A block sits on one attention rank of tp
    // GPUs; an expert-parallel replica's copies spread over its ranks x tp GPUs (sim::tier_copy_share,
    // docs/kv-tiers.md, "Expert parallelism").
    const sim::KvLayout layout = kv_layout(*model, pools[0].tp, decoding.get());
    const double block_bytes = layout.block_bytes(cluster_cfg.get_int("block_size"));
    const double replica_block_bytes = block_bytes * static_cast<double>(pools[0].tp);
    auto spec = std::make_shared<sim::HostTierSpec>();
    spec->capacity_blocks = static_cast<int64_t>(std::floor(h.get_float("capacity_gb") * 1e9 / replica_block_bytes));
    if (spec->capacity_blocks < 1)
      h.fail("capacity_gb", "holds no KV block (" + core::format_double(replica_block_bytes) +
                                " bytes per block per replica); give at least that much");
    const sim::TierCopyShare share = sim::tier_copy_share(block_bytes, pools[0].tp, pools[0].ranks);
    spec->block_bytes_per_gpu = share.block_bytes_per_gpu;
    spec->gpus = share.gpus;
    spec->link_bytes_per_s = h.get_float("bandwidth_gb_s") * 1e9;
    spec->latency_s = h.get_float("latency_us") * 1e-6;
    spec->write = policies::kv_tier_write_registry().make(h.section("write"));
    spec->eviction = policies::kv_tier_eviction_registry().make(h.section("eviction"));
    spec->load = policies::kv_tier_load_registry().make(h.section("load"));
    host_tier = std::move(spec);
  }
  // Disaggregated: as the host tier, the prefill replicas'.
  std::shared_ptr<const sim::NvmeTierSpec> nvme_tier;
  if (config.has("kv_tiers") && config.section("kv_tiers").has("nvme"))
    nvme_tier = nvme_spec(config, *model, pools[0].tp, decoding.get(), pools[0].ranks, prefix_caching,
                          cluster_cfg.get_int("block_size"), host_tier.get());
  std::optional<sim::StoreSpec> kv_store;
  if (config.has("kv_tiers") && config.section("kv_tiers").has("store")) {
    kv_store = store_spec(config, *model, pools[0].tp, decoding.get(), pools[0].ranks, prefix_caching, cluster_cfg.get_int("block_size"));
    check_store_groups(config.section("kv_tiers").section("store"), pools[0].replicas, disaggregated, network != nullptr);
  }

  const core::Params& slo_cfg = config.section("slo");
  metrics::Slo slo;
  if (slo_cfg.has("ttft_ms")) slo.ttft_ms = slo_cfg.get_float("ttft_ms");
  if (slo_cfg.has("tpot_ms")) slo.tpot_ms = slo_cfg.get_float("tpot_ms");
  if (slo_cfg.has("e2e_ms")) slo.e2e_ms = slo_cfg.get_float("e2e_ms");

  metrics::CollectorConfig collector_cfg;
  collector_cfg.slo = slo;
  collector_cfg.classes = source->classes();
  const double interval_ms = config.section("output").get_float("sample_interval_ms");
  // Shorter periods would write a row per replica per fraction of a millisecond of simulated time:
  // hours of simulated traffic would never finish writing.
  if (interval_ms > 0 && interval_ms < 1)
    config.section("output").fail("sample_interval_ms",
                                  "must be 0 (no time series) or at least 1 ms; got " + core::format_double(interval_ms));
  collector_cfg.sample_interval_ns = std::llround(interval_ms * 1e6);
  collector_cfg.measurement = measurement_config(config.section("measurement"));
  if (config.section("output").has("percentiles")) {
    const std::string& mode = config.section("output").get_string("percentiles");
    collector_cfg.percentiles = mode == "exact"    ? metrics::PercentileMode::kExact
                                : mode == "sketch" ? metrics::PercentileMode::kSketch
                                                   : metrics::PercentileMode::kAuto;
  }
  if (config.section("output").has("exact_percentiles_max"))
    collector_cfg.exact_percentiles_max =
        static_cast<uint64_t>(config.section("output").get_int("exact_percentiles_max"));
  // A generator knows how long its arrivals span: a time series too long to write is refused now.
  if (interval_ms > 0 && source->expected_span_s() > 0) {
    const double rows = source->expected_span_s() * 1e3 / interval_ms * static_cast<double>(replicas);
    if (rows > metrics::kMaxSampleRows)
      config.section("output").fail(
          "sample_interval_ms",
          "a sample every " + core::format_double(interval_ms) + " ms of the workload's about " +
              core::format_double(source->expected_span_s()) + " simulated seconds (workload.rate, max_requests, "
              "window_end_s, rate_scale) on " + std::to_string(replicas) + (replicas == 1 ? " replica" : " replicas") +
              " is about " +
              core::format_double(rows) + " time-series rows, more than the " +
              core::format_double(metrics::kMaxSampleRows) + " a run writes; raise sample_interval_ms or set it to 0");
  }
  collector_cfg.kv_host_priced = host_tier && tier_priced(config, "host");
  collector_cfg.kv_nvme_priced = nvme_tier && tier_priced(config, "nvme");
  collector_cfg.kv_store_priced = kv_store && tier_priced(config, "store");
  collector_cfg.kv_store_usd_per_hour =  // every store's capacity
      tier_usd_per_hour(config, "store", kv_store.has_value()) *
      static_cast<double>(kv_store ? store_groups(config, pools[0].replicas) : 1);
  for (const auto& p : pools) {
    for (int64_t i = 0; i < p.replicas; ++i) {
      metrics::ReplicaHardware hw;
      hw.gpus = static_cast<double>(p.gpus());
      hw.hbm_bandwidth = p.gpu->hbm_bandwidth * static_cast<double>(p.gpus());
      hw.usd_per_hour = p.gpu->price_usd_per_hour * static_cast<double>(p.gpus());
      if (&p == &pools[0]) {  // the tiers' replicas (disaggregated: the prefill pool's)
        hw.kv_host_usd_per_hour = tier_usd_per_hour(config, "host", host_tier != nullptr);
        hw.kv_nvme_usd_per_hour = tier_usd_per_hour(config, "nvme", nvme_tier != nullptr);
      }
      hw.role = !disaggregated ? "unified" : (&p == &pools[0] ? "prefill" : "decode");
      hw.gpu = p.gpu_kind;
      collector_cfg.replicas.push_back(hw);
    }
  }

  const sim::FaultPlan fault_plan =
      faults(config, disaggregated, replicas, seed, placement, gpus_per_node, network.get());
  const sim::RetryPolicy retry_policy = retries(config, seed);
  collector_cfg.retries = retry_policy.any();
  // One autoscaler per elastic pool: the unified cluster's, or the prefill and/or decode pool's.
  struct Elastic {
    std::unique_ptr<sim::Autoscaler> policy;
    sim::AutoscalePlan plan;
    sim::ReplicaRole role;
  };
  std::vector<Elastic> elastic;
  if (config.has("autoscaler")) {
    const core::Params& a = config.section("autoscaler");
    if (disaggregated)
      a.fail("kind", "a disaggregated cluster autoscales each pool under its own autoscaler: move this section to "
                     "[cluster.prefill.autoscaler] and/or [cluster.decode.autoscaler] (a pool without one is fixed)");
    Elastic e{nullptr, {}, sim::ReplicaRole::kUnified};
    e.policy = autoscaling(config, a, cluster_cfg, pools[0], *model, decoding.get(), e.role, e.plan);
    elastic.push_back(std::move(e));
  }
  if (disaggregated)
    for (size_t k = 0; k < 2; ++k) {
      const core::Params& pc = cluster_cfg.section(k == 0 ? "prefill" : "decode");
      if (!pc.has("autoscaler")) continue;
      Elastic e{nullptr, {}, k == 0 ? sim::ReplicaRole::kPrefill : sim::ReplicaRole::kDecode};
      e.policy = autoscaling(config, pc.section("autoscaler"), pc, pools[k], *model, decoding.get(), e.role, e.plan);
      elastic.push_back(std::move(e));
    }

  if (outputs.build_only) return result;

  // ---- Outputs: opened now, committed only when the run has finished cleanly.
  std::vector<std::unique_ptr<metrics::ResultSink>> sinks;
  if (!outputs.db_path.empty()) {
    auto db = std::make_unique<metrics::SqliteSink>(outputs.db_path);
    // A sweep numbers its runs after its points (run_id = point index + 1): a single run there
    // would take a number a later point needs, and the sweep could not resume.
    if (db->database().tableExists("experiment"))
      throw core::Error(outputs.db_path + ": holds the results of an experiment (servesim sweep or capacity), "
                        "which numbers its runs after its points; write single runs to another database");
    sinks.push_back(std::move(db));
  }
  if (!outputs.csv_dir.empty()) sinks.push_back(std::make_unique<metrics::CsvSink>(outputs.csv_dir));
  std::vector<metrics::ResultSink*> sink_ptrs;
  for (auto& s : sinks) sink_ptrs.push_back(s.get());
  sink_ptrs.insert(sink_ptrs.end(), outputs.sinks.begin(), outputs.sinks.end());

  // The files the run reads, digested once (the readers have opened them: a missing file has been
  // reported at its key). They must not change until the run is committed.
  const std::map<std::string, core::FileDigest> files = input_files(config);
  result.info.config_toml = config.to_toml();
  result.info.config_hash = config_hash(config, files);
  result.info.seed = seed;
  result.info.version = SERVESIM_VERSION;
  result.info.run_id = outputs.run_id;
  for (const auto& c : source->classes()) result.info.class_names.push_back(c.name);
  for (auto* s : sink_ptrs) s->begin_run(result.info);

  // ---- Run.
  metrics::MetricsCollector collector(collector_cfg, sink_ptrs);
  metrics::InvariantChecker checker(&collector);  // checks each signal, then hands it to the collector
  core::LifecycleObserver& observer = outputs.check ? static_cast<core::LifecycleObserver&>(checker) : collector;
  std::vector<core::LifecycleObserver*> watchers{&observer};
  watchers.insert(watchers.end(), outputs.observers.begin(), outputs.observers.end());
  metrics::ObserverFanout fanout(std::move(watchers));
  sim::ClusterLayout layout;
  layout.replicas = static_cast<size_t>(replicas);
  layout.prefill_replicas = disaggregated ? static_cast<size_t>(pools[0].replicas) : 0;
  layout.layerwise_kv_transfer = net_cfg.get_bool("layerwise_kv_transfer");
  layout.tier_flows = tier_flows;
  // Replicas run ahead of the clock where they can (sim::Cluster::runs_ahead) unless something
  // needs every signal in global time order (a timeline's observers); the replica time series holds
  // them back to its next sample.
  layout.run_ahead = outputs.observers.empty();
  layout.sample_interval_ns = collector_cfg.sample_interval_ns;
  layout.swap_flows = swap_flows;
  if (cluster_cfg.has("pd_pull")) {
    if (!disaggregated)
      cluster_cfg.fail("pd_pull", "pd_pull applies to prefill/decode disaggregation ([cluster.prefill] and "
                                  "[cluster.decode]); remove it");
    if (cluster_cfg.get_string("pd_pull") == "push") layout.pd_pull = sim::PdPull::kPush;
  }
  // The client reaches the engine through the first pool's API server (the prefill pool's when
  // disaggregated), and tokens come back through it.
  const hwmodels::EngineModel& front = *pools[0].engine;
  layout.client.ingress_s = front.api_server_s;
  layout.client.ingress_s_per_prompt_token = front.tokenize_s_per_token;
  layout.client.egress_s = front.stream_s;
  layout.client.first_token_s = front.first_token_s;
  sim::Cluster cluster(simulation, *source, std::move(router), outputs.observers.empty() ? observer : fanout, layout,
                       std::move(decode_router), network.get());

  const double host_link = net.pcie_gb_s * 1e9;
  size_t r = 0;
  for (const auto& p : pools) {
    sim::ReplicaConfig rc;
    rc.kv_blocks = p.kv_blocks;
    rc.block_size = cluster_cfg.get_int("block_size");
    rc.max_context = model->max_context;
    rc.prefix_unit_tokens = prefix_caching ? source->hash_block_tokens() : 0;
    rc.preemption = cluster_cfg.get_string("preemption") == "swap" ? sim::PreemptionMode::kSwap
                                                                    : sim::PreemptionMode::kRecompute;
    rc.swap_capacity_bytes = cluster_cfg.get_float("swap_space_gib") * kGiB;
    rc.host_link_bytes_per_s = host_link;
    rc.kv_bytes_per_token_per_gpu = hwmodels::kv_bytes_per_token_per_gpu(*model, p.tp);
    if (decoding && decoding->drafter())  // its KV moves and swaps with the target's
      rc.kv_bytes_per_token_per_gpu += policies::drafter_kv_bytes_per_token_per_gpu(*decoding->drafter(), p.tp);
    rc.kv_layout = kv_layout(*model, p.tp, decoding.get());
    rc.engine = p.engine.get();
    rc.speculator = decoding.get();
    rc.seed = seed;
    rc.host_tier = &p == &pools[0] ? host_tier : nullptr;  // disaggregated: the prefill pool only
    rc.nvme_tier = &p == &pools[0] ? nvme_tier : nullptr;
    for (int64_t i = 0; i < p.replicas; ++i, ++r)
      cluster.add_replica(rc, *p.cost, std::move(schedulers[r]), placement[r], p.ranks);
  }

  if (kv_store) {
    std::vector<std::unique_ptr<sim::SharedKvStore>> stores;
    for (int64_t g = 0; g < store_groups(config, pools[0].replicas); ++g)
      stores.push_back(std::make_unique<sim::SharedKvStore>(*kv_store));
    cluster.set_kv_stores(std::move(stores), static_cast<size_t>(replicas_per_store(config)));
  }
  cluster.set_faults(fault_plan);
  cluster.set_retries(retry_policy);
  if (admission) cluster.set_admission(std::move(admission));
  for (Elastic& e : elastic) cluster.set_autoscaler(std::move(e.policy), e.plan, e.role);

  const auto wall_start = std::chrono::steady_clock::now();
  cluster.start();
  checker.set_replicas_run_ahead(cluster.runs_ahead());
  simulation.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  cluster.check_drained();
  if (outputs.check) checker.check_drained();

  for (const auto& [path, digest] : files)
    if (core::file_version(path) != digest.version)
      throw core::InputError(path, 0, "",
                             "changed while the run read it (its content digest, part of the run's identity, was "
                             "taken before); run again once it stays the same");
  result.summary = collector.finish(simulation.now(), simulation.events_processed(), wall);
  result.ran_ahead = cluster.runs_ahead();
  result.events_in_line = simulation.events_in_line();
  if (host_tier || kv_store || nvme_tier) append_kv_tier_metrics(cluster, result.summary, outputs.check);
  if (swapping && network) append_swap_metrics(cluster, result.summary);
  if (result.summary.requests_total == 0)
    throw core::Error("the workload produced no requests (check its window, max_requests and input file)");
  // Every output is written where it is not yet visible, then committed: the database first, so
  // that a run is in the database once it is anywhere, and a failure before leaves nothing.
  for (auto* s : sink_ptrs) s->stage(result.summary);
  if (outputs.stage) outputs.stage(result.info);
  for (auto* s : sink_ptrs) s->end_run(result.summary);
  if (outputs.publish) outputs.publish();

  result.workload_kind = config.section("workload").kind();
  result.model_kind = config.section("model").kind();
  result.router_kind = config.section("router").kind();
  result.decoding_kind = decoding ? decoding->name() : "none";
  for (const auto& p : pools) {
    RunResult::PoolInfo info;
    info.role = !disaggregated ? "unified" : (&p == &pools[0] ? "prefill" : "decode");
    info.replicas = p.replicas;
    info.tensor_parallel = p.tp;
    info.expert_parallel = p.ep.degree;
    info.attention_data_parallel = p.ranks;
    info.redundant_experts = p.ep.redundant_experts;
    info.expert_imbalance = p.expert_imbalance;
    info.gpu_kind = p.gpu_kind;
    info.scheduler_kind = p.scheduler_kind;
    info.kv_blocks_per_replica = p.kv_blocks;
    info.usd_per_gpu_hour = p.gpu->price_usd_per_hour;
    info.calibration = p.calibration;
    info.calibration_default = p.calibration_default;
    info.engine_kind = p.engine->name;
    result.pools.push_back(info);
  }
  result.gpu_kind = pools[0].gpu_kind;
  result.scheduler_kind = pools[0].scheduler_kind;
  result.replicas = replicas;
  result.tensor_parallel = pools[0].tp;
  result.kv_blocks_per_replica = pools[0].kv_blocks;
  result.block_size = cluster_cfg.get_int("block_size");
  result.usd_per_gpu_hour = pools[0].gpu->price_usd_per_hour;
  result.slo = slo;
  result.measurement = collector_cfg.measurement;
  return result;
}

}  // namespace servesim::experiments
