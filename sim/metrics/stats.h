#pragma once
// Summary statistics: exact percentiles of stored samples, and a log-linear histogram for streams
// too long to store (inter-token latencies: one sample per generated token).

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
  void add(int64_t value, uint64_t count = 1);
  uint64_t count() const { return count_; }
  double mean() const;
  // Percentile by linear interpolation between the representative values of the closest ranks.
  double percentile(double p) const;
  // Summary with values divided by `scale` (1e6 turns ns into ms).
  LatencyStats summarize(double scale) const;

 private:
  static constexpr int kSubBits = 11;
  static size_t index_of(uint64_t v);
  static double value_of(size_t index);  // bucket midpoint
  double value_at_rank(uint64_t rank) const;

  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  long double sum_ = 0;
};

}  // namespace servesim::metrics
