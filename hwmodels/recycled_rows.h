#pragma once
// Storage for a cost model's per-run memo of operator seconds by row count (RooflineCostModel's
// tabulated operators, `LinearOp::seconds_by_rows`), recycled on the thread that frees it.
//
// Each simulation builds its own cost model, and the memo grows as the run asks for row counts: up
// to kTabulatedRows doubles (128 KB) per calibrated operator, about 1.3 MB for a Llama block. Freed
// at the end of every run, that memory went back to the kernel (blocks this size are mmap'd) and the
// next point of a sweep faulted it in again, 4 KB at a time (21,000 of the 29,200 page faults of the
// bench64 sweep, docs/performance.md). A RecycledRows that took its storage from the pool gives it
// back when it dies; the next RecycledRows to take storage on that thread gets it, emptied.
//
// Only capacity is reused, never contents: take_storage() hands out a vector of size 0, so every
// element a memo reads afterwards was written during its own run (RooflineCostModel::linear_seconds
// resizes with the "not computed" marker -1 and fills an entry from curve_seconds() on its first
// read). What an earlier run of the thread computed, with whatever model, cannot reach a later one;
// results do not depend on the order of a sweep's points or on the thread that runs them
// (SweepTest.RecycledCostMemoGivesEachPointItsOwnFigures checks it).
//
// The pool is core::RecycledStorage<double> (sim/core/recycled_storage.h): per thread (a sweep's
// workers never share pages or a lock), at most kMaxPooled blocks, dying with its thread.

#include <cstddef>
#include <vector>

namespace servesim::hwmodels {

class RecycledRows : public std::vector<double> {
 public:
  static constexpr size_t kMaxPooled = 64;  // core::RecycledStorage's

  RecycledRows() = default;
  RecycledRows(const RecycledRows& other) : std::vector<double>(other) {}  // a copy owns fresh storage
  RecycledRows(RecycledRows&& other) noexcept
      : std::vector<double>(std::move(other)), pooled_(other.pooled_) {
    other.pooled_ = false;
  }
  RecycledRows& operator=(const RecycledRows& other) {
    std::vector<double>::operator=(other);
    return *this;
  }
  RecycledRows& operator=(RecycledRows&& other) noexcept;
  ~RecycledRows();

  // Drops the contents and takes storage for at least `capacity` elements from this thread's pool
  // (or allocates it): size() is 0 afterwards, so nothing a former owner wrote can be read.
  void take_storage(size_t capacity);

  // Vectors in this thread's pool (for tests).
  static size_t pooled_on_this_thread();

 private:
  void give_back();
  bool pooled_ = false;  // give the storage back to the pool when done with it
};

}  // namespace servesim::hwmodels
