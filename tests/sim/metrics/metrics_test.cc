#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <SQLiteCpp/SQLiteCpp.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/metrics/collector.h"
#include "sim/metrics/csv_sink.h"
#include "sim/metrics/sqlite_sink.h"
#include "sim/metrics/stats.h"
#include "sim/metrics/summary.h"
#include "tests/test_paths.h"

namespace servesim::metrics {
namespace {

core::Time sec(double s) { return core::Time::from_ns(static_cast<int64_t>(s * 1e9)); }

TEST(StatsTest, PercentilesInterpolateLikeNumpy) {
  std::vector<double> v = {4, 1, 3, 2};
  LatencyStats s = summarize(v);
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.p50, 2.5);
  EXPECT_DOUBLE_EQ(s.p90, 3.7);   // numpy.percentile([1,2,3,4], 90)
  EXPECT_DOUBLE_EQ(s.p99, 3.97);
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(summarize(one).p99, 7);
  std::vector<double> none;
  EXPECT_EQ(summarize(none).count, 0u);
}

TEST(StatsTest, HistogramIsExactForSmallValuesAndWithinATenthOfAPercent) {
  LogHistogram h;
  for (int64_t v = 0; v < 2048; ++v) h.add(v);
  EXPECT_DOUBLE_EQ(h.percentile(0), 0);
  EXPECT_DOUBLE_EQ(h.percentile(100), 2047);
  EXPECT_DOUBLE_EQ(h.percentile(50), 1023.5);
  for (int64_t v : {2048LL, 5000LL, 123456789LL, 7000000000LL, 4611686018427387904LL}) {
    LogHistogram one;
    one.add(v, 3);
    EXPECT_NEAR(one.percentile(50), static_cast<double>(v), static_cast<double>(v) * 1e-3) << v;
    EXPECT_DOUBLE_EQ(one.mean(), static_cast<double>(v));
  }
  // Weighted counts act like repeated samples.
  LogHistogram w;
  w.add(10, 99);
  w.add(1000, 1);
  EXPECT_DOUBLE_EQ(w.percentile(50), 10);
  EXPECT_DOUBLE_EQ(w.mean(), (10.0 * 99 + 1000) / 100);
}

core::RequestRecord completed(uint64_t id, double arrival, double first, double finish, int64_t out) {
  core::RequestRecord r;
  r.id = id;
  r.arrival = sec(arrival);
  r.first_token = r.client_first_token = sec(first);
  r.finish = r.client_finish = sec(finish);
  r.prompt_tokens = 100;
  r.output_tokens = out;
  return r;
}

TEST(RequestMetricsTest, SeedDefinitions) {
  Slo slo;
  slo.ttft_ms = 600;
  slo.tpot_ms = 400;
  const RequestMetrics m = request_metrics(completed(0, 1.0, 1.5, 3.5, 5), slo);
  EXPECT_DOUBLE_EQ(m.ttft_ms, 500);
  EXPECT_DOUBLE_EQ(m.e2e_ms, 2500);
  ASSERT_TRUE(m.tpot_ms);
  EXPECT_DOUBLE_EQ(*m.tpot_ms, 500);  // (E2E - TTFT) / (N_out - 1)
  EXPECT_FALSE(m.meets_slo);          // TPOT over the limit
  slo.tpot_ms = 500;
  EXPECT_TRUE(request_metrics(completed(0, 1.0, 1.5, 3.5, 5), slo).meets_slo);
  // One output token: no TPOT, and the TPOT limit does not apply.
  const RequestMetrics single = request_metrics(completed(0, 1.0, 1.2, 1.2, 1), slo);
  EXPECT_FALSE(single.tpot_ms);
  EXPECT_TRUE(single.meets_slo);
  core::RequestRecord rejected = completed(0, 1, 1, 1, 5);
  rejected.outcome = core::RequestOutcome::kRejectedContext;
  EXPECT_FALSE(request_metrics(rejected, Slo{}).meets_slo);
}

struct MemorySink : ResultSink {
  std::vector<ReplicaSample> samples;
  std::vector<uint64_t> requests;
  bool ended = false;
  void begin_run(RunInfo& info) override { info.run_id = info.run_id ? info.run_id : 1; }
  void add_request(const core::RequestRecord& r, const RequestMetrics&) override { requests.push_back(r.id); }
  void add_sample(const ReplicaSample& s) override { samples.push_back(s); }
  void end_run(const RunSummary&) override { ended = true; }
};

TEST(CollectorTest, SeedCostPerMillionTokens) {
  // An H100 at $2/h sustaining 3,000 output tok/s: $0.19 per 1M output tokens.
  CollectorConfig cfg;
  ReplicaHardware hw;
  hw.hbm_bandwidth = 3e12;
  hw.usd_per_hour = 2.0;
  cfg.replicas = {hw};
  MetricsCollector c(cfg, {});
  c.on_request_done(completed(0, 0, 1, 3600, 3000 * 3600));
  RunSummary s = c.finish(sec(3600), 1, 0);
  EXPECT_NEAR(s.cost_usd_per_mtok_output, 0.19, 0.005);
  EXPECT_NEAR(s.cost_usd_per_mtok_output, 2.0 / (3000.0 * 3600.0) * 1e6, 1e-12);
  EXPECT_DOUBLE_EQ(s.gpu_hours, 1.0);
  EXPECT_DOUBLE_EQ(s.throughput_output_tok_s, 3000);
}

// PD backpressure: a transfer that started after its prefill ended waited that long for decode
// blocks; the pulls waiting at once are the replicas' latest counts summed.
TEST(CollectorTest, PullWaitsAndThePeakOfPullsWaiting) {
  CollectorConfig cfg;
  cfg.replicas = {ReplicaHardware{}, ReplicaHardware{}, ReplicaHardware{}};
  MetricsCollector c(cfg, {});
  auto state = [&](uint32_t replica, double t, int64_t waiting) {
    core::ReplicaState st;
    st.replica = replica;
    st.time = sec(t);
    st.kv_blocks_total = 10;
    st.pulls_waiting = waiting;
    c.on_replica_state(st);
  };
  auto transfer = [&](double ready, double start) {
    core::KvTransfer t;
    t.ready = sec(ready);
    t.start = sec(start);
    t.end = sec(start + 0.001);
    t.bytes = 1e6;
    c.on_kv_transfer(t);
  };
  state(1, 0.1, 2);
  state(2, 0.2, 3);  // 2 + 3 = 5 waiting at once
  state(1, 0.3, 0);
  state(2, 0.4, 4);  // 0 + 4
  transfer(0.1, 0.1);  // no wait
  transfer(0.1, 0.3);  // 200 ms
  transfer(0.2, 0.7);  // 500 ms
  RunSummary s = c.finish(sec(1), 1, 0);
  EXPECT_EQ(s.kv_transfers, 3u);
  EXPECT_EQ(s.pull_waits, 2u);
  EXPECT_NEAR(s.pull_wait_s, 0.7, 1e-12);
  EXPECT_NEAR(s.pull_wait_max_ms, 500, 1e-9);
  EXPECT_EQ(s.pulls_waiting_peak, 5u);
}

TEST(CollectorTest, GoodputAttainmentAndRejections) {
  CollectorConfig cfg;
  cfg.slo.ttft_ms = 1000;
  cfg.replicas = {ReplicaHardware{}};
  MetricsCollector c(cfg, {});
  c.on_request_done(completed(0, 0, 0.5, 2, 3));    // meets
  c.on_request_done(completed(1, 0, 1.5, 3, 3));    // TTFT too long
  core::RequestRecord rej = completed(2, 1, 1, 1, 3);
  rej.outcome = core::RequestOutcome::kRejectedKvCapacity;
  c.on_request_done(rej);
  RunSummary s = c.finish(sec(4), 1, 0);
  EXPECT_EQ(s.requests_total, 3u);
  EXPECT_EQ(s.requests_completed, 2u);
  EXPECT_EQ(s.requests_rejected, 1u);
  EXPECT_EQ(s.rejected_kv_capacity, 1u);
  EXPECT_EQ(s.requests_meeting_slo, 1u);
  EXPECT_DOUBLE_EQ(s.goodput_req_s, 0.25);
  EXPECT_DOUBLE_EQ(s.throughput_req_s, 0.5);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 1.0 / 3.0);  // a rejected request misses the SLO
  EXPECT_DOUBLE_EQ(s.ttft_ms.p50, 1000);
}

