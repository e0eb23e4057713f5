// The arrival kinds of composed workloads (traces/open_arrivals.cc, stages.cc, closed_loop.cc and
// staged_process.cc): send times and stages exact on hand-built cases, through the workload kind
// `synthetic` as a run builds them.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/core/rng.h"
#include "traces/staged_process.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::traces {
namespace {

using namespace servesim::traces::testing;

constexpr int64_t kMs = 1'000'000;

// A synthetic workload of fixed lengths (100 / 10 tokens) sent as `arrival` says.
std::string synthetic(const std::string& arrival, const std::string& extra = "") {
  return "[workload]\nkind = \"synthetic\"\n" + extra +
         "[workload.prompt]\nkind = \"fixed\"\nvalue = 100\n[workload.output]\nkind = \"fixed\"\nvalue = 10\n"
         "[workload.arrival]\n" +
         arrival;
}

std::vector<int64_t> times(const std::vector<RequestSpec>& rows) {
  std::vector<int64_t> out;
  for (const auto& r : rows) out.push_back(r.arrival.ns());
  return out;
}

std::vector<uint32_t> stages(const std::vector<RequestSpec>& rows) {
  std::vector<uint32_t> out;
  for (const auto& r : rows) out.push_back(r.stage);
  return out;
}

TEST(ArrivalsTest, ConstantIsEvenlySpacedFromTimeZero) {
  auto rows = drain(*make_workload(synthetic("kind = \"constant\"\nrate = 4.0\nrequests = 5\n")));
  EXPECT_EQ(times(rows), (std::vector<int64_t>{0, 250 * kMs, 500 * kMs, 750 * kMs, 1000 * kMs}));
  EXPECT_EQ(rows[3].prompt_tokens, 100);
  EXPECT_EQ(rows[3].output_tokens, 10);
  EXPECT_EQ(stages(rows), (std::vector<uint32_t>(5, 0)));
  // With a duration: the sends in [0, 1 s).
  rows = drain(*make_workload(synthetic("kind = \"constant\"\nrate = 4.0\nduration_s = 1.0\n")));
  EXPECT_EQ(times(rows), (std::vector<int64_t>{0, 250 * kMs, 500 * kMs, 750 * kMs}));
  // Both: whichever ends first.
  rows = drain(*make_workload(synthetic("kind = \"constant\"\nrate = 4.0\nduration_s = 1.0\nrequests = 2\n")));
  EXPECT_EQ(times(rows), (std::vector<int64_t>{0, 250 * kMs}));
  // 3 req/s for 1 s: 0, 1/3 and 2/3 s, rounded to the nanosecond.
  rows = drain(*make_workload(synthetic("kind = \"constant\"\nrate = 3.0\nduration_s = 1.0\n")));
  EXPECT_EQ(times(rows), (std::vector<int64_t>{0, 333'333'333, 666'666'667}));
}

TEST(ArrivalsTest, OfflineSendsEverythingAtTimeZero) {
  const auto rows = drain(*make_workload(synthetic("kind = \"offline\"\nrequests = 3\n")));
  EXPECT_EQ(times(rows), (std::vector<int64_t>{0, 0, 0}));
}

TEST(ArrivalsTest, FixedCountPoissonRescalesItsGapsToTheDuration) {
  // rate 5 for 2 s: N = 10 exponential gaps (mean 0.2 s) of the workload's "arrivals" stream,
  // rescaled so that they sum to 2 s: send i at 2 s x (g_1 + ... + g_i) / (g_1 + ... + g_10).
  const auto rows = drain(*make_workload(
      synthetic("kind = \"poisson_fixed_count\"\nrate = 5.0\nduration_s = 2.0\n", "seed = 7\n")));
  ASSERT_EQ(rows.size(), 10u);
  core::Rng rng(7, "arrivals");
  std::vector<double> gaps(10);
  double total = 0;
  for (double& g : gaps) total += (g = rng.exponential(5.0));
  double sum = 0;
  for (size_t i = 0; i < 10; ++i) {
    sum += gaps[i];
    EXPECT_EQ(rows[i].arrival.ns(), std::llround(2.0 * (sum / total) * 1e9)) << i;
  }
  EXPECT_EQ(rows.back().arrival.ns(), 2'000'000'000);  // the last send ends the stage exactly
  EXPECT_GT(rows.front().arrival.ns(), 0);
  // N = round(rate x duration): 2.5 req/s for 3 s sends 8 (7.5 rounded away from zero).
  EXPECT_EQ(drain(*make_workload(synthetic("kind = \"poisson_fixed_count\"\nrate = 2.5\nduration_s = 3.0\n"))).size(),
            8u);
}

bool same(const std::vector<RequestSpec>& a, const std::vector<RequestSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].arrival != b[i].arrival || a[i].prompt_tokens != b[i].prompt_tokens ||
        a[i].output_tokens != b[i].output_tokens)
      return false;
  return true;
}

