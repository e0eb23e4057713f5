// The roofline memo's recycled storage (hwmodels/recycled_rows.h): capacity is handed from one cost
// model to the next on a thread, contents never are.
#include "hwmodels/recycled_rows.h"

#include <gtest/gtest.h>

#include <thread>
#include <tuple>
#include <vector>

#include "hwmodels/cost_model.h"
#include "tests/hwmodels/hw_test_util.h"
#include "tests/test_paths.h"

namespace servesim::hwmodels {
namespace {

using hwtest::build_hw;
using hwtest::decode;
using hwtest::hw_config;

// Runs `f` on a thread of its own: a pool that starts empty, whatever the tests before did.
template <class F>
void on_fresh_thread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

TEST(RecycledRowsTest, StorageComesBackEmptyWithItsCapacityOnItsThreadOnly) {
  on_fresh_thread([] {
    ASSERT_EQ(RecycledRows::pooled_on_this_thread(), 0u);
    const double* first = nullptr;
    {
      RecycledRows a;
      a.take_storage(1000);
      EXPECT_EQ(a.size(), 0u);
      EXPECT_GE(a.capacity(), 1000u);
      a.resize(1000, 7.0);
      first = a.data();
      const RecycledRows copy = a;  // a copy has storage of its own, which is freed, not pooled
      EXPECT_NE(copy.data(), first);
    }
    EXPECT_EQ(RecycledRows::pooled_on_this_thread(), 1u);
    {
      RecycledRows b;
      b.take_storage(500);
      // The same block (the pool is last in, first out), emptied: nothing of a's 7.0s is readable.
      EXPECT_EQ(b.data(), first);
      EXPECT_EQ(b.size(), 0u);
      EXPECT_GE(b.capacity(), 1000u);
      EXPECT_EQ(RecycledRows::pooled_on_this_thread(), 0u);
      // Another thread's pool does not have it.
      std::thread([] { EXPECT_EQ(RecycledRows::pooled_on_this_thread(), 0u); }).join();
      RecycledRows moved = std::move(b);  // the storage and the duty to give it back move together
      EXPECT_EQ(moved.data(), first);
    }
    EXPECT_EQ(RecycledRows::pooled_on_this_thread(), 1u);
    // Never more than kMaxPooled kept.
    {
      std::vector<RecycledRows> many(RecycledRows::kMaxPooled + 5);
      for (RecycledRows& r : many) r.take_storage(16);
    }
    EXPECT_EQ(RecycledRows::pooled_on_this_thread(), RecycledRows::kMaxPooled);
  });
}

// The step costs of a list of shapes, every field.
std::vector<double> figures(const StepCostModel& cost) {
  std::vector<BatchShape> shapes;
  for (int64_t tokens : {1, 3, 64, 511, 512, 2048, 8191, 20000}) {  // 20000: past the tabulated rows
    BatchShape s;
    s.prefill_seqs = 1;
    s.prefill_tokens = tokens;
    s.prefill_logits = 1;
    s.prefill_attention_pairs = tokens * (tokens + 1) / 2;
    shapes.push_back(s);
  }
  for (int64_t seqs : {1, 2, 37, 256}) shapes.push_back(decode(seqs, 1500));
  BatchShape mixed = decode(40, 900);
  mixed.prefill_seqs = 1;
  mixed.prefill_tokens = 300;
  mixed.prefill_context_tokens = 1000;
  mixed.prefill_attention_pairs = 300 * 1000 + 300 * 301 / 2;
  shapes.push_back(mixed);
  std::vector<double> out;
  for (const BatchShape& s : shapes) {
    const StepCost c = cost.step(s);
    out.insert(out.end(), {c.seconds, c.flops, c.bytes, c.peak_flop_seconds});
  }
  return out;
}

std::string calibrated(const std::string& model, const std::string& gpu) {
  return hw_config(model, gpu) + "[cost_model]\ncalibration = \"" + servesim::testing::source_dir() +
         "/calibration/profiles/" + gpu + ".toml\"\n";
}

TEST(RecycledRowsTest, ACalibratedModelAfterOthersOnItsThreadGivesAFreshModelsFigures) {
  // The oracle: Llama-3-8B on H100 with the shipped profile, built on a thread that never built a
  // model before (its memo storage freshly allocated).
  std::vector<double> fresh;
  on_fresh_thread([&] { fresh = figures(*build_hw(calibrated("llama-3-8b", "h100-sxm")).cost); });
  ASSERT_FALSE(fresh.empty());
  ASSERT_GT(fresh[0], 0);

  on_fresh_thread([&] {
    // Other models first, on this thread: a larger one at TP 4 on the same GPU, and another GPU's
    // profile, whose memos fill thousands of rows with other seconds.
    for (const auto& [model, gpu, tp] : {std::tuple{"llama-3-70b", "h100-sxm", 4}, std::tuple{"qwen2-7b", "a100-80gb-sxm", 1}}) {
      const hwtest::Hw other = build_hw(calibrated(model, gpu), tp);
      figures(*other.cost);
      for (int64_t rows = 1; rows < 16384; rows += 7) {
        BatchShape s;
        s.prefill_seqs = 1;
        s.prefill_tokens = rows;
        s.prefill_logits = 1;
        s.prefill_attention_pairs = rows * (rows + 1) / 2;
        other.cost->step(s);
      }
    }
    // Their memos' storage is in the pool now (Llama blocks: over 10 tabulated operators each).
    const size_t pooled = RecycledRows::pooled_on_this_thread();
    EXPECT_GE(pooled, 10u);
    // Poison it: every pooled block filled to its capacity with a value no step could come from, and
    // given back (emptied, the 1e9s still in the memory the next model gets).
    {
      std::vector<RecycledRows> poison(pooled);
      for (RecycledRows& r : poison) {
        r.take_storage(0);
        r.resize(r.capacity(), 1e9);
      }
    }
    ASSERT_EQ(RecycledRows::pooled_on_this_thread(), pooled);
    {
      const hwtest::Hw again = build_hw(calibrated("llama-3-8b", "h100-sxm"));
      EXPECT_LT(RecycledRows::pooled_on_this_thread(), pooled);  // it took poisoned blocks
      EXPECT_EQ(figures(*again.cost), fresh);                    // bit for bit
    }
  });
}

}  // namespace
}  // namespace servesim::hwmodels
