// Autoscaling of disaggregated pools ([cluster.prefill.autoscaler], [cluster.decode.autoscaler];
// docs/fleet.md "Autoscaling disaggregated pools"): a decode replica's cold start by hand from the
// decode pool's own shard of the weights, a prefill replica's drain that goes off only after its last
// outgoing KV transfer and loses nothing, each pool's GPU-hours by hand from the replica-count
// timeline, an autoscaler that never scales giving the fixed run exactly, the example's burst, and
// link failures under a pool autoscaler. Every run is under the invariant checker and the cluster's
// conservation check.
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

struct Recorder final : core::LifecycleObserver {
  std::vector<core::FleetEvent> events;
  std::vector<core::KvTransfer> transfers;
  std::vector<core::RequestRecord> done;
  std::map<uint32_t, std::vector<core::Time>> iterations;  // starts, per replica
  void on_fleet_event(const core::FleetEvent& e) override { events.push_back(e); }
  void on_kv_transfer(const core::KvTransfer& t) override { transfers.push_back(t); }
  void on_request_done(const core::RequestRecord& r) override { done.push_back(r); }
  void on_iteration(const core::IterationRecord& it) override { iterations[it.replica].push_back(it.start); }
  std::vector<core::FleetEvent> of(core::FleetEventKind kind, int64_t replica = -1) const {
    std::vector<core::FleetEvent> out;
    for (const auto& e : events)
      if (e.kind == kind && (replica < 0 || e.replica == static_cast<uint32_t>(replica))) out.push_back(e);
    return out;
  }
};

RunResult run(const std::string& text, Recorder* rec = nullptr, const std::string& db = "") {
  RunOutputs out;
  out.db_path = db;
  out.check = true;
  if (rec) out.observers.push_back(rec);
  return run_simulation(core::parse_config(text, "a.toml", run_schema()), out);
}

double fleet_value(const RunResult& r, const std::string& name) {
  for (const auto& v : r.summary.fleet)
    if (v.name == name) return v.value;
  ADD_FAILURE() << "no fleet metric " << name;
  return -1;
}

double fleet_metric(SQLite::Database& d, const std::string& name) {
  return d.execAndGet("SELECT value FROM fleet_metrics WHERE name = '" + name + "'").getDouble();
}

// Llama-2-7B (hidden 4096, 32 layers, FFN 11008, vocabulary 32000, multi-head attention, untied
// embeddings) in bf16, on each GPU of a TP-2 replica, counted by hand: the embeddings, the LM head,
// q/k/v/o and gate/up/down split in two; the two RMSNorm vectors per layer and the final norm whole.
constexpr double kLlama2_7bTp2Params =
    2.0 * 32000 * 4096 / 2 + 32.0 * (4.0 * 4096 * 4096 / 2 + 3.0 * 4096 * 11008 / 2 + 2 * 4096) + 4096;
constexpr double kLlama2_7bTp2Bytes = 2 * kLlama2_7bTp2Params;  // 6.74 GB

std::string pd_base(const std::string& prefill, const std::string& decode, const std::string& extra = "") {
  return R"(
seed = 5
[workload]
kind = "poisson"
rate = 12.0
max_requests = 720
[workload.prompt]
kind = "uniform"
min = 200
max = 1500
[workload.output]
kind = "uniform"
min = 10
max = 120
[model]
kind = "llama-2-7b"
[gpu]
kind = "a100-80gb-sxm"
[router]
kind = "least_outstanding"
[decode_router]
kind = "least_outstanding"
[network]
gpus_per_node = 4
[cluster.prefill]
)" + prefill + "\n[cluster.decode]\n" + decode + "\n" + extra;
}

// The decode pool (TP 2, 1 of 2 replicas at the start) under a schedule that wants 2 from 10 s on:
// replica 2 (prefill pool: replica 0; decode pool: 1 and 2) is provisioned at the evaluation at 10 s
// and ready 20 s + 6.74 GB / 6 GB/s (NVMe) + 5 s later. The prefill pool is fixed (TP 1).
const std::string kDecodeUp = pd_base("replicas = 1", R"(replicas = 1
tensor_parallel = 2
[cluster.decode.autoscaler]
kind = "schedule"
max_replicas = 2
times_s = [10]
replicas = [2]
interval_s = 5
provision_s = 20
warmup_s = 5
)");

