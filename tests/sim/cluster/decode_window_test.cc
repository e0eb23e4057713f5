// Decode runs handled in line (Replica::decode_window): while a replica's next decode iteration is
// the next event of the whole simulation and changes nothing but token counts, the replica runs it
// itself, without the event queue and without a walk over its batch. It must give exactly what the
// same run through the queue gives: every iteration, token gap, request record, preemption and
// replica state, and the same number of events handled.
#include <gtest/gtest.h>

#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::sim {
namespace {

using testing::ClusterSetup;
using testing::Harness;
using testing::spec;

constexpr int64_t kMs = 1'000'000;

std::unique_ptr<Harness> run(const std::vector<traces::RequestSpec>& specs, const ClusterSetup& s, bool windows) {
  auto h = std::make_unique<Harness>(specs, s);
  for (const auto& r : h->cluster->replicas()) r->set_decode_windows(windows);
  h->run();
  return h;
}

uint64_t in_line(const Harness& h) {
  uint64_t n = 0;
  for (const auto& r : h.cluster->replicas()) n += r->in_line_iterations();
  return n;
}

// Everything the observers were told, and the engine's count of events, must be the same.
void expect_same(const Harness& a, const Harness& b) {
  ASSERT_EQ(a.obs.iterations.size(), b.obs.iterations.size());
  for (size_t i = 0; i < a.obs.iterations.size(); ++i) {
    const core::IterationRecord &x = a.obs.iterations[i], &y = b.obs.iterations[i];
    ASSERT_EQ(x.replica, y.replica) << i;
    ASSERT_EQ(x.start, y.start) << i;
    ASSERT_EQ(x.duration, y.duration) << i;
    ASSERT_EQ(x.decode_tokens, y.decode_tokens) << i;
    ASSERT_EQ(x.prefill_tokens, y.prefill_tokens) << i;
    ASSERT_EQ(x.flops, y.flops) << i;
    ASSERT_EQ(x.bytes, y.bytes) << i;
  }
  ASSERT_EQ(a.obs.done.size(), b.obs.done.size());
  for (size_t i = 0; i < a.obs.done.size(); ++i) {
    const core::RequestRecord &x = a.obs.done[i], &y = b.obs.done[i];
    EXPECT_EQ(x.id, y.id) << i;
    EXPECT_EQ(x.replica, y.replica) << i;
    EXPECT_EQ(x.outcome, y.outcome) << i;
    EXPECT_EQ(x.first_token, y.first_token) << i;
    EXPECT_EQ(x.finish, y.finish) << i;
    EXPECT_EQ(x.generated_tokens, y.generated_tokens) << i;
    EXPECT_EQ(x.preemptions, y.preemptions) << i;
  }
  EXPECT_EQ(a.obs.gaps, b.obs.gaps);
  EXPECT_EQ(a.obs.gap_tokens, b.obs.gap_tokens);
  EXPECT_EQ(a.obs.preempted, b.obs.preempted);
  ASSERT_EQ(a.obs.states.size(), b.obs.states.size());
  for (size_t i = 0; i < a.obs.states.size(); ++i) {
    EXPECT_EQ(a.obs.states[i].replica, b.obs.states[i].replica) << i;
    EXPECT_EQ(a.obs.states[i].time, b.obs.states[i].time) << i;
    EXPECT_EQ(a.obs.states[i].queued, b.obs.states[i].queued) << i;
    EXPECT_EQ(a.obs.states[i].running, b.obs.states[i].running) << i;
    EXPECT_EQ(a.obs.states[i].kv_blocks_used, b.obs.states[i].kv_blocks_used) << i;
  }
  EXPECT_EQ(a.sim.events_processed(), b.sim.events_processed());
  EXPECT_EQ(a.sim.now(), b.sim.now());
}

// One request, prompt 3, output 10, blocks of 4 tokens, 10 ms iterations. By hand: the prefill
// [0, 10) emits token 1. It completed the prompt, nothing waits and nothing else is queued, so from
// 10 ms the replica runs its decodes in line: iteration j (j = 0, 1, ...) decodes at context 4 + j
// and emits token 2 + j (the first, j = 0, is the request's second token: its gap told on its
// own); it stops before the end of the iteration that emits the last token (K = 10 - 1 - 1 = 8:
// j = 0..7, contexts 4..11, ending at 20, ..., 90 ms), which the run starts too (context 12) and
// leaves to the queue: its end at 100 ms. Blocks: the context passes 4 at j = 1 (20 ms) and 8 at
// j = 5 (60 ms) (blocks 2 and 3). So 8 iterations in line; the gaps are all 10 ms.
TEST(DecodeWindowTest, RunsTheDecodesInLineUpToTheIterationThatFinishes) {
  ClusterSetup s;
  s.block_size = 4;
  s.base_s = 0.010;
  std::unique_ptr<Harness> h = run({spec(0.0, 3, 10)}, s, true);
  EXPECT_EQ(in_line(*h), 8u);
  ASSERT_EQ(h->cost.shapes.size(), 10u);
  const std::vector<int64_t> context = {0, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(h->cost.shapes[i].decode_context_tokens, context[i]) << i;
  ASSERT_EQ(h->obs.done.size(), 1u);
  EXPECT_EQ(h->obs.done[0].finish.ns(), 100 * kMs);
  EXPECT_EQ(h->obs.gaps, std::vector<int64_t>(9, 10 * kMs));
  // The KV the replica reported: 1 block from the prefill, 2 from j = 1 (at 20 ms), 3 from j = 5
  // (at 60 ms); 0 once the request has left.
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (const core::ReplicaState& st : h->obs.states) blocks.emplace_back(st.time.ns() / kMs, st.kv_blocks_used);
  EXPECT_NE(std::find(blocks.begin(), blocks.end(), std::pair<int64_t, int64_t>{20, 2}), blocks.end());
  EXPECT_NE(std::find(blocks.begin(), blocks.end(), std::pair<int64_t, int64_t>{60, 3}), blocks.end());
  EXPECT_EQ(blocks.back(), (std::pair<int64_t, int64_t>{100, 0}));
  expect_same(*h, *run({spec(0.0, 3, 10)}, s, false));
  EXPECT_EQ(h->sim.events_processed(), run({spec(0.0, 3, 10)}, s, false)->sim.events_processed());
}

// An arrival ends the run: A (prompt 3, output 10) at 0 and B (prompt 2, output 3) at 55 ms, 10 ms
// iterations. A's decodes run in line from its prefill's end: [10, 20), [20, 30), [30, 40),
// [40, 50); the next, [50, 60), would end after B's arrival at 55 ms, so it goes into the queue. At
// 60 ms B is admitted and prefilled alone [60, 70) (an iteration is all prefills or all decodes),
// then A and B decode from 70 ms in a run (A has 6 tokens, B 1: K = min(3, 1) = 1): [70, 80) in line
// (A's gap 20 ms, B's its first, each told on its own), [80, 90) started by the run, its end (B's
// last token) through the queue; B leaves at 90. B completed out of an all-decode plan, so A's run
// starts at once at 90 ms: A has 8 tokens, K = 1, [90, 100) in line and [100, 110) (A's 10th token)
// started by the run, its end through the queue. So 6 iterations in line, B done at 90 ms and A at
// 110 ms.
TEST(DecodeWindowTest, AnArrivalDuringTheRunSendsTheNextIterationThroughTheQueue) {
  ClusterSetup s;
  s.block_size = 4;
  s.base_s = 0.010;
  const std::vector<traces::RequestSpec> specs = {spec(0.0, 3, 10), spec(0.055, 2, 3)};
  std::unique_ptr<Harness> h = run(specs, s, true);
  EXPECT_EQ(in_line(*h), 6u);
  ASSERT_NE(h->obs.find(0), nullptr);
  ASSERT_NE(h->obs.find(1), nullptr);
  EXPECT_EQ(h->obs.find(1)->finish.ns(), 90 * kMs);
  EXPECT_EQ(h->obs.find(0)->finish.ns(), 110 * kMs);
  expect_same(*h, *run(specs, s, false));
}

// Random workloads against the same runs through the queue: two replicas behind a load-aware
// router (it reads every replica's load at each arrival), an engine with async scheduling and CUDA
// graphs (iteration times depend on the batch and on the iteration before), client time-outs (weak
// timers that end runs), iteration times that grow with the context, and a cache small enough that
// runs end on blocks running out and requests are preempted.
TEST(DecodeWindowTest, AgreesWithTheQueueOnRandomWorkloads) {
  for (const uint64_t seed : {1u, 2u, 3u}) {
    const std::vector<traces::RequestSpec> specs = testing::random_specs(seed, "decode-window", 300, 0.4);
    ClusterSetup s;
    s.replicas = 2;
    s.router = "kind = \"least_outstanding\"\n";
    s.block_size = 4;
    s.kv_blocks = 40;
    s.base_s = 0.004;
    s.per_token_s = 0.00002;
    hwmodels::EngineModel e;
    e.async_scheduling = true;
    e.first_token_s = seed == 1 ? 0.0 : 0.0025;  // shortens each request's second gap (a run's first may hold it)
    s.engine = e;
    s.client_timeout = core::Duration::from_seconds(seed == 3 ? 0.3 : 60.0);
    std::unique_ptr<Harness> a = run(specs, s, true), b = run(specs, s, false);
    expect_same(*a, *b);
    EXPECT_EQ(in_line(*b), 0u);
    // Measured: about 15,000-16,600 iterations, 6,700-7,100 of them in line; 18-21 preemptions
    // (2 with the short time-out, under which 116 requests time out).
    EXPECT_GT(in_line(*a), a->obs.iterations.size() / 10) << seed;
    EXPECT_GT(a->obs.preempted.size(), 0u) << seed;
    if (seed == 3) {
      EXPECT_GT(a->checker.totals().timed_out, 100u);
    }
  }
}

}  // namespace
}  // namespace servesim::sim
