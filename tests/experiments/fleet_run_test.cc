// Fault injection end to end ([faults], issue 17): configuration errors that name the key, the
// fleet tables in the results database, runs without faults unchanged, the example file; request
// classes in class_stats and in the per-request outputs.
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/rng.h"
#include "sim/metrics/csv_sink.h"
#include "traces/arrival_source.h"
#include "tests/experiments/results_dump.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

const char* kBase = R"(
seed = 5
[workload]
kind = "poisson"
rate = 30.0
max_requests = 400
[workload.prompt]
kind = "uniform"
min = 50
max = 1500
[workload.output]
kind = "uniform"
min = 20
max = 300
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 3
[router]
kind = "least_outstanding"
)";

// The error a whole configuration's run stops with ("" when it runs).
std::string error_of_text(const std::string& text) {
  try {
    run_simulation(core::parse_config(text, "f.toml", run_schema()), RunOutputs{});
  } catch (const core::Error& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const std::string& extra) { return error_of_text(std::string(kBase) + extra); }

TEST(FleetRunTest, FaultConfigurationErrorsNameTheKey) {
  EXPECT_NE(error_of("[faults]\n[[faults.events]]\nreplica = 3\nat_s = 1\n").find("faults.events[0].replica"),
            std::string::npos);
  EXPECT_NE(error_of("[faults]\n[[faults.events]]\nreplica = 3\nat_s = 1\n").find("0 to 2"), std::string::npos);
  EXPECT_NE(error_of("[faults]\nmtbf_s = 10\n").find("give mtbf_s and mttr_s together"), std::string::npos);
  EXPECT_NE(error_of("[faults]\n[[faults.events]]\nreplica = 0\nat_s = 1\nkind = \"slow\"\n").find("needs speed"),
            std::string::npos);
  EXPECT_NE(error_of("[faults]\n[[faults.events]]\nreplica = 0\nat_s = 1\nspeed = 0.5\n").find("faults.events[0].speed"),
            std::string::npos);
  EXPECT_NE(error_of("[faults]\non_failure = \"retry\"\n").find("faults.on_failure"), std::string::npos);
  // On a disaggregated cluster replicas are numbered prefill pool first, then the decode pool.
  const std::string pd = "[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 1\n";
  std::string text = std::string(kBase);
  text.replace(text.find("[cluster]\nreplicas = 3\n"), 22, "[cluster]\n" + pd);
  const std::string out_of_range = error_of_text(text + "[faults]\n[[faults.events]]\nreplica = 2\nat_s = 1\n");
  EXPECT_NE(out_of_range.find("'faults.events[0].replica': replica 2 does not exist: the cluster has 2 replicas (0 to 1)"),
            std::string::npos)
      << out_of_range;
  // A pool autoscaler together with replica faults runs (docs/fleet.md "Failures in an autoscaled
  // pool"; tests/experiments/autoscale_pd_test.cc).
  const std::string scaled = error_of_text(
      text + "[faults]\n[[faults.events]]\nreplica = 0\nat_s = 1\n[cluster.decode.autoscaler]\nkind = "
             "\"target_utilisation\"\ntarget_requests = 8\nmax_replicas = 3\n");
  EXPECT_EQ(scaled, "");
}

// A failure at 5 s of replica 1 (back after 4 s): the database has its events and figures, and every
// request is accounted for: completed + failed = total (nothing rejected or timed out here).
TEST(FleetRunTest, FailureIsCountedInTheDatabase) {
  TempDir dir;
  const std::string db = dir.file("f.db");
  const RunResult r = run_simulation(
      core::parse_config(std::string(kBase) + "[faults]\n[[faults.events]]\nreplica = 1\nat_s = 5\nrepair_s = 4\n",
                         "f.toml", run_schema()),
      RunOutputs{db, ""});
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  auto metric = [&](const char* name) {
    SQLite::Statement st(d, "SELECT value FROM fleet_metrics WHERE name = ?");
    st.bind(1, name);
    EXPECT_TRUE(st.executeStep()) << name;
    return st.getColumn(0).getDouble();
  };
  EXPECT_EQ(metric("replica_failures"), 1);
  EXPECT_EQ(metric("replica_repairs"), 1);
  EXPECT_EQ(metric("replica_down_seconds"), 4);
  const double rerouted = metric("requests_rerouted");
  EXPECT_GT(rerouted, 0);  // at 30 req/s over 3 replicas, replica 1 holds requests at 5 s
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM fleet_events WHERE kind = 'request_rerouted'").getInt64(),
            static_cast<int64_t>(rerouted));
  EXPECT_EQ(d.execAndGet("SELECT time_ns FROM fleet_events WHERE kind = 'replica_down'").getInt64(), 5'000'000'000);
  EXPECT_EQ(d.execAndGet("SELECT time_ns FROM fleet_events WHERE kind = 'replica_up'").getInt64(), 9'000'000'000);
  EXPECT_EQ(r.summary.requests_completed, 400u);  // recomputed, not lost
  // Nothing failed, was rejected or timed out.
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests WHERE outcome <> 'completed'").getInt64(), 0);
}

// A node failure from the configuration: four TP-1 replicas on nodes of two GPUs (replicas 0-1 on
// node 0, 2-3 on node 1); node 1 fails at 5 s for 4 s: replicas 2 and 3 go down together and none
// of their requests is recomputed on either of them while they are down.
TEST(FleetRunTest, ANodeFailureTakesTheReplicasOnItDown) {
  TempDir dir;
  const std::string db = dir.file("node.db");
  std::string text = std::string(kBase) + "[network]\ngpus_per_node = 2\n[faults]\n[[faults.events]]\nnode = 1\n"
                                          "at_s = 5\nrepair_s = 4\n";
  text.replace(text.find("replicas = 3"), 12, "replicas = 4");
  RunOutputs out{db, ""};
  out.check = true;
  const RunResult r = run_simulation(core::parse_config(text, "node.toml", run_schema()), out);
  EXPECT_EQ(r.summary.requests_completed, 400u);
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  EXPECT_EQ(d.execAndGet("SELECT group_concat(replica) FROM (SELECT replica FROM fleet_events WHERE kind = "
                         "'replica_down' ORDER BY replica)").getString(),
            "2,3");
  EXPECT_EQ(d.execAndGet("SELECT COUNT(DISTINCT time_ns) FROM fleet_events WHERE kind IN ('replica_down', "
                         "'request_rerouted')").getInt64(), 1);
  EXPECT_GT(d.execAndGet("SELECT COUNT(*) FROM fleet_events WHERE kind = 'request_rerouted'").getInt64(), 0);
  // Lost on node 1 and recomputed on node 0 (both of node 1's replicas were down until 9 s).
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests r JOIN fleet_events e ON e.request_id = r.request_id "
                         "WHERE e.kind = 'request_rerouted' AND r.decode_replica >= 2").getInt64(), 0);
  EXPECT_NE(error_of("[network]\ngpus_per_node = 2\n[faults]\n[[faults.events]]\nnode = 2\nat_s = 1\n")
                .find("node 2 does not exist: the cluster's replicas fill 2 nodes (0 to 1)"),
            std::string::npos);
  EXPECT_NE(error_of("[faults]\n[[faults.events]]\nnode = 0\nreplica = 1\nat_s = 1\n").find("one of replica and node"),
            std::string::npos);
  EXPECT_NE(error_of("[faults]\n[[faults.events]]\nat_s = 1\n").find("faults.events[0].replica"), std::string::npos);
}

// Link failures ([faults] kind = "link") on a disaggregated cluster: 2 prefill replicas on node 0
// and 2 decode replicas on node 1 (nodes of two GPUs), every KV transfer crossing node 0's NIC.
std::string pd_on_two_nodes(int nics_per_node, const std::string& faults) {
  std::string text = std::string(kBase);
  text.replace(text.find("[cluster]\nreplicas = 3\n"), 22,
               "[cluster.prefill]\nreplicas = 2\n[cluster.decode]\nreplicas = 2\n[decode_router]\nkind = "
               "\"least_outstanding\"\n");
  return text + "[network]\ngpus_per_node = 2\nnics_per_node = " + std::to_string(nics_per_node) + "\n" + faults;
}

