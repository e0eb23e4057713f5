#include "hwmodels/efficiency_table.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"

namespace servesim::hwmodels {

namespace {

// Index i and weight f with the value = (1 - f) v[i] + f v[i + 1]; f = 0 at and beyond the ends.
struct Segment {
  size_t i = 0;
  double f = 0;
};

Segment locate(const std::vector<double>& log_nodes, double log_x) {
  const size_t n = log_nodes.size();
  if (n == 1 || !(log_x > log_nodes.front())) return {0, 0.0};  // also catches NaN
  if (log_x >= log_nodes.back()) return {n - 1, 0.0};
  const auto it = std::upper_bound(log_nodes.begin(), log_nodes.end(), log_x);
  const size_t i = static_cast<size_t>(it - log_nodes.begin()) - 1;
  return {i, (log_x - log_nodes[i]) / (log_nodes[i + 1] - log_nodes[i])};
}

double lerp(const std::vector<double>& v, Segment s) {
  return s.f == 0.0 ? v[s.i] : v[s.i] + s.f * (v[s.i + 1] - v[s.i]);
}

std::vector<double> log2_of(const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = std::log2(x[i]);
  return out;
}

}  // namespace

std::string axis_problem(const std::vector<double>& nodes) {
  if (nodes.empty()) return "needs at least one node";
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!std::isfinite(nodes[i]) || nodes[i] <= 0) return "nodes must be positive and finite";
    if (i > 0 && !(nodes[i] > nodes[i - 1])) return "nodes must be strictly increasing";
  }
  return "";
}

Curve::Curve(std::vector<double> x, std::vector<double> y) : x_(std::move(x)), y_(std::move(y)) {
  if (const std::string p = axis_problem(x_); !p.empty()) throw core::Error("curve axis: " + p);
  if (y_.size() != x_.size()) throw core::Error("curve: as many values as nodes are needed");
  for (double v : y_)
    if (!std::isfinite(v)) throw core::Error("curve: values must be finite");
  log_x_ = log2_of(x_);
}

double Curve::operator()(double x) const { return lerp(y_, locate(log_x_, std::log2(x))); }

double Curve::at_log2(double log2_x) const { return lerp(y_, locate(log_x_, log2_x)); }

Table2D::Table2D(std::vector<double> x, std::vector<double> y, std::vector<std::vector<double>> values)
    : x_(std::move(x)), y_(std::move(y)), values_(std::move(values)) {
  if (const std::string p = axis_problem(x_); !p.empty()) throw core::Error("table x axis: " + p);
  if (const std::string p = axis_problem(y_); !p.empty()) throw core::Error("table y axis: " + p);
  if (values_.size() != y_.size()) throw core::Error("table: one row of values per y node is needed");
  for (const auto& row : values_) {
    if (row.size() != x_.size()) throw core::Error("table: each row needs one value per x node");
    for (double v : row)
      if (!std::isfinite(v)) throw core::Error("table: values must be finite");
  }
  log_x_ = log2_of(x_);
  log_y_ = log2_of(y_);
}

double Table2D::operator()(double x, double y) const {
  const Segment sx = locate(log_x_, std::log2(x));
  const Segment sy = locate(log_y_, std::log2(y));
  const double lo = lerp(values_[sy.i], sx);
  if (sy.f == 0.0) return lo;
  return lo + sy.f * (lerp(values_[sy.i + 1], sx) - lo);
}

Curve Table2D::at_y(double y) const {
  const Segment sy = locate(log_y_, std::log2(y));
  std::vector<double> v(x_.size());
  for (size_t i = 0; i < x_.size(); ++i)
    v[i] = sy.f == 0.0 ? values_[sy.i][i] : values_[sy.i][i] + sy.f * (values_[sy.i + 1][i] - values_[sy.i][i]);
  return Curve(x_, std::move(v));
}

Curve Table2D::at_x(double x) const {
  const Segment sx = locate(log_x_, std::log2(x));
  std::vector<double> v(y_.size());
  for (size_t j = 0; j < y_.size(); ++j) v[j] = lerp(values_[j], sx);
  return Curve(y_, std::move(v));
}

}  // namespace servesim::hwmodels
