#include "calibration/smooth_fit.h"

#include <algorithm>
#include <cmath>

#include "hwmodels/calibration_profile.h"
#include "sim/core/error.h"

namespace servesim::calibration {

namespace {

constexpr double kMinEfficiency = 1e-4;
// A tiny pull towards efficiency 1 keeps the system positive definite when a node is constrained
// by nothing else.
constexpr double kRidge = 1e-6;

struct Basis {
  size_t i = 0;
  double w = 0;
};

// The one or two hat functions non-zero at log2 x.
void hat(const std::vector<double>& log_nodes, double lx, Basis out[2], size_t& n) {
  const size_t k = log_nodes.size();
  if (k == 1 || lx <= log_nodes.front()) {
    out[0] = {0, 1.0};
    n = 1;
    return;
  }
  if (lx >= log_nodes.back()) {
    out[0] = {k - 1, 1.0};
    n = 1;
    return;
  }
  const size_t i = static_cast<size_t>(std::upper_bound(log_nodes.begin(), log_nodes.end(), lx) - log_nodes.begin()) - 1;
  const double f = (lx - log_nodes[i]) / (log_nodes[i + 1] - log_nodes[i]);
  out[0] = {i, 1.0 - f};
  out[1] = {i + 1, f};
  n = 2;
}

std::vector<double> logs(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::log2(v[i]);
  return out;
}

// Solves A x = b for symmetric positive definite A (n x n, row-major) by Cholesky.
std::vector<double> solve_spd(std::vector<double> a, std::vector<double> b, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) throw core::Error("calibration fit: the least-squares system is singular");
    d = std::sqrt(d);
    a[j * n + j] = d;
    for (size_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / d;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    double s = b[i];
    for (size_t k = 0; k < i; ++k) s -= a[i * n + k] * b[k];
    b[i] = s / a[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t k = i + 1; k < n; ++k) s -= a[k * n + i] * b[k];
    b[i] = s / a[i * n + i];
  }
  return b;
}

// Adds l x (sum_k c_k x_{idx_k})^2 to the normal equations.
void add_penalty(std::vector<double>& a, size_t n, const size_t idx[3], const double c[3], double l) {
  for (int p = 0; p < 3; ++p)
    for (int q = 0; q < 3; ++q) a[idx[p] * n + idx[q]] += l * c[p] * c[q];
}

double finish(double log_eff, double max_efficiency) {
  return round_significant(std::clamp(std::exp(log_eff), kMinEfficiency, max_efficiency));
}

void check_samples(const std::vector<double>& eff) {
  if (eff.empty()) throw core::Error("calibration fit: no samples");
  for (double e : eff)
    if (!(e > 0) || !std::isfinite(e)) throw core::Error("calibration fit: an efficiency sample is not positive");
}

}  // namespace

double round_significant(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const int shift = digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(v))));
  // Dividing by an exact power of ten (rather than multiplying by its inexact inverse) keeps large
  // values' shortest decimal form: 134217728 -> 134200000, not 134199999.99999999.
  if (shift < 0) {
    const double factor = std::pow(10.0, -shift);
    return std::round(v / factor) * factor;
  }
  const double scale = std::pow(10.0, shift);
  return std::round(v * scale) / scale;
}

std::vector<double> log2_nodes(double lo, double hi, double step) {
  if (!(lo > 0) || !(hi >= lo) || !(step > 0)) throw core::Error("calibration fit: bad node range");
  const double first = std::floor(std::log2(lo) / step + 1e-9);
  const double last = std::ceil(std::log2(hi) / step - 1e-9);
  std::vector<double> nodes;
  // Rounded to 4 significant digits so profiles read well; half-octave or coarser steps stay
  // strictly increasing.
  for (double k = first; k <= last; k += 1) nodes.push_back(round_significant(std::exp2(k * step)));
  return nodes;
}

