#include "hwmodels/recycled_rows.h"

#include <utility>

namespace servesim::hwmodels {
namespace {

struct Pool {
  std::vector<std::vector<double>> free;
  Pool() { free.reserve(RecycledRows::kMaxPooled); }  // giving back (in destructors) never allocates
  ~Pool();
};

// Set when the thread's pool has been destroyed (thread exit): a RecycledRows that dies later on the
// thread (a static object's, at process exit) frees its storage instead. Trivially destructible, so
// readable until the thread ends.
thread_local bool pool_gone = false;
thread_local Pool pool;

Pool::~Pool() { pool_gone = true; }

}  // namespace

RecycledRows& RecycledRows::operator=(RecycledRows&& other) noexcept {
  if (this != &other) {
    give_back();
    std::vector<double>::operator=(std::move(other));
    pooled_ = other.pooled_;
    other.pooled_ = false;
  }
  return *this;
}

RecycledRows::~RecycledRows() { give_back(); }

void RecycledRows::give_back() {
  if (!pooled_) return;
  pooled_ = false;
  if (pool_gone || capacity() == 0 || pool.free.size() >= kMaxPooled) return;
  std::vector<double>& self = *this;
  pool.free.push_back(std::move(self));
  pool.free.back().clear();
}

void RecycledRows::take_storage(size_t capacity) {
  give_back();
  std::vector<double>& self = *this;
  if (!pool_gone && !pool.free.empty()) {
    self = std::move(pool.free.back());
    pool.free.pop_back();
  } else {
    self = std::vector<double>();
  }
  clear();  // pooled vectors are empty already; stated here because the proof rests on it
  reserve(capacity);
  pooled_ = true;
}

size_t RecycledRows::pooled_on_this_thread() { return pool_gone ? 0 : pool.free.size(); }

}  // namespace servesim::hwmodels
