#pragma once
// Per-thread pools of emptied std::vector storage, for a simulation's per-run tables that a sweep
// worker would otherwise allocate afresh for every point: the request slot table
// (sim/cluster/request.h) and the roofline cost model's memo (hwmodels/recycled_rows.h). Freed at
// the end of a run, such tables go back to the kernel (large blocks are mmap'd) and the next point
// on the thread faults the same amount in again, 4 KB at a time (docs/performance.md, S5).
//
// Only storage travels, never contents: take() returns a vector of size 0, and give_back() destroys
// the elements before pooling the block, so what a table holds in a run is only what that run put
// in. A run's results therefore cannot depend on what ran before on its thread, or on which thread
// runs it (SweepTest.RecycledCostMemoGivesEachPointItsOwnFigures).
//
// One pool per element type and thread (a sweep's workers share neither pages nor a lock), holding
// at most kMaxPooled blocks; it dies with its thread (a vector given back after that is freed).

#include <cstddef>
#include <utility>
#include <vector>

namespace servesim::core {

template <class T>
class RecycledStorage {
 public:
  static constexpr size_t kMaxPooled = 64;

  // An empty vector with room for at least `capacity` elements: the block given back last on this
  // thread if there is one, else a new one.
  static std::vector<T> take(size_t capacity = 0) {
    std::vector<T> v;
    if (!gone() && !pool().free.empty()) {
      v = std::move(pool().free.back());
      pool().free.pop_back();
    }
    v.clear();  // empty already; the independence of runs rests on it, so said here too
    v.reserve(capacity);
    return v;
  }

  // Destroys v's elements and keeps its block for this thread's next take() (freed instead when
  // it has none, or the pool is full or gone).
  static void give_back(std::vector<T>&& v) noexcept {
    v.clear();
    if (gone() || v.capacity() == 0 || pool().free.size() >= kMaxPooled) return;
    pool().free.push_back(std::move(v));  // within the reserved capacity: never allocates
  }

  // Blocks pooled on this thread (for tests).
  static size_t pooled() { return gone() ? 0 : pool().free.size(); }

 private:
  struct Pool {
    std::vector<std::vector<T>> free;
    Pool() { free.reserve(kMaxPooled); }
    ~Pool() { gone() = true; }
  };
  // Set once the thread's pool is destroyed (thread exit); trivially destructible, so readable
  // until the thread ends, when an object with static storage may still give a block back.
  static bool& gone() {
    static thread_local bool g = false;
    return g;
  }
  static Pool& pool() {
    static thread_local Pool p;
    return p;
  }
};

}  // namespace servesim::core