TEST(AutoscalePdTest, DecodeScaleUpIsReadyAfterItsPoolsColdStart) {
  EXPECT_NEAR(kLlama2_7bTp2Bytes / 1e9, 6.74, 0.01);
  TempDir dir;
  Recorder rec;
  const RunResult r = run(kDecodeUp, &rec, dir.file("d.db"));
  const auto provision = rec.of(core::FleetEventKind::kReplicaProvision);
  const auto ready = rec.of(core::FleetEventKind::kReplicaReady);
  ASSERT_EQ(provision.size(), 1u);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(provision[0].replica, 2u);
  EXPECT_EQ(provision[0].time.ns(), 10'000'000'000);
  const double ready_s = 10 + 20 + kLlama2_7bTp2Bytes / 6e9 + 5;
  EXPECT_NEAR(ready[0].time.seconds(), ready_s, 1e-6);
  // No KV comes to it and it runs nothing before it is ready; it does after.
  ASSERT_FALSE(rec.iterations[2].empty());
  EXPECT_GE(rec.iterations[2].front(), ready[0].time);
  size_t to_new = 0;
  for (const auto& t : rec.transfers)
    if (t.to_replica == 2) {
      ++to_new;
      EXPECT_GE(t.ready, ready[0].time);
    }
  EXPECT_GT(to_new, 50u);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  // GPU-hours by hand from the timeline: prefill replica 0 (1 GPU) the whole run T; decode replica 1
  // (2 GPUs) the whole run; decode replica 2 (2 GPUs) from 10 s to T.
  const double t = r.summary.sim_seconds;
  ASSERT_GT(t, ready_s);
  const double prefill_h = t / 3600, decode_h = 2 * (t + (t - 10)) / 3600;
  EXPECT_NEAR(r.summary.gpu_hours, prefill_h + decode_h, 1e-9);
  SQLite::Database d(dir.file("d.db"), SQLite::OPEN_READONLY);
  EXPECT_NEAR(fleet_metric(d, "prefill_provisioned_gpu_hours"), prefill_h, 1e-9);
  EXPECT_NEAR(fleet_metric(d, "decode_provisioned_gpu_hours"), decode_h, 1e-9);
  EXPECT_NEAR(fleet_metric(d, "prefill_replicas_mean"), 1.0, 1e-9);
  EXPECT_NEAR(fleet_metric(d, "decode_replicas_mean"), (2 * t - 10) / t, 1e-9);
  EXPECT_EQ(fleet_metric(d, "decode_replica_provisions"), 1);
  EXPECT_EQ(fleet_metric(d, "prefill_replica_provisions"), 0);
}

// The prefill pool (2 replicas, TP 1) under a schedule that wants 1 from 20 s on, with no
// stabilisation: replica 1 drains at 20 s while it holds a queue and KV transfers; it takes no new
// request, finishes what it holds and goes off at the end of its last outgoing transfer.
const std::string kPrefillDown = pd_base(R"(replicas = 2
[cluster.prefill.autoscaler]
kind = "schedule"
max_replicas = 2
times_s = [20]
replicas = [1]
interval_s = 5
stabilization_s = 0
)",
                                         "replicas = 2", "");

