#pragma once
// Efficiencies as functions of an operator's shape, read from a calibration profile: piecewise
// linear in log2 of the shape between measured nodes, constant beyond the first and last node
// (a fraction measured at 32k tokens stands for larger batches too).

#include <cstddef>
#include <string>
#include <vector>

namespace servesim::hwmodels {

// y(x) over nodes x_0 < x_1 < ... (all > 0). Evaluation does no allocation: a binary search over
// the nodes and one interpolation.
class Curve {
 public:
  Curve() = default;
  // Throws core::Error unless x and y have the same non-zero size, x is strictly increasing and
  // positive, and every value is finite (callers validate files first, to name file and line).
  Curve(std::vector<double> x, std::vector<double> y);

  bool empty() const { return x_.empty(); }
  double operator()(double x) const;
  // The same at log2(x) already taken (several curves over one shape share it).
  double at_log2(double log2_x) const;
  const std::vector<double>& x() const { return x_; }
  const std::vector<double>& y() const { return y_; }

 private:
  std::vector<double> x_, y_;
  std::vector<double> log_x_;  // log2 of the nodes, so a lookup takes one log2
};

// v(x, y) over a grid: bilinear in (log2 x, log2 y), clamped at the edges. values[j][i] is the
// value at (x[i], y[j]): one row per y node. Evaluation does no allocation.
class Table2D {
 public:
  Table2D() = default;
  Table2D(std::vector<double> x, std::vector<double> y, std::vector<std::vector<double>> values);

  bool empty() const { return x_.empty(); }
  double operator()(double x, double y) const;
  // The curve over x at a fixed y: exact, because bilinear interpolation at fixed y is piecewise
  // linear in log2 x over the same nodes. Cost models slice a table once per operator.
  Curve at_y(double y) const;
  // The curve over y at a fixed x, with the same bits as the table: (*this)(x, y) == at_x(x)(y) for
  // every y (the column holds the rows' values at x as operator() interpolates them, and the curve
  // interpolates between them as operator() does between rows). Cost models slice the decode table
  // once per batch size.
  Curve at_x(double x) const;
  const std::vector<double>& x() const { return x_; }
  const std::vector<double>& y() const { return y_; }
  const std::vector<std::vector<double>>& values() const { return values_; }

 private:
  std::vector<double> x_, y_;
  std::vector<std::vector<double>> values_;
  std::vector<double> log_x_, log_y_;
};

// "" when `nodes` can be a Curve's or a Table2D's axis (non-empty, positive, strictly increasing,
// finite), else a sentence saying what is wrong.
std::string axis_problem(const std::vector<double>& nodes);

}  // namespace servesim::hwmodels
