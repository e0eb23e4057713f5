// Client retries ([retries], issue 17): a failed request is sent again as a new request after an
// exponential back-off, counted from when the client learns of the failure. Every case runs
// through the invariant checker (Harness); every time is computed by hand from the linear cost
// model (10 ms per iteration, whatever the batch) and the back-off formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tests/sim/cluster/cluster_harness.h"
#include "tests/traces/trace_test_util.h"

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


// ---- closed-loop clients ----
// A closed-loop client that retries stays busy from its first send to the end of its last attempt:
// its think time and its next request wait for that. Prompts of 10 tokens, fixed outputs; the same
// linear cost model (10 ms per iteration, whatever the batch).
std::unique_ptr<traces::ArrivalSource> closed_loop(const std::string& arrival, int64_t output,
                                                   double timeout_s) {
  return traces::testing::make_workload("[workload]\nkind = \"synthetic\"\nclient_timeout_s = " +
                                        std::to_string(timeout_s) +
                                        "\n[workload.prompt]\nkind = \"fixed\"\nvalue = 10\n"
                                        "[workload.output]\nkind = \"fixed\"\nvalue = " +
                                        std::to_string(output) + "\n[workload.arrival]\n" + arrival);
}

std::map<uint64_t, core::RequestRecord> by_id(const Harness& h) {
  std::map<uint64_t, core::RequestRecord> out;
  for (const auto& r : h.obs.done) out[r.id] = r;
  return out;
}

// Two clients, one sequence at a time (max_num_seqs = 1), 5 output tokens (50 ms of service), a
// 55 ms time-out, think 1 s, 4 client requests, 2 attempts, back-off 100 ms, no jitter.
//   r0 (client 0) runs [0, 50): answered; client 0 thinks until 1050.
//   r1 (client 1) waits behind r0, prefills [50, 60); its client gives up at 55 (the engine lets
//   go at 60) and retries 100 ms later: r2 (attempt 1) at 155 runs [155, 205), within its 55 ms.
//   Client 1 thinks from its retry's answer: its next request r4 at 205 + 1000 = 1205 (without
//   retries it would have been sent at 55 + 1000 = 1055, and r2 would not exist).
//   r3 (client 0) at 1050 runs [1050, 1100); r4 at 1205 runs [1205, 1255). The 4 client requests
//   are 5 attempts; `requests` counts client requests, not attempts.
TEST(ClosedLoopRetriesTest, AClientRetriesBeforeItsThinkTimeAndItsNextRequest) {
  ClusterSetup s;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\nmax_num_seqs = 1\n";
  Harness h(closed_loop("kind = \"closed_loop\"\nconcurrency = 2\nrequests = 4\nthink_time_s = 1\n", 5, 0.055), s);
  h.cluster->set_retries(policy(2, 0.1));
  h.run();
  const auto r = by_id(h);
  ASSERT_EQ(r.size(), 5u);
  const double sent[] = {0, 0, 155, 1050, 1205};
  const double first[] = {0, 0, 0, 1050, 1205};
  const uint32_t attempt[] = {0, 0, 1, 0, 0};
  const core::RequestOutcome done = core::RequestOutcome::kCompleted, out = core::RequestOutcome::kTimedOut;
  const core::RequestOutcome outcome[] = {done, out, done, done, done};
  const double client_end[] = {50, 55, 205, 1100, 1255};
  for (uint64_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r.at(i).arrival, ms(sent[i]));
    EXPECT_EQ(r.at(i).first_sent, ms(first[i]));
    EXPECT_EQ(r.at(i).attempt, attempt[i]);
    EXPECT_EQ(r.at(i).outcome, outcome[i]);
    EXPECT_EQ(r.at(i).client_finish, ms(client_end[i]));
    EXPECT_EQ(r.at(i).retried, i == 1);
  }
  EXPECT_EQ(r.at(1).finish, ms(60));        // the engine let go of the timed-out attempt here
  EXPECT_EQ(r.at(2).first_token, ms(165));  // TTFT 165 ms from the client's first send
  ASSERT_EQ(h.obs.fleet.size(), 1u);
  EXPECT_EQ(h.obs.fleet[0].kind, core::FleetEventKind::kRequestRetried);
  EXPECT_EQ(h.obs.fleet[0].time, ms(155));
  EXPECT_EQ(h.obs.fleet[0].request, 2u);
  EXPECT_EQ(h.obs.fleet[0].value, 1.0);
  EXPECT_EQ(h.sim.now(), ms(1255));
}