// Per-class figures ([[workload.classes]]), by hand. Run SLO: TTFT <= 1000 ms. Class "premium" has
// its own TTFT limit of 100 ms; "batch" has none, so the run's applies.
//   premium: #0 TTFT 50 ms (meets 100), #1 TTFT 200 ms (misses 100; meets the run's 1000), #2 shed
//   batch:   #3 TTFT 500 ms (meets 1000), #4 timed out
// premium: 3 requests, 2 completed, 1 rejected (by admission), 1 meeting -> attainment 1/3, TTFT
// p50 = mean = 125 ms, TPOT of #0 = (150 - 50) / 10 = 10 ms, goodput 1 / 4 s; batch: 2 requests,
// 1 meeting -> 1/2. The run as a whole (its own SLO): #0, #1, #3 meet -> 3/5.
TEST(CollectorTest, PerClassFiguresAgainstEachClasssSlo) {
  CollectorConfig cfg;
  cfg.slo.ttft_ms = 1000;
  cfg.replicas = {ReplicaHardware{}};
  core::RequestClass premium, batch;
  premium.name = "premium";
  premium.tenant = "a";
  premium.ttft_slo_ms = 100;
  batch.name = "batch";
  batch.priority = 1;
  cfg.classes = {premium, batch};
  MetricsCollector c(cfg, {});
  core::RequestRecord r0 = completed(0, 0, 0.05, 0.15, 11);
  core::RequestRecord r1 = completed(1, 0, 0.2, 0.3, 11);
  core::RequestRecord r2 = completed(2, 0.5, 0.5, 0.5, 3);
  r2.outcome = core::RequestOutcome::kRejectedAdmission;
  core::RequestRecord r3 = completed(3, 1, 1.5, 2, 2);
  r3.request_class = 1;
  core::RequestRecord r4 = completed(4, 1, 3, 3, 2);
  r4.outcome = core::RequestOutcome::kTimedOut;
  r4.request_class = 1;
  for (const auto& r : {r0, r1, r2, r3, r4}) c.on_request_done(r);
  RunSummary s = c.finish(sec(4), 1, 0);
  EXPECT_EQ(s.requests_rejected, 1u);
  EXPECT_EQ(s.rejected_admission, 1u);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 3.0 / 5.0);
  ASSERT_EQ(s.classes.size(), 2u);
  const ClassSummary& p = s.classes[0];
  EXPECT_EQ(p.name, "premium");
  EXPECT_EQ(p.tenant, "a");
  EXPECT_EQ(p.requests, 3u);
  EXPECT_EQ(p.completed, 2u);
  EXPECT_EQ(p.rejected, 1u);
  EXPECT_EQ(p.rejected_admission, 1u);
  EXPECT_EQ(p.meeting_slo, 1u);
  EXPECT_DOUBLE_EQ(p.slo_attainment, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(p.goodput_req_s, 0.25);
  EXPECT_DOUBLE_EQ(p.throughput_req_s, 0.5);
  EXPECT_DOUBLE_EQ(p.ttft_ms.p50, 125);
  EXPECT_DOUBLE_EQ(p.ttft_ms.mean, 125);
  EXPECT_DOUBLE_EQ(p.tpot_ms.p50, 10);
  EXPECT_EQ(p.output_tokens, 22);
  EXPECT_DOUBLE_EQ(p.ttft_slo_ms, 100);
  EXPECT_TRUE(std::isnan(p.tpot_slo_ms));
  const ClassSummary& b = s.classes[1];
  EXPECT_EQ(b.priority, 1);
  EXPECT_EQ(b.requests, 2u);
  EXPECT_EQ(b.completed, 1u);
  EXPECT_EQ(b.timed_out, 1u);
  EXPECT_EQ(b.meeting_slo, 1u);
  EXPECT_DOUBLE_EQ(b.slo_attainment, 0.5);
  EXPECT_DOUBLE_EQ(b.ttft_ms.p99, 500);
  EXPECT_DOUBLE_EQ(b.ttft_slo_ms, 1000);  // the run's
  // Conservation per class, and over the classes.
  uint64_t total = 0;
  for (const auto& k : s.classes) {
    EXPECT_EQ(k.requests, k.completed + k.rejected + k.timed_out + k.failed);
    total += k.requests;
  }
  EXPECT_EQ(total, s.requests_total);
}

