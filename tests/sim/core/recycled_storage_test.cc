// Per-thread recycled vector storage (sim/core/recycled_storage.h) and the request slot table built
// on it: a block comes back empty, its old elements destroyed, on the thread that gave it back only.
#include "sim/core/recycled_storage.h"

#include <gtest/gtest.h>

#include <thread>

#include "sim/cluster/request.h"

namespace servesim::core {
namespace {

template <class F>
void on_fresh_thread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

struct Counted {
  static inline int alive = 0;
  int value = 0;
  explicit Counted(int v) : value(v) { ++alive; }
  Counted(const Counted& o) : value(o.value) { ++alive; }
  Counted(Counted&& o) noexcept : value(o.value) { ++alive; }
  ~Counted() { --alive; }
};

TEST(RecycledStorageTest, ABlockComesBackEmptyItsElementsDestroyed) {
  on_fresh_thread([] {
    using Pool = RecycledStorage<Counted>;
    ASSERT_EQ(Pool::pooled(), 0u);
    std::vector<Counted> v = Pool::take(100);
    EXPECT_TRUE(v.empty());
    EXPECT_GE(v.capacity(), 100u);
    for (int i = 0; i < 100; ++i) v.emplace_back(i);
    const Counted* block = v.data();
    ASSERT_EQ(Counted::alive, 100);
    Pool::give_back(std::move(v));
    EXPECT_EQ(Counted::alive, 0);  // the 100 elements were destroyed, not kept in the pool
    EXPECT_EQ(Pool::pooled(), 1u);
    std::thread([] { EXPECT_EQ(RecycledStorage<Counted>::pooled(), 0u); }).join();  // per thread
    std::vector<Counted> w = Pool::take();
    EXPECT_EQ(w.data(), block);  // the same block, empty, with its capacity
    EXPECT_TRUE(w.empty());
    EXPECT_GE(w.capacity(), 100u);
    EXPECT_EQ(Pool::pooled(), 0u);
    Pool::give_back(std::vector<Counted>{});  // no storage: nothing pooled
    EXPECT_EQ(Pool::pooled(), 0u);
    for (size_t i = 0; i < Pool::kMaxPooled + 3; ++i) Pool::give_back(Pool::take(4));
    EXPECT_EQ(Pool::pooled(), 1u);  // taken and given back one at a time: the same block
    std::vector<std::vector<Counted>> many;
    for (size_t i = 0; i < Pool::kMaxPooled + 3; ++i) many.push_back(Pool::take(4));
    for (auto& m : many) Pool::give_back(std::move(m));
    EXPECT_EQ(Pool::pooled(), Pool::kMaxPooled);  // never more than kMaxPooled kept
  });
}

TEST(RecycledStorageTest, ARequestTableStartsEmptyOnAnEarlierTablesStorage) {
  on_fresh_thread([] {
    const sim::Request* block = nullptr;
    {
      sim::RequestTable first;
      for (uint64_t i = 0; i < 1000; ++i) {
        sim::Request r;
        r.id = i;
        r.prompt_tokens = 7;
        r.block_hashes = {i, i + 1};
        first.insert(std::move(r));
      }
      first.erase(sim::RequestId{3});
      EXPECT_EQ(first.capacity(), 1000u);
      block = &first[sim::RequestId{0}];
    }
    EXPECT_EQ(RecycledStorage<sim::Request>::pooled(), 1u);
    sim::RequestTable second;
    EXPECT_EQ(RecycledStorage<sim::Request>::pooled(), 0u);  // it took the first table's block
    EXPECT_EQ(second.capacity(), 0u);                           // with none of its requests
    EXPECT_EQ(second.live(), 0u);
    EXPECT_FALSE(second.holds(sim::RequestId{5}, 5));
    sim::Request r;
    r.id = 42;
    const sim::RequestId id = second.insert(std::move(r));
    EXPECT_EQ(id.slot, 0u);  // a fresh table's first slot: the first table's free slot 3 is not reused
    EXPECT_EQ(&second[id], block);
    EXPECT_EQ(second[id].id, 42u);
    EXPECT_EQ(second[id].prompt_tokens, 0);
    EXPECT_TRUE(second[id].block_hashes.empty());
  });
}

}  // namespace
}  // namespace servesim::core
