#include "hwmodels/efficiency_table.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace servesim::hwmodels {
namespace {

TEST(EfficiencyTableTest, CurveIsLinearInLog2AndClamped) {
  const Curve c({1, 4, 16}, {0.1, 0.5, 0.9});
  EXPECT_DOUBLE_EQ(c(1), 0.1);
  EXPECT_DOUBLE_EQ(c(2), 0.3);  // halfway in log2 between 1 and 4
  EXPECT_DOUBLE_EQ(c(4), 0.5);
  EXPECT_DOUBLE_EQ(c(8), 0.7);
  EXPECT_DOUBLE_EQ(c(0.25), 0.1);  // below the first node
  EXPECT_DOUBLE_EQ(c(1e9), 0.9);   // beyond the last
  EXPECT_DOUBLE_EQ(c.at_log2(1.0), 0.3);
  EXPECT_DOUBLE_EQ(Curve({5}, {0.7})(123), 0.7);
}

TEST(EfficiencyTableTest, TableIsBilinearAndSlicesExactly) {
  // Rows: y = 1, y = 4. Columns: x = 1, 2, 4.
  const Table2D t({1, 2, 4}, {1, 4}, {{0.2, 0.4, 0.6}, {0.4, 0.6, 1.0}});
  EXPECT_DOUBLE_EQ(t(1, 1), 0.2);
  EXPECT_DOUBLE_EQ(t(4, 4), 1.0);
  EXPECT_DOUBLE_EQ(t(2, 2), 0.5);        // halfway between 0.4 and 0.6
  EXPECT_DOUBLE_EQ(t(8, 16), 1.0);       // clamped on both axes
  const Curve slice = t.at_y(2);
  for (double x : {1.0, 1.5, 2.0, 3.0, 4.0, 9.0}) EXPECT_DOUBLE_EQ(slice(x), t(x, 2)) << x;
}

TEST(EfficiencyTableTest, RejectsBadAxes) {
  EXPECT_THROW(Curve({}, {}), core::Error);
  EXPECT_THROW(Curve({1, 1}, {0.1, 0.2}), core::Error);
  EXPECT_THROW(Curve({2, 1}, {0.1, 0.2}), core::Error);
  EXPECT_THROW(Curve({0, 1}, {0.1, 0.2}), core::Error);
  EXPECT_THROW(Curve({1, 2}, {0.1}), core::Error);
  EXPECT_THROW(Table2D({1, 2}, {1}, {{0.1}}), core::Error);
  EXPECT_EQ(axis_problem({1, 2, 3}), "");
  EXPECT_NE(axis_problem({1, 3, 2}), "");
}

}  // namespace
}  // namespace servesim::hwmodels