// A timed-out request (its client gave up) is a failure: counted in requests_total and
// requests_timed_out, never in completed, latencies, tokens or goodput, and it misses the SLO.
TEST(CollectorTest, TimedOutRequestsFailWithoutLatencies) {
  CollectorConfig cfg;
  cfg.slo.ttft_ms = 1000;
  cfg.replicas = {ReplicaHardware{}};
  MetricsCollector c(cfg, {});
  c.on_request_done(completed(0, 0, 0.5, 2, 3));  // meets
  core::RequestRecord late = completed(1, 0, 0.2, 9, 3);
  late.outcome = core::RequestOutcome::kTimedOut;
  late.client_finish = sec(5);
  late.generated_tokens = 2;
  c.on_request_done(late);
  const RunSummary s = c.finish(sec(10), 1, 0);
  EXPECT_EQ(s.requests_total, 2u);
  EXPECT_EQ(s.requests_completed, 1u);
  EXPECT_EQ(s.requests_timed_out, 1u);
  EXPECT_EQ(s.requests_rejected, 0u);
  EXPECT_EQ(s.output_tokens, 3);
  EXPECT_DOUBLE_EQ(s.ttft_ms.mean, 500);
  EXPECT_DOUBLE_EQ(s.e2e_ms.p99, 2000);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 0.5);
  EXPECT_DOUBLE_EQ(s.goodput_req_s, 0.1);
  EXPECT_DOUBLE_EQ(s.throughput_req_s, 0.1);
  bool listed = false;
  for (const auto& v : flatten(s)) listed = listed || (v.name == "requests_timed_out" && v.value == 1 && v.integer);
  EXPECT_TRUE(listed);
}

// Issue 11: the arrival window's figures count what completed by the last arrival, per second of
// the window; the whole-run figures divide by the drain too.
TEST(CollectorTest, ArrivalWindowFiguresCountWhatFinishedWhileRequestsArrived) {
  CollectorConfig cfg;
  cfg.slo.ttft_ms = 1000;
  ReplicaHardware hw;
  hw.usd_per_hour = 3.6;  // $0.001 per second
  cfg.replicas = {hw};
  MetricsCollector c(cfg, {});
  c.on_arrival(0, sec(1));
  c.on_arrival(1, sec(2));
  c.on_request_done(completed(0, 1, 1.5, 3, 10));  // meets the SLO, done at 3 s
  c.on_arrival(2, sec(4));                          // the last arrival: the window is [0, 4 s]
  c.on_request_done(completed(1, 2, 4.5, 6, 20));  // done after the window; misses the TTFT limit
  c.on_request_done(completed(2, 4, 4.5, 10, 30));  // meets the SLO, done after the window
  const RunSummary s = c.finish(sec(10), 3, 0);
  EXPECT_DOUBLE_EQ(s.arrival_window_s, 4.0);
  EXPECT_DOUBLE_EQ(s.throughput_req_s_window, 1.0 / 4.0);
  EXPECT_DOUBLE_EQ(s.throughput_output_tok_s_window, 10.0 / 4.0);
  EXPECT_DOUBLE_EQ(s.goodput_req_s_window, 1.0 / 4.0);
  EXPECT_DOUBLE_EQ(s.cost_usd_per_mtok_output_window, 0.004 / 10.0 * 1e6);
  EXPECT_DOUBLE_EQ(s.throughput_req_s, 3.0 / 10.0);   // the whole run, drain included
  EXPECT_DOUBLE_EQ(s.goodput_req_s, 2.0 / 10.0);
  EXPECT_DOUBLE_EQ(s.cost_usd_per_mtok_output, 0.010 / 60.0 * 1e6);
}

TEST(CollectorTest, UtilisationIsTimeWeighted) {
  CollectorConfig cfg;
  ReplicaHardware hw;  // one GPU of peak 100 FLOP/s and 10 B/s
  hw.hbm_bandwidth = 10.0;
  cfg.replicas = {hw};
  MetricsCollector c(cfg, {});
  core::IterationRecord a;
  a.duration = core::Duration::from_seconds(1);
  a.flops = 50;
  a.peak_flop_seconds = 50.0 / 100.0;  // 50% MFU for 1 s
  a.bytes = 10;                        // 100% MBU
  a.batch_size = 4;
  core::IterationRecord b = a;
  b.duration = core::Duration::from_seconds(3);
  b.flops = 30;
  b.peak_flop_seconds = 30.0 / 100.0;  // 10% for 3 s
  b.bytes = 15;
  b.batch_size = 8;
  c.on_iteration(a);
  c.on_iteration(b);
  RunSummary s = c.finish(sec(4), 2, 0);
  EXPECT_DOUBLE_EQ(s.mfu_mean, 80.0 / 400.0);
  EXPECT_DOUBLE_EQ(s.mbu_mean, 25.0 / 40.0);
  EXPECT_DOUBLE_EQ(s.mean_batch_size, (4.0 + 24.0) / 4.0);
  EXPECT_EQ(s.iterations, 2u);
}

