#pragma once
// Least-squares fits of efficiency curves and tables to measured samples. The unknowns are the
// values at the nodes; a sample between nodes is their piecewise-linear interpolation in log2 of the
// shape (what hwmodels::Curve and Table2D evaluate). The fit is in log(efficiency), so each sample's
// relative error counts the same whatever its size, with a second-difference penalty that keeps
// the curve smooth where samples are sparse and fills nodes without samples.

#include <vector>

#include "hwmodels/calibration_profile.h"
#include "hwmodels/efficiency_table.h"

namespace servesim::calibration {

// Nodes 2^(k x step), rounded to 4 significant digits, for the k whose nodes cover [lo, hi]: the
// first at or below lo, the last at or above hi (lo, hi > 0; step >= 0.01).
std::vector<double> log2_nodes(double lo, double hi, double step = 1.0);

// Efficiency over x. `efficiency` values must be positive; `smoothing` weighs the second-difference
// penalty against the samples (per node, relative to one sample). Results are clamped to
// [1e-4, max_efficiency] (a memory efficiency's physical bound, fit.h; else the format's bound) and
// rounded to 4 significant digits.
hwmodels::Curve fit_curve(const std::vector<double>& x, const std::vector<double>& efficiency,
                          const std::vector<double>& nodes, double smoothing,
                          double max_efficiency = hwmodels::kMaxEfficiency);

// Efficiency over (x, y), same conventions; the table has one row per y node.
hwmodels::Table2D fit_table(const std::vector<double>& x, const std::vector<double>& y,
                            const std::vector<double>& efficiency, const std::vector<double>& x_nodes,
                            const std::vector<double>& y_nodes, double smoothing,
                            double max_efficiency = hwmodels::kMaxEfficiency);

// Weighted linear regression t = a + b s minimising the relative error of t (weights 1/t^2);
// {a, b}. Falls back to the single-point fit a = 0 when all s are equal.
struct Line {
  double intercept = 0;
  double slope = 0;
};
Line fit_relative_line(const std::vector<double>& s, const std::vector<double>& t);

// Rounds to `digits` significant digits (profiles stay readable).
double round_significant(double v, int digits = 4);

}  // namespace servesim::calibration
