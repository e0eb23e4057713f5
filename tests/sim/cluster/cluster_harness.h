#pragma once
// A small cluster for hand-computable tests of the replica mechanism and the policies: a vector
// workload, a linear cost model, any scheduler and router by config, optionally disaggregated
// pools over a real topology, prefix caching and swap preemption. run() also checks the KV
// invariants after the run.

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policies/decoding/decoding_method.h"
#include "policies/router/router.h"
#include "policies/scheduler/batch_scheduler.h"
#include "sim/cluster/cluster.h"
#include "sim/core/config.h"
#include "sim/metrics/invariant_checker.h"
#include "tests/sim_test_support.h"

namespace servesim::testing {

struct ClusterSetup {
  int replicas = 1;
  int prefill_replicas = 0;  // > 0: the first replicas prefill, the rest decode
  int64_t kv_blocks = 1000;
  int64_t block_size = 4;
  int64_t max_context = 4096;
  int64_t prefix_unit_tokens = 0;  // > 0: prefix caching with units of this many tokens
  sim::PreemptionMode preemption = sim::PreemptionMode::kRecompute;
  double swap_capacity_bytes = 1e12;
  double host_link_bytes_per_s = 1e9;
  double kv_bytes_per_token = 1000;  // per GPU; also the model's, for transfers
  std::string scheduler = "kind = \"continuous\"\nwatermark = 0.0\n";
  std::string router = "kind = \"round_robin\"\n";
  std::string decode_router = "kind = \"round_robin\"\n";
  double base_s = 0.010;
  double per_token_s = 0.0;
  sim::TopologyConfig topology;  // num_gpus is set to the replica count (TP 1)
  bool unified_network = false;  // a unified cluster on `topology` too (its KV tiers' copies are flows)
  bool swap_flows = true;        // with a network: swap copies are flows on it (ClusterLayout::swap_flows)
  bool run_ahead = false;        // replicas may run ahead where the cluster allows (ClusterLayout::run_ahead)
  bool layerwise = false;
  sim::PdPull pd_pull = sim::PdPull::kReserveFirst;
  std::vector<int64_t> kv_blocks_of;  // per replica, where given: its KV capacity in place of kv_blocks
  std::optional<hwmodels::EngineModel> engine;  // none: no engine (eager, no host time)
  std::string decoding;      // the [decoding] section's keys; empty: no speculative decoding
  uint64_t seed = 1;         // the replicas' random streams
  std::optional<double> workload_repetition;  // what [workload] repetition would say
  // Hybrid models: the cache's layer groups, and the model's attention pattern and window (the
  // batch shapes' capped sums follow them).
  sim::KvLayout kv_layout;
  std::string attention_pattern;
  int64_t sliding_window = 0;
  sim::ClientPath client;        // the engine's frontend delays (none by default)
  std::optional<core::Duration> client_timeout;  // of the vector workload
  std::shared_ptr<const sim::HostTierSpec> host_tier;  // a host KV tier per (prefill) replica (none by default)
  std::shared_ptr<const sim::StoreSpec> kv_store;      // a KV store shared by the replicas (none by default)
  int replicas_per_store = 0;  // > 0: one store of kv_store's spec per group of this many (prefill) replicas
  std::shared_ptr<const sim::NvmeTierSpec> nvme_tier;  // an NVMe KV tier per (prefill) replica (none by default)
  // GPUs of each replica (consecutive, replica i from GPU i x gpus_per_replica) and its attention
  // ranks (expert parallelism: data-parallel attention ranks sharing one KV pool).
  int64_t gpus_per_replica = 1;
  int64_t attention_ranks = 1;
  // Where given, each replica's scheduler as this returns it (a test's wrapper around the configured one).
  std::function<std::unique_ptr<sim::BatchScheduler>(std::unique_ptr<sim::BatchScheduler>)> wrap_scheduler;
};

struct Harness {
  sim::Simulation sim;
  RecordingObserver obs;
  metrics::InvariantChecker checker{&obs};  // every signal is checked, then recorded
  LinearCostModel cost;
  std::unique_ptr<traces::ArrivalSource> source;
  std::optional<hwmodels::EngineModel> engine;
  std::unique_ptr<sim::Network> network;
  std::unique_ptr<policies::DecodingMethod> decoding;
  std::unique_ptr<sim::Cluster> cluster;

  explicit Harness(std::vector<traces::RequestSpec> specs, const ClusterSetup& s = ClusterSetup())
      : Harness(std::make_unique<VectorSource>(std::move(specs), s.client_timeout), s) {}

