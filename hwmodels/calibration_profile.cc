#include "hwmodels/calibration_profile.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/core/output_file.h"
#include "sim/core/format.h"

namespace servesim::hwmodels {

const Curve* CalibrationProfile::elementwise_curve(std::string_view kind) const {
  if (const auto it = elementwise.find(std::string(kind)); it != elementwise.end()) return &it->second;
  if (const auto it = elementwise.find("copy"); it != elementwise.end()) return &it->second;
  return nullptr;
}

namespace {

constexpr double kBytesPerGbLocal = 1e9;
constexpr double kSecondsPerUs = 1e-6;
// Profiles are small (tens of kilobytes); a larger file is not one.
constexpr size_t kMaxProfileBytes = size_t{8} << 20;

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const toml::node* node, const std::string& key, const std::string& message) const {
    const int64_t line = node ? static_cast<int64_t>(node->source().begin.line) : 0;
    throw core::InputError(source_, line, key, message);
  }

  // Every key of `table` must be one of `allowed`.
  void only(const toml::table& table, const std::string& prefix, std::initializer_list<std::string_view> allowed) const {
    for (const auto& [key, node] : table) {
      const std::string k(key.str());
      if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
      std::string valid;
      for (auto a : allowed) valid += (valid.empty() ? "" : ", ") + std::string(a);
      fail(&node, prefix + k, "unknown key; valid here: " + valid);
    }
  }

  const toml::table* table(const toml::table& parent, const std::string& key, const std::string& path) const {
    const toml::node* node = parent.get(key);
    if (!node) return nullptr;
    if (!node->is_table()) fail(node, path, "expected a table");
    return node->as_table();
  }

  double number(const toml::node* node, const std::string& key) const {
    if (const auto* i = node->as_integer()) return static_cast<double>(i->get());
    if (const auto* f = node->as_floating_point()) {
      if (!std::isfinite(f->get())) fail(node, key, "expected a finite number");
      return f->get();
    }
    fail(node, key, "expected a number");
  }

  std::optional<double> optional_number(const toml::table& t, const std::string& key, const std::string& path,
                                        double lo, double hi, bool lo_exclusive) const {
    const toml::node* node = t.get(key);
    if (!node) return std::nullopt;
    const double v = number(node, path);
    if (v < lo || v > hi || (lo_exclusive && v == lo))
      fail(node, path, "expected a value in " + std::string(lo_exclusive ? "(" : "[") + core::format_double(lo) + ", " +
                           core::format_double(hi) + "], got " + core::format_double(v));
    return v;
  }

  std::string string(const toml::table& t, const std::string& key, bool required) const {
    const toml::node* node = t.get(key);
    if (!node) {
      if (required) fail(nullptr, key, "missing");
      return "";
    }
    if (!node->is_string()) fail(node, key, "expected a string");
    return std::string(node->as_string()->get());
  }

  std::vector<double> numbers(const toml::table& t, const std::string& key, const std::string& path,
                              const toml::node** where = nullptr) const {
    const toml::node* node = t.get(key);
    if (!node) fail(t.get(key), path, "missing");
    if (where) *where = node;
    const toml::array* a = node->as_array();
    if (!a) fail(node, path, "expected an array of numbers");
    std::vector<double> out;
    for (const auto& v : *a) out.push_back(number(&v, path));
    return out;
  }

  // An axis: positive, strictly increasing.
  std::vector<double> axis(const toml::table& t, const std::string& key, const std::string& path) const {
    const toml::node* where = nullptr;
    if (!t.get(key)) fail(&t, path, "missing");
    std::vector<double> nodes = numbers(t, key, path, &where);
    if (const std::string p = axis_problem(nodes); !p.empty()) fail(where, path, p);
    return nodes;
  }

  // Efficiencies: (0, kMaxEfficiency].
  std::vector<double> efficiencies(const toml::table& t, const std::string& key, const std::string& path,
                                   size_t expected) const {
    const toml::node* where = nullptr;
    if (!t.get(key)) fail(&t, path, "missing");
    std::vector<double> v = numbers(t, key, path, &where);
    check_efficiencies(v, where, path, expected);
    return v;
  }