// Replicas may run ahead of the global clock (issue 18), so different replicas' iterations reach the
// collector in any interleaving (each replica's own in its order); the run's figures must not
// change with it. Replica 0 runs three 0.1 s iterations, replica 1 one of 0.1 s and one of 0.2 s,
// each with 1 peak-FLOP-second, 2 bytes and 3 sequences, on 1-GPU replicas of 10 B/s. Interleaved
// (r0, r1, r0, r1, r0) a running sum of the busy seconds is ((((0.1 + 0.1) + 0.1) + 0.2) + 0.1) =
// 0.6; replica by replica (r0, r0, r0, r1, r1) it is 0.6000000000000001 — the old collector's
// single running sum gave two different mfu_mean (5 / 0.6 vs 5 / 0.6000000000000001). The rule now:
// each replica's own sum (0.1 + 0.1 + 0.1 = 0.30000000000000004; 0.1 + 0.2 = 0.30000000000000004),
// added in replica order: 0.6000000000000001 busy seconds whatever the interleaving.
TEST(CollectorTest, FiguresDoNotDependOnHowReplicasIterationsInterleave) {
  CollectorConfig cfg;
  ReplicaHardware hw;
  hw.hbm_bandwidth = 10.0;
  cfg.replicas = {hw, hw};
  auto iteration = [](uint32_t replica, int64_t start_ms, int64_t ms) {
    core::IterationRecord it;
    it.replica = replica;
    it.start = core::Time::from_ns(start_ms * 1'000'000);
    it.duration = core::Duration::from_ns(ms * 1'000'000);
    it.peak_flop_seconds = 1;
    it.flops = 100;
    it.bytes = 2;
    it.batch_size = 3;
    it.decode_tokens = 3;
    return it;
  };
  const core::IterationRecord r0[] = {iteration(0, 0, 100), iteration(0, 100, 100), iteration(0, 200, 100)};
  const core::IterationRecord r1[] = {iteration(1, 0, 100), iteration(1, 100, 200)};
  MetricsCollector interleaved(cfg, {}), by_replica(cfg, {});
  for (const auto* it : {&r0[0], &r1[0], &r0[1], &r1[1], &r0[2]}) interleaved.on_iteration(*it);
  for (const auto* it : {&r0[0], &r0[1], &r0[2], &r1[0], &r1[1]}) by_replica.on_iteration(*it);
  const std::vector<NamedValue> a = flatten(interleaved.finish(sec(1), 5, 0));
  const std::vector<NamedValue> b = flatten(by_replica.finish(sec(1), 5, 0));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(std::memcmp(&a[i].value, &b[i].value, sizeof(double)), 0)
        << a[i].name << ": " << a[i].value << " vs " << b[i].value;
  }
  // The hand sums, grouped replica by replica: busy (GPU-)seconds 0.30000000000000004 +
  // 0.30000000000000004; 5 peak-FLOP-seconds; 10 bytes of ((1 + 1) + 1) + (1 + 2) = 6 peak bytes;
  // batch-seconds ((0.3 + 0.3) + 0.3) + (0.3 + 0.6), each term 3 x an iteration's seconds.
  const double busy = 0.30000000000000004 + 0.30000000000000004;
  ASSERT_EQ(busy, 0.6000000000000001);
  for (const NamedValue& v : a) {
    if (v.name == "mfu_mean") {
      EXPECT_EQ(v.value, 5.0 / busy);
    }
    if (v.name == "mbu_mean") {
      EXPECT_EQ(v.value, 10.0 / (10.0 * 0.1 + 10.0 * 0.1 + 10.0 * 0.1 + (10.0 * 0.1 + 10.0 * 0.2)));
    }
    if (v.name == "mean_batch_size") {
      EXPECT_EQ(v.value, (3 * 0.1 + 3 * 0.1 + 3 * 0.1 + (3 * 0.1 + 3 * 0.2)) / busy);
    }
  }
}

// MFU compares each FLOP with the peak of the precision it ran at (issue 11): a 2-GPU replica busy
// for 2 s whose iteration did 600 FLOPs at an fp8 peak of 200 FLOP/s (3 GPU-seconds at peak) and
// 100 at a 16-bit peak of 100 FLOP/s (1 GPU-second) used 4 of its 4 GPU-seconds' peak: MFU 1, where
// dividing all 700 FLOPs by the 16-bit peak would have said 1.75.
TEST(CollectorTest, MfuIsAgainstThePeakOfEachFlopsPrecision) {
  CollectorConfig cfg;
  ReplicaHardware hw;
  hw.gpus = 2;
  hw.hbm_bandwidth = 10.0;
  cfg.replicas = {hw};
  MetricsCollector c(cfg, {});
  core::IterationRecord it;
  it.duration = core::Duration::from_seconds(2);
  it.flops = 700;
  it.peak_flop_seconds = 600.0 / 200.0 + 100.0 / 100.0;  // 4 GPU-seconds at peak
  c.on_iteration(it);
  const RunSummary s = c.finish(sec(2), 1, 0);
  EXPECT_DOUBLE_EQ(s.mfu_mean, 4.0 / (2.0 * 2.0));
}

TEST(CollectorTest, SamplesAndKvUseOverTime) {
  CollectorConfig cfg;
  cfg.sample_interval_ns = 5;
  cfg.replicas = {ReplicaHardware{}};
  MemorySink sink;
  MetricsCollector c(cfg, {&sink});
  core::ReplicaState st;
  st.kv_blocks_total = 100;
  c.on_replica_state(st);
  st.time = core::Time::from_ns(10);
  st.kv_blocks_used = 50;
  st.running = 3;
  c.on_replica_state(st);
  RunSummary s = c.finish(core::Time::from_ns(20), 1, 0);
  ASSERT_EQ(sink.samples.size(), 5u);  // t = 0, 5, 10, 15, 20
  EXPECT_EQ(sink.samples[1].kv_blocks_used, 0);
  EXPECT_EQ(sink.samples[2].kv_blocks_used, 50);  // the state at t=10 includes the change at 10
  EXPECT_EQ(sink.samples[2].running, 3);
  EXPECT_EQ(sink.samples[4].time_ns, 20);
  EXPECT_DOUBLE_EQ(s.kv_util_mean, 0.25);
}

