#include "sim/metrics/stats.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/metrics/steady_state.h"

namespace servesim::metrics {

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double pos = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

LatencyStats summarize(std::vector<double>& samples) {
  LatencyStats s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  long double sum = 0;
  for (double v : samples) sum += v;
  s.mean = static_cast<double>(sum / static_cast<long double>(samples.size()));
  s.p50 = percentile_sorted(samples, 50);
  s.p90 = percentile_sorted(samples, 90);
  s.p99 = percentile_sorted(samples, 99);
  return s;
}

double LogHistogram::value_of(size_t index) {
  constexpr uint64_t kExact = uint64_t{1} << kSubBits;
  if (index < kExact) return static_cast<double>(index);
  const uint64_t rest = index - kExact;
  const int shift = static_cast<int>(rest / (kExact / 2)) + 1;
  const uint64_t mantissa = rest % (kExact / 2) + kExact / 2;
  const double low = std::ldexp(static_cast<double>(mantissa), shift);
  return low + std::ldexp(1.0, shift) / 2.0 - 0.5;  // midpoint of [low, low + 2^shift - 1]
}

double LogHistogram::mean() const {
  // The same as the long double sum this was until 2026-12-02 while the sum fits 64 bits (every
  // run here: 2^64 ns is 584 years of gaps); exact beyond.
  return count_ ? static_cast<double>(static_cast<long double>(sum_) / static_cast<long double>(count_)) : 0.0;
}

double LogHistogram::value_at_rank(uint64_t rank) const {
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen > rank) return value_of(i);
  }
  return value_of(buckets_.size() - 1);
}

double LogHistogram::percentile(double p) const {
  if (count_ == 0) return 0;
  const double pos = p / 100.0 * static_cast<double>(count_ - 1);
  const uint64_t lo = static_cast<uint64_t>(std::floor(pos));
  const uint64_t hi = std::min<uint64_t>(lo + 1, count_ - 1);
  const double vlo = value_at_rank(lo), vhi = value_at_rank(hi);
  return vlo + (vhi - vlo) * (pos - static_cast<double>(lo));
}

LatencyStats LogHistogram::summarize(double scale) const {
  LatencyStats s;
  s.count = count_;
  if (count_ == 0) return s;
  s.mean = mean() / scale;
  s.p50 = percentile(50) / scale;
  s.p90 = percentile(90) / scale;
  s.p99 = percentile(99) / scale;
  return s;
}

}  // namespace servesim::metrics

namespace servesim::metrics {

int64_t QuantileSketch::key_of(double v) {
  int e = 0;
  const double f = std::frexp(v, &e);  // v = f x 2^e, f in [0.5, 1)
  const auto m = static_cast<int64_t>(std::ldexp(f, kSketchSubBits + 1));  // [2^k, 2^(k+1)), exact
  return static_cast<int64_t>(e) * (int64_t{1} << kSketchSubBits) + (m - (int64_t{1} << kSketchSubBits));
}

double QuantileSketch::value_of(int64_t key) {
  constexpr int64_t kPer = int64_t{1} << kSketchSubBits;
  const int64_t e = key >= 0 ? key / kPer : -((-key + kPer - 1) / kPer);  // floor division
  const int64_t m = key - e * kPer + kPer;
  // (m + 1/2) x 2^(e-k-1) = (2m + 1) x 2^(e-k-2)
  return std::ldexp(static_cast<double>(2 * m + 1), static_cast<int>(e) - kSketchSubBits - 2);
}

void QuantileSketch::add_key(int64_t key, uint64_t n) {
  if (counts_.empty()) {
    offset_ = key;
    counts_.assign(1, 0);
  } else if (key < offset_) {
    counts_.insert(counts_.begin(), static_cast<size_t>(offset_ - key), 0);
    offset_ = key;
  } else if (key - offset_ >= static_cast<int64_t>(counts_.size())) {
    counts_.resize(static_cast<size_t>(key - offset_ + 1), 0);
  }
  counts_[static_cast<size_t>(key - offset_)] += n;
}

void QuantileSketch::add(double v) {
  if (!(v >= 0) || !std::isfinite(v))
    throw core::Error("internal: the percentile sketch takes finite non-negative values; got " + core::format_double(v));
  ++count_;
  sum_ += v;
  if (v == 0) {
    ++zeros_;
    return;
  }
  add_key(key_of(v), 1);
}

void QuantileSketch::merge(const QuantileSketch& other) {
  for (size_t i = 0; i < other.counts_.size(); ++i)
    if (other.counts_[i]) add_key(other.offset_ + static_cast<int64_t>(i), other.counts_[i]);
  zeros_ += other.zeros_;
  count_ += other.count_;
  sum_ += other.sum_;
}

bool QuantileSketch::same_counts(const QuantileSketch& other) const {
  if (zeros_ != other.zeros_ || count_ != other.count_) return false;
  // Compare bucket by bucket over both ranges (a range may carry zero counts at its ends).
  auto at = [](const QuantileSketch& s, int64_t key) -> uint64_t {
    const int64_t i = key - s.offset_;
    return i >= 0 && i < static_cast<int64_t>(s.counts_.size()) ? s.counts_[static_cast<size_t>(i)] : 0;
  };
  int64_t lo = 0, hi = -1;
  if (!counts_.empty()) lo = offset_, hi = offset_ + static_cast<int64_t>(counts_.size()) - 1;
  if (!other.counts_.empty()) {
    lo = counts_.empty() ? other.offset_ : std::min(lo, other.offset_);
    hi = std::max(hi, other.offset_ + static_cast<int64_t>(other.counts_.size()) - 1);
  }
  for (int64_t k = lo; k <= hi; ++k)
    if (at(*this, k) != at(other, k)) return false;
  return true;
}

double QuantileSketch::mean() const {
  return count_ ? static_cast<double>(sum_ / static_cast<long double>(count_)) : 0.0;
}

double QuantileSketch::value_at_rank(uint64_t rank) const {
  if (rank < zeros_) return 0;
  uint64_t seen = zeros_;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen > rank) return value_of(offset_ + static_cast<int64_t>(i));
  }
  return counts_.empty() ? 0 : value_of(offset_ + static_cast<int64_t>(counts_.size()) - 1);
}