TEST(ArrivalsTest, PoissonAndGammaDrawWhatTheGeneratorKindsDraw) {
  const std::string lengths =
      "[workload.prompt]\nkind = \"uniform\"\nmin = 10\nmax = 900\n[workload.output]\nkind = \"lognormal\"\n"
      "mean = 50.0\nsd = 40.0\n";
  const auto poisson = drain(*make_workload(
      "[workload]\nkind = \"poisson\"\nrate = 3.0\nmax_requests = 200\nseed = 11\n" + lengths));
  const auto composed = drain(*make_workload("[workload]\nkind = \"synthetic\"\nseed = 11\n" + lengths +
                                             "[workload.arrival]\nkind = \"poisson\"\nrate = 3.0\nrequests = 200\n"));
  ASSERT_EQ(poisson.size(), 200u);
  EXPECT_TRUE(same(poisson, composed));
  const auto gamma = drain(*make_workload(
      "[workload]\nkind = \"gamma\"\nrate = 3.0\ncv = 2.5\nmax_requests = 200\nseed = 11\n" + lengths));
  const auto composed_gamma =
      drain(*make_workload("[workload]\nkind = \"synthetic\"\nseed = 11\n" + lengths +
                           "[workload.arrival]\nkind = \"gamma\"\nrate = 3.0\ncv = 2.5\nrequests = 200\n"));
  EXPECT_TRUE(same(gamma, composed_gamma));
  // A duration stops the process before it: the same draws, cut.
  const auto cut = drain(*make_workload("[workload]\nkind = \"synthetic\"\nseed = 11\n" + lengths +
                                        "[workload.arrival]\nkind = \"poisson\"\nrate = 3.0\nduration_s = 20.0\n"));
  ASSERT_FALSE(cut.empty());
  ASSERT_LT(cut.size(), poisson.size());
  for (size_t i = 0; i < cut.size(); ++i) EXPECT_EQ(cut[i].arrival, poisson[i].arrival);
  EXPECT_LT(cut.back().arrival.ns(), 20'000'000'000);
  EXPECT_GE(poisson[cut.size()].arrival.ns(), 20'000'000'000);
}

TEST(ArrivalsTest, StagesRunBackToBackAndTagTheirRequests) {
  // Without drain: stage 0 sends at 0 and 0.5 s and lasts 1 s; after a 0.5 s interval stage 1
  // sends at 1.5 and 1.75 s; stage 2 (fixed count, rate 2 for 1 s: 2 sends) starts at 2.5 s and
  // its last send is at 3.5 s exactly.
  const auto rows = drain(*make_workload(synthetic(
      "kind = \"stages\"\ndrain = false\ninterval_s = 0.5\n"
      "[[workload.arrival.stages]]\nrate = 2.0\nduration_s = 1.0\ntype = \"constant\"\n"
      "[[workload.arrival.stages]]\nrate = 4.0\nduration_s = 0.5\ntype = \"constant\"\n"
      "[[workload.arrival.stages]]\nrate = 2.0\nduration_s = 1.0\n")));
  ASSERT_EQ(rows.size(), 6u);
  const std::vector<int64_t> t = times(rows);
  EXPECT_EQ(std::vector<int64_t>(t.begin(), t.begin() + 4), (std::vector<int64_t>{0, 500 * kMs, 1500 * kMs, 1750 * kMs}));
  EXPECT_GT(rows[4].arrival.ns(), 2500 * kMs);
  EXPECT_EQ(rows[5].arrival.ns(), 3500 * kMs);
  EXPECT_EQ(stages(rows), (std::vector<uint32_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_FALSE(make_workload(synthetic("kind = \"stages\"\ndrain = false\n[[workload.arrival.stages]]\n"
                                       "rate = 2.0\nduration_s = 1.0\n"))
                   ->closed_loop());
}

TEST(ArrivalsTest, DrainedStagesWaitForTheLastRequestOfTheStage) {
  auto source = make_workload(synthetic(
      "kind = \"stages\"\ninterval_s = 1.0\n"
      "[[workload.arrival.stages]]\nrate = 2.0\nduration_s = 1.0\ntype = \"constant\"\n"
      "[[workload.arrival.stages]]\nrate = 1.0\nduration_s = 2.0\ntype = \"constant\"\n"));
  ASSERT_TRUE(source->closed_loop());
  RequestSpec r;
  ASSERT_EQ(source->due(), core::Time());
  ASSERT_TRUE(source->next(r));
  EXPECT_EQ(r.arrival.ns(), 0);
  ASSERT_EQ(source->due(), core::Time::from_ns(500 * kMs));
  ASSERT_TRUE(source->next(r));
  EXPECT_EQ(r.arrival.ns(), 500 * kMs);
  EXPECT_EQ(source->due(), std::nullopt);  // stage 0 has sent everything; its requests are in flight
  source->request_done(0, core::Time::from_ns(700 * kMs));
  EXPECT_EQ(source->due(), std::nullopt);
  source->request_done(1, core::Time::from_ns(3000 * kMs));  // the last one ends after the duration
  // Stage 1 starts 1 s after the later of its predecessor's end (1 s) and its last request (3 s).
  ASSERT_EQ(source->due(), core::Time::from_ns(4000 * kMs));
  ASSERT_TRUE(source->next(r));
  EXPECT_EQ(r.stage, 1u);
  ASSERT_TRUE(source->next(r));
  EXPECT_EQ(r.arrival.ns(), 5000 * kMs);
  EXPECT_EQ(source->due(), std::nullopt);
  EXPECT_FALSE(source->next(r));
}

TEST(ArrivalsTest, ClosedLoopClientsSendWhenTheirRequestEnds) {
  auto source = make_workload(
      synthetic("kind = \"closed_loop\"\nconcurrency = 2\nrequests = 5\nthink_time_s = 0.5\n"));
  ASSERT_TRUE(source->closed_loop());
  RequestSpec r;
  ASSERT_EQ(source->due(), core::Time());
  ASSERT_TRUE(source->next(r));  // request 0, client A
  ASSERT_TRUE(source->next(r));  // request 1, client B
  EXPECT_EQ(r.arrival.ns(), 0);
  EXPECT_EQ(source->due(), std::nullopt);  // both clients wait
  source->request_done(0, core::Time::from_ns(1000 * kMs));
  ASSERT_EQ(source->due(), core::Time::from_ns(1500 * kMs));
  ASSERT_TRUE(source->next(r));  // request 2 at 1.5 s
  EXPECT_EQ(r.arrival.ns(), 1500 * kMs);
  source->request_done(1, core::Time::from_ns(2000 * kMs));
  source->request_done(2, core::Time::from_ns(2200 * kMs));
  ASSERT_EQ(source->due(), core::Time::from_ns(2500 * kMs));
  ASSERT_TRUE(source->next(r));
  EXPECT_EQ(r.arrival.ns(), 2500 * kMs);
  ASSERT_TRUE(source->next(r));
  EXPECT_EQ(r.arrival.ns(), 2700 * kMs);
  source->request_done(3, core::Time::from_ns(3000 * kMs));
  EXPECT_EQ(source->due(), std::nullopt);  // 5 requests sent
  EXPECT_FALSE(source->next(r));
  EXPECT_EQ(r.prompt_tokens, 100);
}

TEST(ArrivalsTest, ClosedLoopStopsSendingAtItsDuration) {
  auto source = make_workload(synthetic("kind = \"closed_loop\"\nconcurrency = 2\nduration_s = 2.0\n"));
  RequestSpec r;
  ASSERT_TRUE(source->next(r));
  ASSERT_TRUE(source->next(r));
  source->request_done(1, core::Time::from_ns(2500 * kMs));  // ready after the end: sends nothing
  EXPECT_EQ(source->due(), std::nullopt);
  source->request_done(0, core::Time::from_ns(1900 * kMs));  // still inside: sends at 1.9 s
  ASSERT_EQ(source->due(), core::Time::from_ns(1900 * kMs));
  ASSERT_TRUE(source->next(r));
  source->request_done(2, core::Time::from_ns(2000 * kMs));
  EXPECT_EQ(source->due(), std::nullopt);
}

TEST(ArrivalsTest, MaxRequestsAndTheClientTimeOutApplyToEveryArrivalKind) {
  auto source = make_workload(synthetic("kind = \"offline\"\nrequests = 10\n",
                                        "max_requests = 4\nclient_timeout_s = 300.0\n"));
  EXPECT_EQ(drain(*source).size(), 4u);
  EXPECT_EQ(source->client_timeout(), core::Duration::from_seconds(300));
  EXPECT_EQ(make_workload(synthetic("kind = \"offline\"\nrequests = 10\n"))->client_timeout(), std::nullopt);
  // The trace and generator kinds take it too.
  EXPECT_EQ(make_workload("[workload]\nkind = \"poisson\"\nrate = 1.0\nmax_requests = 3\nclient_timeout_s = 2.5\n"
                          "[workload.prompt]\nkind = \"fixed\"\nvalue = 1\n[workload.output]\nkind = \"fixed\"\n"
                          "value = 1\n")
                ->client_timeout(),
            core::Duration::from_ms(2500));
}

TEST(ArrivalsTest, ConfigurationErrorsNameTheKey) {
  std::string m = config_error([] { make_workload(synthetic("kind = \"poisson\"\nrate = 2.0\n")); });
  EXPECT_NE(m.find("workload.arrival.requests"), std::string::npos) << m;
  EXPECT_NE(m.find("give requests or duration_s"), std::string::npos) << m;
  m = config_error([] { make_workload(synthetic("kind = \"poisson_fixed_count\"\nrate = 2.0\n")); });
  EXPECT_NE(m.find("workload.arrival.duration_s"), std::string::npos) << m;
  m = config_error([] {
    make_workload(synthetic("kind = \"poisson_fixed_count\"\nrate = 1e6\nduration_s = 1e3\n"));
  });
  EXPECT_NE(m.find("workload.arrival.rate"), std::string::npos) << m;
  EXPECT_NE(m.find("at most 100000000"), std::string::npos) << m;
  m = config_error([] { make_workload(synthetic("kind = \"stages\"\n")); });
  EXPECT_NE(m.find("missing required list of tables [[workload.arrival.stages]]"), std::string::npos) << m;
  m = config_error([] {
    make_workload(synthetic("kind = \"stages\"\n[[workload.arrival.stages]]\nrate = 1.0\nduration_s = 1.0\n"
                            "type = \"burst\"\n"));
  });
  EXPECT_NE(m.find("workload.arrival.stages[0].type"), std::string::npos) << m;
  m = config_error([] { make_workload(synthetic("kind = \"closed_loop\"\nrequests = 3\n")); });
  EXPECT_NE(m.find("workload.arrival.concurrency"), std::string::npos) << m;
  m = config_error([] { make_workload("[workload]\nkind = \"synthetic\"\n[workload.prompt]\nkind = \"fixed\"\n"
                                      "value = 1\n[workload.output]\nkind = \"fixed\"\nvalue = 1\n"); });
  EXPECT_NE(m.find("workload.arrival.kind"), std::string::npos) << m;
  m = config_error([] { make_workload(synthetic("kind = \"offline\"\nrequests = 3\n", "client_timeout_s = 0.0\n")); });
  EXPECT_NE(m.find("workload.client_timeout_s"), std::string::npos) << m;
}

}  // namespace
}  // namespace servesim::traces
