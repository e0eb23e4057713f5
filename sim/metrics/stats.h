#pragma once
// Summary statistics: exact percentiles of stored samples, a log-linear histogram for streams too
// long to store (inter-token latencies: one sample per generated token), and a mergeable quantile
// sketch with a stated relative error for runs too long to keep every latency (LatencyStore).

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
// values below 2048 are exact. The sum is an exact integer, so the mean is the exact one rounded.
class LogHistogram {
 public:
  LogHistogram() : buckets_(kBuckets, 0) {}
  // One sample per generated token goes through here: a shift, a subtraction and an increment.
  void add(int64_t value, uint64_t count = 1) {
    const uint64_t v = value < 0 ? 0 : static_cast<uint64_t>(value);
    buckets_[index_of(v)] += count;
    count_ += count;
    sum_ += static_cast<unsigned __int128>(v) * count;  // (a long double sum took the x87 unit every token)
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
  unsigned __int128 sum_ = 0;
};

// ---- Bounded-memory percentiles ------------------------------------------------------------------
//
// A mergeable quantile sketch of non-negative doubles (latencies in ms) with a relative error bound
// that holds for every percentile: kSketchRelativeError = 2^-(kSketchSubBits+1) = 1/512 (0.196%).
//
// Buckets. A value v > 0 is f x 2^e with f in [0.5, 1) (frexp, exact); its bucket is the top
// kSketchSubBits+1 bits of f: m = floor(f x 2^(k+1)) in [2^k, 2^(k+1)) (k = kSketchSubBits), so
// the bucket is [lo, hi) = [m, m+1) x 2^(e-k-1). Buckets are ordered as values are (key
// e x 2^k + m - 2^k grows with v), and every value of a bucket is represented by its midpoint
// r = (m + 1/2) x 2^(e-k-1) (computed exactly with ldexp). Zero has a bucket of its own (exact).
//
// Bound for one value: |r - v| <= (hi - lo) / 2 = 2^(e-k-2), and v >= lo = m x 2^(e-k-1) >= 2^(e-1),
// so |r - v| / v <= 2^(-k-1).
//
// Bound for every percentile. The exact percentile (percentile_sorted: numpy's linear
// interpolation) is q = (1-t) x_i + t x_{i+1}, x_i the i-th smallest value, i and t from p and n
// alone. Since buckets are ordered as values are, the bucket holding the value of rank i is the
// one the sketch's cumulative counts reach at rank i, so the sketch's estimate is
// q' = (1-t) r(x_i) + t r(x_{i+1}) with |r(x) - x| <= eps x, and
// |q' - q| <= (1-t) |r(x_i) - x_i| + t |r(x_{i+1}) - x_{i+1}| <= eps ((1-t) x_i + t x_{i+1}) = eps q
// (values non-negative). The mean is exact (a long double sum), not estimated.
//
// Merging adds counts bucket by bucket: the merge of two sketches has the counts of the sketch
// of the union, whatever the order the values came in.
inline constexpr int kSketchSubBits = 8;
inline constexpr double kSketchRelativeError = 1.0 / static_cast<double>(2 << kSketchSubBits);  // 1/512

class QuantileSketch {
 public:
  // v >= 0 and finite (a latency); anything else is an internal error (core::Error).
  void add(double v);
  void merge(const QuantileSketch& other);
  uint64_t count() const { return count_; }
  double mean() const;
  double percentile(double p) const;  // p in [0, 100]; 0 for no values
  LatencyStats summarize() const;
  // Same buckets with the same counts (what merge must give).
  bool same_counts(const QuantileSketch& other) const;
  size_t buckets() const { return counts_.size(); }  // dense range from the smallest to the largest key

 private:
  static int64_t key_of(double v);    // v > 0
  static double value_of(int64_t key);  // the bucket's midpoint
  double value_at_rank(uint64_t rank) const;
  void add_key(int64_t key, uint64_t n);

  std::vector<uint64_t> counts_;  // counts_[i]: bucket key offset_ + i
  int64_t offset_ = 0;
  uint64_t zeros_ = 0, count_ = 0;
  long double sum_ = 0;
};

// Batch means of a sequence too long to keep: sums of consecutive blocks of `width` observations
// (width 1 at first; when kMaxBlocks blocks are full, neighbours are added together and the width
// doubles). batch_means(b) uses whole blocks only: the F full blocks go into b batches of F / b
// blocks each, the first F mod b blocks (the nearest the warm-up) and the unfinished last block
// are left out, so every batch has the same number of observations. Below kMaxBlocks observations
// (width 1) this is exactly metrics::batch_means of the sequence; past it, at most b blocks of
// 2 n / kMaxBlocks observations are left out (under 1% of them with the default 20 batches).
class BatchSums {
 public:
  static constexpr size_t kMaxBlocks = 4096;
  void add(double v) {
    current_ += v;
    if (++in_current_ == width_) close_block();
  }
  uint64_t count() const { return static_cast<uint64_t>(blocks_.size()) * width_ + in_current_; }
  std::vector<double> batch_means(size_t batches) const;

 private:
  void close_block();
  std::vector<long double> blocks_;
  long double current_ = 0;
  uint64_t in_current_ = 0, width_ = 1;
};

// How a run keeps its latency percentiles ([output] percentiles).
enum class PercentileMode {
  kAuto,    // exact up to exact_percentiles_max completed requests, then the sketch
  kExact,   // every value kept (24 bytes per completed request for TTFT, TPOT and E2E)
  kSketch,  // the sketch from the start
};
// auto's switch point: past this many completed requests (10 M: 240 MB of exact values), the
// collector feeds its exact values into sketches and frees them.
inline constexpr uint64_t kExactPercentilesMax = 10'000'000;

// One latency's values: exact (kept, sorted at the end) until to_sketch(), then a QuantileSketch
// and, for keep_sequence stores, the batch sums of the values in the order they came.
class LatencyStore {
 public:
  explicit LatencyStore(bool keep_sequence = false) : keep_sequence_(keep_sequence) {}
  void add(double v) {
    if (!sketched_) [[likely]]
      values_.push_back(v);
    else
      add_sketched(v);
  }
  // Moves the exact values (in their order) into the sketch and the batch sums, and frees them.
  void to_sketch();
  bool sketched() const { return sketched_; }
  uint64_t count() const { return sketched_ ? sketch_.count() : values_.size(); }
  // Batch means of the values in the order they came (metrics::batch_means, or BatchSums's).
  std::vector<double> batch_means(size_t batches) const;
  // Exact mode: sorts the values (summarize(vector)); sketched: the sketch's summary.
  LatencyStats summarize();

 private:
  void add_sketched(double v);
  bool keep_sequence_ = false;
  bool sketched_ = false;
  std::vector<double> values_;
  QuantileSketch sketch_;
  BatchSums sequence_;
};

}  // namespace servesim::metrics
