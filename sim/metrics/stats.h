#pragma once
// Summary statistics: exact percentiles of stored samples, and a log-linear histogram for streams
// too long to store (inter-token latencies: one sample per generated token).

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace servesim::metrics {

struct LatencyStats {
  uint64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
};

// Percentile `p` in [0, 100] of sorted samples by linear interpolation between closest ranks
// (numpy's default, which vLLM's and SGLang's benchmarks use). 0 for no samples.
double percentile_sorted(const std::vector<double>& sorted, double p);
// Sorts `samples` in place and summarises them.
LatencyStats summarize(std::vector<double>& samples);

// Non-negative integer samples (nanoseconds) in buckets of relative width below 2^-10 (0.1%):
// values below 2048 are exact. Mean is exact.
class LogHistogram {
 public:
  LogHistogram() : buckets_(kBuckets, 0) {}
  // One sample per generated token goes through here: a shift, a subtraction and an increment.
  void add(int64_t value, uint64_t count = 1) {
    const uint64_t v = value < 0 ? 0 : static_cast<uint64_t>(value);
    buckets_[index_of(v)] += count;
    count_ += count;
    sum_ += static_cast<long double>(v) * count;
  }
  uint64_t count() const { return count_; }
  double mean() const;
  // Percentile by linear interpolation between the representative values of the closest ranks.
  double percentile(double p) const;
  // Summary with values divided by `scale` (1e6 turns ns into ms).
  LatencyStats summarize(double scale) const;

 private:
  static constexpr int kSubBits = 11;
  // Exact values below 2^kSubBits, then 2^(kSubBits-1) buckets per power of two up to 2^63.
  static constexpr size_t kBuckets = (size_t{1} << kSubBits) + (63 - kSubBits + 1) * (size_t{1} << (kSubBits - 1));
  static size_t index_of(uint64_t v) {
    constexpr uint64_t kExact = uint64_t{1} << kSubBits;
    if (v < kExact) return static_cast<size_t>(v);
    const int e = 63 - std::countl_zero(v);  // >= kSubBits
    const int shift = e - (kSubBits - 1);    // >= 1
    return static_cast<size_t>(kExact + static_cast<uint64_t>(shift - 1) * (kExact / 2) + ((v >> shift) - kExact / 2));
  }
  static double value_of(size_t index);  // bucket midpoint
  double value_at_rank(uint64_t rank) const;

  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  long double sum_ = 0;
};

}  // namespace servesim::metrics
