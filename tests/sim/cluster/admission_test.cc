// Admission control at the router ([admission], issue 17): shed counts and who is shed, computed by
// hand on a one-replica cluster whose scheduler runs one request at a time (max_num_seqs = 1), so
// that every later request waits in the queue the admission kinds look at. Each case runs through
// the invariant checker (Harness), which checks that every request is accounted for.
#include <gtest/gtest.h>

#include "policies/router/admission.h"
#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::testing {
namespace {

std::unique_ptr<sim::Admission> admission(const std::string& keys) {
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("admission", "admission", "", "a")};
  const core::Params p = core::parse_config("[admission]\n" + keys, "test.toml", schema);
  return policies::admission_registry().make(p.section("admission"));
}

core::RequestClasses two_classes() {
  core::RequestClass premium, batch;
  premium.name = "premium";
  batch.name = "batch";
  batch.priority = 1;
  batch.admit_fraction = 0.5;  // shed at half the limit
  return {premium, batch};
}

traces::RequestSpec classed(double arrival_s, int64_t prompt, int64_t output, int32_t cls) {
  traces::RequestSpec s = spec(arrival_s, prompt, output);
  s.request_class = cls;
  return s;
}

ClusterSetup one_at_a_time() {
  ClusterSetup s;
  s.replicas = 1;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\nmax_num_seqs = 1\n";
  return s;
}

// queue_length, max_queued = 2: premium is shed at 2 waiting, batch (admit_fraction 0.5) at 1.
// Arrivals 1 ms apart; #0 runs at once (its 50 outputs keep the replica busy for 500 ms), so the
// queue at each arrival is the admitted requests after #0:
//   #0 premium q=0 admit | #1 batch q=0 < 1 admit | #2 batch q=1 >= 1 shed | #3 premium q=1 < 2 admit
//   #4 batch q=2 shed    | #5 premium q=2 >= 2 shed
TEST(AdmissionTest, QueueLengthShedsByClassThreshold) {
  auto src = std::make_unique<VectorSource>(std::vector<traces::RequestSpec>{
      classed(0.000, 8, 50, 0), classed(0.001, 8, 5, 1), classed(0.002, 8, 5, 1), classed(0.003, 8, 5, 0),
      classed(0.004, 8, 5, 1), classed(0.005, 8, 5, 0)});
  src->request_classes = two_classes();
  Harness h(std::move(src), one_at_a_time());
  h.cluster->set_admission(admission("kind = \"queue_length\"\nmax_queued = 2\n"));
  h.run();
  std::vector<uint64_t> shed;
  for (const auto& r : h.obs.done)
    if (r.outcome == core::RequestOutcome::kRejectedAdmission) {
      shed.push_back(r.id);
      EXPECT_EQ(r.finish, r.arrival);  // shed at once, at the router
    }
  std::sort(shed.begin(), shed.end());
  EXPECT_EQ(shed, (std::vector<uint64_t>{2, 4, 5}));
  EXPECT_EQ(h.cluster->counters().shed, 3u);
  EXPECT_EQ(h.cluster->counters().rejected, 3u);
  EXPECT_EQ(h.cluster->counters().completed, 3u);
  EXPECT_EQ(h.obs.find(4)->request_class, 1u);
  EXPECT_EQ(h.obs.find(5)->request_class, 0u);
}

// predicted_ttft, max_ttft_ms = 50, chunk_tokens = 10, on the linear cost model (10 ms + 1 ms per
// token): a 10-token chunk takes 20 ms, so 2 ms per prompt token. #0 (20 tokens) is prefilled in
// [0, 30) ms and decodes until long after the others arrive (40..44 ms); the prompt tokens waiting
// at each arrival are those of the admitted requests after #0:
//   #1 batch   10 tokens: (0 + 10) x 2 = 20 <= 25 (50 x 0.5) admit
//   #2 batch   10 tokens: (10 + 10) x 2 = 40 > 25 shed
//   #3 premium 10 tokens: (10 + 10) x 2 = 40 <= 50 admit
//   #4 premium  5 tokens: (20 + 5) x 2 = 50 <= 50 admit (the limit itself is admitted)
//   #5 premium  1 token:  (25 + 1) x 2 = 52 > 50 shed
TEST(AdmissionTest, PredictedTtftFromQueuedPrefillTokensAndStepCosts) {
  ClusterSetup s = one_at_a_time();
  s.base_s = 0.010;
  s.per_token_s = 0.001;
  auto src = std::make_unique<VectorSource>(std::vector<traces::RequestSpec>{
      classed(0.000, 20, 50, 0), classed(0.040, 10, 2, 1), classed(0.041, 10, 2, 1), classed(0.042, 10, 2, 0),
      classed(0.043, 5, 2, 0), classed(0.044, 1, 2, 0)});
  src->request_classes = two_classes();
  Harness h(std::move(src), s);
  h.cluster->set_admission(admission("kind = \"predicted_ttft\"\nmax_ttft_ms = 50\nchunk_tokens = 10\n"));
  h.run();
  std::vector<uint64_t> shed;
  for (const auto& r : h.obs.done)
    if (r.outcome == core::RequestOutcome::kRejectedAdmission) shed.push_back(r.id);
  std::sort(shed.begin(), shed.end());
  EXPECT_EQ(shed, (std::vector<uint64_t>{2, 5}));
  EXPECT_EQ(h.obs.find(0)->first_token, core::Time::from_ns(30'000'000));  // the prefill the case assumes
}