// One NIC per node, down from 5 s to 7 s: nothing leaves node 0 meanwhile, so no request whose
// prefill ended in [5 s, 7 s) has its second token before 7 s, and every request still completes.
TEST(FleetRunTest, ALinkFailureHoldsKvTransfersUntilItsRepair) {
  TempDir dir;
  const std::string db = dir.file("link.db");
  RunOutputs out{db, ""};
  out.check = true;
  const RunResult r = run_simulation(
      core::parse_config(pd_on_two_nodes(1, "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"node 0 nic 0 - "
                                            "leaf\"\nat_s = 5\nrepair_s = 2\n"),
                         "link.toml", run_schema()),
      out);
  EXPECT_EQ(r.summary.requests_completed, 400u);
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  EXPECT_EQ(d.execAndGet("SELECT time_ns FROM fleet_events WHERE kind = 'link_down'").getInt64(), 5'000'000'000);
  EXPECT_EQ(d.execAndGet("SELECT time_ns FROM fleet_events WHERE kind = 'link_up'").getInt64(), 7'000'000'000);
  EXPECT_EQ(d.execAndGet("SELECT value FROM fleet_metrics WHERE name = 'link_failures'").getDouble(), 1);
  EXPECT_EQ(d.execAndGet("SELECT value FROM fleet_metrics WHERE name = 'link_repairs'").getDouble(), 1);
  const int64_t held = d.execAndGet("SELECT COUNT(*) FROM requests WHERE output_tokens > 1 AND engine_first_token_ns "
                                    ">= 5000000000 AND engine_first_token_ns < 7000000000").getInt64();
  EXPECT_GT(held, 20);  // 30 req/s: about 60 prefills end in the outage
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests WHERE output_tokens > 1 AND engine_first_token_ns >= "
                         "5000000000 AND engine_first_token_ns < 7000000000 AND finish_ns < 7000000000").getInt64(), 0);
  // Without the repair nothing could leave node 0 again: an error that names the link, not a hang.
  const std::string cut = error_of_text(
      pd_on_two_nodes(1, "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"node 0 nic 0 - leaf\"\nat_s = 5\n"));
  EXPECT_NE(cut.find("link 'node 0 nic 0 - leaf' failed for good"), std::string::npos)
      << "a transfer cut off for good: " << (cut.empty() ? "accepted" : cut);
}

// Two NICs per node: GPU 0's transfers detour over NVLink to GPU 1 and its NIC while NIC 0 is down
// (for good); nothing waits for a repair and every request completes under the checker.
TEST(FleetRunTest, ALinkFailureWithADetourLosesNothing) {
  RunOutputs out;
  out.check = true;
  const std::string fault = "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"node 0 nic 0 - leaf\"\nat_s = 5\n";
  const RunResult r = run_simulation(core::parse_config(pd_on_two_nodes(2, fault), "link.toml", run_schema()), out);
  EXPECT_EQ(r.summary.requests_completed, 400u);
  const RunResult healthy = run_simulation(core::parse_config(pd_on_two_nodes(2, ""), "h.toml", run_schema()), out);
  EXPECT_EQ(healthy.summary.requests_completed, 400u);
}

