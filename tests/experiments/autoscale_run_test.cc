// Autoscaling end to end ([autoscaler], issue 17; docs/fleet.md "Autoscaling"): the cold start
// against a hand computation from the model's weight bytes and the source's bandwidth, a schedule's
// replica counts at its times and its provisioned GPU-hours by hand, scale-down drains that lose no
// request (under the invariant checker), a burst scaled up and back down after the stabilisation
// window, determinism across --jobs, and runs without an autoscaler untouched.
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <vector>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/digest.h"
#include "sim/core/error.h"
#include "tests/cli_driver.h"
#include "tests/experiments/results_dump.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

// Records the fleet events and each replica's iterations.
struct Recorder final : core::LifecycleObserver {
  std::vector<core::FleetEvent> events;
  std::map<uint32_t, std::vector<core::Time>> iterations;  // starts, per replica
  void on_fleet_event(const core::FleetEvent& e) override { events.push_back(e); }
  void on_iteration(const core::IterationRecord& it) override { iterations[it.replica].push_back(it.start); }
  std::vector<core::FleetEvent> of(core::FleetEventKind kind) const {
    std::vector<core::FleetEvent> out;
    for (const auto& e : events)
      if (e.kind == kind) out.push_back(e);
    return out;
  }
};

RunResult run(const std::string& text, Recorder* rec = nullptr, const std::string& db = "") {
  RunOutputs out;
  out.db_path = db;
  out.check = true;  // the invariant checker and the cluster's conservation check
  if (rec) out.observers.push_back(rec);
  return run_simulation(core::parse_config(text, "a.toml", run_schema()), out);
}

// Llama-2-7B in bf16 at TP 1, counted by hand from its architecture (hidden 4096, 32 layers, FFN
// 11008, vocabulary 32000, untied embeddings): embeddings and LM head 2 x 32000 x 4096; per layer
// q, k, v, o 4 x 4096^2, gate/up/down 3 x 4096 x 11008 and two RMSNorm vectors; the final norm.
constexpr double kLlama2_7bParams = 2.0 * 32000 * 4096 + 32.0 * (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008 + 2 * 4096) + 4096;
constexpr double kLlama2_7bBytes = 2 * kLlama2_7bParams;  // 13.48 GB

// Requests for a minute on one replica; the schedule provisions a second at 10 s.
const char* kColdStart = R"(
seed = 3
[workload]
kind = "poisson"
rate = 20.0
max_requests = 1200
[workload.prompt]
kind = "uniform"
min = 50
max = 500
[workload.output]
kind = "uniform"
min = 10
max = 100
[model]
kind = "llama-2-7b"
[gpu]
kind = "a100-80gb-sxm"
[cluster]
replicas = 1
[router]
kind = "least_outstanding"
[autoscaler]
kind = "schedule"
max_replicas = 2
times_s = [10]
replicas = [2]
interval_s = 5
provision_s = 20
warmup_s = 5
)";

