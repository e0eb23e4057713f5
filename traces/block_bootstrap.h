#pragma once
// A block bootstrap of an arrival stream: what makes replications of a trace replay differ.
//
// A trace is one recording; replaying it again gives the same run. Replications need other draws
// of "the same traffic", and a block bootstrap (Carlstein 1986; Künsch 1989) gives them while
// keeping the trace's burstiness and its short-range structure: wrap the stream on a circle of its
// period P (the last arrival plus one mean gap), cut it into K = ceil(P / L) blocks of L seconds on
// a fixed grid (the last block goes on past P into the start, the circular block bootstrap of
// Politis and Romano 1992, so every block spans L), draw K blocks with replacement (uniformly,
// from the run's seed), lay them end to end and cut the result at P. Within a block arrivals, lengths, prefix hashes and sessions are the
// trace's own; what varies between replications is which stretches of traffic the run sees, and
// how often. The resample spans the original's period, its offered load is the trace's on average,
// and its request count varies as the blocks do.
//
// Streaming: the stream is read once, on the first next() (so building a run that never runs
// reads nothing), into an anonymous temporary file (std::tmpfile, deleted when closed) with the
// file offset of each block's start; blocks are then read back by seeking. Memory is O(blocks),
// whatever the trace's size.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "traces/arrival_source.h"

namespace servesim::traces {

class BlockBootstrapSource final : public ArrivalSource {
 public:
  // `block_ns`: the block length in the stream's time (> 0). `seed` draws the blocks.
  BlockBootstrapSource(std::unique_ptr<ArrivalSource> inner, int64_t block_ns, uint64_t seed);
  ~BlockBootstrapSource() override;

  bool next(RequestSpec& out) override;
  int64_t hash_block_tokens() const override { return hash_block_tokens_; }
  const core::RequestClasses& classes() const override { return classes_; }

  // After the first next(): the blocks of the original and the source block of each output block.
  const std::vector<uint32_t>& plan() const { return plan_; }

 private:
  void spill();                         // reads the inner stream into the file
  bool read_record(RequestSpec& out);   // the next record of the file at its current position
  // Seeks to segment `segment` of output block j (or the next one that has records); false past the end.
  bool start_segment(size_t j, int segment);

  std::unique_ptr<ArrivalSource> inner_;
  int64_t block_ns_;
  uint64_t seed_;
  int64_t hash_block_tokens_;
  core::RequestClasses classes_;  // the inner source's (it is closed once spilled)
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> file_;
  bool spilled_ = false;
  int64_t period_ns_ = 0;                // the resample's span: the last arrival + one mean gap
  std::vector<int64_t> block_offset_;    // file offset of each source block's first record
  std::vector<int64_t> block_count_;     // records in each source block
  std::vector<uint32_t> plan_;           // output block j takes source block plan_[j]
  size_t block_ = 0;                     // the output block being read
  int segment_ = 0;                      // 0: its source block; 1: the wrapped part of the last block
  int64_t left_ = 0;                     // records of the segment still to read
  int64_t shift_ns_ = 0;                 // added to the segment's arrivals (one period when wrapped)
  int64_t limit_ns_ = 0;                 // the segment's arrivals end before this (source time)
};

}  // namespace servesim::traces
