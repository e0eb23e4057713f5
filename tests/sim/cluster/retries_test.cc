// Client retries ([retries], issue 17): a failed request is sent again as a new request after an
// exponential back-off, counted from when the client learns of the failure. Every case runs
// through the invariant checker (Harness); every time is computed by hand from the linear cost
// model (10 ms per iteration, whatever the batch) and the back-off formula.
#include <gtest/gtest.h>

#include <map>

#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::testing {
namespace {

core::Time ms(double v) { return core::Time::from_ns(static_cast<int64_t>(v * 1e6 + 0.5)); }

sim::RetryPolicy policy(uint32_t attempts, double backoff_s, double jitter = 0) {
  sim::RetryPolicy p;
  p.max_attempts = attempts;
  p.backoff_s = backoff_s;
  p.multiplier = 2;
  p.max_backoff_s = 8;
  p.jitter = jitter;
  p.seed = 5;
  return p;
}

// One request that can never finish within its client's 35 ms (10 output tokens take 100 ms).
// Attempt 0: sent at 0, given up at 35 ms; retry 1 waits 100 ms: sent at 135, given up at 170;
// retry 2 waits 200 ms: sent at 370, given up at 405. Three attempts, then the client gives up.
TEST(RetriesTest, TimedOutRequestsAreSentAgainAfterAnExponentialBackOff) {
  ClusterSetup s;
  s.client_timeout = core::Duration::from_seconds(0.035);
  Harness h({spec(0, 8, 10)}, s);
  h.cluster->set_retries(policy(3, 0.1));
  h.run();

  ASSERT_EQ(h.obs.done.size(), 3u);
  std::map<uint64_t, core::RequestRecord> by_id;
  for (const auto& r : h.obs.done) by_id[r.id] = r;
  const double sent[] = {0, 135, 370};
  for (uint64_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const core::RequestRecord& r = by_id.at(i);
    EXPECT_EQ(r.outcome, core::RequestOutcome::kTimedOut);
    EXPECT_EQ(r.arrival, ms(sent[i]));
    EXPECT_EQ(r.client_finish, ms(sent[i] + 35));
    EXPECT_EQ(r.attempt, i);
    EXPECT_EQ(r.first_sent, ms(0));
    EXPECT_EQ(r.retried, i < 2);  // the third is the client's last
  }
  // Each retry is signalled at its send, naming the replica the previous attempt failed on.
  ASSERT_EQ(h.obs.fleet.size(), 2u);
  for (uint64_t k = 0; k < 2; ++k) {
    EXPECT_EQ(h.obs.fleet[k].kind, core::FleetEventKind::kRequestRetried);
    EXPECT_EQ(h.obs.fleet[k].time, ms(sent[k + 1]));
    EXPECT_EQ(h.obs.fleet[k].request, k + 1);
    EXPECT_EQ(h.obs.fleet[k].value, static_cast<double>(k + 1));
    EXPECT_EQ(h.obs.fleet[k].replica, 0u);
  }
  EXPECT_EQ(h.cluster->counters().arrived, 3u);
  EXPECT_EQ(h.cluster->counters().timed_out, 3u);
}

// The back-off doubles up to max_backoff_s: backoff 3 s, max 8 s: the retries wait 3, 6, 8, 8 s.
TEST(RetriesTest, BackOffStopsGrowingAtItsMaximum) {
  ClusterSetup s;
  s.client_timeout = core::Duration::from_seconds(0.035);
  Harness h({spec(0, 8, 10)}, s);
  h.cluster->set_retries(policy(5, 3));
  h.run();
  ASSERT_EQ(h.obs.done.size(), 5u);
  std::map<uint64_t, core::Time> sent;
  for (const auto& r : h.obs.done) sent[r.id] = r.arrival;
  const double expected[] = {0, 3035, 3035 + 35 + 6000, 9070 + 35 + 8000, 17105 + 35 + 8000};
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(sent.at(i), ms(expected[i])) << i;
}

// A retry that succeeds. One replica that runs one sequence at a time (max_num_seqs = 1); A (14
// output tokens) runs [0, 140 ms); B, sent at 0 with a 155 ms time-out, starts at 140 (prefill
// [140, 150), first token at 150) and is given up at 155 (the engine lets go at 160). Its retry,
// sent at 155 + 100 = 255 ms to an idle replica, prefills [255, 265) and decodes 7 more tokens:
// done at 335 ms. The client's view, from its first send: TTFT 265 ms, E2E 335 ms.
TEST(RetriesTest, ARetryThatSucceedsIsMeasuredFromTheFirstSend) {
  ClusterSetup s;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\nmax_num_seqs = 1\n";
  s.client_timeout = core::Duration::from_seconds(0.155);
  Harness h({spec(0, 8, 14), spec(0, 8, 8)}, s);
  h.cluster->set_retries(policy(3, 0.1));
  h.run();

  ASSERT_EQ(h.obs.done.size(), 3u);
  const core::RequestRecord* a = h.obs.find(0);
  const core::RequestRecord* b = h.obs.find(1);
  const core::RequestRecord* b2 = h.obs.find(2);
  ASSERT_TRUE(a && b && b2);
  EXPECT_EQ(a->outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(a->finish, ms(140));
  EXPECT_FALSE(a->retried);
  EXPECT_EQ(b->outcome, core::RequestOutcome::kTimedOut);
  EXPECT_TRUE(b->retried);
  EXPECT_EQ(b->generated_tokens, 2);  // tokens at 150 and 160 ms (the engine lets go at 160)
  EXPECT_EQ(b->finish, ms(160));
  EXPECT_EQ(b2->outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(b2->attempt, 1u);
  EXPECT_EQ(b2->first_sent, ms(0));
  EXPECT_EQ(b2->arrival, ms(255));
  EXPECT_EQ(b2->first_token, ms(265));
  EXPECT_EQ(b2->finish, ms(335));
  EXPECT_FALSE(b2->retried);
}

// A request lost with a failed replica (on_failure = fail) is retried: replica 0 fails at 35 ms
// (the request has tokens at 10, 20, 30 ms) and is back at 50 ms; the retry is sent at 35 + 100 =
// 135 ms and runs from scratch: prefill [135, 145), nine decodes: done at 235 ms. With
// after_failure = false the failure is the client's last word.
TEST(RetriesTest, RequestsLostWithAFailedReplicaAreRetriedUnlessTurnedOff) {
  for (bool after_failure : {true, false}) {
    SCOPED_TRACE(after_failure);
    Harness h({spec(0, 8, 10)}, ClusterSetup());
    sim::FaultPlan plan;
    sim::FaultEvent e;
    e.replica = 0;
    e.at = ms(35);
    e.repair = core::Duration::from_seconds(0.015);
    plan.events = {e};
    plan.recompute = false;
    h.cluster->set_faults(plan);
    sim::RetryPolicy p = policy(2, 0.1);
    p.after_failure = after_failure;
    h.cluster->set_retries(p);
    h.run();
    const core::RequestRecord* lost = h.obs.find(0);
    ASSERT_TRUE(lost);
    EXPECT_EQ(lost->outcome, core::RequestOutcome::kFailed);
    EXPECT_EQ(lost->retried, after_failure);
    if (after_failure) {
      ASSERT_EQ(h.obs.done.size(), 2u);
      const core::RequestRecord* retry = h.obs.find(1);
      ASSERT_TRUE(retry);
      EXPECT_EQ(retry->outcome, core::RequestOutcome::kCompleted);
      EXPECT_EQ(retry->arrival, ms(135));
      EXPECT_EQ(retry->finish, ms(235));
    } else {
      EXPECT_EQ(h.obs.done.size(), 1u);
    }
  }
}

// A request that can never fit is not retried (a client sees a 400, not a 429): the prompt is
// longer than the context.
TEST(RetriesTest, RequestsThatCanNeverFitAreNotRetried) {
  ClusterSetup s;
  s.max_context = 64;
  Harness h({spec(0, 100, 10)}, s);
  h.cluster->set_retries(policy(3, 0.1));
  h.run();
  ASSERT_EQ(h.obs.done.size(), 1u);
  EXPECT_EQ(h.obs.done[0].outcome, core::RequestOutcome::kRejectedContext);
  EXPECT_FALSE(h.obs.done[0].retried);
}

// Jitter: with full jitter (1) each delay is uniform in [0, backoff): 200 requests that all time
// out, each retried once after 1 s at most; the delays spread over the range, and the same seed
// gives the same sends.
TEST(RetriesTest, FullJitterSpreadsTheRetriesOverTheBackOff) {
  auto sends = [](uint64_t seed) {
    ClusterSetup s;
    s.client_timeout = core::Duration::from_seconds(0.035);
    std::vector<traces::RequestSpec> specs;
    for (int i = 0; i < 200; ++i) specs.push_back(spec(i * 0.001, 8, 10));
    Harness h(std::move(specs), s);
    sim::RetryPolicy p = policy(2, 1.0, 1.0);
    p.seed = seed;
    h.cluster->set_retries(p);
    h.run();
    std::vector<double> delays;  // retry send - the first attempt's give-up, s
    for (const auto& r : h.obs.done)
      if (r.attempt == 1) delays.push_back((r.arrival - (r.first_sent + core::Duration::from_seconds(0.035))).seconds());
    return delays;
  };
  const std::vector<double> d = sends(5);
  ASSERT_EQ(d.size(), 200u);
  int low = 0, high = 0;
  for (double x : d) {
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
    low += x < 0.25;
    high += x >= 0.75;
  }
  // A uniform delay puts 50 of 200 in each quarter on average; 20 is more than 4 sigma below.
  EXPECT_GT(low, 20);
  EXPECT_GT(high, 20);
  EXPECT_EQ(sends(5), d);
  EXPECT_NE(sends(6), d);
}

}  // namespace
}  // namespace servesim::testing