  // Any workload (a closed-loop one, say) in place of the vector.
  Harness(std::unique_ptr<traces::ArrivalSource> workload, const ClusterSetup& s)
      : cost(s.base_s, s.per_token_s), source(std::move(workload)) {
    // A model whose KV bytes per token are s.kv_bytes_per_token (2 x layers x heads x dim x bytes).
    cost.mutable_model().num_layers = 1;
    cost.mutable_model().num_kv_heads = 1;
    cost.mutable_model().head_dim = 1;
    cost.mutable_model().kv_bytes = s.kv_bytes_per_token / 2.0;
    cost.mutable_model().attention_pattern = s.attention_pattern;
    cost.mutable_model().sliding_window = s.sliding_window;
    const std::vector<core::ParamSpec> schema = {
        core::ParamSpec::section("scheduler", "schedulers", "continuous", "s"),
        core::ParamSpec::section("router", "routers", "round_robin", "r"),
        core::ParamSpec::section("decode_router", "routers", "round_robin", "d"),
        core::ParamSpec::section("decoding", "decoding", "none", "x")};
    core::Params cfg = core::parse_config("[scheduler]\n" + s.scheduler + "[router]\n" + s.router +
                                              "[decode_router]\n" + s.decode_router + "[decoding]\n" + s.decoding,
                                          "test.toml", schema);
    policies::DecodingContext dctx;
    dctx.target = &cost.model();
    dctx.workload_repetition = s.workload_repetition;
    decoding = policies::decoding_registry().make(cfg.section("decoding"), dctx);
    sim::ClusterLayout layout;
    layout.replicas = static_cast<size_t>(s.replicas);
    layout.prefill_replicas = static_cast<size_t>(s.prefill_replicas);
    layout.layerwise_kv_transfer = s.layerwise;
    layout.pd_pull = s.pd_pull;
    layout.client = s.client;
    layout.swap_flows = s.swap_flows;
    layout.run_ahead = s.run_ahead;
    checker.set_replicas_run_ahead(s.run_ahead);
    std::unique_ptr<sim::Router> decode_router;
    if (s.prefill_replicas > 0 || s.unified_network) {
      sim::TopologyConfig t = s.topology;
      t.num_gpus = s.replicas * s.gpus_per_replica;
      network = std::make_unique<sim::Network>(sim, sim::Topology(t));
    }
    if (s.prefill_replicas > 0) decode_router = policies::router_registry().make(cfg.section("decode_router"), 8);
    cluster = std::make_unique<sim::Cluster>(sim, *source, policies::router_registry().make(cfg.section("router"), 7),
                                             checker, layout, std::move(decode_router), network.get());
    policies::SchedulerContext ctx;
    ctx.max_context = std::min<int64_t>(s.max_context, 2048);
    ctx.data_parallel = s.attention_ranks;
    ctx.tenant_weights = core::tenant_weights(source->classes());
    sim::ReplicaConfig rc;
    rc.kv_blocks = s.kv_blocks;
    rc.block_size = s.block_size;
    rc.max_context = s.max_context;
    rc.prefix_unit_tokens = s.prefix_unit_tokens;
    rc.preemption = s.preemption;
    rc.swap_capacity_bytes = s.swap_capacity_bytes;
    rc.host_link_bytes_per_s = s.host_link_bytes_per_s;
    rc.kv_bytes_per_token_per_gpu = s.kv_bytes_per_token;
    rc.kv_layout = s.kv_layout;
    if (s.engine) engine = *s.engine;
    rc.engine = engine ? &*engine : nullptr;
    rc.speculator = decoding.get();
    rc.seed = s.seed;
    if (s.kv_store && s.replicas_per_store > 0) {
      const int users = s.prefill_replicas > 0 ? s.prefill_replicas : s.replicas;
      std::vector<std::unique_ptr<sim::SharedKvStore>> stores;
      for (int g = 0; g < (users + s.replicas_per_store - 1) / s.replicas_per_store; ++g)
        stores.push_back(std::make_unique<sim::SharedKvStore>(*s.kv_store));
      cluster->set_kv_stores(std::move(stores), static_cast<size_t>(s.replicas_per_store));
    } else if (s.kv_store) {
      cluster->set_kv_store(std::make_unique<sim::SharedKvStore>(*s.kv_store));
    }
    for (int i = 0; i < s.replicas; ++i) {
      // Disaggregated: the host tier is the prefill replicas' (decode replicas have none).
      rc.host_tier = s.prefill_replicas == 0 || i < s.prefill_replicas ? s.host_tier : nullptr;
      rc.nvme_tier = s.prefill_replicas == 0 || i < s.prefill_replicas ? s.nvme_tier : nullptr;
      rc.kv_blocks = static_cast<size_t>(i) < s.kv_blocks_of.size() ? s.kv_blocks_of[static_cast<size_t>(i)] : s.kv_blocks;
      std::vector<int64_t> gpus;
      for (int64_t g = 0; g < s.gpus_per_replica; ++g) gpus.push_back(i * s.gpus_per_replica + g);
      std::unique_ptr<sim::BatchScheduler> scheduler = policies::scheduler_registry().make(cfg.section("scheduler"), ctx);
      if (s.wrap_scheduler) scheduler = s.wrap_scheduler(std::move(scheduler));
      cluster->add_replica(rc, cost, std::move(scheduler), gpus, s.attention_ranks);
    }
  }

  void run() {
    cluster->start();
    sim.run();
    cluster->check_drained();
    checker.check_drained();
    for (const auto& r : cluster->replicas()) {
      r->kv_cache().check();
      if (r->host_tier()) r->host_tier()->check();
      if (r->nvme_tier()) r->nvme_tier()->check();
    }
    for (const auto& store : cluster->kv_stores()) store->check();
    for (const auto& st : obs.states) {
      ASSERT_GE(st.kv_blocks_used, 0);
      ASSERT_LE(st.kv_blocks_used, st.kv_blocks_total);
    }
  }
};

}  // namespace servesim::testing