TEST(AutoscaleRunTest, ColdStartIsProvisioningPlusWeightsOverBandwidthPlusWarmup) {
  EXPECT_NEAR(kLlama2_7bBytes / 1e9, 13.48, 0.01);
  for (const auto& [source, gb_s] : std::vector<std::pair<std::string, double>>{
           {"nvme", 6.0}, {"host_cache", 64.0}, {"remote", 50.0}}) {
    SCOPED_TRACE(source);
    // Defaults: NVMe 6 GB/s; host cache = network.pcie_gb_s; remote = network.nic_gb_s (set here).
    const std::string text = std::string(kColdStart) + "weights_source = \"" + source +
                             "\"\n[network]\npcie_gb_s = 64\nnic_gb_s = 50\n";
    Recorder rec;
    const RunResult r = run(text, &rec);
    const auto provision = rec.of(core::FleetEventKind::kReplicaProvision);
    const auto ready = rec.of(core::FleetEventKind::kReplicaReady);
    ASSERT_EQ(provision.size(), 1u);
    ASSERT_EQ(ready.size(), 1u);
    EXPECT_EQ(provision[0].replica, 1u);
    EXPECT_EQ(provision[0].time.ns(), 10'000'000'000);  // the evaluation at 10 s
    const double expect_s = 10 + 20 + kLlama2_7bBytes / (gb_s * 1e9) + 5;
    EXPECT_NEAR(ready[0].time.seconds(), expect_s, 1e-6);
    // It takes traffic once ready, not before.
    ASSERT_FALSE(rec.iterations[1].empty());
    EXPECT_GE(rec.iterations[1].front(), ready[0].time);
    EXPECT_LT(rec.iterations[1].front().seconds(), expect_s + 1.0);  // 20 req/s: the router sends at once
    EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  }
  // load_gb_s overrides the source's bandwidth.
  Recorder rec;
  run(std::string(kColdStart) + "load_gb_s = 2\n", &rec);
  ASSERT_EQ(rec.of(core::FleetEventKind::kReplicaReady).size(), 1u);
  EXPECT_NEAR(rec.of(core::FleetEventKind::kReplicaReady)[0].time.seconds(), 35 + kLlama2_7bBytes / 2e9, 1e-6);
}

// Two stages 60 s apart (the second waits for the first to drain): the schedule goes 1 -> 3 at 30 s
// (in the quiet gap) and 3 -> 2 at 60 s (replica 2, empty, drains and is off at once).
const char* kSchedule = R"(
seed = 9
[workload]
kind = "synthetic"
[workload.prompt]
kind = "uniform"
min = 50
max = 300
[workload.output]
kind = "uniform"
min = 5
max = 40
[workload.arrival]
kind = "stages"
drain = true
interval_s = 60
[[workload.arrival.stages]]
rate = 10
duration_s = 20
[[workload.arrival.stages]]
rate = 10
duration_s = 20
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 1
[router]
kind = "round_robin"
[autoscaler]
kind = "schedule"
max_replicas = 3
times_s = [30, 60]
replicas = [3, 2]
interval_s = 10
stabilization_s = 0
provision_s = 4
warmup_s = 1
load_gb_s = 1000
)";

