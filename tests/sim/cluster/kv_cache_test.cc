#include "sim/cluster/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>

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

// ---- hybrid models: accounting per layer group -----------------------------------------------

// gpt-oss's shape: as many window layers as full ones (equal bytes per token), a window of 128,
// blocks of 16 tokens: a block is 16 tokens of both groups, so a page of either is half a block.
KvLayout gpt_oss_like() {
  KvLayout l;
  l.full_bytes_per_token = 18 * 2048;
  l.window_bytes_per_token = 18 * 2048;
  l.window = 128;
  return l;
}

TEST(KvCacheHybridTest, WindowLayersHoldTheWindowOnAnyPrompt) {
  KvCache kv(100000, 16, 0, gpt_oss_like());
  ASSERT_TRUE(kv.hybrid());
  // A 100,000-token prompt decoding: the window layers keep the pages of the last 127 computed
  // tokens and the new one, from token 99,873 on: pages 6242 to 6250, 9 of them; the full layers
  // keep all 6251.
  EXPECT_EQ(kv.window_pages(0, 100000, 100001), 9);
  EXPECT_EQ(kv.request_blocks(0, 100000, 100001), (6251 + 9 + 1) / 2);
  // Never more than ceil(128 / 16) + 1 pages, at any length, once the tokens are computed.
  for (int64_t n = 1; n <= 20000; n += 37) {
    const int64_t pages = kv.window_pages(0, n, n + 1);
    EXPECT_LE(pages, 9) << n;
    EXPECT_EQ(pages, std::min(kv.blocks_for(n + 1), pages)) << n;
    EXPECT_EQ(kv.request_blocks(0, n, n + 1), (kv.blocks_for(n + 1) + pages + 1) / 2) << n;
  }
  // A prefill writes all its tokens' K and V first: a whole prompt in one step holds every page.
  EXPECT_EQ(kv.window_pages(0, 0, 100000), 6250);
  // A chunk of 2048 after 8192 computed tokens: the window's 127 cached tokens and the chunk.
  EXPECT_EQ(kv.window_pages(0, 8192, 8192 + 2048), (8192 + 2048) / 16 - (8192 - 127) / 16);
  // Its cache in bytes: every token of the full layers, the last 128 of the window layers.
  EXPECT_DOUBLE_EQ(kv.request_bytes(100000), 18.0 * 2048 * 100000 + 18.0 * 2048 * 128);
}

TEST(KvCacheHybridTest, AStateLayersMemoryDoesNotGrowWithTheContext) {
  // Only linear-attention layers (a Mamba-style model): a block is one state, whatever the context.
  KvLayout state_only;
  state_only.state_bytes = 1e6;
  KvCache pure(100, 16, 0, state_only);
  for (int64_t n : {1, 100, 10000, 1000000}) EXPECT_EQ(pure.request_blocks(0, n - 1, n), 1) << n;
  EXPECT_DOUBLE_EQ(pure.request_bytes(1), pure.request_bytes(1000000));
  // Full layers beside (Qwen3-Next's shape): 1000 bytes per token, a 50,000-byte state, blocks of
  // 16 tokens (16,000 bytes): the state takes 3.125 blocks, rounded with the pages into 4 more
  // blocks than the full layers' at every context.
  KvLayout hybrid;
  hybrid.full_bytes_per_token = 1000;
  hybrid.state_bytes = 50000;
  KvCache kv(100000, 16, 0, hybrid);
  for (int64_t n : {1, 16, 17, 4096, 100000}) EXPECT_EQ(kv.request_blocks(0, n - 1, n), kv.blocks_for(n) + 4) << n;
}

TEST(KvCacheHybridTest, APrefixUnitCachesItsTokensTheWindowTailAndOneStateSnapshot) {
  KvLayout l;
  l.full_bytes_per_token = 1000;
  l.window_bytes_per_token = 1000;
  l.window = 64;
  l.state_bytes = 16000;
  KvCache kv(1000, 16, 512, l);  // a block: 16 x 2000 = 32,000 bytes
  // A 512-token unit: 32 full-layer pages (16 blocks), the window layers' last 63 tokens (4 pages,
  // 2 blocks) that a hit at its end needs, and the state at its end (half a block): 19 blocks.
  EXPECT_EQ(kv.unit_blocks_for(512), 19);
  // A partial last unit of 40 tokens: 3 pages, 3 pages, a state: 3.5 -> 4 blocks.
  EXPECT_EQ(kv.unit_blocks_for(40), 4);
  // Private blocks after a 1024-token hit: pages from the hit on, and the request's own state.
  EXPECT_EQ(kv.request_blocks(1024, 1024, 1024 + 100), 8);  // 7 x 1/2 + 7 x 1/2 + 1/2 -> 8
  // Without a layout nothing changes: a unit is blocks_for(tokens).
  EXPECT_EQ(KvCache(10, 16, 512).unit_blocks_for(40), 3);
  EXPECT_FALSE(KvCache(10, 16, 512).hybrid());
}

}  // namespace
}  // namespace servesim::sim
