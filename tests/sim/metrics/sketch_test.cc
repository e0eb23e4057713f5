// The bounded-memory percentiles (stats.h): QuantileSketch against exact sorted quantiles computed
// here (numpy's linear interpolation, written out again), its bound at a bucket's edge by hand,
// merging, and BatchSums against batch means worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sim/core/error.h"
#include "sim/metrics/stats.h"
#include "sim/metrics/steady_state.h"

namespace servesim::metrics {
namespace {

// The oracle: percentile p of the values, numpy's default (linear between closest ranks).
double exact_percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

constexpr double kPercentiles[] = {0, 0.1, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100};

void expect_within_bound(const std::vector<double>& values, const char* what) {
  SCOPED_TRACE(what);
  QuantileSketch s;
  for (double v : values) s.add(v);
  ASSERT_EQ(s.count(), values.size());
  for (double p : kPercentiles) {
    const double exact = exact_percentile(values, p);
    const double got = s.percentile(p);
    // The stated bound, plus the rounding of one interpolation in double.
    EXPECT_LE(std::abs(got - exact), kSketchRelativeError * exact * (1 + 1e-12) + 1e-300)
        << "p" << p << ": sketch " << got << ", exact " << exact;
  }
  long double sum = 0;
  for (double v : values) sum += v;
  EXPECT_NEAR(s.mean(), static_cast<double>(sum / values.size()), 1e-12 * std::abs(static_cast<double>(sum / values.size())));
}

TEST(QuantileSketchTest, StatedBoundIsOneOver512) { EXPECT_DOUBLE_EQ(kSketchRelativeError, 1.0 / 512); }

TEST(QuantileSketchTest, EveryPercentileWithinTheBoundOnSeveralDistributions) {
  std::mt19937_64 rng(7);
  const size_t n = 200'001;
  std::vector<double> v(n);
  std::lognormal_distribution<double> lognormal(3.0, 1.2);
  for (auto& x : v) x = lognormal(rng);
  expect_within_bound(v, "lognormal");
  std::uniform_real_distribution<double> uniform(10, 20);
  for (auto& x : v) x = uniform(rng);
  expect_within_bound(v, "uniform [10, 20)");
  std::uniform_real_distribution<double> u01(0, 1);
  for (auto& x : v) x = std::pow(1 - u01(rng), -1.0 / 1.1);  // Pareto, alpha 1.1: a heavy tail
  expect_within_bound(v, "pareto 1.1");
  for (auto& x : v) x = std::pow(10.0, -3 + 9 * u01(rng));  // log-uniform over 1e-3 .. 1e6
  expect_within_bound(v, "log-uniform 1e-3..1e6");
  std::vector<double> constant(1000, 123.456);
  expect_within_bound(constant, "constant");
  expect_within_bound({42.0}, "one value");
  expect_within_bound({0, 0, 0, 5, 1e-3, 1e6}, "zeros and extremes");
}

TEST(QuantileSketchTest, BucketEdgeByHand) {
  // 1.0 = 0.5 x 2^1: bucket [1, 1 + 1/256), represented by its midpoint 1 + 1/512: the error is
  // exactly the bound. 3.0 = 0.75 x 2^2: bucket [3, 3 + 1/128), midpoint 3 + 1/256.
  QuantileSketch s;
  s.add(1.0);
  EXPECT_EQ(s.percentile(50), 1.0 + 1.0 / 512);
  EXPECT_EQ(s.mean(), 1.0);  // the mean is exact
  QuantileSketch t;
  t.add(3.0);
  t.add(3.0);
  EXPECT_EQ(t.percentile(99), 3.0 + 1.0 / 256);
  // Zero is exact; p50 of {0, 0, 0, 8}: rank 1.5 between two zeros.
  QuantileSketch z;
  for (double v : {0.0, 0.0, 8.0, 0.0}) z.add(v);
  EXPECT_EQ(z.percentile(50), 0.0);
  EXPECT_EQ(z.percentile(100), 8.0 + 8.0 / 512);  // 8 = 0.5 x 2^4: [8, 8 + 1/32), midpoint 8 + 1/64
  EXPECT_EQ(QuantileSketch().percentile(50), 0.0);
}

TEST(QuantileSketchTest, RejectsNegativeAndNonFiniteValues) {
  QuantileSketch s;
  EXPECT_THROW(s.add(-1.0), core::Error);
  EXPECT_THROW(s.add(std::numeric_limits<double>::quiet_NaN()), core::Error);
  EXPECT_THROW(s.add(std::numeric_limits<double>::infinity()), core::Error);
  EXPECT_EQ(s.count(), 0u);
}

TEST(QuantileSketchTest, MergeEqualsTheSketchOfTheUnion) {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> a_dist(1.0, 0.5), b_dist(6.0, 2.0);  // disjoint-ish ranges
  QuantileSketch a, b, all, b_then_a;
  std::vector<double> values;
  for (int i = 0; i < 50'000; ++i) {
    const double x = a_dist(rng), y = b_dist(rng);
    a.add(x);
    b.add(y);
    values.push_back(x);
    values.push_back(y);
  }
  for (double v : values) all.add(v);
  b_then_a = b;
  b_then_a.merge(a);  // b's range first: a's buckets extend it downwards
  a.merge(b);
  for (const QuantileSketch* m : {&a, &b_then_a}) {
    EXPECT_TRUE(m->same_counts(all));
    EXPECT_EQ(m->count(), all.count());
    for (double p : kPercentiles) EXPECT_EQ(m->percentile(p), all.percentile(p)) << p;
    EXPECT_NEAR(m->mean(), all.mean(), 1e-12 * all.mean());
  }
  QuantileSketch empty;
  QuantileSketch copy = all;
  copy.merge(empty);
  EXPECT_TRUE(copy.same_counts(all));
  empty.merge(all);
  EXPECT_TRUE(empty.same_counts(all));
  // A different sketch is told apart.
  QuantileSketch other = all;
  other.add(1.0);
  EXPECT_FALSE(other.same_counts(all));
}

TEST(QuantileSketchTest, Deterministic) {
  auto build = [] {
    std::mt19937_64 rng(3);
    std::lognormal_distribution<double> d(2, 1);
    QuantileSketch s;
    for (int i = 0; i < 10'000; ++i) s.add(d(rng));
    return s.summarize();
  };
  const LatencyStats x = build(), y = build();
  EXPECT_EQ(x.p50, y.p50);
  EXPECT_EQ(x.p90, y.p90);
  EXPECT_EQ(x.p99, y.p99);
  EXPECT_EQ(x.mean, y.mean);
}

TEST(BatchSumsTest, BelowTheBlockLimitItIsExactlyBatchMeans) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 100);
  std::vector<double> v(4001);
  BatchSums b;
  for (auto& x : v) b.add(x = u(rng));
  for (size_t batches : {1, 7, 20, 4001}) EXPECT_EQ(b.batch_means(batches), batch_means(v, batches)) << batches;
  EXPECT_TRUE(b.batch_means(4002).empty());
}

TEST(BatchSumsTest, MergedBlocksByHand) {
  // 0, 1, 2, ..., n-1. 4096 blocks of 1 merge into 2048 of 2 (4096 values); 8192 values make 4096
  // blocks of 2, merged into 2048 of 4; 10,000 values are 2,500 blocks of 4. 20 batches of 125
  // blocks (500 values): batch b is the values 500b .. 500b + 499, mean 500b + 249.5.
  BatchSums b;
  for (int i = 0; i < 10'000; ++i) b.add(i);
  EXPECT_EQ(b.count(), 10'000u);
  std::vector<double> m = b.batch_means(20);
  ASSERT_EQ(m.size(), 20u);
  for (size_t k = 0; k < 20; ++k) EXPECT_DOUBLE_EQ(m[k], 500.0 * k + 249.5);
  // 7 batches: 2,500 = 7 x 357 + 1, the first block (values 0..3) left out; batch b is the values
  // 4 + 1428b .. 4 + 1428b + 1427.
  m = b.batch_means(7);
  ASSERT_EQ(m.size(), 7u);
  for (size_t k = 0; k < 7; ++k) EXPECT_DOUBLE_EQ(m[k], 4 + 1428.0 * k + 713.5);
  // Three more values make an unfinished block: left out.
  for (int i = 10'000; i < 10'003; ++i) b.add(i);
  m = b.batch_means(20);
  for (size_t k = 0; k < 20; ++k) EXPECT_DOUBLE_EQ(m[k], 500.0 * k + 249.5);
}

TEST(LatencyStoreTest, ExactUntilSwitchedThenTheSketchOfEveryValue) {
  LatencyStore store(true);
  QuantileSketch oracle;
  std::vector<double> values;
  for (int i = 1; i <= 1000; ++i) {
    const double v = std::sqrt(static_cast<double>(i));
    store.add(v);
    values.push_back(v);
  }
  EXPECT_FALSE(store.sketched());
  EXPECT_EQ(store.batch_means(10), batch_means(values, 10));
  store.to_sketch();
  EXPECT_TRUE(store.sketched());
  for (int i = 1001; i <= 3000; ++i) {
    const double v = std::sqrt(static_cast<double>(i));
    store.add(v);
    values.push_back(v);
  }
  for (double v : values) oracle.add(v);
  EXPECT_EQ(store.count(), 3000u);
  const LatencyStats s = store.summarize();
  EXPECT_EQ(s.p50, oracle.percentile(50));
  EXPECT_EQ(s.p99, oracle.percentile(99));
  EXPECT_LE(std::abs(s.p90 - exact_percentile(values, 90)), kSketchRelativeError * exact_percentile(values, 90));
  // The order is kept for batch means (3,000 values: width 1, exactly batch_means).
  EXPECT_EQ(store.batch_means(10), batch_means(values, 10));
}

}  // namespace
}  // namespace servesim::metrics