// One client, 5 output tokens, a 15 ms time-out (every attempt times out), 2 attempts, back-off
// 100 ms, think 4 ms, 2 client requests.
//   r0 at 0 prefills [0, 10), decodes [10, 20); given up at 15, retried at 115.
//   r1 (attempt 1) prefills [115, 125), decodes [125, 135); given up at 130: the client's last
//   attempt, so it gives up and thinks 4 ms: r2 at 134 (the engine lets go of r1 at 135).
//   r2 prefills [135, 145), decodes [145, 155); given up at 149, retried at 249.
//   r3 (attempt 1) prefills [249, 259), decodes [259, 269); given up at 264: both client
//   requests given up, 4 attempts, the run ends when the engine lets go of r3 at 269.
TEST(ClosedLoopRetriesTest, AClientThatGivesUpThinksAndSendsItsNextRequest) {
  Harness h(closed_loop("kind = \"closed_loop\"\nconcurrency = 1\nrequests = 2\nthink_time_s = 0.004\n", 5, 0.015),
            ClusterSetup());
  h.cluster->set_retries(policy(2, 0.1));
  h.run();
  const auto r = by_id(h);
  ASSERT_EQ(r.size(), 4u);
  const double sent[] = {0, 115, 134, 249};
  const double first[] = {0, 0, 134, 134};
  const double finish[] = {20, 135, 155, 269};
  for (uint64_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r.at(i).outcome, core::RequestOutcome::kTimedOut);
    EXPECT_EQ(r.at(i).arrival, ms(sent[i]));
    EXPECT_EQ(r.at(i).first_sent, ms(first[i]));
    EXPECT_EQ(r.at(i).client_finish, ms(sent[i] + 15));
    EXPECT_EQ(r.at(i).finish, ms(finish[i]));
    EXPECT_EQ(r.at(i).attempt, i % 2);
    EXPECT_EQ(r.at(i).retried, i % 2 == 0);
  }
  EXPECT_EQ(h.sim.now(), ms(269));
}

// duration_s stops new client requests, not retries: a client in the middle of a request retries
// it past the end (as open-loop clients do), and the run still ends, as each client request has at
// most max_attempts attempts. One client, duration 100 ms, the same 50 ms requests and 15 ms
// time-out: r0 at 0 is given up at 15 and retried at 115 (past 100: sent); given up at 130, its
// client would send its next request at 134, past the duration: none.
TEST(ClosedLoopRetriesTest, RetriesOfARequestSentBeforeTheDurationAreSentAfterIt) {
  Harness h(closed_loop("kind = \"closed_loop\"\nconcurrency = 1\nduration_s = 0.1\nthink_time_s = 0.004\n", 5,
                        0.015),
            ClusterSetup());
  h.cluster->set_retries(policy(2, 0.1));
  h.run();
  const auto r = by_id(h);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r.at(1).arrival, ms(115));
  EXPECT_EQ(r.at(1).attempt, 1u);
  EXPECT_EQ(h.sim.now(), ms(135));
}

