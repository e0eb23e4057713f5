// Replicas running ahead (sim::Cluster::runs_ahead) from the CLI's run: the same run with and
// without it must write the same results, to the bit: every request row, every replica time-series
// sample (the series holds replicas back to its next sample), every replica's figures and the
// summary. An observer of the run's signals (as --timeline adds) keeps the replicas in the queue's
// order, which gives the run to compare against.
#include <gtest/gtest.h>

#include <cstring>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "tests/sim_test_support.h"

namespace servesim::experiments {
namespace {

struct Recorder final : metrics::ResultSink {
  std::vector<core::RequestRecord> requests;
  std::vector<metrics::ReplicaSample> samples;
  std::vector<metrics::ReplicaStats> replicas;
  void begin_run(metrics::RunInfo&) override {}
  void add_request(const core::RequestRecord& r, const metrics::RequestMetrics&) override { requests.push_back(r); }
  void add_sample(const metrics::ReplicaSample& s) override { samples.push_back(s); }
  void add_replica_stats(const metrics::ReplicaStats& s) override { replicas.push_back(s); }
  void end_run(const metrics::RunSummary&) override {}
};

struct Outcome {
  Recorder rec;
  metrics::RunSummary summary;
  bool ran_ahead = false;
  uint64_t events_in_line = 0;
};

void run(const std::string& toml, bool queue, Outcome& out) {
  testing::RecordingObserver watcher;
  RunOutputs o;
  o.check = true;
  o.sinks.push_back(&out.rec);
  if (queue) o.observers.push_back(&watcher);
  const RunResult r = run_simulation(core::parse_config(toml, "run_ahead.toml", run_schema()), o);
  out.summary = r.summary;
  out.ran_ahead = r.ran_ahead;
  out.events_in_line = r.events_in_line;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// 4,000 Poisson requests on 8 Llama-3-8B replicas on H100, at about 70% load, the vLLM V1 engine
// (client path, async scheduling), a time series every 50 ms; the replicas taken in turn (each
// replica's next request known: it runs ahead up to it) or chosen by a router that ignores decode
// progress (Router::ignores_decode_progress: every replica runs ahead up to the next request's time
// in a queue): by load (least_outstanding, power_of_two), at random, by the request's key.
class RunAheadRunTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RunAheadRunTest, TheSameResultsWithAndWithoutRunningAhead) {
  std::string toml = R"(seed = 3
[workload]
kind = "poisson"
rate = 60.0
max_requests = 4000
[workload.prompt]
kind = "lognormal"
mean = 600
sd = 400
min = 16
max = 4000
[workload.output]
kind = "lognormal"
mean = 150
sd = 120
min = 1
max = 800
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 8
[router]
kind = "ROUTER"
[output]
sample_interval_ms = 50
)";
  toml.replace(toml.find("ROUTER"), 6, GetParam());
  Outcome a, b;
  run(toml, false, a);
  run(toml, true, b);
  // The first ran ahead, and handled most of its iterations so (6,000 requests' decodes: far more
  // than the 4,000 requests' prefills); the second, watched, kept to the queue's order.
  EXPECT_TRUE(a.ran_ahead);
  EXPECT_FALSE(b.ran_ahead);
  EXPECT_GT(a.events_in_line, a.summary.iterations / 2);
  ASSERT_EQ(a.rec.requests.size(), 4000u);
  ASSERT_EQ(a.rec.requests.size(), b.rec.requests.size());
  for (size_t i = 0; i < a.rec.requests.size(); ++i) {
    ASSERT_EQ(a.rec.requests[i].id, b.rec.requests[i].id) << i;
    ASSERT_EQ(a.rec.requests[i].first_token, b.rec.requests[i].first_token) << i;
    ASSERT_EQ(a.rec.requests[i].finish, b.rec.requests[i].finish) << i;
    ASSERT_EQ(a.rec.requests[i].replica, b.rec.requests[i].replica) << i;
  }
  ASSERT_GT(a.rec.samples.size(), 1000u);
  ASSERT_EQ(a.rec.samples.size(), b.rec.samples.size());
  for (size_t i = 0; i < a.rec.samples.size(); ++i) {
    const metrics::ReplicaSample &x = a.rec.samples[i], &y = b.rec.samples[i];
    ASSERT_EQ(x.replica, y.replica) << i;
    ASSERT_EQ(x.time_ns, y.time_ns) << i;
    ASSERT_EQ(x.queued, y.queued) << i;
    ASSERT_EQ(x.running, y.running) << i;
    ASSERT_EQ(x.kv_blocks_used, y.kv_blocks_used) << i;
  }
  ASSERT_EQ(a.rec.replicas.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const auto x = metrics::flatten(a.rec.replicas[i]), y = metrics::flatten(b.rec.replicas[i]);
    ASSERT_EQ(x.size(), y.size());
    for (size_t k = 0; k < x.size(); ++k) EXPECT_TRUE(same_bits(x[k].value, y[k].value)) << i << " " << x[k].name;
  }
  const auto x = metrics::flatten(a.summary), y = metrics::flatten(b.summary);
  ASSERT_EQ(x.size(), y.size());
  for (size_t k = 0; k < x.size(); ++k)
    if (x[k].name != "wall_seconds") {
      EXPECT_TRUE(same_bits(x[k].value, y[k].value)) << x[k].name;
    }
}

INSTANTIATE_TEST_SUITE_P(Routers, RunAheadRunTest,
                         ::testing::Values("round_robin", "least_outstanding", "power_of_two", "random",
                                           "consistent_hash"));

// Routers that read what a decode run changes keep the replicas in the queue's order: an oracle's
// remaining tokens, a prefix cache's contents.
TEST(RunAheadRunTest, RoutersThatReadDecodeProgressDoNotRunAhead) {
  for (const char* router : {"kind = \"least_outstanding\"\noracle = true", "kind = \"power_of_two\"\noracle = true",
                             "kind = \"prefix_affinity\""}) {
    const std::string toml = std::string(R"(seed = 3
[workload]
kind = "poisson"
rate = 60.0
max_requests = 200
[workload.prompt]
kind = "fixed"
value = 300
[workload.output]
kind = "fixed"
value = 40
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 4
prefix_caching = true
[router]
)") + router + "\n";
    Outcome a;
    run(toml, false, a);
    EXPECT_FALSE(a.ran_ahead) << router;
    EXPECT_EQ(a.rec.requests.size(), 200u) << router;
  }
}

}  // namespace
}  // namespace servesim::experiments
