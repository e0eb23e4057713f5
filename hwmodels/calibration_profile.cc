#include "hwmodels/calibration_profile.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "hwmodels/engine/engine_model.h"
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

std::string AttentionLayout::name() const {
  std::string n = std::to_string(heads) + " heads / " + std::to_string(kv_heads) + " KV heads x " +
                  std::to_string(head_dim);
  if (is_mla()) n += " (MLA latent " + std::to_string(kv_lora_rank) + " + " + std::to_string(head_dim - kv_lora_rank) + ")";
  return n + ", pages of " + std::to_string(block_size);
}

DecodeTableChoice CalibrationProfile::decode_attention_table(const AttentionLayout& model) const {
  auto log_ratio = [](int64_t a, int64_t b) {
    return std::fabs(std::log2(static_cast<double>(a) / static_cast<double>(b)));
  };
  const DecodeAttentionTable* best = nullptr;
  double best_key[3] = {0, 0, 0};
  for (const DecodeAttentionTable& t : attention_decode_layouts) {
    const AttentionLayout& l = t.layout;
    if (l.is_mla() != model.is_mla() || l.head_dim != model.head_dim || l.kv_lora_rank != model.kv_lora_rank) continue;
    const double key[3] = {log_ratio(l.group(), model.group()), log_ratio(l.kv_heads, model.kv_heads),
                           log_ratio(l.block_size, model.block_size)};
    // Tables are in ascending layout order, so keeping the first of equal keys is deterministic.
    if (!best || std::lexicographical_compare(key, key + 3, best_key, best_key + 3)) {
      best = &t;
      std::copy(key, key + 3, best_key);
    }
  }
  if (best) {
    const bool exact = best_key[0] == 0 && best_key[1] == 0 && best_key[2] == 0;
    return {&best->memory_efficiency, exact ? DecodeTableMatch::kExact : DecodeTableMatch::kNearest, &best->layout};
  }
  if (!attention_decode.empty()) return {&attention_decode, DecodeTableMatch::kUnkeyed, nullptr};
  return {};
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

  // A whole number in [lo, hi].
  int64_t count(const toml::table& t, const std::string& key, const std::string& path, int64_t lo, int64_t hi,
                bool required) const {
    const toml::node* node = t.get(key);
    if (!node) {
      if (required) fail(&t, path, "missing");
      return 0;
    }
    const auto* i = node->as_integer();
    if (!i || i->get() < lo || i->get() > hi)
      fail(node, path, "expected a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return i->get();
  }

  DecodeAttentionTable decode_layout(const toml::table& t, const std::string& path) const {
    only(t, path + ".", {"heads", "kv_heads", "head_dim", "block_size", "kv_lora_rank", "seqs", "context_tokens",
                         "memory_efficiency"});
    DecodeAttentionTable d;
    AttentionLayout& l = d.layout;
    constexpr int64_t kMaxCount = 1 << 20;
    l.heads = count(t, "heads", path + ".heads", 1, kMaxCount, true);
    l.kv_heads = count(t, "kv_heads", path + ".kv_heads", 1, kMaxCount, true);
    l.head_dim = count(t, "head_dim", path + ".head_dim", 1, kMaxCount, true);
    l.block_size = count(t, "block_size", path + ".block_size", 1, kMaxCount, true);
    l.kv_lora_rank = count(t, "kv_lora_rank", path + ".kv_lora_rank", 1, kMaxCount, false);
    if (l.heads % l.kv_heads != 0) fail(t.get("kv_heads"), path + ".kv_heads", "must divide heads");
    if (l.is_mla() && l.kv_heads != 1)
      fail(t.get("kv_heads"), path + ".kv_heads", "an MLA layout has one KV head (the shared latent)");
    if (l.is_mla() && l.head_dim <= l.kv_lora_rank)
      fail(t.get("head_dim"), path + ".head_dim", "an MLA layout's head_dim is kv_lora_rank + the rotary dimensions");
    d.memory_efficiency = table2d(t, path, "seqs", "context_tokens", "memory_efficiency");
    return d;
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
                   "attention_prefill", "attention_decode", "attention_decode_layout", "attention", "all_reduce",
                   "send_recv", "host_copy", "overhead", "engine", "uncertainty"});
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
      const toml::table& e = *node.as_table();
      r.only(e, path + ".", {"bytes", "memory_efficiency", "row_ns_per_byte"});
      if (const auto floor = r.optional_number(e, "row_ns_per_byte", path + ".row_ns_per_byte", 0, 1e6, false))
        p.elementwise_row_ns_per_byte[kind] = *floor;
      if (e.get("bytes") || e.get("memory_efficiency") || !e.get("row_ns_per_byte")) {
        std::vector<double> x = r.axis(e, "bytes", path + ".bytes");
        std::vector<double> y = r.efficiencies(e, "memory_efficiency", path + ".memory_efficiency", x.size());
        p.elementwise[kind] = Curve(std::move(x), std::move(y));
      }
    }
  }
  if (const toml::table* t = r.table(doc, "attention_prefill", "attention_prefill"))
    p.attention_prefill = r.curve(*t, "attention_prefill", "tokens", "compute_efficiency");
  if (const toml::table* t = r.table(doc, "attention_decode", "attention_decode")) {
    r.only(*t, "attention_decode.", {"seqs", "context_tokens", "memory_efficiency"});
    p.attention_decode = r.table2d(*t, "attention_decode", "seqs", "context_tokens", "memory_efficiency");
  }
  if (const toml::node* node = doc.get("attention_decode_layout")) {
    const toml::array* tables = node->as_array();
    if (!tables) r.fail(node, "attention_decode_layout", "expected [[attention_decode_layout]] tables");
    for (size_t i = 0; i < tables->size(); ++i) {
      const std::string path = "attention_decode_layout[" + std::to_string(i) + "]";
      const toml::node& item = *tables->get(i);
      if (!item.is_table()) r.fail(&item, path, "expected a table");
      DecodeAttentionTable d = r.decode_layout(*item.as_table(), path);
      for (const DecodeAttentionTable& other : p.attention_decode_layouts)
        if (other.layout == d.layout) r.fail(&item, path, "a second table for " + d.layout.name());
      p.attention_decode_layouts.push_back(std::move(d));
    }
    // Kept in layout order whatever the file's, so the lookup's tie-break and the written file are
    // independent of it.
    std::stable_sort(p.attention_decode_layouts.begin(), p.attention_decode_layouts.end(),
                     [](const DecodeAttentionTable& a, const DecodeAttentionTable& b) { return a.layout < b.layout; });
  }
  if (const toml::table* t = r.table(doc, "all_reduce", "all_reduce")) {
    r.only(*t, "all_reduce.", {"gpus", "latency_us", "bus_bandwidth_gb_s", "regime"});
    if (const toml::node* regimes = t->get("regime")) {
      const toml::array* list = regimes->as_array();
      if (!list) r.fail(regimes, "all_reduce.regime", "expected an array of tables ([[all_reduce.regime]])");
      for (const toml::node& node : *list) {
        const toml::table* rt = node.as_table();
        if (!rt) r.fail(&node, "all_reduce.regime", "expected a table");
        r.only(*rt, "all_reduce.regime.", {"gpus", "max_bytes", "latency_us", "bus_bandwidth_gb_s"});
        const auto gpus = r.optional_number(*rt, "gpus", "all_reduce.regime.gpus", 2, 1e6, false);
        const auto max_bytes = r.optional_number(*rt, "max_bytes", "all_reduce.regime.max_bytes", 0, kHuge, true);
        const auto latency = r.optional_number(*rt, "latency_us", "all_reduce.regime.latency_us", 0, 1e6, false);
        const auto bw = r.optional_number(*rt, "bus_bandwidth_gb_s", "all_reduce.regime.bus_bandwidth_gb_s", 0, kHuge, true);
        if (!gpus || !max_bytes || !latency || !bw || *gpus != std::floor(*gpus))
          r.fail(&node, "all_reduce.regime", "needs integer gpus, max_bytes, latency_us and bus_bandwidth_gb_s");
        auto& v = p.all_reduce_regimes[static_cast<int64_t>(*gpus)];
        if (!v.empty() && !(*max_bytes > v.back().max_bytes))
          r.fail(&node, "all_reduce.regime.max_bytes", "regimes of one GPU count must ascend in max_bytes");
        v.push_back({*max_bytes, {*latency * kSecondsPerUs, *bw * kBytesPerGbLocal}});
      }
    }
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
  if (const toml::table* t = r.table(doc, "attention", "attention")) {
    r.only(*t, "attention.", {"decode_memory_efficiency", "prefill_compute_efficiency"});
    p.attention_decode_efficiency = r.optional_number(*t, "decode_memory_efficiency",
                                                      "attention.decode_memory_efficiency", 0, 1, true);
    p.attention_prefill_efficiency = r.optional_number(*t, "prefill_compute_efficiency",
                                                       "attention.prefill_compute_efficiency", 0, 1, true);
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
  if (const toml::table* t = r.table(doc, "engine", "engine")) {
    for (const auto& [key, node] : *t) {
      const std::string kind(key.str());
      const std::string path = "engine." + kind;
      const core::KindInfo* info = engine_registry().find(kind);
      if (!info) r.fail(&node, path, "unknown engine kind; valid: " + core::join(engine_registry().kind_names(), ", "));
      if (!node.is_table()) r.fail(&node, path, "expected a table of that engine's parameters");
      auto& values = p.engine[info->name];
      for (const auto& [pk, pv] : *node.as_table()) {
        const std::string name(pk.str());
        const std::string where = path + "." + name;
        const auto spec = std::find_if(info->params.begin(), info->params.end(),
                                       [&](const core::ParamSpec& s) { return s.name == name; });
        if (spec == info->params.end() ||
            (spec->type != core::ParamType::kFloat && spec->type != core::ParamType::kBool)) {
          std::string valid;
          for (const auto& s : info->params)
            if (s.type == core::ParamType::kFloat || s.type == core::ParamType::kBool)
              valid += (valid.empty() ? "" : ", ") + s.name;
          r.fail(&pv, where, "not a fitted parameter of engine '" + info->name + "'; valid: " + valid);
        }
        if (spec->type == core::ParamType::kBool) {
          const auto* b = pv.as_boolean();
          if (!b) r.fail(&pv, where, "expected true or false");
          values[name] = b->get() ? 1.0 : 0.0;
        } else {
          const double v = r.number(&pv, where);
          if (v < spec->min || v > spec->max)
            r.fail(&pv, where, "expected a value in " + spec->range_str() + ", got " + core::format_double(v));
          values[name] = v;
        }
      }
    }
  }
  if (const toml::table* t = r.table(doc, "uncertainty", "uncertainty")) {
    r.only(*t, "uncertainty.", {"residuals", "step_log_rms", "frontend_rms_ms", "correlation", "held_out"});
    const auto n = r.optional_number(*t, "residuals", "uncertainty.residuals", 3, 1e6, false);
    // At most a 50% step error and 10 s of client path: beyond them a profile predicts nothing.
    const auto step = r.optional_number(*t, "step_log_rms", "uncertainty.step_log_rms", 0, 0.5, false);
    const auto front = r.optional_number(*t, "frontend_rms_ms", "uncertainty.frontend_rms_ms", 0, 1e4, false);
    if (!n || !step || !front)
      r.fail(t, "uncertainty", "needs residuals (the count, >= 3), step_log_rms and frontend_rms_ms");
    if (*n != std::floor(*n)) r.fail(t->get("residuals"), "uncertainty.residuals", "expected a whole count");
    p.uncertainty.residuals = static_cast<int64_t>(*n);
    p.uncertainty.step_log_rms = *step;
    p.uncertainty.frontend_rms_s = *front * 1e-3;
    p.uncertainty.correlation = r.optional_number(*t, "correlation", "uncertainty.correlation", -1, 1, false).value_or(0);
    if (const toml::node* h = t->get("held_out")) {
      if (!h->is_boolean()) r.fail(h, "uncertainty.held_out", "expected true or false");
      p.uncertainty.held_out = h->as_boolean()->get();
    }
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
  std::set<std::string> kinds;
  for (const auto& [kind, curve] : p.elementwise) kinds.insert(kind);
  for (const auto& [kind, floor] : p.elementwise_row_ns_per_byte) kinds.insert(kind);
  for (const std::string& kind : kinds) {
    out += "\n[elementwise." + kind + "]\n";
    if (const auto floor = p.elementwise_row_ns_per_byte.find(kind); floor != p.elementwise_row_ns_per_byte.end())
      out += "# a row takes at least this per byte of the row (one thread block streams it)\nrow_ns_per_byte = " +
             num(floor->second) + "\n";
    if (const auto curve = p.elementwise.find(kind); curve != p.elementwise.end()) {
      out += "bytes = " + array(curve->second.x()) + "\n";
      out += "memory_efficiency = " + array(curve->second.y()) + "\n";
    }
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
  for (const DecodeAttentionTable& d : p.attention_decode_layouts) {
    const AttentionLayout& l = d.layout;
    out += "\n[[attention_decode_layout]]\n# " + l.name() +
           ": fraction of HBM bandwidth by decoding sequences and mean context; one row per context_tokens node\n";
    out += "heads = " + std::to_string(l.heads) + "\nkv_heads = " + std::to_string(l.kv_heads) +
           "\nhead_dim = " + std::to_string(l.head_dim) + "\nblock_size = " + std::to_string(l.block_size) + "\n";
    if (l.is_mla()) out += "kv_lora_rank = " + std::to_string(l.kv_lora_rank) + "\n";
    out += "seqs = " + array(d.memory_efficiency.x()) + "\n";
    out += "context_tokens = " + array(d.memory_efficiency.y()) + "\n";
    out += "memory_efficiency = [\n";
    for (const auto& row : d.memory_efficiency.values()) out += "  " + array(row) + ",\n";
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
  if (!p.all_reduce_regimes.empty()) {
    out += "# smaller messages (up to max_bytes) take the regime below the large-message line above\n";
    for (const auto& [n, regimes] : p.all_reduce_regimes)
      for (const AllReduceRegime& r : regimes)
        out += "[[all_reduce.regime]]\ngpus = " + std::to_string(n) + "\nmax_bytes = " + num(r.max_bytes) +
               "\nlatency_us = " + converted(r.cost.latency_s / kSecondsPerUs) +
               "\nbus_bandwidth_gb_s = " + converted(r.cost.bandwidth / kBytesPerGbLocal) + "\n";
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
  if (p.attention_decode_efficiency || p.attention_prefill_efficiency) {
    out += "\n[attention]\n";
    if (p.attention_decode_efficiency)
      out += "decode_memory_efficiency = " + num(*p.attention_decode_efficiency) + "\n";
    if (p.attention_prefill_efficiency)
      out += "prefill_compute_efficiency = " + num(*p.attention_prefill_efficiency) + "\n";
  }
  if (p.iteration_overhead_ms || p.layer_overhead_us || p.decode_iteration_overhead_ms || p.decode_layer_overhead_us) {
    out += "\n[overhead]\n";
    if (p.iteration_overhead_ms) out += "iteration_ms = " + num(*p.iteration_overhead_ms) + "\n";
    if (p.layer_overhead_us) out += "layer_us = " + num(*p.layer_overhead_us) + "\n";
    if (p.decode_iteration_overhead_ms) out += "decode_iteration_ms = " + num(*p.decode_iteration_overhead_ms) + "\n";
    if (p.decode_layer_overhead_us) out += "decode_layer_us = " + num(*p.decode_layer_overhead_us) + "\n";
  }
  for (const auto& [kind, values] : p.engine) {
    out += "\n[engine." + kind + "]\n";
    const core::KindInfo* info = engine_registry().find(kind);
    for (const auto& [name, v] : values) {
      const std::string& key = name;  // clang before 16 cannot capture a structured binding in a lambda
      const bool boolean = info && std::any_of(info->params.begin(), info->params.end(), [&](const core::ParamSpec& s) {
                             return s.name == key && s.type == core::ParamType::kBool;
                           });
      out += name + " = " + (boolean ? std::string(v != 0 ? "true" : "false") : num(v)) + "\n";
    }
  }
  if (!p.uncertainty.empty()) {
    const CalibrationUncertainty& u = p.uncertainty;
    out += "\n# the serving fit's residuals per stage (hwmodels/uncertainty.h): ln(measured / simulated ITL mean) and\n"
           "# measured - simulated TTFT mean; their RMS about zero and correlation (servesim run --prediction-draws)\n"
           "[uncertainty]\nresiduals = " + std::to_string(u.residuals) + "\nstep_log_rms = " + num(u.step_log_rms) +
           "\nfrontend_rms_ms = " + converted(u.frontend_rms_s * 1e3) + "\ncorrelation = " + num(u.correlation) +
           "\nheld_out = " + (u.held_out ? "true" : "false") + "\n";
  }
  return out;
}

void write_calibration_profile(const CalibrationProfile& profile, const std::string& path) {
  // Whole or not at all, and only over another profile (never over a file of another kind).
  core::write_file_atomically(path, "a servesim calibration profile (--out)",
                              core::starts_with("# servesim calibration profile"), calibration_profile_toml(profile));
}

std::string executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::vector<std::string> profile_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("SERVESIM_PROFILE_DIR"); env && *env) dirs.emplace_back(env);
  if (const std::string exe = executable_dir(); !exe.empty()) {
    dirs.push_back((std::filesystem::path(exe) / ".." / "calibration" / "profiles").lexically_normal().string());
    dirs.push_back((std::filesystem::path(exe) / ".." / "share" / "servesim" / "profiles").lexically_normal().string());
  }
  return dirs;
}

std::optional<std::string> shipped_profile(const std::string& gpu_name) {
  std::error_code ec;
  for (const std::string& dir : profile_search_path()) {
    const std::filesystem::path p = std::filesystem::path(dir) / (core::to_lower(gpu_name) + ".toml");
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return std::nullopt;
}

bool has_shipped_profile(const std::string& gpu_name) {
  static constexpr std::string_view kShipped[] = {"a100-80gb-sxm", "h100-sxm"};
  const std::string name = core::to_lower(gpu_name);
  return std::find(std::begin(kShipped), std::end(kShipped), name) != std::end(kShipped);
}

std::optional<std::string> selected_calibration(const core::Params& cost_model, const std::string& gpu_name) {
  if (cost_model.has("calibration")) {
    const std::string& value = cost_model.get_string("calibration");
    if (value == kNoCalibration) return std::nullopt;
    // Checked here, where a problem can name the key: readable, a regular file, within the size cap.
    return cost_model.readable_file("calibration", "a calibration profile", core::kMaxDataFileBytes);
  }
  return shipped_profile(gpu_name);
}

}  // namespace servesim::hwmodels
