#pragma once
// A replica's paged KV cache, counted in blocks of `block_size` tokens. Blocks are taken as a
// sequence grows and returned when it finishes or is preempted; the count can never go below zero
// or above the capacity (a violation is a bug and throws).

#include <cstdint>
#include <string>

#include "sim/core/error.h"

namespace servesim::sim {

class KvBlockManager {
 public:
  KvBlockManager() = default;
  KvBlockManager(int64_t total_blocks, int64_t block_size) : total_(total_blocks), block_size_(block_size) {}

  int64_t total() const { return total_; }
  int64_t used() const { return used_; }
  int64_t free() const { return total_ - used_; }
  int64_t block_size() const { return block_size_; }
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  bool try_allocate(int64_t blocks) {
    if (blocks > free()) return false;
    used_ += blocks;
    return true;
  }
  void release(int64_t blocks) {
    if (blocks < 0 || blocks > used_)
      throw core::Error("internal: KV release of " + std::to_string(blocks) + " blocks with " +
                        std::to_string(used_) + " in use");
    used_ -= blocks;
  }

 private:
  int64_t total_ = 0;
  int64_t block_size_ = 16;
  int64_t used_ = 0;
};

}  // namespace servesim::sim
