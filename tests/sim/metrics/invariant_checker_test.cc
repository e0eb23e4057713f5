// The invariant checker on hand-made signal sequences: a consistent run passes, and each broken rule
// is reported with a message that names the invariant, the time, the replica and the request.
#include "sim/metrics/invariant_checker.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "sim/core/error.h"

namespace servesim::metrics {
namespace {

using core::Time;

Time at(int64_t ns) { return Time::from_ns(ns); }

core::ReplicaState state(uint32_t replica, int64_t t, int64_t queued, int64_t running, int64_t used,
                         int64_t total = 100) {
  core::ReplicaState s;
  s.replica = replica;
  s.time = at(t);
  s.queued = queued;
  s.running = running;
  s.kv_blocks_used = used;
  s.kv_blocks_total = total;
  return s;
}

core::IterationRecord iteration(uint32_t replica, int64_t start, int64_t duration, int64_t prefill, int64_t decode,
                                int64_t batch) {
  core::IterationRecord it;
  it.replica = replica;
  it.start = at(start);
  it.duration = core::Duration::from_ns(duration);
  it.prefill_tokens = prefill;
  it.decode_tokens = decode;
  it.batch_size = batch;
  it.flops = 1e9;
  it.bytes = 1e6;
  return it;
}

core::RequestRecord completed(uint64_t id, uint32_t replica, int64_t arrival, int64_t first, int64_t finish,
                              int64_t prompt, int64_t output) {
  core::RequestRecord r;
  r.id = id;
  r.replica = replica;
  r.decode_replica = replica;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  r.arrival = at(arrival);
  r.first_token = at(first);
  r.finish = at(finish);
  return r;
}

// One request of 10 prompt and 3 output tokens on replica 0 of 2: prefill [0, 100), two decodes.
void healthy_run(InvariantChecker& c) {
  c.on_replica_state(state(0, 0, 0, 0, 0));
  c.on_replica_state(state(1, 0, 0, 0, 0));
  c.on_arrival(0, at(0));
  c.on_iteration(iteration(0, 0, 100, 10, 0, 1));
  c.on_replica_state(state(0, 0, 0, 1, 1));
  const core::GapRun gap[] = {{50, 1}};
  c.on_iteration(iteration(0, 100, 50, 0, 1, 1));
  c.on_replica_state(state(0, 100, 0, 1, 1));
  c.on_token_gaps(gap);
  c.on_iteration(iteration(0, 150, 50, 0, 1, 1));
  c.on_replica_state(state(0, 150, 0, 1, 1));
  c.on_token_gaps(gap);
  c.on_request_done(completed(0, 0, 0, 100, 200, 10, 3));
  c.on_replica_state(state(0, 200, 0, 0, 0));
  // A second request rejected on arrival.
  c.on_arrival(1, at(300));
  core::RequestRecord rej;
  rej.id = 1;
  rej.replica = 1;
  rej.outcome = core::RequestOutcome::kRejectedContext;
  rej.prompt_tokens = 9000;
  rej.output_tokens = 1;
  rej.arrival = rej.first_token = rej.finish = at(300);
  c.on_request_done(rej);
}

struct Forwarded final : core::LifecycleObserver {
  int signals = 0;
  void on_arrival(uint64_t, core::Time) override { ++signals; }
  void on_request_done(const core::RequestRecord&) override { ++signals; }
  void on_iteration(const core::IterationRecord&) override { ++signals; }
  void on_token_gaps(std::span<const core::GapRun>) override { ++signals; }
  void on_replica_state(const core::ReplicaState&) override { ++signals; }
};

TEST(InvariantCheckerTest, AConsistentRunPassesAndIsForwarded) {
  Forwarded next;
  InvariantChecker c(&next);
  healthy_run(c);
  EXPECT_NO_THROW(c.check_drained());
  EXPECT_EQ(next.signals, 15);
  EXPECT_EQ(c.totals().arrived, 2u);
  EXPECT_EQ(c.totals().completed, 1u);
  EXPECT_EQ(c.totals().rejected, 1u);
  EXPECT_EQ(c.totals().token_gaps, 2u);
  EXPECT_GT(c.totals().checks, 40u);
}

// Runs `before` on a fresh checker (expected to pass), then `bad`, which must throw a core::Error
// whose message holds every needle.
void expect_violation(const std::function<void(InvariantChecker&)>& before,
                      const std::function<void(InvariantChecker&)>& bad, const std::vector<std::string>& needles) {
  InvariantChecker c;
  ASSERT_NO_THROW(before(c));
  try {
    bad(c);
    ADD_FAILURE() << "no violation reported";
  } catch (const core::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("invariant violated [", 0), 0u) << m;
    for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "'" << n << "' not in: " << m;
  }
}

void two_replicas(InvariantChecker& c) {
  c.on_replica_state(state(0, 0, 0, 0, 0));
  c.on_replica_state(state(1, 0, 0, 0, 0));
}

TEST(InvariantCheckerTest, TheClockNeverGoesBack) {
  expect_violation(
      [](InvariantChecker& c) {
        two_replicas(c);
        c.on_arrival(0, at(500));
      },
      [](InvariantChecker& c) { c.on_replica_state(state(0, 499, 1, 0, 0)); },
      {"[clock]", "499 ns", "500 ns", "went back"});
}

// Replicas running ahead (issue 18): replica 0 runs its decodes to t = 250 before replica 1's
// signals at t = 0 and 50 arrive. Request 0 (replica 0): prefill [0, 100), decodes [100, 150),
// [150, 200), [200, 250); request 1 (replica 1): prefill [0, 50). Each replica's own signals come in
// its own time order.
void replica_0_runs_ahead(InvariantChecker& c) {
  c.set_replicas_run_ahead(true);
  two_replicas(c);
  c.on_arrival(0, at(0));
  c.on_arrival(1, at(0));
  c.on_iteration(iteration(0, 0, 100, 10, 0, 1));
  c.on_replica_state(state(0, 0, 0, 1, 1));
  c.on_iteration(iteration(0, 100, 50, 0, 1, 1));
  c.on_replica_state(state(0, 100, 0, 1, 1));
  c.on_iteration(iteration(0, 150, 50, 0, 1, 1));
  c.on_replica_state(state(0, 150, 0, 1, 1));
  c.on_iteration(iteration(0, 200, 50, 0, 1, 1));
  c.on_replica_state(state(0, 200, 0, 1, 1));
  // Replica 1's signals at t = 0 and 50, after replica 0's at t = 200.
  c.on_iteration(iteration(1, 0, 50, 10, 0, 1));
  c.on_replica_state(state(1, 50, 0, 1, 1));
}

TEST(InvariantCheckerTest, ReplicasRunningAheadKeepTheirOwnClocks) {
  // On: replica 1 at t = 50 after replica 0 at t = 200 passes, and request 0's finish at 200 (the
  // end of replica 0's iteration [150, 200), not of its last one, [200, 250)) passes.
  InvariantChecker c;
  ASSERT_NO_THROW(replica_0_runs_ahead(c));
  EXPECT_NO_THROW(c.on_request_done(completed(0, 0, 0, 100, 200, 10, 3)));
  // A replica's own signal going back still fails, on the replica's own clock.
  expect_violation(replica_0_runs_ahead, [](InvariantChecker& c) { c.on_replica_state(state(0, 120, 0, 1, 1)); },
                   {"[clock]", "replica 0", "120 ns", "200 ns", "went back"});
  expect_violation(replica_0_runs_ahead, [](InvariantChecker& c) { c.on_iteration(iteration(1, 40, 10, 0, 1, 1)); },
                   {"[clock]", "replica 1", "40 ns", "50 ns", "went back"});
  // A completion must still end an iteration of its decode replica: none of replica 0's ends at 175.
  expect_violation(replica_0_runs_ahead,
                   [](InvariantChecker& c) { c.on_request_done(completed(0, 0, 0, 100, 175, 10, 3)); },
                   {"[requests]", "request 0", "no iteration of replica 0 ends then", "ends at 200 ns"});
  // Request-level signals keep the global clock: a preemption at 60 after a completion at 200.
  expect_violation(
      [](InvariantChecker& c) {
        replica_0_runs_ahead(c);
        c.on_request_done(completed(0, 0, 0, 100, 200, 10, 3));
      },
      [](InvariantChecker& c) { c.on_preempt(1, 1, at(60)); }, {"[clock]", "preemption", "60 ns", "went back"});
  // A replica must not run ahead across its failure: replica 0 signalled at 200, fails at 120.
  expect_violation(
      replica_0_runs_ahead,
      [](InvariantChecker& c) {
        c.on_fleet_event(core::FleetEvent{core::FleetEventKind::kReplicaDown, 0, at(120), 0, 0});
      },
      {"[clock]", "replica_down of replica 0", "200 ns", "ran ahead across it"});
}

TEST(InvariantCheckerTest, WithoutRunAheadReplicasShareTheGlobalClock) {
  // Off (the default): replica 1's signal at t = 50 after replica 0's at t = 100 fails.
  expect_violation(
      [](InvariantChecker& c) {
        two_replicas(c);
        c.on_arrival(0, at(0));
        c.on_arrival(1, at(0));
        c.on_iteration(iteration(0, 0, 100, 10, 0, 1));
        c.on_replica_state(state(0, 0, 0, 1, 1));
        c.on_iteration(iteration(0, 100, 50, 0, 1, 1));
        c.on_replica_state(state(0, 100, 0, 1, 1));
      },
      [](InvariantChecker& c) { c.on_replica_state(state(1, 50, 0, 1, 1)); },
      {"[clock]", "replica-state", "50 ns", "100 ns", "went back"});
}

TEST(InvariantCheckerTest, KvBlocksStayWithinZeroAndCapacity) {
  expect_violation(two_replicas, [](InvariantChecker& c) { c.on_replica_state(state(1, 5, 0, 0, 101)); },
                   {"[kv]", "replica 1", "101 KV blocks in use of 100"});
  expect_violation(two_replicas, [](InvariantChecker& c) { c.on_replica_state(state(0, 5, 0, 0, -1)); },
                   {"[kv]", "-1 KV blocks"});
  expect_violation(two_replicas, [](InvariantChecker& c) { c.on_replica_state(state(0, 5, 0, 0, 0, 99)); },
                   {"[kv]", "capacity changed from 100 to 99"});
}

TEST(InvariantCheckerTest, RequestsArriveAndLeaveExactlyOnce) {
  // Out of order.
  expect_violation(two_replicas, [](InvariantChecker& c) { c.on_arrival(1, at(0)); }, {"[requests]", "expected id 0"});
  // Finished twice.
  expect_violation(
      [](InvariantChecker& c) {
        healthy_run(c);
      },
      [](InvariantChecker& c) { c.on_request_done(completed(0, 0, 0, 100, 300, 10, 3)); },
      {"[requests]", "request 0", "already finished"});
  // Finished without arriving.
  expect_violation(two_replicas, [](InvariantChecker& c) { c.on_request_done(completed(7, 0, 0, 1, 2, 1, 1)); },
                   {"request 7", "never arrived"});
  // More requests on the replicas than in flight.
  expect_violation(
      [](InvariantChecker& c) {
        two_replicas(c);
        c.on_arrival(0, at(0));
        c.on_replica_state(state(0, 0, 1, 0, 0));
      },
      [](InvariantChecker& c) { c.on_replica_state(state(1, 0, 1, 0, 0)); },
      {"[requests]", "hold 2 queued or running", "only 1 are in flight"});
  // Never left.
  expect_violation(
      [](InvariantChecker& c) {
        two_replicas(c);
        c.on_arrival(0, at(0));
      },
      [](InvariantChecker& c) { c.check_drained(); }, {"[requests]", "1 requests arrived but never", "ids 0"});
}

TEST(InvariantCheckerTest, ARequestsOwnRecordIsConsistent) {
  auto arrived = [](InvariantChecker& c) {
    two_replicas(c);
    c.on_arrival(0, at(10));
    c.on_iteration(iteration(0, 10, 90, 5, 0, 1));
  };
  // Wrong arrival time.
  expect_violation(arrived, [](InvariantChecker& c) { c.on_request_done(completed(0, 0, 11, 100, 100, 5, 1)); },
                   {"reports arrival 11 ns", "arrived at 10 ns"});
  // Finishes when no iteration of its replica ends.
  expect_violation(arrived, [](InvariantChecker& c) { c.on_request_done(completed(0, 0, 10, 100, 120, 5, 1)); },
                   {"finished at 120 ns", "ended at 100 ns"});
  // Three tokens in one nanosecond.
  expect_violation(arrived, [](InvariantChecker& c) {
    c.on_iteration(iteration(0, 100, 1, 0, 1, 1));
    c.on_request_done(completed(0, 0, 10, 100, 101, 5, 3));
  }, {"[tokens]", "emitted 3 tokens within 1 ns"});
  // Preemptions not signalled.
  expect_violation(arrived, [](InvariantChecker& c) {
    auto r = completed(0, 0, 10, 100, 100, 5, 1);
    r.preemptions = 2;
    c.on_request_done(r);
  }, {"reports 2 preemptions, 0 were signalled"});
  // A rejected request that took time.
  expect_violation(arrived, [](InvariantChecker& c) {
    core::RequestRecord r = completed(0, 0, 10, 50, 100, 5, 1);
    r.outcome = core::RequestOutcome::kRejectedKvCapacity;
    c.on_request_done(r);
  }, {"rejected_kv_capacity", "leaves when it arrives"});
}

TEST(InvariantCheckerTest, IterationsDoNotOverlapAndAreWellFormed) {
  auto one = [](InvariantChecker& c) {
    two_replicas(c);
    c.on_iteration(iteration(0, 0, 100, 5, 0, 1));
  };
  expect_violation(one, [](InvariantChecker& c) { c.on_iteration(iteration(0, 99, 10, 0, 1, 1)); },
                   {"[iterations]", "replica 0", "overlaps", "ends at 100 ns"});
  expect_violation(one, [](InvariantChecker& c) { c.on_iteration(iteration(1, 100, 0, 0, 1, 1)); },
                   {"[iterations]", "lasts 0 ns"});
  expect_violation(one, [](InvariantChecker& c) { c.on_iteration(iteration(1, 100, 5, 0, 3, 2)); },
                   {"[iterations]", "batch size 2, 3 decode tokens"});
  expect_violation(one, [](InvariantChecker& c) { c.on_iteration(iteration(1, 100, 5, 1, 0, 2)); },
                   {"[iterations]", "every sequence"});
  expect_violation(one, [](InvariantChecker& c) { c.on_iteration(iteration(7, 100, 5, 1, 0, 1)); },
                   {"[replicas]", "replica 7"});
}

TEST(InvariantCheckerTest, TokensAddUp) {
  // A completed 3-token request with only one inter-token gap signalled.
  expect_violation(
      [](InvariantChecker& c) {
        two_replicas(c);
        c.on_arrival(0, at(0));
        c.on_iteration(iteration(0, 0, 100, 10, 0, 1));
        c.on_iteration(iteration(0, 100, 50, 0, 1, 1));
        const core::GapRun gap[] = {{50, 1}};
        c.on_token_gaps(gap);
        c.on_request_done(completed(0, 0, 0, 100, 150, 10, 3));
      },
      [](InvariantChecker& c) { c.check_drained(); },
      {"[tokens]", "3 output tokens", "2 after an inter-token gap", "1 gaps signalled delivered 1"});
  expect_violation(two_replicas, [](InvariantChecker& c) {
    const core::GapRun gap[] = {{0, 1}};
    c.on_token_gaps(gap);
  }, {"[tokens]", "gap of 0 ns"});
  expect_violation(two_replicas, [](InvariantChecker& c) {
    const core::GapRun gap[] = {{10, 1, 0}};
    c.on_token_gaps(gap);
  }, {"[tokens]", "delivering 0 tokens"});
}

TEST(InvariantCheckerTest, SpeculativeDecodesAddUp) {
  // A 5-token request: its first token from the prefill, then one decode that verified 3 drafts,
  // accepted 3 and emitted all 4 tokens in one chunk (one gap).
  auto run = [](int64_t emitted_gap_tokens) {
    return [emitted_gap_tokens](InvariantChecker& c) {
      two_replicas(c);
      c.on_arrival(0, at(0));
      c.on_iteration(iteration(0, 0, 100, 10, 0, 1));
      core::IterationRecord it = iteration(0, 100, 50, 0, 1, 1);
      it.verify_seqs = 1;
      it.draft_tokens = 3;
      it.accepted_tokens = 3;
      it.extra_decode_tokens = 3;
      c.on_iteration(it);
      const core::GapRun gap[] = {{50, 1, emitted_gap_tokens}};
      c.on_token_gaps(gap);
      c.on_request_done(completed(0, 0, 0, 100, 150, 10, 5));
    };
  };
  {
    InvariantChecker c;
    run(4)(c);
    EXPECT_NO_THROW(c.check_drained());
  }
  expect_violation(run(2), [](InvariantChecker& c) { c.check_drained(); },
                   {"[tokens]", "5 output tokens", "4 after an inter-token gap"});
  // More accepted than drafted.
  expect_violation(two_replicas, [](InvariantChecker& c) {
    core::IterationRecord it = iteration(0, 0, 50, 0, 1, 1);
    it.verify_seqs = 1;
    it.draft_tokens = 2;
    it.accepted_tokens = 3;
    c.on_iteration(it);
  }, {"[iterations]", "verifying 2 draft tokens, 3 accepted"});
}

// A timed-out request: its tokens' gaps count (tokens produced - 1), its times hold together.
core::RequestRecord timed_out(uint64_t id, int64_t arrival, int64_t first, int64_t finish, int64_t generated) {
  core::RequestRecord r = completed(id, 0, arrival, first, finish, 10, 5);
  r.outcome = core::RequestOutcome::kTimedOut;
  r.generated_tokens = generated;
  r.client_finish = at(arrival + 120);
  return r;
}

TEST(InvariantCheckerTest, TimedOutRequestsKeepTheirContract) {
  // Request 0 produced 3 of 5 tokens (prefill [0, 100), decodes to 200) before its client gave up.
  auto run = [](InvariantChecker& c) {
    two_replicas(c);
    c.on_arrival(0, at(0));
    c.on_iteration(iteration(0, 0, 100, 10, 0, 1));
    c.on_iteration(iteration(0, 100, 50, 0, 1, 1));
    c.on_iteration(iteration(0, 150, 50, 0, 1, 1));
    const core::GapRun gaps[] = {{50, 2}};
    c.on_token_gaps(gaps);
  };
  {
    InvariantChecker c;
    run(c);
    c.on_request_done(timed_out(0, 0, 100, 200, 3));
    EXPECT_NO_THROW(c.check_drained());
    EXPECT_EQ(c.totals().timed_out, 1u);
    EXPECT_EQ(c.totals().timed_out_gaps, 2);
  }
  expect_violation(run, [](InvariantChecker& c) { c.on_request_done(timed_out(0, 0, 100, 200, 6)); },
                   {"[tokens]", "produced 6 of 5 output tokens"});
  expect_violation(run, [](InvariantChecker& c) { c.on_request_done(timed_out(0, 0, 0, 200, 3)); },
                   {"[requests]", "produced 3 tokens, first at 0 ns"});
  expect_violation(run, [](InvariantChecker& c) { c.on_request_done(timed_out(0, 0, 150, 200, 0)); },
                   {"[requests]", "produced 0 tokens"});
  expect_violation(
      run,
      [](InvariantChecker& c) {
        core::RequestRecord r = timed_out(0, 0, 100, 200, 3);
        r.client_finish = at(0);
        c.on_request_done(r);
      },
      {"[requests]", "client gave up at 0 ns"});
  // Two gaps signalled, but the record says one token: the totals disagree at the end.
  expect_violation(
      [&](InvariantChecker& c) {
        run(c);
        c.on_request_done(timed_out(0, 0, 100, 200, 1));
      },
      [](InvariantChecker& c) { c.check_drained(); }, {"[tokens]", "so 0 after an inter-token gap", "the 2 gaps signalled delivered 2"});
}

TEST(InvariantCheckerTest, PrefixHitsAndTransfersAddUp) {
  auto arrived = [](InvariantChecker& c) {
    two_replicas(c);
    c.on_arrival(0, at(0));
  };
  core::PrefixLookup bad_lookup;
  bad_lookup.replica = 0;
  bad_lookup.prompt_units = 2;
  bad_lookup.matched_units = 3;
  expect_violation(arrived, [&](InvariantChecker& c) { c.on_prefix_lookup(bad_lookup); },
                   {"[prefix]", "matched 3 of 2 units"});
  // A request's first lookup is signalled once (one asked again while it waits counts at its
  // admission), and its record reports that lookup's hit as its cached tokens.
  core::PrefixLookup first;
  first.id = 0;
  first.replica = 0;
  first.prompt_units = 2;
  first.matched_units = 2;
  first.prompt_tokens = 16;
  first.hit_tokens = 8;
  expect_violation(
      [&](InvariantChecker& c) {
        arrived(c);
        c.on_prefix_lookup(first);
      },
      [&](InvariantChecker& c) { c.on_prefix_lookup(first); }, {"[prefix]", "request 0 signalled a second first lookup"});
  core::RequestRecord rec;
  rec.id = 0;
  rec.replica = 0;
  rec.prompt_tokens = 16;
  rec.output_tokens = 1;
  rec.cached_tokens = 16;
  rec.arrival = at(0);
  rec.first_token = rec.finish = at(100);
  expect_violation(
      [&](InvariantChecker& c) {
        arrived(c);
        c.on_prefix_lookup(first);
      },
      [&](InvariantChecker& c) { c.on_request_done(rec); }, {"[prefix]", "reports 16 cached tokens, its first lookup hit 8"});
  core::KvTransfer same;
  same.id = 0;
  same.from_replica = same.to_replica = 1;
  same.bytes = 10;
  expect_violation(arrived, [&](InvariantChecker& c) { c.on_kv_transfer(same); }, {"[transfers]", "from replica 1 to 1"});
  // The record's bytes disagree with the transfers'.
  expect_violation(
      [](InvariantChecker& c) {
        two_replicas(c);
        c.on_arrival(0, at(0));
        c.on_iteration(iteration(0, 0, 100, 10, 0, 1));
        core::KvTransfer t;
        t.id = 0;
        t.from_replica = 0;
        t.to_replica = 1;
        t.bytes = 1000;
        t.start = at(100);
        t.end = at(110);
        c.on_kv_transfer(t);
        c.on_iteration(iteration(1, 110, 10, 0, 1, 1));
      },
      [](InvariantChecker& c) {
        auto r = completed(0, 0, 0, 100, 120, 10, 2);
        r.decode_replica = 1;
        r.kv_transfer_bytes = 999;
        c.on_request_done(r);
      },
      {"[transfers]", "999", "1000"});
}

}  // namespace
}  // namespace servesim::metrics
