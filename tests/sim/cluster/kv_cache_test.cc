#include "sim/cluster/kv_cache.h"

#include <gtest/gtest.h>

namespace servesim::sim {
namespace {

TEST(KvCacheTest, PrivateBlocksNeverExceedCapacity) {
  KvCache kv(10, 16);
  EXPECT_EQ(kv.blocks_for(1), 1);
  EXPECT_EQ(kv.blocks_for(16), 1);
  EXPECT_EQ(kv.blocks_for(17), 2);
  EXPECT_TRUE(kv.try_allocate(7));
  EXPECT_FALSE(kv.try_allocate(4));
  EXPECT_EQ(kv.used(), 7);
  EXPECT_TRUE(kv.try_allocate(3));
  EXPECT_EQ(kv.available(), 0);
  kv.release(10);
  EXPECT_EQ(kv.used(), 0);
  EXPECT_THROW(kv.release(1), core::Error);
  kv.check();
}

TEST(KvCacheTest, UnitsAreSharedAndEvictedLeastRecentlyReleasedFirst) {
  KvCache kv(10, 4, 8);  // units of 8 tokens = 2 blocks
  const uint64_t a = KvCache::chain(0, 1), b = KvCache::chain(a, 2), c = KvCache::chain(0, 3);
  EXPECT_NE(a, c);
  EXPECT_NE(KvCache::chain(0, 2), b);  // a unit's key depends on its prefix
  const uint32_t ua = kv.insert(a, 2);
  const uint32_t ub = kv.insert(b, 2);
  const uint32_t uc = kv.insert(c, 2);
  EXPECT_EQ(kv.cached_blocks(), 6);
  EXPECT_EQ(kv.available(), 4);
  kv.acquire(ua);  // a second request shares unit a
  kv.unref(ua);
  EXPECT_TRUE(kv.referenced(ua));
  kv.unref(ub);    // released first: evicted first
  kv.unref(ua);
  kv.unref(uc);
  EXPECT_EQ(kv.evictable_blocks(), 6);
  EXPECT_EQ(kv.available(), 10);
  EXPECT_EQ(kv.free(), 4);
  // Needing 6 free blocks evicts b (released first), then a.
  EXPECT_TRUE(kv.try_allocate(8));
  EXPECT_EQ(kv.find(b), KvCache::kNone);
  EXPECT_EQ(kv.find(a), KvCache::kNone);
  EXPECT_NE(kv.find(c), KvCache::kNone);
  EXPECT_EQ(kv.evictions(), 2u);
  // Acquiring an evictable unit takes it out of the evictable pool.
  kv.acquire(kv.find(c));
  EXPECT_EQ(kv.available(), 0);
  EXPECT_FALSE(kv.try_allocate(1));
  kv.check();
  EXPECT_THROW(kv.unref(ua), core::Error);  // a's slot is gone
}

}  // namespace
}  // namespace servesim::sim
