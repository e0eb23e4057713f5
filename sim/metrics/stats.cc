#include "sim/metrics/stats.h"

#include <algorithm>
#include <bit>
#include <cmath>

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
  return count_ ? static_cast<double>(sum_ / static_cast<long double>(count_)) : 0.0;
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