// LifecycleObserver::on_decode_steps (a decode run's iterations told at once) stands for calls in
// a stated order: each step's iteration, then its state (where it has one), then its gaps (where it
// emits). Three steps by hand: a state at the second, gaps at the first and third.
TEST(LifecycleObserverTest, DecodeStepsAreTheirCallsInOrder) {
  struct Log final : core::LifecycleObserver {
    std::vector<std::string> calls;
    void on_iteration(const core::IterationRecord& it) override {
      calls.push_back("iteration " + std::to_string(it.replica) + " " + std::to_string(it.start.ns()) + "+" +
                      std::to_string(it.duration.ns()) + " n=" + std::to_string(it.decode_tokens) + " bytes=" +
                      std::to_string(static_cast<int>(it.bytes)));
    }
    void on_replica_state(const core::ReplicaState& s) override {
      calls.push_back("state " + std::to_string(s.time.ns()) + " kv=" + std::to_string(s.kv_blocks_used) +
                      " running=" + std::to_string(s.running));
    }
    void on_token_gaps(std::span<const core::GapRun> runs) override {
      for (const auto& r : runs)
        calls.push_back("gaps " + std::to_string(r.gap_ns) + " x" + std::to_string(r.count) + " t" + std::to_string(r.tokens));
    }
  } log;
  core::IterationRecord base;
  base.replica = 2;
  base.decode_tokens = 5;
  base.batch_size = 5;
  core::ReplicaState state;
  state.replica = 2;
  state.running = 5;
  state.kv_blocks_used = 7;
  auto step = [](int64_t start, int64_t duration, double bytes, int64_t kv, bool emits) {
    core::DecodeStep s;
    s.start = core::Time::from_ns(start);
    s.duration = core::Duration::from_ns(duration);
    s.bytes = bytes;
    s.kv_blocks_used = kv;
    s.emits = emits;
    return s;
  };
  const core::DecodeStep steps[] = {step(100, 10, 1, -1, true), step(110, 11, 2, 8, false), step(121, 12, 3, -1, true)};
  log.on_decode_steps(base, state, steps);
  const std::vector<std::string> want = {"iteration 2 100+10 n=5 bytes=1", "gaps 10 x5 t1",
                                         "iteration 2 110+11 n=5 bytes=2", "state 110 kv=8 running=5",
                                         "iteration 2 121+12 n=5 bytes=3", "gaps 12 x5 t1"};
  EXPECT_EQ(log.calls, want);
}

// MetricsCollector::on_decode_steps does the calls' work its own way (the replica's sums in
// registers, counts added once, states that change the blocks alone kept in line): every figure,
// sample and per-replica statistic must be what the calls themselves give, to the bit. Random runs
// on two replicas (durations, costs, states, gaps; one run with speculative drafts, which takes the
// calls' way), the calls made by hand.
TEST(CollectorTest, DecodeStepsGiveWhatTheirCallsGive) {
  struct Stats final : ResultSink {
    std::vector<ReplicaSample> samples;
    std::vector<std::vector<NamedValue>> replicas;
    void begin_run(RunInfo&) override {}
    void add_request(const core::RequestRecord&, const RequestMetrics&) override {}
    void add_sample(const ReplicaSample& s) override { samples.push_back(s); }
    void add_replica_stats(const ReplicaStats& r) override { replicas.push_back(flatten(r)); }
    void end_run(const RunSummary&) override {}
  };
  CollectorConfig cfg;
  ReplicaHardware hw;
  hw.gpus = 2;
  hw.hbm_bandwidth = 3.35e12;
  hw.usd_per_hour = 4;
  cfg.replicas = {hw, hw};
  cfg.sample_interval_ns = 7'000'000;
  Stats sa, sb;
  MetricsCollector batched(cfg, {&sa}), calls(cfg, {&sb});
  core::ReplicaState states[2];
  for (uint32_t r = 0; r < 2; ++r) {
    states[r].replica = r;
    states[r].kv_blocks_total = 1000;
    states[r].running = 3;
    batched.on_replica_state(states[r]);
    calls.on_replica_state(states[r]);
  }
  uint64_t x = 12345;
  auto next = [&](uint64_t m) {  // a small LCG: the same draws everywhere
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return (x >> 33) % m;
  };
  int64_t t[2] = {0, 0};
  uint64_t steps_told = 0;
  for (int run = 0; run < 60; ++run) {
    const uint32_t r = static_cast<uint32_t>(next(2));
    core::IterationRecord base;
    base.replica = r;
    base.decode_tokens = static_cast<int64_t>(1 + next(200));
    base.batch_size = base.decode_tokens;
    if (run == 17) base.draft_tokens = 4;  // not a decode_window run: the calls' way
    std::vector<core::DecodeStep> steps(1 + next(32));
    // Mostly the state the collector last had (a run's steps change the blocks alone); sometimes
    // one that differs in its running count too, which on_replica_state takes its own way.
    if (next(4) == 0) states[r].running = static_cast<int64_t>(1 + next(50));
    int64_t kv = states[r].kv_blocks_used;
    for (auto& s : steps) {
      s.start = core::Time::from_ns(t[r]);
      s.duration = core::Duration::from_ns(static_cast<int64_t>(5'000'000 + next(40'000'000)));
      t[r] += s.duration.ns();
      s.flops = 1e12 * static_cast<double>(1 + next(1000)) / 7.0;
      s.bytes = 1e9 * static_cast<double>(1 + next(1000)) / 3.0;
      s.peak_flop_seconds = static_cast<double>(1 + next(1000)) / 11.0;
      s.kv_blocks_used = next(3) == 0 ? (kv += static_cast<int64_t>(1 + next(4))) : -1;
      s.emits = next(8) != 0;
    }
    steps_told += steps.size();
    batched.on_decode_steps(base, states[r], steps);
    // The calls, by hand.
    for (const auto& s : steps) {
      core::IterationRecord it = base;
      it.start = s.start;
      it.duration = s.duration;
      it.flops = s.flops;
      it.bytes = s.bytes;
      it.peak_flop_seconds = s.peak_flop_seconds;
      calls.on_iteration(it);
      if (s.kv_blocks_used >= 0) {
        states[r].time = s.start;
        states[r].kv_blocks_used = s.kv_blocks_used;
        calls.on_replica_state(states[r]);
      }
      if (s.emits) {
        const core::GapRun g[] = {{s.duration.ns(), base.decode_tokens, 1}};
        calls.on_token_gaps(g);
      }
    }
  }
  const core::Time end = core::Time::from_ns(std::max(t[0], t[1]));
  const std::vector<NamedValue> a = flatten(batched.finish(end, 1, 0)), b = flatten(calls.finish(end, 1, 0));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(std::memcmp(&a[i].value, &b[i].value, sizeof(double)), 0)
        << a[i].name << ": " << a[i].value << " vs " << b[i].value;
    if (a[i].name == "iterations") EXPECT_EQ(a[i].value, static_cast<double>(steps_told));
  }
  ASSERT_EQ(sa.replicas.size(), 2u);
  ASSERT_EQ(sa.replicas.size(), sb.replicas.size());
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(sa.replicas[r].size(), sb.replicas[r].size());
    for (size_t i = 0; i < sa.replicas[r].size(); ++i)
      EXPECT_EQ(std::memcmp(&sa.replicas[r][i].value, &sb.replicas[r][i].value, sizeof(double)), 0)
          << "replica " << r << " " << sa.replicas[r][i].name;
  }
  ASSERT_GT(sa.samples.size(), 10u);
  ASSERT_EQ(sa.samples.size(), sb.samples.size());
  for (size_t i = 0; i < sa.samples.size(); ++i) {
    EXPECT_EQ(sa.samples[i].time_ns, sb.samples[i].time_ns) << i;
    EXPECT_EQ(sa.samples[i].kv_blocks_used, sb.samples[i].kv_blocks_used) << i;
  }
}

