#include "calibration/operator_csv.h"

#include <algorithm>
#include <filesystem>

#include "calibration/csv.h"
#include "hwmodels/model_spec.h"
#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::calibration {

namespace {

constexpr std::string_view kPrefix = "time_stats.";
constexpr std::string_view kMedian = ".median";

int64_t model_column(const CsvTable& t, size_t r, const char* name, int64_t lo, int64_t hi) {
  const int64_t v = t.integer(r, t.require(name));
  if (v < lo || v > hi)
    throw core::InputError(t.source, t.lines[r], name,
                           "expected " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + std::to_string(v));
  return v;
}

bool gated_column(const CsvTable& t, size_t r) {
  const size_t c = t.require("use_gated_mlp");
  const std::string v = core::to_lower(t.rows[r][c]);
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  throw core::InputError(t.source, t.lines[r], "use_gated_mlp", "expected True or False, got '" + t.rows[r][c] + "'");
}

}  // namespace

OperatorTable parse_operator_csv(std::string_view text, const std::string& source, const std::string& model_name) {
  const CsvTable t = parse_csv(text, source);
  OperatorTable out;
  out.source = source;
  out.model_name = model_name.empty() ? source : model_name;
  std::vector<std::pair<std::string, size_t>> op_columns;
  for (size_t c = 0; c < t.header.size(); ++c) {
    const std::string& h = t.header[c];
    if (h.size() > kPrefix.size() + kMedian.size() && h.compare(0, kPrefix.size(), kPrefix) == 0 &&
        h.compare(h.size() - kMedian.size(), kMedian.size(), kMedian) == 0) {
      std::string op = h.substr(kPrefix.size(), h.size() - kPrefix.size() - kMedian.size());
      out.ops.push_back(op);
      op_columns.emplace_back(std::move(op), c);
    }
  }
  if (op_columns.empty())
    throw core::InputError(source, 1, "time_stats.<op>.median", "no operator median column in the header");
  const size_t tokens_col = t.require("num_tokens");
  const size_t tp_col = t.require("num_tensor_parallel_workers");
  if (t.rows.empty()) throw core::InputError(source, 2, "", "no rows");

  for (size_t r = 0; r < t.rows.size(); ++r) {
    hwmodels::ModelSpec m;
    m.name = out.model_name;
    m.num_layers = 1;  // the table times one layer
    m.num_heads = model_column(t, r, "n_head", 1, hwmodels::kMaxModelDim);
    m.num_kv_heads = model_column(t, r, "n_kv_head", 1, hwmodels::kMaxModelDim);
    m.hidden_size = model_column(t, r, "n_embd", 1, hwmodels::kMaxModelDim);
    m.intermediate_size = model_column(t, r, "n_expanded_embd", 1, hwmodels::kMaxModelDim);
    m.vocab_size = model_column(t, r, "vocab_size", 1, hwmodels::kMaxModelDim);
    m.gated_mlp = gated_column(t, r);
    if (m.hidden_size % m.num_heads != 0)
      throw core::InputError(source, t.lines[r], "n_head", "n_embd is not a multiple of n_head");
    m.head_dim = m.hidden_size / m.num_heads;
    m.max_context = 1 << 20;
    if (const std::string p = hwmodels::model_problem(m); !p.empty())
      throw core::InputError(source, t.lines[r], "n_kv_head", p.substr(p.find(':') + 2));
    if (r == 0) {
      out.model = m;
    } else if (m.num_heads != out.model.num_heads || m.num_kv_heads != out.model.num_kv_heads ||
               m.hidden_size != out.model.hidden_size || m.intermediate_size != out.model.intermediate_size ||
               m.vocab_size != out.model.vocab_size || m.gated_mlp != out.model.gated_mlp) {
      throw core::InputError(source, t.lines[r], "n_embd", "a row of another model: one mlp.csv describes one model");
    }
    OperatorRow row;
    row.line = t.lines[r];
    row.num_tokens = t.integer(r, tokens_col);
    row.tensor_parallel = t.integer(r, tp_col);
    if (row.num_tokens < 1 || row.num_tokens > (int64_t{1} << 30))
      throw core::InputError(source, row.line, "num_tokens", "expected 1..2^30 tokens");
    if (row.tensor_parallel < 1 || row.tensor_parallel > 4096)
      throw core::InputError(source, row.line, "num_tensor_parallel_workers", "expected 1..4096 GPUs");
    for (const auto& [op, c] : op_columns) {
      const double ms = t.number(r, c);
      if (!(ms > 0)) throw core::InputError(source, row.line, t.header[c], "a measured time must be positive");
      row.median_ms[op] = ms;
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

OperatorTable read_operator_csv(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string model = p.has_parent_path() ? p.parent_path().filename().string() : p.stem().string();
  return parse_operator_csv(read_text_file(path), path, model);
}

std::vector<CollectiveRow> parse_collective_csv(std::string_view text, const std::string& source) {
  const CsvTable t = parse_csv(text, source);
  const size_t gpus_col = t.require("num_workers");
  const size_t size_col = t.require("size");
  const size_t per_node_col = t.require("devices_per_node");
  const size_t kind_col = t.require("collective");
  std::vector<CollectiveRow> out;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    CollectiveRow row;
    row.line = t.lines[r];
    row.collective = t.rows[r][kind_col];
    if (row.collective != "all_reduce" && row.collective != "send_recv")
      throw core::InputError(source, row.line, "collective", "expected all_reduce or send_recv, got '" +
                                                                 row.collective.substr(0, 40) + "'");
    const int median = t.column(std::string(kPrefix) + row.collective + std::string(kMedian));
    if (median < 0)
      throw core::InputError(source, 1, std::string(kPrefix) + row.collective + std::string(kMedian),
                             "column missing from the header");
    row.gpus = t.integer(r, gpus_col);
    row.gpus_per_node = t.integer(r, per_node_col);
    row.bytes = t.number(r, size_col);
    row.median_ms = t.number(r, static_cast<size_t>(median));
    // The fastest repetition, when the table has it: small messages' medians carry the host's
    // launch jitter (a 2 KB all-reduce on 8 H100s takes 15 to 38 us between repetitions), which a
    // replayed CUDA graph does not pay.
    const int fastest = t.column(std::string(kPrefix) + row.collective + ".min");
    row.min_ms = fastest >= 0 ? t.number(r, static_cast<size_t>(fastest)) : row.median_ms;
    if (!(row.min_ms > 0) || row.min_ms > row.median_ms)
      throw core::InputError(source, row.line, "min", "expected a positive minimum no larger than the median");
    if (row.gpus < 2 || row.gpus > 1 << 20) throw core::InputError(source, row.line, "num_workers", "expected 2 or more GPUs");
    if (row.gpus_per_node < 1) throw core::InputError(source, row.line, "devices_per_node", "expected 1 or more");
    if (!(row.bytes > 0)) throw core::InputError(source, row.line, "size", "expected a positive message size");
    if (!(row.median_ms > 0)) throw core::InputError(source, row.line, "median", "a measured time must be positive");
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<CollectiveRow> read_collective_csv(const std::string& path) {
  return parse_collective_csv(read_text_file(path), path);
}

OperatorData read_operator_dir(const std::string& dir, const std::string& gpu_name,
                               const std::vector<std::string>& exclude) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw core::InputError(dir, 0, "", "not a directory of measured operator tables");
  fs::path compute = dir, network = dir;
  if (fs::is_directory(fs::path(dir) / "compute", ec)) {
    const std::string lower = core::to_lower(gpu_name);
    const std::string shorter = lower.substr(0, lower.find('-'));
    compute = fs::path(dir) / "compute" / shorter;
    network = fs::path(dir) / "network" / (shorter + "_dgx");
    if (!fs::is_directory(compute, ec)) {
      std::string have;
      for (const auto& e : fs::directory_iterator(fs::path(dir) / "compute", ec))
        have += (have.empty() ? "" : ", ") + e.path().filename().string();
      throw core::InputError(compute.string(), 0, "",
                             "no measured tables for GPU '" + gpu_name + "' (looked for compute/" + shorter +
                                 "); this directory has: " + have);
    }
  }
  std::vector<fs::path> files;
  for (const fs::path& root : {compute, network}) {
    if (!fs::is_directory(root, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (it->is_regular_file(ec) && (name == "mlp.csv" || name == "all_reduce.csv" || name == "send_recv.csv"))
        files.push_back(it->path());
    }
    if (root == network) break;
    if (compute == network) break;  // one tree holds everything
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  OperatorData data;
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    if (name == "mlp.csv") {
      const std::string model = f.parent_path().filename().string();
      if (std::find(exclude.begin(), exclude.end(), model) != exclude.end()) continue;
      data.tables.push_back(read_operator_csv(f.string()));
    } else {
      for (auto& row : read_collective_csv(f.string()))
        (row.collective == "all_reduce" ? data.all_reduce : data.send_recv).push_back(std::move(row));
    }
    data.files.push_back(f.string());
  }
  if (data.tables.empty())
    throw core::InputError(dir, 0, "", "no mlp.csv (measured operator table) found for GPU '" + gpu_name + "'" +
                                           (exclude.empty() ? "" : " after the excluded models"));
  return data;
}

}  // namespace servesim::calibration