TEST(AutoscalePdTest, PrefillDrainEndsWithItsLastTransferAndLosesNothing) {
  for (const char* pull : {"reserve_first", "push"}) {
    SCOPED_TRACE(pull);
    // Rate 30 req/s: the prefill replicas hold queues when the drain comes.
    std::string text = kPrefillDown;
    text.replace(text.find("rate = 12.0"), 11, "rate = 30.0");
    text += std::string("[cluster]\npd_pull = \"") + pull + "\"\n";
    TempDir dir;
    Recorder rec;
    const RunResult r = run(text, &rec, dir.file("p.db"));
    const auto drain = rec.of(core::FleetEventKind::kReplicaDrain);
    ASSERT_EQ(drain.size(), 1u);
    EXPECT_EQ(drain[0].replica, 1u);
    EXPECT_EQ(drain[0].time.ns(), 20'000'000'000);
    const auto off = rec.of(core::FleetEventKind::kReplicaOff, 1);
    ASSERT_EQ(off.size(), 1u);
    // Its last outgoing transfer: it goes off exactly when that one ends, after the drain.
    core::Time last;
    size_t after_drain = 0;
    for (const auto& t : rec.transfers)
      if (t.from_replica == 1) {
        last = std::max(last, t.end);
        after_drain += t.end > drain[0].time;
      }
    EXPECT_GT(after_drain, 0u);  // it held transfers when it drained
    EXPECT_EQ(off[0].time, last);
    // Nothing was routed to it after the drain, and every request completed (none lost).
    for (const auto& d : rec.done)
      if (d.replica == 1) {
        EXPECT_LT(d.arrival, drain[0].time);
      }
    EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
    EXPECT_EQ(r.summary.requests_total, 720u);
    // GPU-hours by hand: prefill replica 0 and both decode replicas the whole run T, prefill
    // replica 1 from 0 to its off.
    const double t = r.summary.sim_seconds, off_s = off[0].time.seconds();
    SQLite::Database d(dir.file("p.db"), SQLite::OPEN_READONLY);
    EXPECT_NEAR(fleet_metric(d, "prefill_provisioned_gpu_hours"), (t + off_s) / 3600, 1e-9);
    EXPECT_NEAR(fleet_metric(d, "decode_provisioned_gpu_hours"), 2 * t / 3600, 1e-9);
    EXPECT_NEAR(r.summary.gpu_hours, (3 * t + off_s) / 3600, 1e-9);
  }
}

// Autoscalers whose pools never change (min = max = the start) give the fixed run exactly.
TEST(AutoscalePdTest, AutoscalersThatNeverScaleGiveTheFixedRun) {
  const std::string fixed = pd_base("replicas = 2", "replicas = 2");
  const std::string elastic = pd_base(R"(replicas = 2
[cluster.prefill.autoscaler]
kind = "slo"
max_ttft_ms = 1
min_replicas = 2
max_replicas = 2
interval_s = 1
)",
                                      R"(replicas = 2
[cluster.decode.autoscaler]
kind = "tpot"
max_tpot_ms = 1
min_replicas = 2
max_replicas = 2
interval_s = 1
)");
  Recorder a_rec, b_rec;
  const RunResult a = run(elastic, &a_rec);
  const RunResult b = run(fixed, &b_rec);
  EXPECT_TRUE(a_rec.of(core::FleetEventKind::kReplicaProvision).empty());
  ASSERT_EQ(a_rec.done.size(), b_rec.done.size());
  for (size_t i = 0; i < a_rec.done.size(); ++i) {
    EXPECT_EQ(a_rec.done[i].id, b_rec.done[i].id);
    EXPECT_EQ(a_rec.done[i].finish, b_rec.done[i].finish);
    EXPECT_EQ(a_rec.done[i].first_token, b_rec.done[i].first_token);
    EXPECT_EQ(a_rec.done[i].decode_replica, b_rec.done[i].decode_replica);
  }
  EXPECT_EQ(a.summary.ttft_ms.p99, b.summary.ttft_ms.p99);
  EXPECT_EQ(a.summary.tpot_ms.p99, b.summary.tpot_ms.p99);
  EXPECT_NEAR(a.summary.gpu_hours, b.summary.gpu_hours, 1e-12);
  EXPECT_NEAR(a.summary.cost_usd, b.summary.cost_usd, 1e-12);
}

// The example: both pools scale up under the burst (120-300 s) and back down after it, losing
// nothing, for fewer GPU-hours than the fixed pools of the peak.
TEST(AutoscalePdTest, ExampleScalesBothPoolsWithTheBurst) {
  const std::string path = servesim::testing::source_dir() + "/experiments/fleet/autoscale_pd.toml";
  RunOutputs out;
  out.check = true;
  Recorder rec;
  out.observers.push_back(&rec);
  const RunResult r = run_simulation(load_run_config(path, {}), out);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  size_t prefill_up = 0, decode_up = 0;
  for (const auto& e : rec.of(core::FleetEventKind::kReplicaProvision)) {
    EXPECT_GE(e.time.seconds(), 120);  // nothing before the burst
    (e.replica < 4 ? prefill_up : decode_up) += 1;
  }
  EXPECT_GT(prefill_up, 0u);
  EXPECT_GT(decode_up, 0u);
  // Scale-down not before a stabilisation window (60 s) after the first scale-up; the decode pool's
  // not before the burst's end (its batches stay large until the burst's answers are done).
  const double first_up = rec.of(core::FleetEventKind::kReplicaProvision).front().time.seconds();
  size_t prefill_down = 0, decode_down = 0;
  for (const auto& e : rec.of(core::FleetEventKind::kReplicaDrain)) {
    EXPECT_GE(e.time.seconds(), first_up + 60);
    if (e.replica >= 4) {
      EXPECT_GE(e.time.seconds(), 300);
    }
    (e.replica < 4 ? prefill_down : decode_down) += 1;
  }
  EXPECT_GT(prefill_down, 0u);
  EXPECT_GT(decode_down, 0u);
  EXPECT_LT(r.summary.gpu_hours, 8 * r.summary.sim_seconds / 3600);
}