RunInfo info() {
  RunInfo i;
  i.config_toml = "seed = 1\n";
  i.config_hash = "0123456789abcdef";
  i.seed = 1;
  i.version = "test";
  return i;
}

int64_t count(SQLite::Database& db, const std::string& table) {
  return db.execAndGet("SELECT COUNT(*) FROM " + table).getInt64();
}

TEST(SqliteSinkTest, WritesARunAtomically) {
  testing::TempDir dir;
  const std::string path = dir.file("r.db");
  {
    SqliteSink sink(path);
    RunInfo i = info();
    sink.begin_run(i);
    EXPECT_EQ(i.run_id, 1);
    sink.add_request(completed(0, 0, 1, 2, 3), RequestMetrics{1000, 500.0, 2000, true});
    sink.add_sample(ReplicaSample{0, 0, 1, 2, 3, 4});
    RunSummary s;
    s.requests_total = 1;
    s.ttft_ms.p99 = 12.5;
    sink.end_run(s);
  }
  {
    SqliteSink sink(path);  // a second run, abandoned before end_run
    RunInfo i = info();
    sink.begin_run(i);
    EXPECT_EQ(i.run_id, 2);
    sink.add_request(completed(0, 0, 1, 2, 3), RequestMetrics{});
  }
  SQLite::Database db(path);
  EXPECT_EQ(count(db, "runs"), 1);
  EXPECT_EQ(count(db, "requests"), 1);
  EXPECT_EQ(count(db, "replica_timeseries"), 1);
  EXPECT_DOUBLE_EQ(db.execAndGet("SELECT ttft_ms_p99 FROM runs").getDouble(), 12.5);
  EXPECT_EQ(db.execAndGet("SELECT outcome FROM requests").getString(), "completed");
  EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
}

// A timed-out row: when the client gave up (finish_ns) and when the engine let go
// (engine_finish_ns), no latencies; every row carries its load stage.
TEST(SqliteSinkTest, TimedOutRowsAndStages) {
  testing::TempDir dir;
  const std::string path = dir.file("r.db");
  {
    SqliteSink sink(path);
    RunInfo i = info();
    sink.begin_run(i);
    core::RequestRecord r = completed(0, 0, 1, 4, 3);
    r.outcome = core::RequestOutcome::kTimedOut;
    r.client_finish = sec(3);
    r.stage = 2;
    sink.add_request(r, RequestMetrics{});
    sink.end_run(RunSummary{});
  }
  SQLite::Database db(path);
  SQLite::Statement st(db,
                       "SELECT outcome, first_token_ns IS NULL, finish_ns, ttft_ms IS NULL, e2e_ms IS NULL, "
                       "engine_first_token_ns IS NULL, engine_finish_ns, stage FROM requests");
  ASSERT_TRUE(st.executeStep());
  EXPECT_EQ(st.getColumn(0).getString(), "timed_out");
  EXPECT_EQ(st.getColumn(1).getInt(), 1);
  EXPECT_EQ(st.getColumn(2).getInt64(), 3'000'000'000);
  EXPECT_EQ(st.getColumn(3).getInt(), 1);
  EXPECT_EQ(st.getColumn(4).getInt(), 1);
  EXPECT_EQ(st.getColumn(5).getInt(), 1);
  EXPECT_EQ(st.getColumn(6).getInt64(), 4'000'000'000);
  EXPECT_EQ(st.getColumn(7).getInt(), 2);
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 8);
}

// Schema version 8 (PD backpressure): a version-7 database's runs table, without the pull columns,
// gets them with the first run written into it; the rows before hold NULL there.
TEST(SqliteSinkTest, VersionSevenDatabasesGetThePullColumns) {
  testing::TempDir dir;
  const std::string path = dir.file("v7.db");
  {
    SqliteSink sink(path);
    RunInfo i = info();
    sink.begin_run(i);
    sink.end_run(RunSummary{});
  }
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    for (const char* c : {"pull_waits", "pull_wait_s", "pull_wait_max_ms", "pulls_waiting_peak"})
      db.exec(std::string("ALTER TABLE runs DROP COLUMN ") + c);
    db.exec("PRAGMA user_version = 7");
  }
  {
    SqliteSink sink(path);
    RunInfo i = info();
    sink.begin_run(i);
    RunSummary s;
    s.pull_waits = 3;
    s.pull_wait_s = 1.5;
    s.pull_wait_max_ms = 700;
    s.pulls_waiting_peak = 2;
    sink.end_run(s);
  }
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 8);
  EXPECT_EQ(count(db, "runs"), 2);
  EXPECT_TRUE(db.execAndGet("SELECT pull_waits FROM runs WHERE run_id = 1").isNull());
  EXPECT_EQ(db.execAndGet("SELECT pull_waits FROM runs WHERE run_id = 2").getInt64(), 3);
  EXPECT_DOUBLE_EQ(db.execAndGet("SELECT pull_wait_s FROM runs WHERE run_id = 2").getDouble(), 1.5);
  EXPECT_DOUBLE_EQ(db.execAndGet("SELECT pull_wait_max_ms FROM runs WHERE run_id = 2").getDouble(), 700);
  EXPECT_EQ(db.execAndGet("SELECT pulls_waiting_peak FROM runs WHERE run_id = 2").getInt64(), 2);
}