hwmodels::Curve fit_curve(const std::vector<double>& x, const std::vector<double>& eff, const std::vector<double>& nodes,
                          double smoothing, double max_efficiency) {
  check_samples(eff);
  const size_t n = nodes.size();
  const std::vector<double> ln = logs(nodes);
  std::vector<double> a(n * n, 0.0), b(n, 0.0);
  for (size_t s = 0; s < x.size(); ++s) {
    Basis h[2];
    size_t k = 0;
    hat(ln, std::log2(x[s]), h, k);
    const double y = std::log(eff[s]);
    for (size_t p = 0; p < k; ++p) {
      b[h[p].i] += h[p].w * y;
      for (size_t q = 0; q < k; ++q) a[h[p].i * n + h[q].i] += h[p].w * h[q].w;
    }
  }
  for (size_t i = 0; i + 2 < n; ++i) {
    const size_t idx[3] = {i, i + 1, i + 2};
    const double c[3] = {1, -2, 1};
    add_penalty(a, n, idx, c, smoothing);
  }
  for (size_t i = 0; i < n; ++i) a[i * n + i] += kRidge;
  const std::vector<double> sol = solve_spd(std::move(a), std::move(b), n);
  std::vector<double> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = finish(sol[i], max_efficiency);
  return hwmodels::Curve(nodes, std::move(values));
}

hwmodels::Table2D fit_table(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& eff,
                            const std::vector<double>& x_nodes, const std::vector<double>& y_nodes, double smoothing,
                            double max_efficiency) {
  check_samples(eff);
  const size_t nx = x_nodes.size(), ny = y_nodes.size(), n = nx * ny;
  const std::vector<double> lx = logs(x_nodes), ly = logs(y_nodes);
  std::vector<double> a(n * n, 0.0), b(n, 0.0);
  for (size_t s = 0; s < x.size(); ++s) {
    Basis hx[2], hy[2];
    size_t kx = 0, ky = 0;
    hat(lx, std::log2(x[s]), hx, kx);
    hat(ly, std::log2(y[s]), hy, ky);
    const double v = std::log(eff[s]);
    size_t idx[4];
    double w[4];
    size_t m = 0;
    for (size_t j = 0; j < ky; ++j)
      for (size_t i = 0; i < kx; ++i) {
        idx[m] = hy[j].i * nx + hx[i].i;
        w[m++] = hy[j].w * hx[i].w;
      }
    for (size_t p = 0; p < m; ++p) {
      b[idx[p]] += w[p] * v;
      for (size_t q = 0; q < m; ++q) a[idx[p] * n + idx[q]] += w[p] * w[q];
    }
  }
  const double c[3] = {1, -2, 1};
  for (size_t j = 0; j < ny; ++j)
    for (size_t i = 0; i < nx; ++i) {
      if (i + 2 < nx) {
        const size_t idx[3] = {j * nx + i, j * nx + i + 1, j * nx + i + 2};
        add_penalty(a, n, idx, c, smoothing);
      }
      if (j + 2 < ny) {
        const size_t idx[3] = {j * nx + i, (j + 1) * nx + i, (j + 2) * nx + i};
        add_penalty(a, n, idx, c, smoothing);
      }
    }
  for (size_t i = 0; i < n; ++i) a[i * n + i] += kRidge;
  const std::vector<double> sol = solve_spd(std::move(a), std::move(b), n);
  std::vector<std::vector<double>> values(ny, std::vector<double>(nx));
  for (size_t j = 0; j < ny; ++j)
    for (size_t i = 0; i < nx; ++i) values[j][i] = finish(sol[j * nx + i], max_efficiency);
  return hwmodels::Table2D(x_nodes, y_nodes, std::move(values));
}

Line fit_relative_line(const std::vector<double>& s, const std::vector<double>& t) {
  double sw = 0, sws = 0, swt = 0, swss = 0, swst = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double w = 1.0 / (t[i] * t[i]);
    sw += w;
    sws += w * s[i];
    swt += w * t[i];
    swss += w * s[i] * s[i];
    swst += w * s[i] * t[i];
  }
  const double det = sw * swss - sws * sws;
  if (s.empty() || !(std::fabs(det) > 1e-12 * sw * swss)) {
    double ratio = 0;
    for (size_t i = 0; i < s.size(); ++i) ratio += t[i] / s[i];
    return {0.0, s.empty() ? 0.0 : ratio / static_cast<double>(s.size())};
  }
  return {(swss * swt - sws * swst) / det, (sw * swst - sws * swt) / det};
}

}  // namespace servesim::calibration