// The tpot policy against bounds that need no cost model: any decode iteration of Llama-3-8B on an
// H100-SXM reads its 16.06 GB of weights from HBM at no more than 3.35 TB/s, so it takes at least
// 4.79 ms. A limit of 1 ms can never be met (b* = 0): the first evaluation with requests on the
// decode pool wants every replica. A limit of 10^6 ms is never approached: every evaluation is below
// half of it and wants one replica fewer, so (no stabilisation) the pool steps down one replica per
// evaluation to min_replicas.
TEST(AutoscalePdTest, TpotPolicyAgainstTheWeightReadingBound) {
  const std::string pools = R"(
seed = 6
[workload]
kind = "poisson"
rate = 20.0
max_requests = 400
[workload.prompt]
kind = "uniform"
min = 100
max = 600
[workload.output]
kind = "uniform"
min = 50
max = 200
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[network]
gpus_per_node = 4
[cluster.prefill]
replicas = 1
[cluster.decode]
replicas = @N@
[cluster.decode.autoscaler]
kind = "tpot"
max_tpot_ms = @LIMIT@
max_replicas = 3
interval_s = 5
stabilization_s = 0
provision_s = 1
warmup_s = 0
load_gb_s = 1000
)";
  auto with = [&](const std::string& n, const std::string& limit) {
    std::string t = pools;
    t.replace(t.find("@N@"), 3, n);
    t.replace(t.find("@LIMIT@"), 7, limit);
    return t;
  };
  EXPECT_GT(16.06e9 / 3.35e12 * 1e3, 4.79);
  Recorder up;
  const RunResult a = run(with("1", "1"), &up);
  const auto provision = up.of(core::FleetEventKind::kReplicaProvision);
  ASSERT_EQ(provision.size(), 2u);  // decode replicas 2 and 3 (prefill: 0; decode: 1-3), both at 5 s
  EXPECT_EQ(provision[0].replica, 2u);
  EXPECT_EQ(provision[1].replica, 3u);
  for (const auto& e : provision) EXPECT_EQ(e.time.ns(), 5'000'000'000);
  EXPECT_TRUE(up.of(core::FleetEventKind::kReplicaDrain).empty());  // never below the limit
  EXPECT_EQ(a.summary.requests_completed, a.summary.requests_total);
  Recorder down;
  const RunResult b = run(with("3", "1000000"), &down);
  const auto drain = down.of(core::FleetEventKind::kReplicaDrain);
  ASSERT_EQ(drain.size(), 2u);  // 3 -> 2 at 5 s, 2 -> 1 at 10 s: the highest-numbered first
  EXPECT_EQ(drain[0].replica, 3u);
  EXPECT_EQ(drain[0].time.ns(), 5'000'000'000);
  EXPECT_EQ(drain[1].replica, 2u);
  EXPECT_EQ(drain[1].time.ns(), 10'000'000'000);
  EXPECT_TRUE(down.of(core::FleetEventKind::kReplicaProvision).empty());
  EXPECT_EQ(b.summary.requests_completed, b.summary.requests_total);
}

// Link failures under a pool autoscaler: the KV transfers re-route around a failed cable while the
// decode pool scales; nothing is lost.
TEST(AutoscalePdTest, LinkFailuresUnderAPoolAutoscaler) {
  std::string text = kDecodeUp;
  text.replace(text.find("[network]\ngpus_per_node = 4"), 27,
               "[network]\ngpus_per_node = 2\nnics_per_node = 2\nnic_gb_s = 12.5");
  text += "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"node 1 nic 0 - leaf\"\nat_s = 5\nrepair_s = 40\n";
  Recorder rec;
  const RunResult r = run(text, &rec);
  EXPECT_EQ(rec.of(core::FleetEventKind::kLinkDown).size(), 1u);
  EXPECT_EQ(rec.of(core::FleetEventKind::kReplicaReady).size(), 1u);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
}

// Replica faults in an autoscaled decode pool (docs/fleet.md "Failures in an autoscaled pool"). The
// decode pool (TP 2, replicas 1..3, 2 in service) under a schedule that always wants 2, evaluated
// every 5 s; decode replica 1 fails for good at 12 s. By hand: it goes off at 12 s (its transfers
// called off, its requests recomputed from the prefill pool); the evaluation at 15 s sees 1 in
// service, wants 2 and provisions replica 3 (the off one that is not down), ready at
// 15 + 20 + 6.74 GB / 6 GB/s (NVMe) + 5 = 41.12 s. Nothing is lost.
const std::string kDecodeFault = pd_base("replicas = 1", R"(replicas = 2
tensor_parallel = 2
[cluster.decode.autoscaler]
kind = "schedule"
max_replicas = 3
times_s = [0]
replicas = [2]
interval_s = 5
provision_s = 20
warmup_s = 5
)", "[faults]\n[[faults.events]]\nreplica = 1\nat_s = 12\n");

TEST(AutoscalePdTest, FailedDecodeReplicaIsReplacedAtTheNextEvaluation) {
  TempDir dir;
  Recorder rec;
  const RunResult r = run(kDecodeFault, &rec, dir.file("f.db"));
  const auto down = rec.of(core::FleetEventKind::kReplicaDown);
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].replica, 1u);
  EXPECT_EQ(down[0].time.ns(), 12'000'000'000);
  const auto off = rec.of(core::FleetEventKind::kReplicaOff, 1);
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0].time.ns(), 12'000'000'000);
  const auto provision = rec.of(core::FleetEventKind::kReplicaProvision);
  const auto ready = rec.of(core::FleetEventKind::kReplicaReady);
  ASSERT_EQ(provision.size(), 1u);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(provision[0].replica, 3u);
  EXPECT_EQ(provision[0].time.ns(), 15'000'000'000);
  const double ready_s = 15 + 20 + kLlama2_7bTp2Bytes / 6e9 + 5;
  EXPECT_NEAR(ready[0].time.seconds(), ready_s, 1e-6);
  EXPECT_EQ(ready[0].replica, 3u);
  // Nothing reaches the failed replica after its failure, nor the new one before it is ready.
  for (const auto& t : rec.transfers) {
    if (t.to_replica == 1) {
      EXPECT_LE(t.end.ns(), 12'000'000'000);
    }
    if (t.to_replica == 3) {
      EXPECT_GE(t.start, ready[0].time);
    }
  }
  EXPECT_GT(rec.iterations[3].size(), 10u);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  EXPECT_EQ(r.summary.requests_total, 720u);
  // GPU-hours by hand: prefill replica 0 (1 GPU) the whole run T; decode replica 1 (2 GPUs) until
  // its failure at 12 s; decode replica 2 (2 GPUs) the whole run; replica 3 (2 GPUs) from its
  // provisioning at 15 s.
  const double t = r.summary.sim_seconds;
  ASSERT_GT(t, ready_s);
  const double decode_h = 2 * (12 + t + (t - 15)) / 3600;
  EXPECT_NEAR(r.summary.gpu_hours, t / 3600 + decode_h, 1e-9);
  SQLite::Database d(dir.file("f.db"), SQLite::OPEN_READONLY);
  EXPECT_NEAR(fleet_metric(d, "decode_provisioned_gpu_hours"), decode_h, 1e-9);
}

// The only decode replica (replica 1 of replicas 1..2, the schedule wanting 1) fails for good at
// 12 s. By hand: the evaluation at 15 s provisions replica 2, ready at 15 + 20 + 6.74 GB / 6 GB/s + 5
// = 41.12 s. Requests prefilled in between wait on prefill replica 0, holding their KV, and move only
// once it is ready; none fails (each waited for one replica that did not come yet, at 15 s, at most:
// within max_reroutes = 3).
TEST(AutoscalePdTest, OnlyDecodeReplicaFailingLeavesRequestsWaitingForTheReplacement) {
  std::string text = kDecodeFault;
  text.replace(text.find("replicas = 2\ntensor_parallel"), 12, "replicas = 1");
  text.replace(text.find("max_replicas = 3"), 16, "max_replicas = 2");
  text.replace(text.find("replicas = [2]"), 14, "replicas = [1]");
  Recorder rec;
  const RunResult r = run(text, &rec);
  const auto provision = rec.of(core::FleetEventKind::kReplicaProvision);
  const auto ready = rec.of(core::FleetEventKind::kReplicaReady);
  ASSERT_EQ(provision.size(), 1u);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(provision[0].replica, 2u);
  EXPECT_EQ(provision[0].time.ns(), 15'000'000'000);
  const double ready_s = 15 + 20 + kLlama2_7bTp2Bytes / 6e9 + 5;
  EXPECT_NEAR(ready[0].time.seconds(), ready_s, 1e-6);
  // Prefilled while no decode replica was up, they waited: their transfers start at the readiness.
  size_t waited = 0;
  for (const auto& t : rec.transfers) {
    EXPECT_EQ(t.to_replica == 1, t.end.ns() <= 12'000'000'000);
    if (t.to_replica != 2) continue;
    EXPECT_GE(t.start, ready[0].time);
    if (t.ready < ready[0].time) {
      ++waited;
      EXPECT_EQ(t.start, ready[0].time);
    }
  }
  EXPECT_GT(waited, 20u);
  // No decode iteration runs between the failure and the readiness.
  for (const auto& [replica, starts] : rec.iterations) {
    if (replica == 0) continue;
    for (const core::Time s : starts) EXPECT_TRUE(s.ns() < 12'000'000'000 || s >= ready[0].time) << replica;
  }
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  EXPECT_EQ(fleet_value(r, "requests_failed"), 0);
}

// With no decode replica to provision (the pool's only one, failed for good) the waiting requests
// fail rather than wait for ever, and the run still conserves every request.
TEST(AutoscalePdTest, DecodePoolWithNothingToProvisionFailsTheWaiting) {
  std::string text = kDecodeFault;
  text.replace(text.find("replicas = 2\ntensor_parallel"), 12, "replicas = 1");
  text.replace(text.find("max_replicas = 3"), 16, "max_replicas = 1");
  text.replace(text.find("replicas = [2]"), 14, "replicas = [1]");
  const RunResult r = run(text);
  EXPECT_GT(fleet_value(r, "requests_failed"), 500);
  EXPECT_EQ(static_cast<double>(r.summary.requests_completed) + fleet_value(r, "requests_failed"),
            static_cast<double>(r.summary.requests_total));
}

// A push called off by a failure must not keep a draining decode replica waiting for it. Pushes
// slowed to about half a second (1 GB/s NICs; decode replica 3 on node 1) are under way to decode
// replica 3 when the schedule drains it at 10 s; prefill replica 0 fails for good 1 ms later, calling
// off its pushes. Replica 3 still goes off once the pushes that did arrive have decoded, and every
// push counted to it is accounted for (the cluster's end-of-run check throws otherwise).
TEST(AutoscalePdTest, PushCalledOffByAFailureDoesNotHoldADrainingReplica) {
  std::string text = pd_base("replicas = 2", R"(replicas = 2
tensor_parallel = 2
[cluster.decode.autoscaler]
kind = "schedule"
max_replicas = 2
times_s = [10]
replicas = [1]
interval_s = 5
stabilization_s = 0
)", "[faults]\n[[faults.events]]\nreplica = 0\nat_s = 10.001\n");
  text.replace(text.find("[network]\ngpus_per_node = 4"), 27, "[network]\ngpus_per_node = 4\nnic_gb_s = 1");
  text.replace(text.find("[cluster.prefill]"), 17, "[cluster]\npd_pull = \"push\"\n[cluster.prefill]");
  Recorder rec;
  const RunResult r = run(text, &rec);
  size_t called_off = 0;  // pushes from replica 0 to replica 3 under way at its failure
  for (const auto& e : rec.of(core::FleetEventKind::kRequestRerouted, 0)) {
    (void)e;
    ++called_off;
  }
  const auto drain = rec.of(core::FleetEventKind::kReplicaDrain, 3);
  ASSERT_EQ(drain.size(), 1u);
  EXPECT_EQ(drain[0].time.ns(), 10'000'000'000);
  const auto off = rec.of(core::FleetEventKind::kReplicaOff, 3);
  ASSERT_EQ(off.size(), 1u);
  EXPECT_GT(off[0].time, drain[0].time);
  EXPECT_LT(off[0].time.seconds(), r.summary.sim_seconds);
  // No push from the failed replica arrived after its failure; none reached replica 3 after it went off.
  size_t before_drain = 0;
  for (const auto& t : rec.transfers) {
    if (t.from_replica == 0) {
      EXPECT_LE(t.end.ns(), 10'001'000'000);
    }
    if (t.to_replica == 3) {
      EXPECT_LE(t.end, off[0].time);
      before_drain += t.start.ns() < 10'000'000'000 && t.end.ns() > 10'000'000'000;
    }
  }
  EXPECT_GT(before_drain, 0u);
  EXPECT_GT(called_off, 0u);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
}

}  // namespace
}  // namespace servesim::experiments