// Without classes every request has admit_fraction 1: of six requests 1 ms apart, #0 runs and #1, #2
// fill the queue to 2, so #3, #4, #5 are shed.
TEST(AdmissionTest, WithoutClassesEveryRequestHasTheFullLimit) {
  Harness h({spec(0.000, 8, 50), spec(0.001, 8, 5), spec(0.002, 8, 5), spec(0.003, 8, 5), spec(0.004, 8, 5),
             spec(0.005, 8, 5)},
            one_at_a_time());
  h.cluster->set_admission(admission("kind = \"queue_length\"\nmax_queued = 2\n"));
  h.run();
  EXPECT_EQ(h.cluster->counters().shed, 3u);
  for (uint64_t id : {3, 4, 5}) EXPECT_EQ(h.obs.find(id)->outcome, core::RequestOutcome::kRejectedAdmission);
}

}  // namespace
}  // namespace servesim::testing

// ---- priority scheduling (scheduler policy = "priority") -------------------------------------------

namespace servesim::testing {
namespace {

// One replica of 4 KV blocks of 4 tokens (watermark 0), 10 ms per iteration. A (batch, priority 1)
// at 0 and B (premium, priority 0) at 1 ms, 4-token prompts, 10 outputs. A prefills [0, 10), B
// [10, 20); from 20 ms both decode, each growing to 2 blocks (all 4). At 60 ms each has produced 5
// tokens and needs a 9th KV token: a 3rd block, and none is free. FCFS decodes A first and preempts
// the newest running request, B; priority decodes B first (priority 0) and preempts the lowest
// priority, A.
std::vector<uint64_t> preempted_under(const std::string& policy) {
  ClusterSetup s;
  s.replicas = 1;
  s.kv_blocks = 4;
  s.block_size = 4;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\npolicy = \"" + policy + "\"\n";
  auto src = std::make_unique<VectorSource>(
      std::vector<traces::RequestSpec>{classed(0.000, 4, 10, 1), classed(0.001, 4, 10, 0)});
  src->request_classes = two_classes();
  Harness h(std::move(src), s);
  h.run();
  EXPECT_FALSE(h.obs.preempted.empty());
  return h.obs.preempted;
}

TEST(PrioritySchedulingTest, PreemptsTheLowestPriorityRunningRequest) {
  const auto fcfs = preempted_under("fcfs");
  const auto priority = preempted_under("priority");
  ASSERT_FALSE(fcfs.empty());
  ASSERT_FALSE(priority.empty());
  EXPECT_EQ(fcfs.front(), 1u);      // B, the newest
  EXPECT_EQ(priority.front(), 0u);  // A, the lower class
}

// max_num_seqs = 1: A (batch) runs [0, 20) (prefill, one decode); B (batch) at 1 ms and C (premium)
// at 2 ms wait. When A leaves at 20 ms, FCFS admits B (first token at 30 ms) and priority admits C
// (first token at 30 ms, B's at 50 ms after C's prefill and decode).
TEST(PrioritySchedulingTest, AdmitsWaitingRequestsByPriorityThenArrival) {
  for (const std::string policy : {"fcfs", "priority"}) {
    SCOPED_TRACE(policy);
    ClusterSetup s = one_at_a_time();
    s.scheduler += "policy = \"" + policy + "\"\n";
    auto src = std::make_unique<VectorSource>(std::vector<traces::RequestSpec>{
        classed(0.000, 4, 2, 1), classed(0.001, 4, 2, 1), classed(0.002, 4, 2, 0)});
    src->request_classes = two_classes();
    Harness h(std::move(src), s);
    h.run();
    const core::Time t30 = core::Time::from_ns(30'000'000), t50 = core::Time::from_ns(50'000'000);
    if (policy == "fcfs") {
      EXPECT_EQ(h.obs.find(1)->first_token, t30);
      EXPECT_EQ(h.obs.find(2)->first_token, t50);
    } else {
      EXPECT_EQ(h.obs.find(2)->first_token, t30);
      EXPECT_EQ(h.obs.find(1)->first_token, t50);
    }
  }
}

// The chunked scheduler takes the same policy: the same built case as the first, with a budget
// large enough that every iteration is what the continuous scheduler plans.
TEST(PrioritySchedulingTest, ChunkedPreemptsTheLowestPriorityToo) {
  ClusterSetup s;
  s.replicas = 1;
  s.kv_blocks = 4;
  s.block_size = 4;
  s.scheduler = "kind = \"chunked\"\nwatermark = 0.0\npolicy = \"priority\"\n";
  auto src = std::make_unique<VectorSource>(
      std::vector<traces::RequestSpec>{classed(0.000, 4, 10, 1), classed(0.001, 4, 10, 0)});
  src->request_classes = two_classes();
  Harness h(std::move(src), s);
  h.run();
  ASSERT_FALSE(h.obs.preempted.empty());
  EXPECT_EQ(h.obs.preempted.front(), 0u);
  EXPECT_EQ(h.obs.find(1)->preemptions, 0u);  // the premium request is never preempted
}

}  // namespace
}  // namespace servesim::testing