double QuantileSketch::percentile(double p) const {
  if (count_ == 0) return 0;
  // The ranks and weight of percentile_sorted.
  const double pos = p / 100.0 * static_cast<double>(count_ - 1);
  const auto lo = static_cast<uint64_t>(std::floor(pos));
  const uint64_t hi = std::min<uint64_t>(lo + 1, count_ - 1);
  const double vlo = value_at_rank(lo), vhi = value_at_rank(hi);
  return vlo + (vhi - vlo) * (pos - static_cast<double>(lo));
}

LatencyStats QuantileSketch::summarize() const {
  LatencyStats s;
  s.count = count_;
  if (count_ == 0) return s;
  s.mean = mean();
  s.p50 = percentile(50);
  s.p90 = percentile(90);
  s.p99 = percentile(99);
  return s;
}

void BatchSums::close_block() {
  blocks_.push_back(current_);
  current_ = 0;
  in_current_ = 0;
  if (blocks_.size() < kMaxBlocks) return;
  for (size_t i = 0; i < kMaxBlocks / 2; ++i) blocks_[i] = blocks_[2 * i] + blocks_[2 * i + 1];
  blocks_.resize(kMaxBlocks / 2);
  width_ *= 2;
}

std::vector<double> BatchSums::batch_means(size_t batches) const {
  std::vector<double> out;
  if (batches == 0 || blocks_.size() < batches) return out;
  const size_t size = blocks_.size() / batches;  // blocks per batch
  const size_t skip = blocks_.size() - size * batches;
  const long double n = static_cast<long double>(size) * static_cast<long double>(width_);
  out.reserve(batches);
  for (size_t b = 0; b < batches; ++b) {
    long double sum = 0;
    for (size_t i = 0; i < size; ++i) sum += blocks_[skip + b * size + i];
    out.push_back(static_cast<double>(sum / n));
  }
  return out;
}

void LatencyStore::add_sketched(double v) {
  sketch_.add(v);
  if (keep_sequence_) sequence_.add(v);
}

void LatencyStore::to_sketch() {
  if (sketched_) return;
  sketched_ = true;
  for (double v : values_) add_sketched(v);
  std::vector<double>().swap(values_);
}

std::vector<double> LatencyStore::batch_means(size_t batches) const {
  return sketched_ ? sequence_.batch_means(batches) : metrics::batch_means(values_, batches);
}

LatencyStats LatencyStore::summarize() {
  return sketched_ ? sketch_.summarize() : metrics::summarize(values_);
}

}  // namespace servesim::metrics