  void check_efficiencies(const std::vector<double>& v, const toml::node* where, const std::string& path,
                          size_t expected) const {
    if (v.size() != expected)
      fail(where, path, "expected " + std::to_string(expected) + " values (one per node), got " + std::to_string(v.size()));
    for (double e : v)
      if (!(e > 0) || e > kMaxEfficiency)
        fail(where, path, "efficiencies must be in (0, 4], got " + core::format_double(e));
  }

  Curve curve(const toml::table& t, const std::string& path, const char* x_key, const char* y_key) const {
    only(t, path + ".", {x_key, y_key});
    std::vector<double> x = axis(t, x_key, path + "." + x_key);
    std::vector<double> y = efficiencies(t, y_key, path + "." + y_key, x.size());
    return Curve(std::move(x), std::move(y));
  }

  Table2D table2d(const toml::table& t, const std::string& path, const char* x_key, const char* y_key,
                  const char* v_key) const {
    std::vector<double> x = axis(t, x_key, path + "." + x_key);
    std::vector<double> y = axis(t, y_key, path + "." + y_key);
    const std::string vpath = path + "." + v_key;
    const toml::node* node = t.get(v_key);
    if (!node) fail(&t, vpath, "missing");
    const toml::array* rows = node->as_array();
    if (!rows) fail(node, vpath, "expected an array of arrays, one per " + std::string(y_key) + " node");
    if (rows->size() != y.size())
      fail(node, vpath, "expected " + std::to_string(y.size()) + " rows (one per " + y_key + " node), got " +
                            std::to_string(rows->size()));
    std::vector<std::vector<double>> values;
    for (const auto& row_node : *rows) {
      const toml::array* row = row_node.as_array();
      if (!row) fail(&row_node, vpath, "expected an array of numbers per row");
      std::vector<double> r;
      for (const auto& v : *row) r.push_back(number(&v, vpath));
      check_efficiencies(r, &row_node, vpath, x.size());
      values.push_back(std::move(r));
    }
    return Table2D(std::move(x), std::move(y), std::move(values));
  }

  GemmTables gemm(const toml::table& t, const std::string& path) const {
    only(t, path + ".", {"rows", "weight_elements", "compute_efficiency", "memory_bytes", "memory_efficiency"});
    GemmTables g;
    if (t.get("compute_efficiency") || t.get("rows") || t.get("weight_elements"))
      g.compute_efficiency = table2d(t, path, "rows", "weight_elements", "compute_efficiency");
    if (t.get("memory_efficiency") || t.get("memory_bytes")) {
      std::vector<double> x = axis(t, "memory_bytes", path + ".memory_bytes");
      std::vector<double> y = efficiencies(t, "memory_efficiency", path + ".memory_efficiency", x.size());
      g.memory_efficiency = Curve(std::move(x), std::move(y));
    }
    return g;
  }

 private:
  std::string source_;
};

}  // namespace

