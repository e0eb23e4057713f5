#include "hwmodels/recycled_rows.h"

#include <utility>

#include "sim/core/recycled_storage.h"

namespace servesim::hwmodels {

using Storage = core::RecycledStorage<double>;
static_assert(Storage::kMaxPooled == RecycledRows::kMaxPooled);

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
  std::vector<double>& self = *this;
  Storage::give_back(std::move(self));
  self = std::vector<double>();
}

void RecycledRows::take_storage(size_t capacity) {
  give_back();
  std::vector<double>& self = *this;
  self = Storage::take(capacity);  // size 0: nothing a former owner wrote can be read
  pooled_ = true;
}

size_t RecycledRows::pooled_on_this_thread() { return Storage::pooled(); }

}  // namespace servesim::hwmodels