// Schema version 6 (request classes): a version-5 database, the same layout without class_stats,
// is still written into; it gets class_stats (and version 6) with its first run that has classes.
TEST(SqliteSinkTest, VersionFiveDatabasesTakeRunsWithClasses) {
  testing::TempDir dir;
  const std::string path = dir.file("v5.db");
  {
    SqliteSink sink(path);
    RunInfo i = info();
    sink.begin_run(i);
    sink.end_run(RunSummary{});
  }
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA user_version = 5");
  }
  {
    SqliteSink sink(path);  // a run without classes leaves it as it is
    RunInfo i = info();
    sink.begin_run(i);
    sink.end_run(RunSummary{});
  }
  {
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 5);
    EXPECT_FALSE(db.tableExists("class_stats"));
  }
  {
    SqliteSink sink(path);
    RunInfo i = info();
    sink.begin_run(i);
    RunSummary s;
    ClassSummary c;
    c.name = "premium";
    c.requests = 3;
    c.ttft_slo_ms = std::numeric_limits<double>::quiet_NaN();
    c.tpot_slo_ms = 50;
    s.classes = {c};
    sink.end_run(s);
  }
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 8);
  EXPECT_EQ(count(db, "runs"), 3);
  EXPECT_EQ(db.execAndGet("SELECT run_id FROM class_stats WHERE class = 'premium'").getInt(), 3);
  EXPECT_EQ(db.execAndGet("SELECT requests FROM class_stats").getInt(), 3);
  EXPECT_TRUE(db.execAndGet("SELECT ttft_slo_ms FROM class_stats").isNull());
  EXPECT_EQ(db.execAndGet("SELECT tpot_slo_ms FROM class_stats").getDouble(), 50);
}

// Schema version 7: the requests' class column comes with the first run that has request classes
// (its rows name their class); rows of runs without classes hold NULL, and a database that never
// holds a run with classes keeps the requests layout it had. A version-6 database takes the column.
TEST(SqliteSinkTest, RequestsNameTheirClassOnceARunHasClasses) {
  testing::TempDir dir;
  const std::string path = dir.file("c.db");
  auto has_class_column = [&] {
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    SQLite::Statement cols(db, "SELECT name FROM pragma_table_info('requests')");
    bool found = false;
    while (cols.executeStep()) found = found || cols.getColumn(0).getString() == "class";
    return found;
  };
  {
    SqliteSink sink(path);
    RunInfo i = info();
    sink.begin_run(i);
    sink.add_request(completed(0, 0, 1, 2, 3), RequestMetrics{});
    sink.end_run(RunSummary{});
  }
  EXPECT_FALSE(has_class_column());
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA user_version = 6");
  }
  {
    SqliteSink sink(path);
    RunInfo i = info();
    i.class_names = {"premium", "batch"};
    sink.begin_run(i);
    core::RequestRecord a = completed(0, 0, 1, 2, 3), b = completed(1, 0, 1, 2, 3), c = completed(2, 0, 1, 2, 3);
    a.request_class = 1;
    b.request_class = 0;
    c.request_class = 1;
    for (const auto& r : {a, b, c}) sink.add_request(r, RequestMetrics{});
    sink.end_run(RunSummary{});
  }
  EXPECT_TRUE(has_class_column());
  {
    SqliteSink sink(path);  // a run without classes after it
    RunInfo i = info();
    sink.begin_run(i);
    sink.add_request(completed(0, 0, 1, 2, 3), RequestMetrics{});
    sink.end_run(RunSummary{});
  }
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 8);
  SQLite::Statement st(db, "SELECT run_id, request_id, class FROM requests ORDER BY run_id, request_id");
  std::vector<std::string> rows;
  while (st.executeStep())
    rows.push_back(std::to_string(st.getColumn(0).getInt()) + "/" + std::to_string(st.getColumn(1).getInt()) + "/" +
                   (st.getColumn(2).isNull() ? std::string("NULL") : st.getColumn(2).getString()));
  EXPECT_EQ(rows, (std::vector<std::string>{"1/0/NULL", "2/0/batch", "2/1/premium", "2/2/batch", "3/0/NULL"}));
}