CalibrationProfile parse_calibration_profile(std::string_view text, const std::string& source_name) {
  Reader r(source_name);
  if (text.size() > kMaxProfileBytes) r.fail(nullptr, "", "larger than 8 MiB: not a calibration profile");
  toml::table doc;
  try {
    doc = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    // toml++ quotes the offending text, which can hold a line break: keep the message one line.
    std::string what(e.description());
    for (char& c : what)
      if (c == '\n' || c == '\r') c = ' ';
    throw core::InputError(source_name, static_cast<int64_t>(e.source().begin.line), "", "malformed TOML: " + what);
  }
  r.only(doc, "", {"format", "version", "gpu", "description", "source", "launch", "gemm", "gemm_fp8", "elementwise",
                   "attention_prefill", "attention_decode", "all_reduce", "send_recv", "host_copy", "overhead"});
  CalibrationProfile p;
  if (r.string(doc, "format", true) != kProfileFormat)
    r.fail(doc.get("format"), "format", "not a servesim calibration profile (format = \"" + std::string(kProfileFormat) + "\")");
  const toml::node* version = doc.get("version");
  if (!version) r.fail(nullptr, "version", "missing");
  if (r.number(version, "version") != static_cast<double>(kProfileVersion))
    r.fail(version, "version", "this build reads version " + std::to_string(kProfileVersion) + " profiles");
  p.gpu = r.string(doc, "gpu", true);
  p.description = r.string(doc, "description", false);
  p.source = r.string(doc, "source", false);

  constexpr double kHuge = 1e12;
  if (const toml::table* t = r.table(doc, "launch", "launch")) {
    r.only(*t, "launch.", {"kernel_us", "gemm_kernel_us", "eager_launch_us", "graph_launch_us"});
    p.kernel_us = r.optional_number(*t, "kernel_us", "launch.kernel_us", 0, 1e6, false);
    p.gemm_kernel_us = r.optional_number(*t, "gemm_kernel_us", "launch.gemm_kernel_us", 0, 1e6, false);
    p.eager_launch_us = r.optional_number(*t, "eager_launch_us", "launch.eager_launch_us", 0, 1e6, false);
    p.graph_launch_us = r.optional_number(*t, "graph_launch_us", "launch.graph_launch_us", 0, 1e6, false);
  }
  if (const toml::table* t = r.table(doc, "gemm", "gemm")) p.gemm = r.gemm(*t, "gemm");
  if (const toml::table* t = r.table(doc, "gemm_fp8", "gemm_fp8")) p.gemm_fp8 = r.gemm(*t, "gemm_fp8");
  if (const toml::table* t = r.table(doc, "elementwise", "elementwise")) {
    r.only(*t, "elementwise.", {"rms_norm", "rope", "act", "add", "embedding", "copy"});
    for (const auto& [key, node] : *t) {
      const std::string kind(key.str());
      const std::string path = "elementwise." + kind;
      if (!node.is_table()) r.fail(&node, path, "expected a table with bytes and memory_efficiency");
      p.elementwise[kind] = r.curve(*node.as_table(), path, "bytes", "memory_efficiency");
    }
  }
  if (const toml::table* t = r.table(doc, "attention_prefill", "attention_prefill"))
    p.attention_prefill = r.curve(*t, "attention_prefill", "tokens", "compute_efficiency");
  if (const toml::table* t = r.table(doc, "attention_decode", "attention_decode")) {
    r.only(*t, "attention_decode.", {"seqs", "context_tokens", "memory_efficiency"});
    p.attention_decode = r.table2d(*t, "attention_decode", "seqs", "context_tokens", "memory_efficiency");
  }
  if (const toml::table* t = r.table(doc, "all_reduce", "all_reduce")) {
    r.only(*t, "all_reduce.", {"gpus", "latency_us", "bus_bandwidth_gb_s"});
    const toml::node* where = nullptr;
    const std::vector<double> gpus = r.axis(*t, "gpus", "all_reduce.gpus");
    const std::vector<double> latency = r.numbers(*t, "latency_us", "all_reduce.latency_us", &where);
    if (latency.size() != gpus.size()) r.fail(where, "all_reduce.latency_us", "expected one value per GPU count");
    const std::vector<double> bw = r.numbers(*t, "bus_bandwidth_gb_s", "all_reduce.bus_bandwidth_gb_s", &where);
    if (bw.size() != gpus.size()) r.fail(where, "all_reduce.bus_bandwidth_gb_s", "expected one value per GPU count");
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (gpus[i] < 2 || gpus[i] != std::floor(gpus[i]) || gpus[i] > 1e6)
        r.fail(t->get("gpus"), "all_reduce.gpus", "GPU counts are integers >= 2");
      if (latency[i] < 0 || latency[i] > 1e6) r.fail(t->get("latency_us"), "all_reduce.latency_us", "expected [0, 1e6] us");
      if (!(bw[i] > 0) || bw[i] > kHuge)
        r.fail(t->get("bus_bandwidth_gb_s"), "all_reduce.bus_bandwidth_gb_s", "expected a positive bandwidth");
      p.all_reduce[static_cast<int64_t>(gpus[i])] = {latency[i] * kSecondsPerUs, bw[i] * kBytesPerGbLocal};
    }
  }
  if (const toml::table* t = r.table(doc, "send_recv", "send_recv")) {
    r.only(*t, "send_recv.", {"latency_us", "bandwidth_gb_s"});
    const auto latency = r.optional_number(*t, "latency_us", "send_recv.latency_us", 0, 1e6, false);
    const auto bw = r.optional_number(*t, "bandwidth_gb_s", "send_recv.bandwidth_gb_s", 0, kHuge, true);
    if (!latency || !bw) r.fail(t, "send_recv", "needs latency_us and bandwidth_gb_s");
    p.send_recv = AlphaBeta{*latency * kSecondsPerUs, *bw * kBytesPerGbLocal};
  }
  if (const toml::table* t = r.table(doc, "host_copy", "host_copy")) {
    r.only(*t, "host_copy.", {"h2d_gb_s", "d2h_gb_s"});
    if (auto v = r.optional_number(*t, "h2d_gb_s", "host_copy.h2d_gb_s", 0, kHuge, true)) p.h2d_bandwidth = *v * kBytesPerGbLocal;
    if (auto v = r.optional_number(*t, "d2h_gb_s", "host_copy.d2h_gb_s", 0, kHuge, true)) p.d2h_bandwidth = *v * kBytesPerGbLocal;
  }
  if (const toml::table* t = r.table(doc, "overhead", "overhead")) {
    r.only(*t, "overhead.", {"iteration_ms", "layer_us", "decode_iteration_ms", "decode_layer_us"});
    p.iteration_overhead_ms = r.optional_number(*t, "iteration_ms", "overhead.iteration_ms", 0, 1e6, false);
    p.layer_overhead_us = r.optional_number(*t, "layer_us", "overhead.layer_us", 0, 1e6, false);
    p.decode_iteration_overhead_ms =
        r.optional_number(*t, "decode_iteration_ms", "overhead.decode_iteration_ms", 0, 1e6, false);
    p.decode_layer_overhead_us = r.optional_number(*t, "decode_layer_us", "overhead.decode_layer_us", 0, 1e6, false);
  }
  return p;
}