// ---- priority preemption to admit a waiting request (priority_preemption = "admit") ---------------

namespace servesim::testing {
namespace {

// One replica of 2 KV blocks of 16 tokens (watermark 0), 10 ms per iteration. Two batch requests
// (priority 1), L0 at 0 and L1 at 1 ms, 10-token prompts and 7 outputs: each holds one block for its
// whole life (10 prompt tokens + 6 decodes = 16 KV tokens), so from L1's admission no block is free.
// A premium request H (priority 0, 4-token prompt, 2 outputs) arrives at 25 ms.
//
// continuous: L0 prefills [0, 10), L1 [10, 20); both decode from 20 ms and produce their 7th token at
// 80 ms (decodes ending 30, 40, ..., 80). Without preemption H waits for their blocks: it prefills
// [80, 90), first token at 90 ms. With priority_preemption = "admit", at the 30 ms plan H is the head,
// does not fit (0 blocks free) and the running request of the largest (priority, arrival) is L1
// (priority 1 > 0): L1 is preempted (its block freed), H now fits and prefills [30, 40): first token at
// 40 ms (TTFT 15 ms against 65). L0 (priority 1 too) is not touched once H fits.
//
// chunked (budget 2,048): L0 prefills [0, 10); at 10 ms L0 decodes and L1 prefills in one iteration;
// L0's 7th token comes at 70 ms (decodes ending 20, ..., 70) and frees its block, so without
// preemption H prefills [70, 80), first token at 80 ms; with it, L1 is preempted at the 30 ms plan and
// H prefills with L0's decode in [30, 40): first token at 40 ms.
struct PreemptionCase {
  core::Time h_first_token;
  std::vector<uint64_t> preempted;
};

PreemptionCase premium_arrives_on_a_full_replica(const std::string& scheduler, const std::string& keys,
                                                 int32_t premium_class = 0) {
  ClusterSetup s;
  s.replicas = 1;
  s.kv_blocks = 2;
  s.block_size = 16;
  s.scheduler = "kind = \"" + scheduler + "\"\nwatermark = 0.0\npolicy = \"priority\"\n" + keys;
  auto src = std::make_unique<VectorSource>(std::vector<traces::RequestSpec>{
      classed(0.000, 10, 7, 1), classed(0.001, 10, 7, 1), classed(0.025, 4, 2, premium_class)});
  src->request_classes = two_classes();
  Harness h(std::move(src), s);
  h.run();
  for (uint64_t id = 0; id < 3; ++id) EXPECT_EQ(h.obs.find(id)->outcome, core::RequestOutcome::kCompleted);
  return {h.obs.find(2)->first_token, h.obs.preempted};
}

TEST(PriorityPreemptionTest, ContinuousPreemptsTheNewestLowerClassToAdmitTheHead) {
  const auto ms = [](int64_t v) { return core::Time::from_ns(v * 1'000'000); };
  const PreemptionCase without = premium_arrives_on_a_full_replica("continuous", "");
  EXPECT_EQ(without.h_first_token, ms(90));
  EXPECT_TRUE(without.preempted.empty());
  const PreemptionCase none = premium_arrives_on_a_full_replica("continuous", "priority_preemption = \"none\"\n");
  EXPECT_EQ(none.h_first_token, ms(90));
  const PreemptionCase admit = premium_arrives_on_a_full_replica("continuous", "priority_preemption = \"admit\"\n");
  EXPECT_EQ(admit.h_first_token, ms(40));
  EXPECT_EQ(admit.preempted, (std::vector<uint64_t>{1}));  // L1: the newest of the lower class, once
}

TEST(PriorityPreemptionTest, ChunkedPreemptsTheNewestLowerClassToAdmitTheHead) {
  const auto ms = [](int64_t v) { return core::Time::from_ns(v * 1'000'000); };
  const PreemptionCase without = premium_arrives_on_a_full_replica("chunked", "");
  EXPECT_EQ(without.h_first_token, ms(80));
  EXPECT_TRUE(without.preempted.empty());
  const PreemptionCase admit = premium_arrives_on_a_full_replica("chunked", "priority_preemption = \"admit\"\n");
  EXPECT_EQ(admit.h_first_token, ms(40));
  EXPECT_EQ(admit.preempted, (std::vector<uint64_t>{1}));
}

// Equal priorities never preempt: the same case with H of the batch class (priority 1, as L0 and L1)
// waits for their blocks exactly as without the option (first token at 90 ms, continuous; 80 ms,
// chunked) and nothing is preempted.
TEST(PriorityPreemptionTest, EqualPrioritiesNeverPreempt) {
  const auto ms = [](int64_t v) { return core::Time::from_ns(v * 1'000'000); };
  const PreemptionCase c = premium_arrives_on_a_full_replica("continuous", "priority_preemption = \"admit\"\n", 1);
  EXPECT_EQ(c.h_first_token, ms(90));
  EXPECT_TRUE(c.preempted.empty());
  const PreemptionCase k = premium_arrives_on_a_full_replica("chunked", "priority_preemption = \"admit\"\n", 1);
  EXPECT_EQ(k.h_first_token, ms(80));
  EXPECT_TRUE(k.preempted.empty());
}

// The sequence limit counts as "cannot be admitted" too: ample KV (1,000 blocks), max_num_seqs = 2.
// L0 and L1 (batch, 4-token prompts, 10 outputs) at 0 and 1 ms take both slots; H (premium, 4 + 2)
// at 25 ms. continuous: L0 and L1 produce their 10th token at 110 ms (prefills [0, 10) and [10, 20),
// nine decodes ending 30, ..., 110), so without preemption H prefills [110, 120): first token at
// 120 ms. chunked: L1's prefill shares [10, 20) with L0's first decode, L0's 10th token comes at
// 100 ms, and H prefills [100, 110): 110 ms. With "admit", the 30 ms plan finds the slots full and
// preempts L1: H's first token at 40 ms under both schedulers.
TEST(PriorityPreemptionTest, AFullSequenceLimitPreemptsToo) {
  const auto ms = [](int64_t v) { return core::Time::from_ns(v * 1'000'000); };
  for (const std::string kind : {"continuous", "chunked"}) {
    SCOPED_TRACE(kind);
    for (const bool admit : {false, true}) {
      ClusterSetup s;
      s.replicas = 1;
      s.scheduler = "kind = \"" + kind + "\"\nwatermark = 0.0\nmax_num_seqs = 2\npolicy = \"priority\"\n" +
                    (admit ? "priority_preemption = \"admit\"\n" : "");
      auto src = std::make_unique<VectorSource>(std::vector<traces::RequestSpec>{
          classed(0.000, 4, 10, 1), classed(0.001, 4, 10, 1), classed(0.025, 4, 2, 0)});
      src->request_classes = two_classes();
      Harness h(std::move(src), s);
      h.run();
      EXPECT_EQ(h.obs.find(2)->first_token, admit ? ms(40) : kind == "continuous" ? ms(120) : ms(110));
      EXPECT_EQ(h.obs.preempted, admit ? std::vector<uint64_t>{1} : std::vector<uint64_t>{});
    }
  }
}

// The option belongs to the priority policy: with fcfs (or none) it is an error at the key.
TEST(PriorityPreemptionTest, NeedsThePriorityPolicy) {
  ClusterSetup s;
  s.scheduler = "kind = \"continuous\"\npolicy = \"fcfs\"\npriority_preemption = \"admit\"\n";
  EXPECT_THROW(Harness({spec(0, 4, 2)}, s), core::Error);
  s.scheduler = "kind = \"chunked\"\npriority_preemption = \"admit\"\n";
  EXPECT_THROW(Harness({spec(0, 4, 2)}, s), core::Error);
}

}  // namespace
}  // namespace servesim::testing