// Request rows go in 32 at a time through one multi-row statement, the rest one by one when the
// run is staged, with statements kept across the runs of one sink (a sweep's points): every row
// comes back in the order it was added, with its own values, in runs with and without classes,
// and a run abandoned after a full batch leaves no row.
TEST(SqliteSinkTest, BatchedRowsComeBackInOrderAcrossRuns) {
  testing::TempDir dir;
  const std::string path = dir.file("b.db");
  // Run r, row k: id 1000 r + k (not in order of k: ids descend in every third row), arrival k s,
  // a timed-out row every 7th, class k mod 3 in the run with classes, stage k mod 4.
  auto row = [](int run, int k) {
    core::RequestRecord r = completed(static_cast<uint64_t>(1000 * run + (k % 3 == 0 ? 500 - k : k)), k, k + 0.5,
                                      k + 2.0, 1 + k % 5);
    if (k % 7 == 6) r.outcome = core::RequestOutcome::kTimedOut;
    r.stage = k % 4;
    r.request_class = static_cast<uint32_t>(k % 3);
    return r;
  };
  const int sizes[] = {70, 33, 0, 32};
  {
    SqliteSink sink(path);
    for (int run = 0; run < 4; ++run) {
      RunInfo i = info();
      if (run == 1) i.class_names = {"a", "b", "c"};
      sink.begin_run(i);
      for (int k = 0; k < sizes[run]; ++k) {
        const core::RequestRecord r = row(run, k);
        RequestMetrics m{500.0 + k, k % 5 == 0 ? std::optional<double>{} : std::optional<double>{10.0 * k},
                         2000.0 + k, k % 2 == 0};
        sink.add_request(r, m);
      }
      sink.end_run(RunSummary{});
    }
    RunInfo i = info();  // abandoned after one full batch went in
    sink.begin_run(i);
    for (int k = 0; k < 40; ++k) sink.add_request(row(9, k), RequestMetrics{});
  }
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(count(db, "runs"), 4);
  SQLite::Statement st(db,
                       "SELECT run_id, request_id, outcome, arrival_ns, ttft_ms, tpot_ms, meets_slo, stage, class, "
                       "output_tokens FROM requests ORDER BY rowid");
  for (int run = 0; run < 4; ++run)
    for (int k = 0; k < sizes[run]; ++k) {
      ASSERT_TRUE(st.executeStep()) << "run " << run << " row " << k;
      const core::RequestRecord r = row(run, k);
      const bool timed_out = k % 7 == 6;
      EXPECT_EQ(st.getColumn(0).getInt(), run + 1);
      EXPECT_EQ(st.getColumn(1).getInt64(), static_cast<int64_t>(r.id));
      EXPECT_EQ(st.getColumn(2).getString(), timed_out ? "timed_out" : "completed");
      EXPECT_EQ(st.getColumn(3).getInt64(), int64_t{k} * 1'000'000'000);
      if (timed_out) {
        EXPECT_TRUE(st.getColumn(4).isNull());
        EXPECT_TRUE(st.getColumn(5).isNull());
      } else {
        EXPECT_EQ(st.getColumn(4).getDouble(), 500.0 + k);
        if (k % 5 == 0) EXPECT_TRUE(st.getColumn(5).isNull()); else EXPECT_EQ(st.getColumn(5).getDouble(), 10.0 * k);
      }
      EXPECT_EQ(st.getColumn(6).getInt(), k % 2 == 0 ? 1 : 0);
      EXPECT_EQ(st.getColumn(7).getInt(), k % 4);
      if (run == 1) EXPECT_EQ(st.getColumn(8).getString(), std::string(1, static_cast<char>('a' + k % 3)));
      else EXPECT_TRUE(st.getColumn(8).isNull());
      EXPECT_EQ(st.getColumn(9).getInt(), 1 + k % 5);
    }
  EXPECT_FALSE(st.executeStep());
  EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
}

TEST(SqliteSinkTest, RefusesForeignLayoutsAndDirectories) {
  testing::TempDir dir;
  const std::string path = dir.file("old.db");
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE runs (x INTEGER); PRAGMA user_version = 99;");
  }
  try {
    SqliteSink sink(path);
    FAIL();
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("layout"), std::string::npos);
  }
  EXPECT_THROW(SqliteSink{dir.path()}, core::Error);
  EXPECT_THROW(SqliteSink{dir.file("missing-dir/r.db")}, core::Error);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CsvSinkTest, AppendsRunsAndDropsUnfinishedOnes) {
  testing::TempDir dir;
  for (int run = 0; run < 2; ++run) {
    CsvSink sink(dir.path());
    RunInfo i = info();
    i.config_toml = "seed = 1\n[x]\nname = \"a,b\"\n";
    sink.begin_run(i);
    EXPECT_EQ(i.run_id, 0);  // numbered when the run is staged, under the directory's lock
    sink.add_request(completed(7, 0, 1, 2, 3), RequestMetrics{1000, 500.0, 2000, true});
    sink.end_run(RunSummary{});
    EXPECT_EQ(sink.run_id(), run + 1);
  }
  {
    CsvSink sink(dir.path());
    RunInfo i = info();
    sink.begin_run(i);
    sink.add_request(completed(8, 0, 1, 2, 3), RequestMetrics{});
  }
  const std::string requests = slurp(dir.file("requests.csv"));
  EXPECT_EQ(requests.find("run_id,request_id"), 0u);
  EXPECT_NE(requests.find("\n1,7,0,completed,100,3,0,1000000000,2000000000,1000,500,2000,0,1,0,0,0,1000000000,2000000000,0\n"), std::string::npos)
      << requests;
  EXPECT_NE(requests.find("\n2,7,"), std::string::npos);
  {
    CsvSink sink(dir.path());
    RunInfo i = info();
    sink.begin_run(i);
    core::RequestRecord r = completed(9, 0, 1, 4, 3);
    r.outcome = core::RequestOutcome::kTimedOut;
    r.client_finish = sec(3);
    r.stage = 1;
    sink.add_request(r, RequestMetrics{});
    sink.end_run(RunSummary{});
  }
  EXPECT_NE(slurp(dir.file("requests.csv")).find("\n3,9,0,timed_out,100,3,0,,3000000000,,,,0,0,0,0,0,,4000000000,1\n"),
            std::string::npos)
      << slurp(dir.file("requests.csv"));
  EXPECT_EQ(requests.find(",8,"), std::string::npos);  // the abandoned run left nothing
  const std::string runs = slurp(dir.file("runs.csv"));
  EXPECT_NE(runs.find("\"seed = 1\n[x]\nname = \"\"a,b\"\"\n\""), std::string::npos) << runs;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_NE(entry.path().filename().string().front(), '.') << "a staging file was left: " << entry.path();
}

// requests.csv gains a `class` column with the first run that has request classes: earlier rows and
// rows of later runs without classes get an empty field there; without classes the header is as before.
TEST(CsvSinkTest, RequestsNameTheirClassOnceARunHasClasses) {
  testing::TempDir dir;
  const std::string base =
      "run_id,request_id,replica,outcome,prompt_tokens,output_tokens,arrival_ns,first_token_ns,finish_ns,ttft_ms,"
      "tpot_ms,e2e_ms,preemptions,meets_slo,cached_tokens,decode_replica,kv_transfer_bytes,engine_first_token_ns,"
      "engine_finish_ns,stage";
  auto run = [&](std::vector<std::string> classes, std::vector<uint16_t> of) {
    CsvSink sink(dir.path());
    RunInfo i = info();
    i.class_names = std::move(classes);
    sink.begin_run(i);
    for (size_t k = 0; k < of.size(); ++k) {
      core::RequestRecord r = completed(k, 0, 1, 2, 3);
      r.request_class = of[k];
      sink.add_request(r, RequestMetrics{1000, 500.0, 2000, true});
    }
    sink.end_run(RunSummary{});
  };
  const std::string row = ",0,completed,100,3,0,1000000000,2000000000,1000,500,2000,0,1,0,0,0,1000000000,2000000000,0";
  run({}, {0});
  EXPECT_EQ(slurp(dir.file("requests.csv")), base + "\n1,0" + row + "\n");
  run({"premium", "batch"}, {1, 0});
  run({}, {0});
  EXPECT_EQ(slurp(dir.file("requests.csv")), base + ",class\n1,0" + row + ",\n2,0" + row + ",batch\n2,1" + row +
                                                 ",premium\n3,0" + row + ",\n");
}

}  // namespace
}  // namespace servesim::metrics