CalibrationProfile read_calibration_profile(const std::string& path) {
  return parse_calibration_profile(
      core::read_input_file(path, "a calibration profile (a file written by servesim fit or calibrate)",
                            core::kMaxDataFileBytes),
      path);
}

namespace {

std::string num(double v) { return core::format_double(v); }

// Values converted back to the file's units (seconds -> us, bytes/s -> GB/s) lose their shortest
// decimal form to rounding; 12 significant digits restore it.
std::string converted(double v) {
  if (v == 0 || !std::isfinite(v)) return num(v);
  const int shift = 11 - static_cast<int>(std::floor(std::log10(std::fabs(v))));
  if (shift < 0) return num(std::round(v / std::pow(10.0, -shift)) * std::pow(10.0, -shift));
  return num(std::round(v * std::pow(10.0, shift)) / std::pow(10.0, shift));
}

std::string array(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + num(v[i]);
  return out + "]";
}

void write_gemm(std::string& out, const char* name, const GemmTables& g) {
  if (g.empty()) return;
  out += std::string("\n[") + name + "]\n";
  if (!g.compute_efficiency.empty()) {
    out += "# fraction of peak by rows (M) and weight elements (N x K); one row per weight_elements node\n";
    out += "rows = " + array(g.compute_efficiency.x()) + "\n";
    out += "weight_elements = " + array(g.compute_efficiency.y()) + "\n";
    out += "compute_efficiency = [\n";
    for (const auto& row : g.compute_efficiency.values()) out += "  " + array(row) + ",\n";
    out += "]\n";
  }
  if (!g.memory_efficiency.empty()) {
    out += "# fraction of HBM bandwidth by bytes moved (weights + activations)\n";
    out += "memory_bytes = " + array(g.memory_efficiency.x()) + "\n";
    out += "memory_efficiency = " + array(g.memory_efficiency.y()) + "\n";
  }
}

}  // namespace