// Draining stages wait for the last attempt of their client requests. Stage 0 sends at 0 and 10
// ms (100 req/s for 20 ms), 2 output tokens, a 25 ms time-out, 2 attempts, back-off 100 ms.
//   r0 prefills [0, 10), decodes [10, 20): answered at 20.
//   r1 (sent at 10, after the replica planned [10, 20)) prefills [20, 30), decodes [30, 40); its
//   client gives up at 35 and retries at 135: r2 runs [135, 155), answered within its 25 ms.
//   Stage 0's last client request ends at 155 (without retries: 35), so stage 1 starts 5 ms later,
//   at 160: r3 at 160 runs [160, 180); r4 at 170 prefills [180, 190), decodes [190, 200), is given
//   up at 195 and retried at 295: r5 runs [295, 315). Retries keep their stage.
TEST(ClosedLoopRetriesTest, DrainedStagesWaitForTheLastAttempt) {
  Harness h(closed_loop("kind = \"stages\"\ninterval_s = 0.005\n"
                        "[[workload.arrival.stages]]\nrate = 100.0\nduration_s = 0.02\ntype = \"constant\"\n"
                        "[[workload.arrival.stages]]\nrate = 100.0\nduration_s = 0.02\ntype = \"constant\"\n",
                        2, 0.025),
            ClusterSetup());
  h.cluster->set_retries(policy(2, 0.1));
  h.run();
  const auto r = by_id(h);
  ASSERT_EQ(r.size(), 6u);
  const double sent[] = {0, 10, 135, 160, 170, 295};
  const uint32_t stage[] = {0, 0, 0, 1, 1, 1};
  const uint32_t attempt[] = {0, 0, 1, 0, 0, 1};
  for (uint64_t i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r.at(i).arrival, ms(sent[i]));
    EXPECT_EQ(r.at(i).stage, stage[i]);
    EXPECT_EQ(r.at(i).attempt, attempt[i]);
    EXPECT_EQ(r.at(i).outcome, i == 1 || i == 4 ? core::RequestOutcome::kTimedOut : core::RequestOutcome::kCompleted);
  }
  EXPECT_EQ(r.at(2).finish, ms(155));
  EXPECT_EQ(r.at(5).finish, ms(315));
}

// `concurrency` clients, however many attempts each makes: 4 clients, a time-out that a queue of
// more than two requests misses, 3 attempts with full jitter, three seeds. At every instant at most 4 client requests are
// open (from a first send to the client-side end of the attempt not retried) and at most 4
// attempts are in flight at their clients ([send, client end)); every client request is answered
// or given up once.
TEST(ClosedLoopRetriesTest, ClientsNeverHaveMoreThanConcurrencyRequestsInFlight) {
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    ClusterSetup s;
    s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\nmax_num_seqs = 2\n";
    Harness h(closed_loop("kind = \"closed_loop\"\nconcurrency = 4\nrequests = 60\nthink_time_s = 0.003\n", 4,
                          0.075),
              s);
    sim::RetryPolicy p = policy(3, 0.02, 1.0);
    p.seed = seed;
    h.cluster->set_retries(p);
    h.run();
    std::vector<std::pair<int64_t, int>> open, flight;  // (time, +1 / -1); ends sort before starts
    uint64_t clients = 0, answered = 0, gave_up = 0, retried = 0;
    for (const auto& r : h.obs.done) {
      EXPECT_GE(r.client_finish, r.arrival);
      flight.push_back({r.arrival.ns(), +1});
      flight.push_back({r.client_finish.ns(), -1});
      if (r.attempt == 0) {
        ++clients;
        open.push_back({r.arrival.ns(), +1});
      }
      if (r.retried) {
        ++retried;
      } else {
        open.push_back({r.client_finish.ns(), -1});
        (r.outcome == core::RequestOutcome::kCompleted ? answered : gave_up) += 1;
      }
    }
    auto peak = [](std::vector<std::pair<int64_t, int>> v) {
      std::sort(v.begin(), v.end());
      int now = 0, most = 0;
      for (const auto& [t, d] : v) most = std::max(most, now += d);
      return most;
    };
    EXPECT_EQ(clients, 60u);
    EXPECT_EQ(answered + gave_up, clients);  // conservation: each client request ends once
    EXPECT_GT(retried, 10u);                 // the case does exercise retries ...
    EXPECT_GT(gave_up, 0u);                  // ... and clients that give up
    EXPECT_EQ(peak(open), 4);
    EXPECT_LE(peak(flight), 4);
  }
}

}  // namespace
}  // namespace servesim::testing