TEST(AutoscaleRunTest, ScheduleGivesItsCountsAtItsTimesAndGpuHoursByHand) {
  TempDir dir;
  const std::string db = dir.file("s.db");
  Recorder rec;
  const RunResult r = run(kSchedule, &rec, db);
  const auto provision = rec.of(core::FleetEventKind::kReplicaProvision);
  ASSERT_EQ(provision.size(), 2u);
  for (const auto& e : provision) EXPECT_EQ(e.time.ns(), 30'000'000'000);
  EXPECT_EQ(provision[0].replica, 1u);
  EXPECT_EQ(provision[1].replica, 2u);
  EXPECT_EQ(provision[1].value, 3);  // replicas provisioned after it
  const auto drain = rec.of(core::FleetEventKind::kReplicaDrain);
  ASSERT_EQ(drain.size(), 1u);
  EXPECT_EQ(drain[0].replica, 2u);  // the highest-numbered replica up
  EXPECT_EQ(drain[0].time.ns(), 60'000'000'000);
  const auto off = rec.of(core::FleetEventKind::kReplicaOff);
  ASSERT_EQ(off.size(), 3u);  // replicas 1 and 2 at the start, replica 2 at 60 s
  EXPECT_EQ(off[2].replica, 2u);
  EXPECT_EQ(off[2].time.ns(), 60'000'000'000);  // empty in the gap between the stages
  EXPECT_EQ(off[2].value, 2);
  // The second stage (from 80 s on) runs on replicas 0 and 1; replica 2 never served a request.
  EXPECT_TRUE(rec.iterations[2].empty());
  ASSERT_FALSE(rec.iterations[1].empty());
  EXPECT_GT(rec.iterations[1].front().seconds(), 80);
  // GPU-hours by hand (TP 1): replica 0 the whole run T, replica 1 from 30 s to T, replica 2 from
  // 30 s to 60 s: T + (T - 30) + 30 = 2T replica-seconds.
  const double t = r.summary.sim_seconds;
  ASSERT_GT(t, 80);
  EXPECT_NEAR(r.summary.gpu_hours, 2 * t / 3600.0, 1e-9);
  EXPECT_NEAR(r.summary.cost_usd, r.summary.gpu_hours * r.usd_per_gpu_hour, 1e-9);
  // The database: the events with their counts, and the provisioned figures.
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM fleet_events WHERE kind = 'replica_provision'").getInt64(), 2);
  EXPECT_NEAR(d.execAndGet("SELECT value FROM fleet_metrics WHERE name = 'provisioned_gpu_hours'").getDouble(),
              2 * t / 3600.0, 1e-9);
  EXPECT_EQ(d.execAndGet("SELECT value FROM fleet_metrics WHERE name = 'replicas_peak'").getDouble(), 3);
  EXPECT_NEAR(d.execAndGet("SELECT value FROM fleet_metrics WHERE name = 'replicas_mean'").getDouble(), 2.0, 1e-9);
  EXPECT_NEAR(d.execAndGet("SELECT gpu_hours FROM runs").getDouble(), 2 * t / 3600.0, 1e-9);
}

// The example: a burst from 120 s to 300 s on an slo-autoscaled pool (evaluations every 15 s,
// stabilisation 60 s). It scales up at the first evaluations of the burst, and down only after the
// burst, a window after it last wanted more; drains lose nothing (the run is under the checker).
TEST(AutoscaleRunTest, ExampleScalesUpUnderTheBurstAndDownAfterTheWindowLosingNothing) {
  const std::string path = servesim::testing::source_dir() + "/experiments/fleet/autoscale.toml";
  RunOutputs out;
  out.check = true;
  Recorder rec;
  out.observers.push_back(&rec);
  const RunResult r = run_simulation(load_run_config(path, {}), out);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);  // nothing lost, rejected or failed
  const auto provision = rec.of(core::FleetEventKind::kReplicaProvision);
  const auto drain = rec.of(core::FleetEventKind::kReplicaDrain);
  ASSERT_FALSE(provision.empty());
  ASSERT_FALSE(drain.empty());
  EXPECT_GT(provision.front().time.seconds(), 120);
  EXPECT_LE(provision.front().time.seconds(), 150);  // within two evaluations of the burst's start
  EXPECT_GE(drain.front().time.seconds(), 300);      // not before the burst is over
  // Every drain ends with the replica off, later than the drain when it held requests.
  bool held = false;
  for (const auto& dr : drain) {
    bool off = false;
    for (const auto& e : rec.of(core::FleetEventKind::kReplicaOff))
      if (e.replica == dr.replica && e.time >= dr.time) {
        off = true;
        held = held || e.time > dr.time;
        break;
      }
    EXPECT_TRUE(off) << "replica " << dr.replica;
  }
  EXPECT_TRUE(held);  // some drain waited for requests to finish
  // Cheaper than a fixed pool of the peak size, and better served than one of the starting size.
  const RunResult fixed = run_simulation(load_run_config(path, {"cluster.replicas=6", "autoscaler.min_replicas=6"}), out);
  EXPECT_LT(r.summary.gpu_hours, 0.8 * fixed.summary.gpu_hours);
  EXPECT_NEAR(fixed.summary.gpu_hours, 6 * fixed.summary.sim_seconds / 3600.0, 1e-9);
}

// target_utilisation under a burst: up once the requests per replica exceed the target, down again
// only a stabilisation window after the count it wanted fell.
TEST(AutoscaleRunTest, TargetUtilisationScalesWithTheLoad) {
  std::string text = R"(
seed = 4
[workload]
kind = "synthetic"
[workload.prompt]
kind = "uniform"
min = 200
max = 1500
[workload.output]
kind = "uniform"
min = 50
max = 400
[workload.arrival]
kind = "stages"
drain = false
interval_s = 0
[[workload.arrival.stages]]
rate = 4
duration_s = 60
[[workload.arrival.stages]]
rate = 40
duration_s = 60
[[workload.arrival.stages]]
rate = 4
duration_s = 240
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 1
[router]
kind = "least_outstanding"
[autoscaler]
kind = "target_utilisation"
target_requests = 40
max_replicas = 5
interval_s = 10
stabilization_s = 90
provision_s = 10
warmup_s = 2
)";
  Recorder rec;
  const RunResult r = run(text, &rec);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  const auto provision = rec.of(core::FleetEventKind::kReplicaProvision);
  const auto drain = rec.of(core::FleetEventKind::kReplicaDrain);
  ASSERT_FALSE(provision.empty());
  ASSERT_FALSE(drain.empty());
  EXPECT_GE(provision.front().time.seconds(), 60);
  EXPECT_LE(provision.front().time.seconds(), 120);
  // Down no earlier than a whole window after the last scale-up.
  EXPECT_GE((drain.front().time - provision.back().time).seconds(), 90);
  double peak = 0;
  for (const auto& v : r.summary.fleet)
    if (v.name == "replicas_peak") peak = v.value;
  EXPECT_GE(peak, 2);
}

// The same configuration and seed give the same results database at any --jobs.
TEST(AutoscaleRunTest, ReplicationsAreTheSameBytesAtAnyJobs) {
  TempDir dir;
  const std::string path = servesim::testing::source_dir() + "/experiments/fleet/autoscale.toml";
  std::vector<std::string> digests;
  for (const char* jobs : {"1", "3"}) {
    const std::string db = dir.file(std::string("j") + jobs + ".db");
    const servesim::testing::Cli c =
        servesim::testing::cli({"run", path, "--replications", "3", "--jobs", jobs, "--db", db});
    ASSERT_EQ(c.code, 0) << c.err;
    digests.push_back(servesim::testing::dump_results(db, {"config", "version"}));
  }
  EXPECT_EQ(digests[0], digests[1]);
}

// From the command line: the summary's autoscaling line and the JSON's fleet figures, the GPU-hours
// provisioned being the run's gpu_hours.
TEST(AutoscaleRunTest, CommandLineReportsTheProvisionedGpuHours) {
  const std::string path = servesim::testing::source_dir() + "/experiments/fleet/autoscale.toml";
  const servesim::testing::Cli text = servesim::testing::cli({"run", path, "--no-db"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("autoscaling  5 replicas provisioned, 3 drained"), std::string::npos) << text.out;
  const servesim::testing::Cli json = servesim::testing::cli({"run", path, "--no-db", "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_TRUE(j.contains("fleet")) << json.out;
  EXPECT_EQ(j["fleet"]["replica_provisions"].get<int64_t>(), 5);
  EXPECT_EQ(j["fleet"]["replicas_peak"].get<int64_t>(), 6);
  const auto& summary = j.contains("summary") ? j["summary"] : j;
  EXPECT_DOUBLE_EQ(j["fleet"]["provisioned_gpu_hours"].get<double>(), summary["gpu_hours"].get<double>());
  // The timeline has the fleet events: 5 provisions, 5 readies, 3 drains, 5 + 3 offs.
  TempDir dir;
  const std::string timeline = dir.file("t.json");
  ASSERT_EQ(servesim::testing::cli({"run", path, "--no-db", "--timeline", timeline, "--timeline-max-events", "1000000"}).code, 0);
  const auto trace = nlohmann::json::parse(std::ifstream(timeline));
  std::map<std::string, int> fleet;
  for (const auto& e : trace["traceEvents"])
    if (e.value("cat", "") == "fleet") ++fleet[e["name"].get<std::string>()];
  EXPECT_EQ(fleet["replica_provision"], 5);
  EXPECT_EQ(fleet["replica_ready"], 5);
  EXPECT_EQ(fleet["replica_drain"], 3);
  EXPECT_EQ(fleet["replica_off"], 8);
}

// The side-by-side sweep: the fixed pools' GPU-hours are replicas x run length by hand; the
// autoscaled ones cost less than the fixed pool of the peak size, and the warm start meets the SLO
// for more requests than the cold one.
TEST(AutoscaleRunTest, SweepOfFixedAndAutoscaledPools) {
  TempDir dir;
  const std::string db = dir.file("s.db");
  const servesim::testing::Cli c = servesim::testing::cli(
      {"sweep", servesim::testing::source_dir() + "/experiments/fleet/autoscale_vs_fixed.toml", "--db", db, "--quiet"});
  ASSERT_EQ(c.code, 0) << c.err;
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  auto col = [&](const char* name, int run) {
    SQLite::Statement st(d, std::string("SELECT ") + name + " FROM runs WHERE run_id = ?");
    st.bind(1, run);
    EXPECT_TRUE(st.executeStep());
    return st.getColumn(0).getDouble();
  };
  const int fixed_replicas[] = {2, 3, 6};
  for (int run = 1; run <= 3; ++run)
    EXPECT_NEAR(col("gpu_hours", run), fixed_replicas[run - 1] * col("sim_seconds", run) / 3600.0, 1e-9) << run;
  EXPECT_LT(col("gpu_hours", 4), col("gpu_hours", 3));
  EXPECT_LT(col("gpu_hours", 5), col("gpu_hours", 3));
  EXPECT_GT(col("slo_attainment", 5), col("slo_attainment", 4));
  EXPECT_EQ(d.execAndGet("SELECT COUNT(DISTINCT run_id) FROM fleet_events WHERE kind = 'replica_provision'").getInt64(), 2);
}

// An autoscaler whose pool never changes (min = max = the start) costs what a fixed pool does.
TEST(AutoscaleRunTest, AFixedAutoscalerMatchesAFixedPool) {
  Recorder rec;
  std::string text = kColdStart;
  text.replace(text.find("times_s = [10]\nreplicas = [2]"), 29, "times_s = [10]\nreplicas = [1]");
  text.replace(text.find("max_replicas = 2"), 16, "max_replicas = 1");
  const RunResult a = run(text, &rec);
  std::string plain = kColdStart;
  plain.erase(plain.find("[autoscaler]"));
  const RunResult b = run(plain);
  EXPECT_EQ(a.summary.requests_completed, b.summary.requests_completed);
  EXPECT_EQ(a.summary.ttft_ms.p99, b.summary.ttft_ms.p99);
  EXPECT_NEAR(a.summary.gpu_hours, b.summary.gpu_hours, 1e-12);
}

}  // namespace
}  // namespace servesim::experiments

namespace servesim::experiments {
namespace {

// Failures under an autoscaler ([faults] with [autoscaler]): a failed replica leaves the pool (it
// stops costing) and the autoscaler's next evaluation provisions a replacement with the cold start.
// The schedule wants 2 replicas all along (of 3); replica 1 fails for good at 15 s; the evaluation at
// 20 s sees 1 and provisions replica 2, ready after 4 s + 16.06 GB at 1,000 GB/s + 1 s.
// GPU-hours by hand: replica 0 the whole run T, replica 1 [0, 15 s], replica 2 [20 s, T].
std::string failing_pool(const std::string& replicas, const std::string& schedule, const std::string& fault) {
  return std::string(R"(
seed = 4
[workload]
kind = "poisson"
rate = 10.0
max_requests = 600
[workload.prompt]
kind = "uniform"
min = 50
max = 300
[workload.output]
kind = "uniform"
min = 5
max = 60
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = )") + replicas + R"(
[router]
kind = "least_outstanding"
[autoscaler]
kind = "schedule"
max_replicas = 3
times_s = [0]
replicas = [)" + schedule + R"(]
interval_s = 10
stabilization_s = 0
provision_s = 4
warmup_s = 1
load_gb_s = 1000
[faults]
[[faults.events]]
)" + fault;
}

constexpr double kLlama3_8bGb = 16.06;  // its weights in bf16 (docs/fleet.md, "Cold start")

TEST(AutoscaleRunTest, AFailedReplicaIsReplacedAtTheNextEvaluation) {
  Recorder rec;
  const RunResult r = run(failing_pool("2", "2", "replica = 1\nat_s = 15\n"), &rec);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);  // recomputed, none lost
  const auto down = rec.of(core::FleetEventKind::kReplicaDown);
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].time.ns(), 15'000'000'000);
  const auto off = rec.of(core::FleetEventKind::kReplicaOff);
  ASSERT_EQ(off.size(), 2u);  // replica 2 at the start, replica 1 at its failure
  EXPECT_EQ(off[1].replica, 1u);
  EXPECT_EQ(off[1].time.ns(), 15'000'000'000);
  const auto provision = rec.of(core::FleetEventKind::kReplicaProvision);
  ASSERT_EQ(provision.size(), 1u);
  EXPECT_EQ(provision[0].replica, 2u);  // not the failed one
  EXPECT_EQ(provision[0].time.ns(), 20'000'000'000);
  const auto ready = rec.of(core::FleetEventKind::kReplicaReady);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_NEAR(ready[0].time.seconds(), 20 + 4 + kLlama3_8bGb / 1000 + 1, 0.01);
  const double t = r.summary.sim_seconds;
  ASSERT_GT(t, 30);
  EXPECT_NEAR(r.summary.gpu_hours, (t + 15 + (t - 20)) / 3600.0, 1e-9);
}

// One replica wanted, and it fails for good at 15 s: nothing is up; requests wait (parked) until the
// evaluation at 20 s provisions replica 1 and its cold start ends, then all complete there.
TEST(AutoscaleRunTest, RequestsWaitForTheReplacementWhenNoReplicaIsUp) {
  Recorder rec;
  const RunResult r = run(failing_pool("1", "1", "replica = 0\nat_s = 15\n"), &rec);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  const auto ready = rec.of(core::FleetEventKind::kReplicaReady);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].replica, 1u);
  const double ready_s = 20 + 4 + kLlama3_8bGb / 1000 + 1;
  EXPECT_NEAR(ready[0].time.seconds(), ready_s, 0.01);
  ASSERT_FALSE(rec.iterations[1].empty());
  EXPECT_GE(rec.iterations[1].front(), ready[0].time);
  // Nothing ran between the failure and the replacement.
  for (const auto& [replica, starts] : rec.iterations)
    for (core::Time s : starts) EXPECT_FALSE(s.seconds() > 15.0 && s < ready[0].time) << "replica " << replica;
  // A repaired replica comes back off (the pool's size is the autoscaler's), and may be provisioned again.
  Recorder rec2;
  const RunResult r2 = run(failing_pool("1", "1", "replica = 0\nat_s = 15\nrepair_s = 2\n"), &rec2);
  EXPECT_EQ(r2.summary.requests_completed, r2.summary.requests_total);
  ASSERT_EQ(rec2.of(core::FleetEventKind::kReplicaUp).size(), 1u);
  EXPECT_EQ(rec2.of(core::FleetEventKind::kReplicaUp)[0].time.ns(), 17'000'000'000);
  const auto provision2 = rec2.of(core::FleetEventKind::kReplicaProvision);
  ASSERT_EQ(provision2.size(), 1u);
  EXPECT_EQ(provision2[0].replica, 0u);  // repaired by the evaluation at 20 s: the lowest-numbered off replica
  EXPECT_EQ(provision2[0].time.ns(), 20'000'000'000);
}

}  // namespace
}  // namespace servesim::experiments