std::string calibration_profile_toml(const CalibrationProfile& p) {
  std::string out = "# servesim calibration profile (docs/calibration.md)\n";
  out += "format = " + core::toml_quote(kProfileFormat) + "\n";
  out += "version = " + std::to_string(kProfileVersion) + "\n";
  out += "gpu = " + core::toml_quote(p.gpu) + "\n";
  if (!p.description.empty()) out += "description = " + core::toml_quote(p.description) + "\n";
  if (!p.source.empty()) out += "source = " + core::toml_quote(p.source) + "\n";
  if (p.kernel_us || p.gemm_kernel_us || p.eager_launch_us || p.graph_launch_us) {
    out += "\n[launch]\n";
    if (p.kernel_us) out += "kernel_us = " + num(*p.kernel_us) + "\n";
    if (p.gemm_kernel_us) out += "gemm_kernel_us = " + num(*p.gemm_kernel_us) + "\n";
    if (p.eager_launch_us) out += "eager_launch_us = " + num(*p.eager_launch_us) + "\n";
    if (p.graph_launch_us) out += "graph_launch_us = " + num(*p.graph_launch_us) + "\n";
  }
  write_gemm(out, "gemm", p.gemm);
  write_gemm(out, "gemm_fp8", p.gemm_fp8);
  for (const auto& [kind, curve] : p.elementwise) {
    out += "\n[elementwise." + kind + "]\n";
    out += "bytes = " + array(curve.x()) + "\n";
    out += "memory_efficiency = " + array(curve.y()) + "\n";
  }
  if (!p.attention_prefill.empty()) {
    out += "\n[attention_prefill]\n# fraction of peak by mean query tokens per prefill chunk\n";
    out += "tokens = " + array(p.attention_prefill.x()) + "\n";
    out += "compute_efficiency = " + array(p.attention_prefill.y()) + "\n";
  }
  if (!p.attention_decode.empty()) {
    out += "\n[attention_decode]\n# fraction of HBM bandwidth by decoding sequences and mean context; one row per "
           "context_tokens node\n";
    out += "seqs = " + array(p.attention_decode.x()) + "\n";
    out += "context_tokens = " + array(p.attention_decode.y()) + "\n";
    out += "memory_efficiency = [\n";
    for (const auto& row : p.attention_decode.values()) out += "  " + array(row) + ",\n";
    out += "]\n";
  }
  if (!p.all_reduce.empty()) {
    std::string gpus, latency, bw;
    for (const auto& [n, ab] : p.all_reduce) {
      const char* sep = gpus.empty() ? "" : ", ";
      gpus += sep + std::to_string(n);
      latency += sep + converted(ab.latency_s / kSecondsPerUs);
      bw += sep + converted(ab.bandwidth / kBytesPerGbLocal);
    }
    out += "\n[all_reduce]\n# time = latency + 2 (n - 1) / n x bytes / bus bandwidth, per GPU count n\n";
    out += "gpus = [" + gpus + "]\nlatency_us = [" + latency + "]\nbus_bandwidth_gb_s = [" + bw + "]\n";
  }
  if (p.send_recv) {
    out += "\n[send_recv]\nlatency_us = " + converted(p.send_recv->latency_s / kSecondsPerUs) +
           "\nbandwidth_gb_s = " + converted(p.send_recv->bandwidth / kBytesPerGbLocal) + "\n";
  }
  if (p.h2d_bandwidth || p.d2h_bandwidth) {
    out += "\n[host_copy]\n";
    if (p.h2d_bandwidth) out += "h2d_gb_s = " + converted(*p.h2d_bandwidth / kBytesPerGbLocal) + "\n";
    if (p.d2h_bandwidth) out += "d2h_gb_s = " + converted(*p.d2h_bandwidth / kBytesPerGbLocal) + "\n";
  }
  if (p.iteration_overhead_ms || p.layer_overhead_us || p.decode_iteration_overhead_ms || p.decode_layer_overhead_us) {
    out += "\n[overhead]\n";
    if (p.iteration_overhead_ms) out += "iteration_ms = " + num(*p.iteration_overhead_ms) + "\n";
    if (p.layer_overhead_us) out += "layer_us = " + num(*p.layer_overhead_us) + "\n";
    if (p.decode_iteration_overhead_ms) out += "decode_iteration_ms = " + num(*p.decode_iteration_overhead_ms) + "\n";
    if (p.decode_layer_overhead_us) out += "decode_layer_us = " + num(*p.decode_layer_overhead_us) + "\n";
  }
  return out;
}

void write_calibration_profile(const CalibrationProfile& profile, const std::string& path) {
  // Whole or not at all, and only over another profile (never over a file of another kind).
  core::write_file_atomically(path, "a servesim calibration profile (--out)",
                              core::starts_with("# servesim calibration profile"), calibration_profile_toml(profile));
}

}  // namespace servesim::hwmodels