TEST(FleetRunTest, LinkFailureErrorsNameTheKey) {
  auto pd_error = [](const std::string& faults) { return error_of_text(pd_on_two_nodes(1, faults)); };
  EXPECT_NE(pd_error("[faults]\n[[faults.events]]\nkind = \"link\"\nat_s = 1\n").find("needs link"), std::string::npos);
  const std::string unknown = pd_error("[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"nic 0\"\nat_s = 1\n");
  EXPECT_NE(unknown.find("faults.events[0].link"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("no network link is named"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("\"node 0 nic 0 - leaf\""), std::string::npos) << unknown;  // an example of the names
  EXPECT_NE(pd_error("[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"gpu 0 pcie\"\nreplica = 0\nat_s = 1\n")
                .find("faults.events[0].replica"),
            std::string::npos);
  // A unified cluster of single-GPU replicas has no network.
  EXPECT_NE(error_of("[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"gpu 0 pcie\"\nat_s = 1\n")
                .find("this cluster has no network"),
            std::string::npos);
}

// Replica faults on a disaggregated cluster. A tiny built case: Llama-3-8B on H100s, one request
// at a time of fixed lengths, ingress 0 (engine times are the client's), every replica alone on its
// node (network.gpus_per_node = 1, one NIC): a KV transfer crosses GPU - PCIe - NIC - leaf - NIC -
// PCIe - GPU, 6 us of latency (1 + 2 + 2 + 1), 50 GB/s at its bottleneck. Llama-3-8B holds 32 layers
// x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131,072 bytes of KV per token.
constexpr double kKvBytesPerToken = 131072;
constexpr double kLinkBytesPerS = 50e9;
constexpr double kPathLatencyS = 6e-6;
double transfer_s(double tokens) { return kPathLatencyS + tokens * kKvBytesPerToken / kLinkBytesPerS; }

std::string pd_tiny(int prefill, int decode, int64_t prompt, int64_t output, int requests, const std::string& extra) {
  return "seed = 1\n[workload]\nkind = \"synthetic\"\n[workload.arrival]\nkind = \"constant\"\nrate = 1000000000\n"
         "requests = " + std::to_string(requests) +
         "\n[workload.prompt]\nkind = \"fixed\"\nvalue = " + std::to_string(prompt) +
         "\n[workload.output]\nkind = \"fixed\"\nvalue = " + std::to_string(output) +
         "\n[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n[cluster.prefill]\nreplicas = " +
         std::to_string(prefill) + "\n[cluster.decode]\nreplicas = " + std::to_string(decode) +
         "\n[router]\nkind = \"least_outstanding\"\n[decode_router]\nkind = \"least_outstanding\"\n"
         "[network]\ngpus_per_node = 1\nnics_per_node = 1\n[prediction]\nfrontend_offset_ms = -1000000\n" + extra;
}

// What the run signalled: every request's record and every KV transfer.
struct Recorder final : core::LifecycleObserver {
  std::vector<core::RequestRecord> done;
  std::vector<core::KvTransfer> transfers;
  void on_request_done(const core::RequestRecord& r) override { done.push_back(r); }
  void on_kv_transfer(const core::KvTransfer& t) override { transfers.push_back(t); }
  const core::RequestRecord& request(uint64_t id) const {
    for (const auto& r : done)
      if (r.id == id) return r;
    throw core::Error("no record of request " + std::to_string(id));
  }
};

RunResult run_recorded(const std::string& text, Recorder& rec) {
  RunOutputs out;
  out.check = true;
  out.observers = {&rec};
  return run_simulation(core::parse_config(text, "pd.toml", run_schema()), out);
}

std::string at_s(int64_t ns) { return core::format_double(static_cast<double>(ns) * 1e-9); }

// (1) One prefill replica (0) and two decode replicas (1, 2); one request of 1,000 prompt and 40
// output tokens. Decode replica 1 fails, for good, in the middle of its 11th decode step: the request
// has produced 11 tokens (1 from its prefill, 10 decodes) and is recomputed: prefilled again from
// scratch on replica 0 (1,011 tokens: its prompt and what it produced, emitting token 12), moved to
// replica 2 (the decode replica up) and decoded there for its last 28 tokens.
// Oracles, all from runs without faults and the hand figures above:
// - baseline (no fault): first token at t1 (the 1,000-token prefill), KV moved in transfer_s(1000) =
//   2.62744 ms, then 39 decode steps of about d each: d = (finish - t1 - transfer_s(1000)) / 39;
//   the failure at T = t1 + transfer_s(1000) + 10.5 d.
// - an independent request of 1,011 prompt and 29 output tokens alone: its prefill is the re-prefill
//   (1,011 tokens, emitting one token), its transfer transfer_s(1011) = 2.656096 ms the second
//   transfer, its 28 decodes at the same contexts the recomputed request's; so the recomputed
//   request finishes at T + that request's finish (it arrives at 0 with ingress 0), and its second
//   transfer ends at T + that request's first token + transfer_s(1011).
// Its record: TTFT kept (first token at t1), KV bytes of both completed transfers (1,000 + 1,011
// tokens), decoded on replica 2. With on_failure = "fail" (4): outcome failed with its 11 tokens.
TEST(FleetRunTest, PdDecodeReplicaFailureRecomputesThroughThePrefillPool) {
  Recorder base;
  run_recorded(pd_tiny(1, 2, 1000, 40, 1, ""), base);
  const core::RequestRecord& b = base.request(0);
  ASSERT_EQ(b.decode_replica, 1u);  // the least-outstanding tie goes to the first decode replica
  ASSERT_EQ(base.transfers.size(), 1u);
  EXPECT_NEAR((base.transfers[0].end - base.transfers[0].start).seconds(), transfer_s(1000), 2e-9);
  const int64_t t1 = b.first_token.ns();
  const double d_ns = (static_cast<double>(b.finish.ns() - t1) - transfer_s(1000) * 1e9) / 39;
  const int64_t fail_ns = t1 + std::llround(transfer_s(1000) * 1e9 + 10.5 * d_ns);

  Recorder alone;
  run_recorded(pd_tiny(1, 2, 1011, 29, 1, ""), alone);
  const core::RequestRecord& a = alone.request(0);
  ASSERT_EQ(alone.transfers.size(), 1u);
  EXPECT_NEAR((alone.transfers[0].end - alone.transfers[0].start).seconds(), transfer_s(1011), 2e-9);

  const std::string fault = "[faults]\n[[faults.events]]\nreplica = 1\nat_s = " + at_s(fail_ns) + "\n";
  Recorder rec;
  const RunResult r = run_recorded(pd_tiny(1, 2, 1000, 40, 1, fault), rec);
  const int64_t fail_at = core::Duration::from_seconds(std::stod(at_s(fail_ns))).ns();
  const core::RequestRecord& got = rec.request(0);
  EXPECT_EQ(got.outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(got.first_token.ns(), t1);  // TTFT kept
  EXPECT_EQ(got.decode_replica, 2u);
  EXPECT_NEAR(got.kv_transfer_bytes, (1000 + 1011) * kKvBytesPerToken, 1e-6);
  ASSERT_EQ(rec.transfers.size(), 2u);
  EXPECT_EQ(rec.transfers[1].from_replica, 0u);
  EXPECT_EQ(rec.transfers[1].to_replica, 2u);
  EXPECT_NEAR(static_cast<double>(rec.transfers[1].start.ns()), static_cast<double>(fail_at + a.first_token.ns()), 2);
  EXPECT_NEAR(static_cast<double>(rec.transfers[1].end.ns()),
              static_cast<double>(fail_at + a.first_token.ns()) + transfer_s(1011) * 1e9, 3);
  EXPECT_NEAR(static_cast<double>(got.finish.ns()), static_cast<double>(fail_at + a.finish.ns()), 3);
  EXPECT_EQ(r.summary.requests_completed, 1u);

  // (4) on_failure = "fail": it leaves at the failure, failed, with the 11 tokens it had.
  Recorder failed;
  const RunResult f =
      run_recorded(pd_tiny(1, 2, 1000, 40, 1, "[faults]\non_failure = \"fail\"\n" + fault.substr(9)), failed);
  const core::RequestRecord& lost = failed.request(0);
  EXPECT_EQ(lost.outcome, core::RequestOutcome::kFailed);
  EXPECT_EQ(lost.generated_tokens, 11);
  EXPECT_EQ(lost.finish.ns(), fail_at);
  EXPECT_EQ(f.summary.requests_completed, 0u);
  EXPECT_EQ(failed.transfers.size(), 1u);
}

// (2) Two prefill replicas (0, 1) and one decode replica (2); two requests of 8,000 prompt tokens at
// once (1 ns apart), one on each prefill replica, so their KV transfers (8,000 x 131,072 =
// 1,048,576,000 bytes each) both enter decode replica 2's NIC and share it: 25 GB/s each (max-min).
// Prefill replica 0 fails 5 ms into its transfer. The flow is called off at once: request 1's flow
// has the link's 50 GB/s to itself from then on. By hand, with s0, s1 the transfers' starts (the
// prefills' ends, read from the run without the fault) and F = s0 + 5 ms:
//   moved by F: 50 GB/s x (s1 - s0) is request 0's alone before s1 (1 ns: 50 bytes, not request 1's),
//   request 1's: 25 GB/s x (F - s1); the rest at 50 GB/s; its transfer ends at
//   F + (1,048,576,000 - 25e9 x (F - s1)) / 50e9 + 6 us;
// without the fault both share the link to the end (about s0 + 41.9 ms). Request 0 (1 token so far)
// is recomputed on prefill replica 1 (8,001 tokens), its KV moved alone: transfer_s(8001).
TEST(FleetRunTest, PdPrefillReplicaFailureCancelsItsTransferInFlight) {
  Recorder base;
  run_recorded(pd_tiny(2, 1, 8000, 4, 2, ""), base);
  ASSERT_EQ(base.transfers.size(), 2u);
  const core::KvTransfer& t0 = base.transfers[0].id == 0 ? base.transfers[0] : base.transfers[1];
  const core::KvTransfer& t1 = base.transfers[0].id == 1 ? base.transfers[0] : base.transfers[1];
  ASSERT_EQ(t0.from_replica, 0u);
  ASSERT_EQ(t1.from_replica, 1u);
  const double bytes = 8000 * kKvBytesPerToken;
  // Sharing: both at 25 GB/s (request 0's 1 ns alone aside): about 2 x 20.97 ms.
  EXPECT_NEAR((t1.end - t1.start).seconds(), bytes / 25e9 + kPathLatencyS, 1e-6);

  const int64_t fail_ns = t0.start.ns() + 5'000'000;
  Recorder rec;
  const RunResult r = run_recorded(
      pd_tiny(2, 1, 8000, 4, 2, "[faults]\n[[faults.events]]\nreplica = 0\nat_s = " + at_s(fail_ns) + "\n"), rec);
  EXPECT_EQ(r.summary.requests_completed, 2u);
  ASSERT_EQ(rec.transfers.size(), 2u);  // request 0's first transfer never completed
  const core::KvTransfer& still = rec.transfers[0];
  ASSERT_EQ(still.id, 1u);
  EXPECT_EQ(still.start.ns(), t1.start.ns());
  const double f = static_cast<double>(fail_ns) * 1e-9, s1 = t1.start.seconds();
  const double end = f + (bytes - 25e9 * (f - s1)) / kLinkBytesPerS + kPathLatencyS;
  EXPECT_NEAR(still.end.seconds(), end, 3e-9);
  EXPECT_LT(still.end.seconds() + 0.015, t1.end.seconds());  // much earlier than sharing to the end
  // Request 0: recomputed on prefill replica 1, its KV moved alone, TTFT kept.
  const core::KvTransfer& again = rec.transfers[1];
  EXPECT_EQ(again.id, 0u);
  EXPECT_EQ(again.from_replica, 1u);
  EXPECT_NEAR((again.end - again.start).seconds(), transfer_s(8001), 2e-9);
  EXPECT_EQ(rec.request(0).first_token.ns(), base.request(0).first_token.ns());
  EXPECT_NEAR(rec.request(0).kv_transfer_bytes, 8001 * kKvBytesPerToken, 1e-6);
  EXPECT_EQ(rec.request(0).outcome, core::RequestOutcome::kCompleted);
}

// No decode replica up: one prefill replica (0), one decode replica (1) that fails at 0 s. The request
// (1,000 prompt, 40 output tokens) is prefilled as usual (first token at t1, as in the run without
// failure) and then waits on replica 0, which keeps its KV, for the decode replica's repair at 1 s:
// its transfer starts at exactly 1 s (ready at t1) and takes transfer_s(1000), and it finishes 1 s -
// t1 later than without the failure (the decodes are the same). Without a repair it fails at t1 with
// the one token its prefill produced. A straggler on the decode pool (speed 0.5 from 0 s): every
// decode step takes twice as long, so the time from the transfer's end to the last token doubles.
TEST(FleetRunTest, PdWithNoDecodeReplicaUpPrefilledRequestsWaitForTheRepair) {
  Recorder base;
  run_recorded(pd_tiny(1, 1, 1000, 40, 1, ""), base);
  const core::RequestRecord& b = base.request(0);
  ASSERT_EQ(base.transfers.size(), 1u);
  const int64_t t1 = b.first_token.ns();
  ASSERT_LT(t1, 1'000'000'000);

  Recorder rec;
  run_recorded(pd_tiny(1, 1, 1000, 40, 1, "[faults]\n[[faults.events]]\nreplica = 1\nat_s = 0\nrepair_s = 1\n"), rec);
  ASSERT_EQ(rec.transfers.size(), 1u);
  EXPECT_EQ(rec.transfers[0].ready.ns(), t1);
  EXPECT_EQ(rec.transfers[0].start.ns(), 1'000'000'000);
  EXPECT_NEAR((rec.transfers[0].end - rec.transfers[0].start).seconds(), transfer_s(1000), 2e-9);
  const core::RequestRecord& got = rec.request(0);
  EXPECT_EQ(got.outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(got.first_token.ns(), t1);
  EXPECT_NEAR(static_cast<double>(got.finish.ns()), static_cast<double>(b.finish.ns() + 1'000'000'000 - t1), 3);

  Recorder lost;
  const RunResult f = run_recorded(pd_tiny(1, 1, 1000, 40, 1, "[faults]\n[[faults.events]]\nreplica = 1\nat_s = 0\n"), lost);
  EXPECT_EQ(lost.request(0).outcome, core::RequestOutcome::kFailed);
  EXPECT_EQ(lost.request(0).finish.ns(), t1);
  EXPECT_EQ(lost.request(0).generated_tokens, 1);
  EXPECT_EQ(f.summary.requests_completed, 0u);
  EXPECT_TRUE(lost.transfers.empty());

  Recorder slow;
  run_recorded(pd_tiny(1, 1, 1000, 40, 1, "[faults]\n[[faults.events]]\nreplica = 1\nkind = \"slow\"\nspeed = 0.5\nat_s = 0\n"),
               slow);
  ASSERT_EQ(slow.transfers.size(), 1u);
  EXPECT_EQ(slow.request(0).first_token.ns(), t1);  // the prefill pool runs at full speed
  EXPECT_NEAR(static_cast<double>(slow.request(0).finish.ns() - slow.transfers[0].end.ns()),
              2.0 * static_cast<double>(b.finish.ns() - base.transfers[0].end.ns()), 40);
}

// (3) A node failure on a disaggregated cluster: three prefill replicas (0-2) and three decode
// replicas (3-5) on nodes of two GPUs: node 0 = replicas 0, 1; node 1 = 2 (prefill) and 3 (decode);
// node 2 = 4, 5. Node 1 fails at 5 s for 4 s: replicas 2 and 3 go down together, their requests
// (queued, prefilling, decoding, their KV on the wire) are recomputed elsewhere, none decodes on 3
// or prefills on 2 while they are down, and every request completes, under the invariant checker.
// With on_failure = "fail" (4): completed + failed = 400, the failed rows counted in fleet_metrics.
TEST(FleetRunTest, PdNodeFailureTakesAPrefillAndADecodeReplicaDown) {
  TempDir dir;
  auto text = [](const std::string& on_failure) {
    std::string t = std::string(kBase);
    t.replace(t.find("[cluster]\nreplicas = 3\n"), 22,
              "[cluster.prefill]\nreplicas = 3\n[cluster.decode]\nreplicas = 3\n[decode_router]\nkind = "
              "\"least_outstanding\"\n");
    return t + "[network]\ngpus_per_node = 2\n[faults]\non_failure = \"" + on_failure +
           "\"\n[[faults.events]]\nnode = 1\nat_s = 5\nrepair_s = 4\n";
  };
  const std::string db = dir.file("pdnode.db");
  RunOutputs out{db, ""};
  out.check = true;
  const RunResult r = run_simulation(core::parse_config(text("recompute"), "pdnode.toml", run_schema()), out);
  EXPECT_EQ(r.summary.requests_completed, 400u);
  {
    SQLite::Database d(db, SQLite::OPEN_READONLY);
    EXPECT_EQ(d.execAndGet("SELECT group_concat(replica) FROM (SELECT replica FROM fleet_events WHERE kind = "
                           "'replica_down' ORDER BY replica)").getString(),
              "2,3");
    EXPECT_EQ(d.execAndGet("SELECT COUNT(DISTINCT time_ns) FROM fleet_events WHERE kind IN ('replica_down', "
                           "'request_rerouted')").getInt64(), 1);
    EXPECT_GT(d.execAndGet("SELECT COUNT(*) FROM fleet_events WHERE kind = 'request_rerouted'").getInt64(), 0);
    // No request that finished during the outage decoded on replica 3 after its first token came
    // before it (every rerouted one is prefilled again off node 1 while it is down).
    EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests r JOIN fleet_events e ON e.request_id = r.request_id "
                           "WHERE e.kind = 'request_rerouted' AND r.engine_finish_ns < 9000000000 AND "
                           "r.decode_replica = 3").getInt64(), 0);
    EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests WHERE outcome <> 'completed'").getInt64(), 0);
  }
  const std::string db2 = dir.file("pdnode_fail.db");
  RunOutputs out2{db2, ""};
  out2.check = true;
  const RunResult f = run_simulation(core::parse_config(text("fail"), "pdnode.toml", run_schema()), out2);
  SQLite::Database d(db2, SQLite::OPEN_READONLY);
  const int64_t failed = d.execAndGet("SELECT COUNT(*) FROM requests WHERE outcome = 'failed'").getInt64();
  EXPECT_GT(failed, 0);
  EXPECT_EQ(f.summary.requests_completed + static_cast<uint64_t>(failed), 400u);
  EXPECT_EQ(d.execAndGet("SELECT value FROM fleet_metrics WHERE name = 'requests_failed'").getDouble(),
            static_cast<double>(failed));
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests WHERE outcome = 'failed' AND finish_ns <> 5000000000")
                .getInt64(), 0);
}

// The example of docs/fleet.md under the invariant checker: losing half the decode pool keeps every
// request within the SLO (its lost requests recomputed through the prefill pool), losing half the
// prefill pool at this load does not (its queue grows for 30 s).
TEST(FleetRunTest, ExampleNodeFailurePdRunsWithTheChecker) {
  RunOutputs out;
  out.check = true;
  const std::string path = servesim::testing::source_dir() + "/experiments/fleet/node_failure_pd.toml";
  const RunResult decode = run_simulation(load_run_config(path, {}), out);
  EXPECT_EQ(decode.summary.requests_completed, decode.summary.requests_total);
  EXPECT_DOUBLE_EQ(decode.summary.slo_attainment, 1.0);
  const RunResult prefill = run_simulation(load_run_config(path, {"faults.events=[{node=1,at_s=20,repair_s=30}]"}), out);
  EXPECT_EQ(prefill.summary.requests_completed, prefill.summary.requests_total);
  EXPECT_LT(prefill.summary.slo_attainment, 0.8);
}

// One request of 1,000 prompt tokens on the two-node PD cluster above, with the fabric's numbers
// written out: PCIe and NIC 50 GB/s, 1 us per PCIe and per NIC hop, a GPU per PCIe link (no PCIe
// switch), one leaf (no spine). Its KV leaves GPU 0 (node 0) for a GPU of node 1 by
// GPU pcie -> node 0 nic 0 - leaf -> node 1 nic 0 - leaf -> GPU pcie: 4 us of latency.
std::string one_transfer(const std::string& faults) {
  std::string text = pd_on_two_nodes(1, "");
  text.replace(text.find("max_requests = 400"), 18, "max_requests = 1");
  const std::string prompt = "kind = \"uniform\"\nmin = 50\nmax = 1500";
  text.replace(text.find(prompt), prompt.size(), "kind = \"fixed\"\nvalue = 1000");
  return text + "gpus_per_pcie_switch = 1\npcie_gb_s = 50\nnic_gb_s = 50\npcie_latency_us = 1\nnic_latency_us = 1\n" +
         "rails = false\n" + faults;
}

// Degraded links ([faults] kind = "link" with speed): node 0's NIC at 0.25 of its bandwidth carries
// the one KV transfer at 12.5 GB/s. Llama-3-8B's KV: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
// = 131,072 B per token; 1,000 tokens = 131,072,000 B.
//   degraded all along: 131,072,000 / 12.5e9 = 10.48576 ms, + 4 us latency = 10.48976 ms;
//   healthy: 131,072,000 / 50e9 = 2.62144 ms + 4 us = 2.62544 ms;
//   healed H = 4 ms after the transfer starts (T0, the prefill's end, read from the healthy run's
//   first token): 4 ms x 12.5e9 = 50,000,000 B moved, 81,072,000 B left at 50e9 = 1.62144 ms:
//   4 + 1.62144 + 0.004 = 5.62544 ms.
TEST(FleetRunTest, ADegradedLinkCarriesAKvTransferAtItsSpeedUntilItsRepair) {
  TempDir dir;
  auto run = [&](const std::string& faults, const std::string& name) {
    RunOutputs out{dir.file(name + ".db"), ""};
    out.check = true;
    return run_simulation(core::parse_config(one_transfer(faults), name + ".toml", run_schema()), out);
  };
  const RunResult healthy = run("", "healthy");
  ASSERT_EQ(healthy.summary.requests_completed, 1u);
  EXPECT_DOUBLE_EQ(healthy.summary.kv_transfer_gb, 0.131072);  // the hand-computed bytes
  EXPECT_NEAR(healthy.summary.kv_transfer_ms.mean, 2.62544, 2e-6);
  const std::string slow = "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"node 0 nic 0 - leaf\"\nat_s = 0\nspeed = 0.25\n";
  const RunResult degraded = run(slow, "slow");
  EXPECT_NEAR(degraded.summary.kv_transfer_ms.mean, 10.48976, 2e-6);
  int64_t t0 = 0;
  {
    SQLite::Database d(dir.file("healthy.db"), SQLite::OPEN_READONLY);
    t0 = d.execAndGet("SELECT engine_first_token_ns FROM requests").getInt64();
  }
  const double repair_s = static_cast<double>(t0 + 4'000'000) * 1e-9;
  const RunResult healed = run(slow + "repair_s = " + core::format_double(repair_s) + "\n", "healed");
  EXPECT_NEAR(healed.summary.kv_transfer_ms.mean, 5.62544, 2e-6);
  SQLite::Database d(dir.file("healed.db"), SQLite::OPEN_READONLY);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM fleet_events WHERE kind = 'link_speed'").getInt64(), 2);
  EXPECT_EQ(d.execAndGet("SELECT value FROM fleet_events WHERE kind = 'link_speed' ORDER BY time_ns LIMIT 1").getDouble(), 0.25);
  EXPECT_EQ(d.execAndGet("SELECT time_ns FROM fleet_events WHERE kind = 'link_speed' AND value = 1").getInt64(), t0 + 4'000'000);
  EXPECT_EQ(d.execAndGet("SELECT value FROM fleet_metrics WHERE name = 'link_speed_changes'").getDouble(), 2);
  // A later speed change supersedes the repair of an earlier one: degraded at 0 for 4 ms past T0,
  // but set to 0.5 at 0.001 s (before the transfer): the repair does not heal it, 131,072,000 / 25e9
  // = 5.24288 ms + 4 us.
  const RunResult superseded =
      run(slow + "repair_s = " + core::format_double(repair_s) +
              "\n[[faults.events]]\nkind = \"link\"\nlink = \"node 0 nic 0 - leaf\"\nat_s = 0.001\nspeed = 0.5\n",
          "superseded");
  EXPECT_NEAR(superseded.summary.kv_transfer_ms.mean, 5.24688, 2e-6);
}

// A link failed twice (two explicit events overlapping) comes back at the later repair: down from
// 0 to T0 / 2 and from 0 to T0 + 4 ms (T0: the transfer's start, the prefill's end, read from the
// healthy run): the transfer waits until T0 + 4 ms, then moves 131,072,000 B at 50 GB/s:
// 4 + 2.62144 + 0.004 ms.
TEST(FleetRunTest, ALinkFailedTwiceComesBackAtTheLaterRepair) {
  TempDir dir;
  run_simulation(core::parse_config(one_transfer(""), "h.toml", run_schema()), RunOutputs{dir.file("h.db"), ""});
  SQLite::Database d(dir.file("h.db"), SQLite::OPEN_READONLY);
  const int64_t t0 = d.execAndGet("SELECT engine_first_token_ns FROM requests").getInt64();
  const std::string link = "kind = \"link\"\nlink = \"node 0 nic 0 - leaf\"\nat_s = 0\n";
  RunOutputs out;
  out.check = true;
  const RunResult r = run_simulation(
      core::parse_config(one_transfer("[faults]\n[[faults.events]]\n" + link + "repair_s = " +
                                      core::format_double(static_cast<double>(t0 / 2) * 1e-9) + "\n[[faults.events]]\n" +
                                      link + "repair_s = " +
                                      core::format_double(static_cast<double>(t0 + 4'000'000) * 1e-9) + "\n"),
                         "twice.toml", run_schema()),
      out);
  EXPECT_EQ(r.summary.requests_completed, 1u);
  EXPECT_NEAR(r.summary.kv_transfer_ms.mean, 4 + 2.62144 + 0.004, 2e-6);
}

// Drawn link failures ([[faults.link_mtbf]]): each link's failures and repairs are its own stream's
// draws, faults/link/<name>: failure after exponential(1 / mtbf_s), repair exponential(1 / mttr_s)
// after it, the next failure exponential(1 / mtbf_s) after the repair, drawn here independently.
TEST(FleetRunTest, DrawnLinkFailuresFollowTheLinksOwnStream) {
  TempDir dir;
  const std::string db = dir.file("drawn.db");
  RunOutputs out{db, ""};
  out.check = true;
  const std::string faults =
      "[faults]\n[[faults.link_mtbf]]\nlinks = \"node 0 nic 1 - leaf, node 1 nic 0 - leaf\"\nmtbf_s = 3\nmttr_s = 0.5\n";
  const RunResult r = run_simulation(core::parse_config(pd_on_two_nodes(2, faults), "drawn.toml", run_schema()), out);
  EXPECT_EQ(r.summary.requests_completed, 400u);
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  const int64_t end = d.execAndGet("SELECT MAX(finish_ns) FROM requests").getInt64();
  for (const std::string name : {"node 0 nic 1 - leaf", "node 1 nic 0 - leaf"}) {
    core::Rng rng(5, "faults/link/" + name);  // seed = 5 (kBase)
    std::vector<std::pair<std::string, int64_t>> expected;
    int64_t t = 0;
    for (bool down = true;; down = !down) {
      t += static_cast<int64_t>(std::llround(rng.exponential(1.0 / (down ? 3.0 : 0.5)) * 1e9));
      if (t > end) break;
      expected.emplace_back(down ? "link_down" : "link_up", t);
    }
    ASSERT_GE(expected.size(), 2u) << name;
    // The link's number: the first of its two directed links, in the rows' value.
    SQLite::Statement st(d, "SELECT kind, time_ns FROM fleet_events WHERE kind IN ('link_down', 'link_up') AND value = "
                            "(SELECT value FROM fleet_events WHERE kind = 'link_down' AND time_ns = ?) ORDER BY time_ns");
    st.bind(1, expected.front().second);
    std::vector<std::pair<std::string, int64_t>> got;
    while (st.executeStep()) got.emplace_back(st.getColumn(0).getString(), st.getColumn(1).getInt64());
    EXPECT_EQ(got, expected) << name;
  }
  // The same seed gives the same bytes.
  RunOutputs again{dir.file("again.db"), ""};
  run_simulation(core::parse_config(pd_on_two_nodes(2, faults), "drawn.toml", run_schema()), again);
  EXPECT_EQ(servesim::testing::dump_results(db, {"run_id", "started_at", "wall_s", "finished_at"}),
            servesim::testing::dump_results(dir.file("again.db"), {"run_id", "started_at", "wall_s", "finished_at"}));
}

// Over a long run each class of links is down mttr / (mtbf + mttr) of the time. NICs: mtbf 1,000 s,
// mttr 100 s, p = 100 / 1,100 = 0.0909; NVLinks: mtbf 5,000 s, mttr 50 s, p = 50 / 5,050 = 0.0099.
// The bound: a link alternates up ~ Exp(mtbf) and down ~ Exp(mttr); over n cycles the fraction down
// D / (U + D) has, by the delta method, a standard deviation of
// sqrt(((1 - p)^2 mttr^2 + p^2 mtbf^2) / n) / (mtbf + mttr): per cycle 0.117 (NIC) and 0.0139
// (NVLink). The run lasts about 200,000 s (10,000 requests at 0.05 req/s): 4 NIC links x ~180
// cycles = ~720 (sd 0.0044), 4 NVLinks x ~40 = ~160 (sd 0.0011). The test allows 5 sd: 0.022 and
// 0.0055 (counting the cycles the run actually held, at least half the expected ones).
TEST(FleetRunTest, DrawnLinkFailuresKeepEachClassDownMttrOverMtbfPlusMttr) {
  TempDir dir;
  const std::string db = dir.file("long.db");
  std::string text = pd_on_two_nodes(2, "[faults]\n[[faults.link_mtbf]]\nlinks = \"nic\"\nmtbf_s = 1000\nmttr_s = 100\n"
                                        "[[faults.link_mtbf]]\nlinks = \"nvlink\"\nmtbf_s = 5000\nmttr_s = 50\n");
  text.replace(text.find("rate = 30.0"), 11, "rate = 0.05");
  text.replace(text.find("max_requests = 400"), 18, "max_requests = 10000");
  const RunResult r = run_simulation(core::parse_config(text, "long.toml", run_schema()), RunOutputs{db, ""});
  EXPECT_EQ(r.summary.requests_completed, 10000u);
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  const int64_t end = d.execAndGet("SELECT MAX(finish_ns) FROM requests").getInt64();
  ASSERT_GT(end, 150'000e9);
  // Per link (its number, value): the time down, clipped at the run's end, and the failures.
  std::map<int64_t, int64_t> down_ns, since;
  std::map<int64_t, int> failures;
  SQLite::Statement st(d, "SELECT kind, time_ns, CAST(value AS INTEGER) FROM fleet_events ORDER BY time_ns");
  while (st.executeStep()) {
    const std::string kind = st.getColumn(0).getString();
    const int64_t t = st.getColumn(1).getInt64(), link = st.getColumn(2).getInt64();
    if (kind == "link_down") {
      ASSERT_FALSE(since.count(link)) << "link " << link << " down twice";
      since[link] = t;
      ++failures[link];
    } else if (kind == "link_up") {
      ASSERT_TRUE(since.count(link));
      down_ns[link] += t - since[link];
      since.erase(link);
    }
  }
  for (const auto& [link, t] : since) down_ns[link] += end - t;
  ASSERT_EQ(failures.size(), 8u);  // 4 NIC links (2 nodes x 2 NICs) and 4 NVLinks (4 GPUs)
  // Link numbers: the topology numbers the NIC links of a node before its GPUs' links, so tell the
  // classes apart by their failure counts' scale instead: NICs fail ~180 times, NVLinks ~40.
  double nic_down = 0, nvlink_down = 0;
  int nic_links = 0, nvlink_links = 0, nic_cycles = 0, nvlink_cycles = 0;
  for (const auto& [link, n] : failures) {
    const bool nic = n > 100;
    (nic ? nic_down : nvlink_down) += static_cast<double>(down_ns[link]);
    ++(nic ? nic_links : nvlink_links);
    (nic ? nic_cycles : nvlink_cycles) += n;
  }
  ASSERT_EQ(nic_links, 4);
  ASSERT_EQ(nvlink_links, 4);
  ASSERT_GT(nic_cycles, 360);
  ASSERT_GT(nvlink_cycles, 80);
  const double span = 4.0 * static_cast<double>(end);
  EXPECT_NEAR(nic_down / span, 100.0 / 1100.0, 5 * 0.117 / std::sqrt(nic_cycles));
  EXPECT_NEAR(nvlink_down / span, 50.0 / 5050.0, 5 * 0.0139 / std::sqrt(nvlink_cycles));
}

// The day-long example's configuration, cut to its first ~4,000 s at 4 req/s and its NIC MTBF to
// 1,000 s (the [faults] section given again) so that failures come, runs under the invariant checker
// and loses nothing.
TEST(FleetRunTest, ExampleDrawnNicFailuresRunWithTheChecker) {
  RunOutputs out;
  out.check = true;
  const RunResult r = run_simulation(
      load_run_config(servesim::testing::source_dir() + "/experiments/fleet/link_mtbf_pd.toml",
                      {"workload.max_requests=16000", "faults={link_mtbf=[{links=\"nic\", mtbf_s=1000, mttr_s=900}]}"}),
      out);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  double failures = 0;
  for (const auto& v : r.summary.fleet)
    if (v.name == "link_failures") failures = v.value;
  EXPECT_GT(failures, 10);  // 8 ports x ~4,000 s / 1,900 s: ~17 expected
}

TEST(FleetRunTest, DrawnAndDegradedLinkErrorsNameTheKey) {
  auto pd_error = [](const std::string& faults) { return error_of_text(pd_on_two_nodes(1, faults)); };
  auto has = [](const std::string& error, const std::string& what) {
    return error.find(what) != std::string::npos;
  };
  const std::string spine = pd_error("[faults]\n[[faults.link_mtbf]]\nlinks = \"spine\"\nmtbf_s = 10\nmttr_s = 1\n");
  EXPECT_TRUE(has(spine, "faults.link_mtbf[0].links") && has(spine, "no link of class 'spine'")) << spine;
  const std::string unknown = pd_error("[faults]\n[[faults.link_mtbf]]\nlinks = \"nics\"\nmtbf_s = 10\nmttr_s = 1\n");
  EXPECT_TRUE(has(unknown, "faults.link_mtbf[0].links") && has(unknown, "no link class or network link is named 'nics'"))
      << unknown;
  const std::string half = pd_error("[faults]\n[[faults.link_mtbf]]\nlinks = \"nic\"\nmtbf_s = 10\n");
  EXPECT_TRUE(has(half, "faults.link_mtbf[0].mtbf_s") && has(half, "give mtbf_s and mttr_s together")) << half;
  const std::string twice = pd_error("[faults]\n[[faults.link_mtbf]]\nlinks = \"nic\"\nmtbf_s = 10\nmttr_s = 1\n"
                                     "[[faults.link_mtbf]]\nlinks = \"node 1 nic 0 - leaf\"\nmtbf_s = 10\nmttr_s = 1\n");
  EXPECT_TRUE(has(twice, "faults.link_mtbf[1].links") && has(twice, "is named by faults.link_mtbf[0].links too")) << twice;
  const std::string none = error_of("[faults]\n[[faults.link_mtbf]]\nlinks = \"nic\"\nmtbf_s = 10\nmttr_s = 1\n");
  EXPECT_TRUE(has(none, "faults.link_mtbf[0].links") && has(none, "this cluster has no network")) << none;
  const std::string link = "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"node 0 nic 0 - leaf\"\nat_s = 1\n";
  for (const char* bad : {"speed = 0\n", "speed = 1.5\n", "speed = -0.5\n"}) {
    const std::string e = pd_error(link + bad);
    EXPECT_TRUE(has(e, "faults.events[0].speed")) << bad << ": " << e;
  }
  const std::string heal = pd_error(link + "speed = 1\nrepair_s = 2\n");
  EXPECT_TRUE(has(heal, "faults.events[0].repair_s") && has(heal, "speed = 1 heals the link")) << heal;
  const std::string failed = error_of("[faults]\n[[faults.events]]\nreplica = 0\nat_s = 1\nspeed = 0.5\n");
  EXPECT_TRUE(has(failed, "faults.events[0].speed") && has(failed, "a degraded link")) << failed;
}

// Drawn node failures from the configuration: four TP-1 replicas on nodes of two GPUs; replicas 0-1
// (node 0) and 2-3 (node 1) always go down and come back in pairs.
TEST(FleetRunTest, DrawnNodeFailuresTakeNodesDownWhole) {
  TempDir dir;
  const std::string db = dir.file("nodes.db");
  std::string text = std::string(kBase) + "[network]\ngpus_per_node = 2\n[faults]\nnode_mtbf_s = 4\nnode_mttr_s = 2\n";
  text.replace(text.find("replicas = 3"), 12, "replicas = 4");
  RunOutputs out{db, ""};
  out.check = true;
  const RunResult r = run_simulation(core::parse_config(text, "nodes.toml", run_schema()), out);
  EXPECT_EQ(r.summary.requests_total, 400u);
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  EXPECT_GT(d.execAndGet("SELECT COUNT(*) FROM fleet_events WHERE kind = 'replica_down'").getInt64(), 0);
  // Every failure and repair instant holds both replicas of one node and nothing else.
  SQLite::Statement st(d, "SELECT kind, time_ns, group_concat(replica) FROM (SELECT kind, time_ns, replica FROM "
                          "fleet_events WHERE kind IN ('replica_down', 'replica_up') ORDER BY replica) GROUP BY kind, "
                          "time_ns");
  int groups = 0;
  while (st.executeStep()) {
    const std::string who = st.getColumn(2).getString();
    EXPECT_TRUE(who == "0,1" || who == "2,3") << st.getColumn(0).getString() << " at " << st.getColumn(1).getInt64()
                                              << " ns: replicas " << who;
    ++groups;
  }
  EXPECT_GT(groups, 0);
  EXPECT_NE(error_of("[faults]\nnode_mtbf_s = 10\n").find("give node_mtbf_s and node_mttr_s together"),
            std::string::npos);
}

// A run without [faults] writes no fleet tables (its database keeps the layout it had).
TEST(FleetRunTest, RunsWithoutFaultsWriteNoFleetTables) {
  TempDir dir;
  const std::string db = dir.file("n.db");
  run_simulation(core::parse_config(kBase, "n.toml", run_schema()), RunOutputs{db, ""});
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  EXPECT_FALSE(d.tableExists("fleet_events"));
  EXPECT_FALSE(d.tableExists("fleet_metrics"));
}

TEST(FleetRunTest, ExampleFailureAtPeakRunsWithTheChecker) {
  RunOutputs out;
  out.check = true;
  const RunResult r =
      run_simulation(load_run_config(servesim::testing::source_dir() + "/experiments/fleet/failure_at_peak.toml", {}), out);
  EXPECT_EQ(r.summary.requests_completed, r.summary.requests_total);
  ASSERT_FALSE(r.summary.fleet.empty());
}

// Request classes and admission control (issue 17): class_stats in the database, its rows adding up
// to the run and to the requests table; runs without classes write no class table.
TEST(FleetRunTest, ClassStatsAddUpToTheRequestsTable) {
  TempDir dir;
  const std::string db = dir.file("c.db");
  const std::string classes =
      "[[workload.classes]]\nname = \"premium\"\nshare = 1\ntenant = \"a\"\nttft_slo_ms = 200\n"
      "[[workload.classes]]\nname = \"batch\"\nshare = 3\npriority = 1\nadmit_fraction = 0.25\n"
      "[admission]\nkind = \"queue_length\"\nmax_queued = 8\n[slo]\nttft_ms = 2000\n";
  std::string text = std::string(kBase) + classes;
  text.replace(text.find("rate = 30.0"), 11, "rate = 90.0");  // overload: the queues fill and shed
  const RunResult r = run_simulation(core::parse_config(text, "c.toml", run_schema()), RunOutputs{db, ""});
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  EXPECT_EQ(d.execAndGet("PRAGMA user_version").getInt(), 8);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM class_stats").getInt64(), 2);
  EXPECT_EQ(d.execAndGet("SELECT SUM(requests) FROM class_stats").getInt64(), 400);
  const int64_t shed = d.execAndGet("SELECT SUM(rejected_admission) FROM class_stats").getInt64();
  EXPECT_GT(shed, 0);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM requests WHERE outcome = 'rejected_admission'").getInt64(), shed);
  EXPECT_EQ(static_cast<int64_t>(r.summary.rejected_admission), shed);
  // The lower admit_fraction sheds batch first: at least as large a share of its requests.
  const double batch_shed = d.execAndGet("SELECT 1.0 * rejected_admission / requests FROM class_stats WHERE class = 'batch'").getDouble();
  const double premium_shed = d.execAndGet("SELECT 1.0 * rejected_admission / requests FROM class_stats WHERE class = 'premium'").getDouble();
  EXPECT_GE(batch_shed, premium_shed);
  EXPECT_EQ(d.execAndGet("SELECT ttft_slo_ms FROM class_stats WHERE class = 'premium'").getDouble(), 200);
  EXPECT_EQ(d.execAndGet("SELECT ttft_slo_ms FROM class_stats WHERE class = 'batch'").getDouble(), 2000);  // the run's
  EXPECT_TRUE(d.execAndGet("SELECT tpot_slo_ms FROM class_stats WHERE class = 'batch'").isNull());
  // Attainment per class: meeting its own limits over its requests (shed ones included).
  for (const char* cls : {"premium", "batch"}) {
    SCOPED_TRACE(cls);
    const double total = d.execAndGet(std::string("SELECT requests FROM class_stats WHERE class = '") + cls + "'").getDouble();
    const double met = d.execAndGet(std::string("SELECT meeting_slo FROM class_stats WHERE class = '") + cls + "'").getDouble();
    EXPECT_NEAR(d.execAndGet(std::string("SELECT slo_attainment FROM class_stats WHERE class = '") + cls + "'").getDouble(),
                met / total, 1e-12);
  }
  // Without classes: no class table; the run's layout is that of version 5.
  const std::string plain = dir.file("p.db");
  run_simulation(core::parse_config(kBase, "p.toml", run_schema()), RunOutputs{plain, ""});
  SQLite::Database p(plain, SQLite::OPEN_READONLY);
  EXPECT_FALSE(p.tableExists("class_stats"));
}

// The per-request outputs name each request's class (requests.class in the database, the class
// column of requests.csv), against the classes the workload generated: the same workload built on
// its own and drained gives the oracle, request by request; the counts per class follow, and each is
// its class_stats requests. Runs without classes keep the requests layout they had.
TEST(FleetRunTest, RequestRowsNameTheirClass) {
  TempDir dir;
  const std::string text = std::string(kBase) +
                           "[[workload.classes]]\nname = \"premium\"\nshare = 1\n"
                           "[[workload.classes]]\nname = \"batch\"\nshare = 3\n";
  const core::Params config = core::parse_config(text, "c.toml", run_schema());
  std::vector<std::string> generated;
  {
    auto source = traces::workload_registry().make(config.section("workload"), 5);  // the run's seed
    traces::RequestSpec spec;
    while (source->next(spec)) generated.push_back(spec.request_class == 0 ? "premium" : "batch");
  }
  ASSERT_EQ(generated.size(), 400u);
  const std::string db = dir.file("c.db"), csv = dir.file("csv");
  run_simulation(config, RunOutputs{db, csv});
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  SQLite::Statement st(d, "SELECT request_id, class FROM requests ORDER BY request_id");
  size_t rows = 0;
  while (st.executeStep()) {
    const size_t id = static_cast<size_t>(st.getColumn(0).getInt64());
    ASSERT_LT(id, generated.size());
    EXPECT_EQ(st.getColumn(1).getString(), generated[id]) << "request " << id;
    ++rows;
  }
  EXPECT_EQ(rows, generated.size());
  for (const char* c : {"premium", "batch"}) {
    const int64_t want = std::count(generated.begin(), generated.end(), c);
    EXPECT_EQ(d.execAndGet(std::string("SELECT COUNT(*) FROM requests WHERE class = '") + c + "'").getInt64(), want) << c;
    EXPECT_EQ(d.execAndGet(std::string("SELECT requests FROM class_stats WHERE class = '") + c + "'").getInt64(), want) << c;
  }
  // The mix as configured: premium is a quarter of the requests, within 6 binomial standard
  // deviations (400 x 1/4 x 3/4 = 75, sd 8.7).
  const int64_t premium = std::count(generated.begin(), generated.end(), "premium");
  EXPECT_NEAR(static_cast<double>(premium), 100.0, 6 * std::sqrt(75.0));
  // requests.csv: the last column is the class, row by row in request order.
  std::ifstream in(csv + "/requests.csv");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line.substr(line.rfind(',')), ",class");
  size_t k = 0;
  while (std::getline(in, line)) {
    ASSERT_LT(k, generated.size());
    EXPECT_EQ(line.substr(line.rfind(',') + 1), generated[k]) << "row " << k;
    ++k;
  }
  EXPECT_EQ(k, generated.size());
  // Without classes the requests table and requests.csv have no class column.
  const std::string plain = dir.file("p.db"), plain_csv = dir.file("pcsv");
  run_simulation(core::parse_config(kBase, "p.toml", run_schema()), RunOutputs{plain, plain_csv});
  SQLite::Database p(plain, SQLite::OPEN_READONLY);
  EXPECT_EQ(p.execAndGet("SELECT COUNT(*) FROM pragma_table_info('requests') WHERE name = 'class'").getInt(), 0);
  std::ifstream pin(plain_csv + "/requests.csv");
  ASSERT_TRUE(std::getline(pin, line));
  EXPECT_EQ(line.substr(line.rfind(',')), ",stage");
}

TEST(FleetRunTest, ExampleTwoClassBurstRunsWithTheCheckerWithAndWithoutShedding) {
  const std::string path = servesim::testing::source_dir() + "/experiments/fleet/two_class_burst.toml";
  RunOutputs out;
  out.check = true;
  const RunResult plain = run_simulation(load_run_config(path, {}), out);
  ASSERT_EQ(plain.summary.classes.size(), 2u);
  EXPECT_EQ(plain.summary.rejected_admission, 0u);
  const RunResult shed = run_simulation(
      load_run_config(path, {"admission.kind=predicted_ttft", "admission.max_ttft_ms=400"}), out);
  EXPECT_GT(shed.summary.rejected_admission, 0u);
  EXPECT_EQ(shed.summary.classes[0].requests, plain.summary.classes[0].requests);  // the same arrivals
  EXPECT_EQ(shed.summary.classes[0].requests + shed.summary.classes[1].requests, shed.summary.requests_total);
}

// Client retries (issue 17) on the two-class burst with a 15 s client time-out: the same client
// requests as without retries, every retry a request of its own (a row, a request_retried event),
// and the retry storm after the burst: the attempts sent in the 25 s after it are well over what
// the clients send there by themselves.
TEST(FleetRunTest, RetriesAfterTheBurstAddLoadAndAreCountedPerClientRequest) {
  TempDir dir;
  const std::string path = servesim::testing::source_dir() + "/experiments/fleet/two_class_burst.toml";
  const std::string plain_db = dir.file("plain.db"), retry_db = dir.file("retry.db");
  RunOutputs plain_out{plain_db, ""}, retry_out{retry_db, ""};
  plain_out.check = retry_out.check = true;
  const RunResult plain = run_simulation(load_run_config(path, {"workload.client_timeout_s=15"}), plain_out);
  const RunResult retry =
      run_simulation(load_run_config(path, {"workload.client_timeout_s=15", "retries.max_attempts=3"}), retry_out);
  EXPECT_TRUE(plain.summary.fleet.empty());  // no retries, no faults: no fleet figures
  auto metric = [&](const char* name) {
    for (const auto& v : retry.summary.fleet)
      if (v.name == name) return v.value;
    ADD_FAILURE() << name << " missing";
    return -1.0;
  };
  EXPECT_EQ(metric("client_requests"), static_cast<double>(plain.summary.requests_total));
  EXPECT_EQ(metric("client_requests") + metric("retry_attempts"), static_cast<double>(retry.summary.requests_total));
  EXPECT_EQ(metric("client_completed") + metric("client_gave_up"), metric("client_requests"));
  EXPECT_GT(metric("retry_attempts"), 0);
  SQLite::Database d(retry_db, SQLite::OPEN_READONLY);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM fleet_events WHERE kind = 'request_retried'").getInt64(),
            static_cast<int64_t>(metric("retry_attempts")));
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM fleet_events WHERE kind <> 'request_retried'").getInt64(), 0);
  // Every failed attempt (here: timed out) is either retried or its client's last word.
  EXPECT_EQ(static_cast<double>(d.execAndGet("SELECT COUNT(*) FROM requests WHERE outcome = 'timed_out'").getInt64()),
            metric("retry_attempts") + metric("client_gave_up"));
  EXPECT_EQ(static_cast<double>(d.execAndGet("SELECT COUNT(*) FROM requests WHERE outcome = 'completed'").getInt64()),
            metric("client_completed"));
  SQLite::Database p(plain_db, SQLite::OPEN_READONLY);
  const char* after = "SELECT COUNT(*) FROM requests WHERE arrival_ns >= 35000000000 AND arrival_ns < 60000000000";
  const int64_t own = p.execAndGet(after).getInt64(), sent = d.execAndGet(after).getInt64();
  EXPECT_GT(sent, own * 3 / 2) << own << " sent by the clients, " << sent << " attempts with retries";
}

// Client retries on a closed loop (issue 17): the benchmark of closed_loop_azure_lengths.toml with
// 128 clients and a 10 s time-out. `requests` counts client requests: 2,000 first sends with and
// without retries, the retries on top. A retrying client stays busy until its last attempt ends:
// at every instant exactly 128 client requests are open (from the first send to the end of the
// attempt not retried; ends before starts at one instant), never more, and at most 128 attempts.
TEST(FleetRunTest, ClosedLoopClientsRetryWithoutBecomingMoreClients) {
  struct Records final : core::LifecycleObserver {
    std::vector<core::RequestRecord> done;
    void on_request_done(const core::RequestRecord& r) override { done.push_back(r); }
  };
  const std::string path = servesim::testing::source_dir() + "/experiments/workloads/closed_loop_azure_lengths.toml";
  const std::vector<std::string> base = {"workload.arrival.concurrency=128", "workload.client_timeout_s=10"};
  std::vector<std::string> with = base;
  with.push_back("retries.max_attempts=3");
  RunOutputs plain_out, retry_out;
  plain_out.check = retry_out.check = true;
  Records records;
  retry_out.observers.push_back(&records);
  const RunResult plain = run_simulation(load_run_config(path, base), plain_out);
  const RunResult retry = run_simulation(load_run_config(path, with), retry_out);
  auto metric = [&](const char* name) {
    for (const auto& v : retry.summary.fleet)
      if (v.name == name) return v.value;
    ADD_FAILURE() << name << " missing";
    return -1.0;
  };
  EXPECT_EQ(plain.summary.requests_total, 2000u);
  EXPECT_EQ(metric("client_requests"), 2000.0);
  EXPECT_GT(metric("retry_attempts"), 100.0);
  EXPECT_EQ(metric("client_requests") + metric("retry_attempts"), static_cast<double>(retry.summary.requests_total));
  EXPECT_EQ(metric("client_completed") + metric("client_gave_up"), metric("client_requests"));
  EXPECT_EQ(metric("client_completed"), static_cast<double>(retry.summary.requests_completed));
  ASSERT_EQ(records.done.size(), retry.summary.requests_total);
  std::vector<std::pair<int64_t, int>> open, flight;
  for (const auto& r : records.done) {
    flight.push_back({r.arrival.ns(), +1});
    flight.push_back({r.client_finish.ns(), -1});
    if (r.attempt == 0) open.push_back({r.arrival.ns(), +1});
    if (!r.retried) open.push_back({r.client_finish.ns(), -1});
  }
  auto peak = [](std::vector<std::pair<int64_t, int>> v) {
    std::sort(v.begin(), v.end());
    int now = 0, most = 0;
    for (const auto& [t, d] : v) most = std::max(most, now += d);
    return most;
  };
  EXPECT_EQ(peak(open), 128);
  EXPECT_LE(peak(flight), 128);
}

}  // namespace
}  // namespace servesim::experiments

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

// The CSV output carries the fleet and class tables as the database does: three runs into one
// database and one CSV directory (a plain run, a replica failure, a two-class burst with retries);
// every row of fleet_events.csv, fleet_metrics.csv and class_stats.csv equals the database's row,
// column by column, and the plain run has none.
std::vector<std::string> db_rows(SQLite::Database& d, const std::string& table) {
  std::vector<std::string> rows;
  SQLite::Statement st(d, "SELECT * FROM " + table + " ORDER BY rowid");
  while (st.executeStep()) {
    std::string row;
    for (int i = 0; i < st.getColumnCount(); ++i) {
      const SQLite::Column c = st.getColumn(i);
      row += i ? "," : "";
      if (c.isNull()) continue;
      if (c.isInteger()) row += std::to_string(c.getInt64());
      else if (c.isFloat()) row += core::format_double(c.getDouble());
      else row += metrics::csv_field(c.getString());
    }
    rows.push_back(row);
  }
  return rows;
}

std::vector<std::string> csv_rows(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<std::string> rows;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) rows.push_back(line);
  return rows;
}

TEST(FleetRunTest, CsvOutputCarriesTheFleetAndClassTablesAsTheDatabaseDoes) {
  TempDir dir;
  const std::string db = dir.file("r.db"), csv = dir.file("csv");
  RunOutputs out{db, csv};
  out.check = true;
  run_simulation(core::parse_config(kBase, "plain.toml", run_schema()), out);
  EXPECT_FALSE(std::filesystem::exists(csv + "/fleet_events.csv"));  // no run with fleet dynamics yet
  EXPECT_FALSE(std::filesystem::exists(csv + "/class_stats.csv"));
  run_simulation(core::parse_config(std::string(kBase) + "[faults]\n[[faults.events]]\nreplica = 1\nat_s = 5\n"
                                                         "repair_s = 4\n",
                                    "f.toml", run_schema()),
                 out);
  EXPECT_FALSE(std::filesystem::exists(csv + "/class_stats.csv"));
  const std::string burst = servesim::testing::source_dir() + "/experiments/fleet/two_class_burst.toml";
  run_simulation(load_run_config(burst, {"workload.client_timeout_s=15", "retries.max_attempts=3"}), out);
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  for (const char* table : {"fleet_events", "fleet_metrics", "class_stats"}) {
    const auto from_db = db_rows(d, table);
    const auto from_csv = csv_rows(csv + "/" + table + ".csv");
    EXPECT_GE(from_db.size(), 2u) << table;  // two classes; events and figures of two runs
    EXPECT_EQ(from_csv, from_db) << table;
  }
  EXPECT_EQ(d.execAndGet("SELECT COUNT(*) FROM fleet_metrics WHERE run_id = 1").getInt64(), 0);
  EXPECT_EQ(d.execAndGet("SELECT COUNT(DISTINCT run_id) FROM fleet_events").getInt64(), 2);
}

}  // namespace
}  // namespace servesim::experiments
