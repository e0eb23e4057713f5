#include "experiments/experiment.h"

#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "experiments/replications.h"
#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/format.h"
#include "sim/core/input_file.h"
#include "sim/core/output_file.h"
#include "sim/core/rng.h"
#include "sim/core/toml_node.h"

namespace servesim::experiments {
namespace {

constexpr std::string_view kSetPrefix = "--set ";
constexpr size_t kMaxPoints = 1'000'000;

core::SourceLocation where_of(const toml::node& node, const std::string& file) {
  return core::SourceLocation{file, node.source().begin.line, node.source().begin.column};
}

core::SourceLocation where_of_key(const toml::key& key, const toml::node& node, const std::string& file) {
  if (key.source().begin.line > 0) return core::SourceLocation{file, key.source().begin.line, key.source().begin.column};
  return where_of(node, file);
}


// A double as TOML text that reads back as a float.
std::string float_text_impl(double v) {
  std::string s = core::format_double(v);
  if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
  return s;
}

// A node as TOML value text (inline form), for --set-style overrides.
std::string toml_text(const toml::node& node, const std::string& file) {
  switch (node.type()) {
    case toml::node_type::string: return core::toml_quote(*node.value<std::string>());
    case toml::node_type::integer: return std::to_string(*node.value<int64_t>());
    case toml::node_type::floating_point: return toml_float(*node.value<double>());
    case toml::node_type::boolean: return *node.value<bool>() ? "true" : "false";
    case toml::node_type::array: {
      std::string out = "[";
      bool first = true;
      for (const auto& e : *node.as_array()) {
        out += (first ? "" : ", ") + toml_text(e, file);
        first = false;
      }
      return out + "]";
    }
    case toml::node_type::table: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : *node.as_table()) {
        out += (first ? " " : ", ") + core::toml_quote(k.str()) + " = " + toml_text(v, file);
        first = false;
      }
      return out + (first ? "}" : " }");
    }
    default:
      throw core::ConfigError(where_of(node, file), "", "dates and times are not configuration values");
  }
}

std::optional<std::string> toml_string(const std::string& text) {
  if (text.empty() || text.front() != '"') return std::nullopt;
  try {
    toml::table t = toml::parse("v = " + text);
    if (auto s = t["v"].value<std::string>()) return *s;
  } catch (const toml::parse_error&) {
  }
  return std::nullopt;
}

bool valid_key_path(const std::string& key) {
  if (key.empty() || key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos) return false;
  for (char c : key)
    if (c == '=' || c == ' ' || c == '\t' || c == '\n') return false;
  return true;
}

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  return parts;
}

// The declared parameter a dotted key names in a resolved configuration, or nullptr.
const core::ParamSpec* find_spec_impl(const core::Params& root, const std::string& key) {
  const std::vector<core::ParamSpec>* specs = &run_schema();
  const core::Params* cur = &root;
  const auto parts = split_key(key);
  for (size_t i = 0; i < parts.size(); ++i) {
    const core::ParamSpec* spec = nullptr;
    for (const auto& s : *specs)
      if (s.name == parts[i]) spec = &s;
    if (!spec) return nullptr;
    if (i + 1 == parts.size()) return spec;
    if (spec->type == core::ParamType::kSection) {
      cur = &cur->section(parts[i]);
      const core::KindFamily* family = core::find_family(spec->family);
      const core::KindInfo* info = family ? family->find(cur->kind()) : nullptr;
      if (!info) return nullptr;
      specs = &info->params;
    } else if (spec->type == core::ParamType::kTable) {
      cur = &cur->section(parts[i]);
      specs = &spec->fields;
    } else {
      return nullptr;
    }
  }
  return nullptr;
}

// The message of an error without its "file:line:col: 'key': " prefix.
std::string bare_message(const core::ConfigError& e) {
  std::string prefix = e.where().str() + ": ";
  if (!e.key().empty()) prefix += "'" + core::printable(e.key(), 120) + "': ";
  const std::string what = e.what();
  return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

size_t common_prefix(const std::string& a, const std::string& b) {
  const auto pa = split_key(a), pb = split_key(b);
  size_t n = 0;
  while (n < pa.size() && n < pb.size() && pa[n] == pb[n]) ++n;
  return n;
}

// Keeps a generated value free of binary noise (0.30000000000000004 -> 0.3).
double round_significant(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return std::strtod(buf, nullptr);
}

class FileParser {
 public:
  explicit FileParser(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const toml::node& node, const std::string& key, const std::string& message) const {
    throw core::ConfigError(where_of(node, file_), key, message);
  }

  void check_keys(const toml::table& table, const std::string& path, const std::vector<std::string>& valid) const {
    for (const auto& [k, v] : table) {
      const std::string name(k.str());
      if (std::find(valid.begin(), valid.end(), name) == valid.end())
        throw core::ConfigError(where_of_key(k, v, file_), path.empty() ? name : path + "." + name,
                                "unknown key" + core::did_you_mean(name, valid) + "; valid keys" +
                                    (path.empty() ? "" : " in [" + path + "]") + ": " + core::join(valid));
    }
  }

  double number(const toml::node& node, const std::string& key) const {
    if (!node.is_number()) fail(node, key, "expected a number, got " + core::toml_type_name(node));
    const double v = *node.value<double>();
    if (!std::isfinite(v)) fail(node, key, "expected a finite number");
    return v;
  }

  int64_t integer(const toml::node& node, const std::string& key, int64_t lo, int64_t hi) const {
    auto v = node.value_exact<int64_t>();
    if (!v) fail(node, key, "expected an integer, got " + core::toml_type_name(node));
    if (*v < lo || *v > hi)
      fail(node, key, "value " + std::to_string(*v) + " is out of range; valid: [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
    return *v;
  }

  std::string string(const toml::node& node, const std::string& key) const {
    if (!node.is_string()) fail(node, key, "expected a string, got " + core::toml_type_name(node));
    return *node.value<std::string>();
  }

  // Leaves of a table as settings: nested (non-inline) tables recurse; everything else is a value.
  void leaves(const toml::table& table, const std::string& prefix, std::vector<Setting>& out) const {
    for (const auto& [k, v] : table) {
      const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      if (v.is_table() && !v.as_table()->is_inline()) {
        leaves(*v.as_table(), key, out);
        continue;
      }
      Setting s;
      s.key = key;
      s.value = toml_text(v, file_);
      s.key_where = where_of_key(k, v, file_);
      s.value_where = where_of(v, file_);
      out.push_back(std::move(s));
    }
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

}  // namespace

std::string toml_float(double v) { return float_text_impl(v); }

const core::ParamSpec* find_param_spec(const core::Params& config, const std::string& key) {
  return find_spec_impl(config, key);
}

std::optional<double> get_number(const core::Params& config, const std::string& key) {
  const auto parts = split_key(key);
  const core::Params* cur = &config;
  for (size_t i = 0; i + 1 < parts.size(); ++i) cur = &cur->section(parts[i]);
  const core::ParamSpec* spec = find_param_spec(config, key);
  if (!spec || !cur->has(parts.back())) return std::nullopt;
  if (spec->type == core::ParamType::kFloat) return cur->get_float(parts.back());
  if (spec->type == core::ParamType::kInt) return static_cast<double>(cur->get_int(parts.back()));
  return std::nullopt;
}

std::string Setting::display_value() const {
  // Shown on terminals and in one-line messages: control and invisible characters escaped.
  if (auto s = toml_string(value)) return core::printable(*s, std::string::npos);
  if (value.empty() || (value.front() != '{' && value.front() != '[')) return value;
  try {
    const toml::table t = toml::parse("v = " + value);
    std::function<std::string(const toml::node&)> compact = [&](const toml::node& n) -> std::string {
      if (n.is_table()) {
        std::string out = "{";
        for (const auto& [k, v] : *n.as_table()) out += (out.size() > 1 ? ", " : "") + std::string(k.str()) + "=" + compact(v);
        return out + "}";
      }
      if (n.is_array()) {
        std::string out = "[";
        for (const auto& v : *n.as_array()) out += (out.size() > 1 ? ", " : "") + compact(v);
        return out + "]";
      }
      if (n.is_string()) return core::printable(*n.value<std::string>(), std::string::npos);
      return toml_text(n, "");
    };
    return compact(*t.get("v"));
  } catch (const std::exception&) {
    return value;
  }
}

std::string settings_label(const std::vector<Setting>& settings) {
  std::string out;
  int labelled_axis = -2;
  for (const auto& s : settings) {
    if (!s.label.empty()) {
      if (s.axis == labelled_axis) continue;
      labelled_axis = s.axis;
      out += (out.empty() ? "" : " ") + core::printable(s.axis_name, std::string::npos) + "=" +
             core::printable(s.label, std::string::npos);
      continue;
    }
    out += (out.empty() ? "" : " ") + core::printable(s.key, std::string::npos) + "=" + s.display_value();
  }
  return out.empty() ? "(base)" : out;
}

std::string configuration_label(const std::vector<Setting>& settings) {
  std::vector<Setting> kept;
  for (const auto& s : settings)
    if (s.key != "seed" && s.key != "workload.rate" && s.key != "workload.rate_scale") kept.push_back(s);
  return settings_label(kept);
}

std::string Point::label() const { return settings_label(settings); }

std::string Point::configuration() const { return configuration_label(settings); }

std::string point_context(const Point& p) {
  return "point " + std::to_string(p.index) +
         (p.settings.empty() ? " (the base)" : " (" + core::printable(p.label(), 300) + ")");
}

int resolve_jobs(int jobs) {
  const int cores = std::max(1, tbb::info::default_concurrency());
  // oneTBB crashed with 100,000 threads and ran out of memory with 10^8: more threads than this
  // machine could ever use are refused, not attempted.
  if (jobs < 0 || jobs > kMaxJobs)
    throw core::UsageError("--jobs " + std::to_string(jobs) + ": valid: 0 (all cores) to " + std::to_string(kMaxJobs) +
                           " threads");
  if (jobs == 0) return cores;
  return jobs;
}

void check_experiment_outputs(const Experiment& experiment, const std::string& experiment_path,
                              const std::string& db_path) {
  if (db_path.empty()) return;
  core::PathPlan plan;
  plan.input(experiment_path, "the experiment file");
  plan.input(experiment.base_file(), "the base configuration");
  if (!experiment.points().empty()) {
    const core::Params config = experiment.resolve(experiment.points().front().settings);
    config.for_each_path([&](const core::Params& section, const std::string& name) {
      plan.input(section.get_string(name), "'" + section.key_path(name) + "'");
    });
  }
  plan.output(db_path, "--db");
  plan.output(db_path + "-journal", "--db's journal");
  plan.check();
}

Experiment Experiment::load(const std::string& path) {
  const std::string text = core::read_input_file(path, "an experiment file (TOML)", core::kMaxConfigBytes);
  const std::filesystem::path abs = core::absolute_path(path);
  Experiment e = parse(text, path, abs.parent_path().string());
  if (e.name_.empty()) e.name_ = std::filesystem::path(path).stem().string();
  return e;
}

Experiment Experiment::parse(const std::string& text, const std::string& source_name, const std::string& base_dir) {
  Experiment e;
  e.source_name_ = source_name;
  e.text_ = text;
  e.base_dir_ = std::filesystem::absolute(base_dir).lexically_normal().string();
  FileParser p(source_name);

  toml::table doc;
  try {
    doc = toml::parse(text, source_name);
  } catch (const toml::parse_error& err) {
    std::string what(err.description());
    for (char& c : what)
      if (c == '\n' || c == '\r') c = ' ';
    throw core::ConfigError(core::SourceLocation{source_name, err.source().begin.line, err.source().begin.column}, "",
                            "TOML syntax error: " + core::printable(what, 300));
  }
  // A run configuration given where an experiment belongs: say what it is and how to use it.
  if (!doc.get("base") && !doc.get("axis")) {
    for (const auto& spec : run_schema()) {
      const toml::node* n = doc.get(spec.name);
      if (!n || spec.name == "seed") continue;
      throw core::ConfigError(where_of(*n, source_name), spec.name,
                              "this is a run configuration (it has '" + spec.name +
                                  "'), not an experiment file: run it with servesim run " + source_name +
                                  ", or name it in an experiment file as base = \"" + source_name +
                                  "\" with the [[axis]] tables to vary");
    }
  }
  p.check_keys(doc, "",
               {"name", "description", "base", "set", "seeds", "repetitions", "replications", "infeasible", "axis",
                "capacity"});

  if (const toml::node* n = doc.get("name")) e.name_ = p.string(*n, "name");
  if (const toml::node* n = doc.get("description")) (void)p.string(*n, "description");

  // ---- The base configuration.
  const toml::node* base = doc.get("base");
  if (!base)
    throw core::ConfigError(core::SourceLocation{source_name, 0, 0}, "base",
                            "missing: name the base run configuration, base = \"path/to/config.toml\" (relative to "
                            "this file), or write it inline as a [base] table");
  e.base_where_ = where_of(*base, source_name);
  if (base->is_string()) {
    std::filesystem::path bp(*base->value<std::string>());
    if (bp.empty()) p.fail(*base, "base", "empty path");
    if (bp.is_relative()) bp = std::filesystem::path(e.base_dir_) / bp;
    bp = core::absolute_path(bp.string());
    try {
      e.base_text_ = core::read_input_file(bp.string(), "a TOML run configuration", core::kMaxConfigBytes);
    } catch (const core::InputError& err) {
      // The path may hold a line break or control characters (TOML escapes): shown escaped, and a
      // long one cut short, so that the reason after it still shows.
      const std::string what = err.what();
      const bool named = !err.file().empty() && what.rfind(err.file(), 0) == 0;
      p.fail(*base, "base",
             "cannot read the base configuration: " +
                 (named ? core::printable(err.file(), 400) + core::printable(what.substr(err.file().size()), 400)
                        : core::printable(what, 800)));
    }
    e.base_file_ = bp.string();
    e.base_source_ = bp.string();
    e.base_dir_of_base_ = bp.parent_path().string();
  } else if (base->is_table()) {
    e.base_source_ = source_name + " [base]";
    e.base_dir_of_base_ = e.base_dir_;
    p.leaves(*base->as_table(), "", e.base_settings_);
  } else {
    p.fail(*base, "base", "expected a path (string) or a [base] table, got " + core::toml_type_name(*base));
  }
  if (const toml::node* n = doc.get("set")) {
    if (!n->is_table()) p.fail(*n, "set", "expected a table of overrides ([set] with section.key = value)");
    p.leaves(*n->as_table(), "", e.base_settings_);
  }

  // ---- Repetitions.
  const toml::node* seeds = doc.get("seeds");
  const toml::node* reps = doc.get("repetitions");
  if (seeds && reps) p.fail(*reps, "repetitions", "give either seeds = [...] or repetitions = N, not both");
  if (seeds) {
    e.seeds_where_ = where_of(*seeds, source_name);
    if (!seeds->is_array() || seeds->as_array()->empty())
      p.fail(*seeds, "seeds", "expected a non-empty array of seeds (integers >= 0)");
    for (const auto& s : *seeds->as_array()) {
      const int64_t v = p.integer(s, "seeds", 0, INT64_MAX);
      if (std::find(e.seeds_.begin(), e.seeds_.end(), static_cast<uint64_t>(v)) != e.seeds_.end())
        p.fail(s, "seeds", "seed " + std::to_string(v) + " is listed twice");
      e.seeds_.push_back(static_cast<uint64_t>(v));
    }
  }
  if (reps) {
    e.seeds_where_ = where_of(*reps, source_name);
    e.repetitions_ = p.integer(*reps, "repetitions", 1, 100000);
  }
  if (const toml::node* r = doc.get("replications")) {
    if (seeds || reps)
      p.fail(*r, "replications", "replications = N sets the seeds itself (seed, seed + 1, ...); remove " +
                                     std::string(seeds ? "seeds" : "repetitions"));
    e.seeds_where_ = where_of(*r, source_name);
    e.replications_ = p.integer(*r, "replications", 2, 100000);
    e.repetitions_ = e.replications_;
  }
  if (const toml::node* n = doc.get("infeasible")) {
    const std::string v = p.string(*n, "infeasible");
    if (v != "error" && v != "skip")
      p.fail(*n, "infeasible", "invalid value " + core::in_quotes(v) + "; valid: error (default), skip");
    e.skip_infeasible_ = v == "skip";
  }

  // ---- Axes.
  if (const toml::node* axes = doc.get("axis")) {
    if (!axes->is_array_of_tables() && !(axes->is_array() && axes->as_array()->empty()))
      p.fail(*axes, "axis", "expected [[axis]] tables (an array of tables), got " + core::toml_type_name(*axes));
    std::map<std::string, core::SourceLocation> seen;
    for (const auto& node : *axes->as_array()) {
      const toml::table& t = *node.as_table();
      Axis axis;
      axis.where = where_of(node, source_name);
      p.check_keys(t, "axis", {"key", "keys", "values", "from", "to", "step", "count", "scale", "name", "labels"});
      const toml::node* key = t.get("key");
      const toml::node* keys = t.get("keys");
      if (!key && !keys) p.fail(node, "axis", "an [[axis]] needs key = \"section.key\" (or keys = [...] to zip)");
      if (key && keys) p.fail(*keys, "axis.keys", "give either key or keys, not both");
      std::vector<core::SourceLocation> key_where;
      if (key) {
        axis.keys.push_back(p.string(*key, "axis.key"));
        key_where.push_back(where_of(*key, source_name));
      } else {
        if (!keys->is_array() || keys->as_array()->empty())
          p.fail(*keys, "axis.keys", "expected a non-empty array of keys");
        for (const auto& k : *keys->as_array()) {
          axis.keys.push_back(p.string(k, "axis.keys"));
          key_where.push_back(where_of(k, source_name));
        }
      }
      for (size_t i = 0; i < axis.keys.size(); ++i) {
        const std::string& k = axis.keys[i];
        if (!valid_key_path(k))
          throw core::ConfigError(key_where[i], "axis.key", core::in_quotes(k) + " is not a configuration key (section.key)");
        if (k == "seed" && (seeds || reps || e.replications_ > 0))
          throw core::ConfigError(key_where[i], "axis.key",
                                  "an axis on 'seed' and seeds/repetitions/replications at " + e.seeds_where_.str() +
                                      " both set the seed; keep one");
        if (auto it = seen.find(k); it != seen.end())
          throw core::ConfigError(key_where[i], "axis.key", core::in_quotes(k) + " is already an axis at " + it->second.str());
        seen[k] = key_where[i];
      }

      const toml::node* values = t.get("values");
      const toml::node* from = t.get("from");
      const toml::node* to = t.get("to");
      if (values && (from || to || t.get("step") || t.get("count") || t.get("scale")))
        p.fail(*values, "axis.values", "give either values = [...] or a range (from, to, step or count), not both");
      auto setting = [&](size_t k, std::string value, core::SourceLocation value_where) {
        Setting s;
        s.key = axis.keys[k];
        s.value = std::move(value);
        s.key_where = key_where[k];
        s.value_where = std::move(value_where);
        return s;
      };
      if (values) {
        if (!values->is_array() || values->as_array()->empty())
          p.fail(*values, "axis.values", "expected a non-empty array of values");
        for (const auto& v : *values->as_array()) {
          std::vector<Setting> step;
          if (axis.keys.size() == 1) {
            step.push_back(setting(0, toml_text(v, source_name), where_of(v, source_name)));
          } else {
            if (!v.is_array() || v.as_array()->size() != axis.keys.size())
              p.fail(v, "axis.values",
                     "a zipped axis takes one array of " + std::to_string(axis.keys.size()) +
                         " values per step (one for each of " + core::join(axis.keys) + ")");
            size_t k = 0;
            for (const auto& x : *v.as_array()) {
              step.push_back(setting(k, toml_text(x, source_name), where_of(x, source_name)));
              ++k;
            }
          }
          axis.steps.push_back(std::move(step));
        }
      } else {
        if (!from || !to) p.fail(node, "axis", "an [[axis]] needs values = [...] or a range: from, to and step or count");
        if (axis.keys.size() != 1) p.fail(node, "axis", "a range axis has one key; zip several keys with values");
        const double lo = p.number(*from, "axis.from"), hi = p.number(*to, "axis.to");
        const toml::node* step = t.get("step");
        const toml::node* count = t.get("count");
        std::string scale = "linear";
        if (const toml::node* s = t.get("scale")) {
          scale = p.string(*s, "axis.scale");
          if (scale != "linear" && scale != "log")
            p.fail(*s, "axis.scale", "invalid value " + core::in_quotes(scale) + "; valid: linear, log");
        }
        if (!step && !count) p.fail(node, "axis", "a range axis needs step = ... or count = ...");
        if (step && count) p.fail(*count, "axis.count", "give either step or count, not both");
        if (hi < lo) p.fail(*to, "axis.to", "the range runs from " + core::format_double(lo) + " to " +
                                               core::format_double(hi) + ": 'to' must not be below 'from'");
        std::vector<std::string> texts;
        const bool ints = from->is_integer() && to->is_integer() && scale == "linear";
        if (scale == "log") {
          if (step) p.fail(*step, "axis.step", "a log-scale range takes count = N, not step");
          if (lo <= 0) p.fail(*from, "axis.from", "a log-scale range needs from > 0");
          const int64_t n = p.integer(*count, "axis.count", 1, static_cast<int64_t>(kMaxPoints));
          for (int64_t i = 0; i < n; ++i) {
            const double v = n == 1 ? lo : lo * std::pow(hi / lo, static_cast<double>(i) / static_cast<double>(n - 1));
            texts.push_back(toml_float(round_significant(v, 6)));
          }
        } else if (step) {
          const double d = p.number(*step, "axis.step");
          if (!(d > 0)) p.fail(*step, "axis.step", "step must be > 0");
          const double steps = std::floor((hi - lo) / d + 1e-9);
          if (steps + 1 > static_cast<double>(kMaxPoints))
            p.fail(*step, "axis.step", "the range has more than " + std::to_string(kMaxPoints) + " values");
          const bool int_step = ints && step->is_integer();
          for (int64_t i = 0; i <= static_cast<int64_t>(steps); ++i) {
            if (int_step)
              texts.push_back(std::to_string(*from->value<int64_t>() + i * *step->value<int64_t>()));
            else
              texts.push_back(toml_float(round_significant(lo + static_cast<double>(i) * d, 12)));
          }
        } else {
          const int64_t n = p.integer(*count, "axis.count", 1, static_cast<int64_t>(kMaxPoints));
          const bool even = ints && (n == 1 || (*to->value<int64_t>() - *from->value<int64_t>()) % (n - 1) == 0);
          for (int64_t i = 0; i < n; ++i) {
            if (even) {
              texts.push_back(std::to_string(
                  *from->value<int64_t>() +
                  (n == 1 ? 0 : i * ((*to->value<int64_t>() - *from->value<int64_t>()) / (n - 1)))));
            } else {
              const double v = n == 1 ? lo : lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(n - 1);
              texts.push_back(toml_float(round_significant(v, 12)));
            }
          }
        }
        for (auto& text : texts) axis.steps.push_back({setting(0, std::move(text), where_of(*from, source_name))});
      }
      if (const toml::node* n = t.get("name")) {
        axis.name = p.string(*n, "axis.name");
        if (axis.name.empty() || axis.name.find_first_of(" =") != std::string::npos)
          p.fail(*n, "axis.name", "an axis name is one word without '=', e.g. \"setup\"");
      } else {
        for (size_t k = 0; k < axis.keys.size(); ++k) axis.name += (k ? "+" : "") + axis.keys[k];
      }
      const int axis_index = static_cast<int>(e.axes_.size());
      std::vector<std::string> labels;
      if (const toml::node* n = t.get("labels")) {
        if (!n->is_array() || n->as_array()->size() != axis.steps.size())
          p.fail(*n, "axis.labels", "expected an array of " + std::to_string(axis.steps.size()) +
                                        " labels, one for each value of the axis");
        for (const auto& l : *n->as_array()) {
          std::string label = p.string(l, "axis.labels");
          if (label.empty()) p.fail(l, "axis.labels", "a label is not empty");
          if (std::find(labels.begin(), labels.end(), label) != labels.end())
            p.fail(l, "axis.labels", "the label " + core::in_quotes(label) + " is given twice");
          labels.push_back(std::move(label));
        }
      }
      for (size_t i = 0; i < axis.steps.size(); ++i) {
        for (Setting& s : axis.steps[i]) {
          s.axis = axis_index;
          s.axis_name = axis.name;
          if (!labels.empty()) s.label = labels[i];
        }
      }
      e.axes_.push_back(std::move(axis));
    }
  }

  // ---- [capacity]
  if (const toml::node* cap = doc.get("capacity")) {
    if (!cap->is_table()) p.fail(*cap, "capacity", "expected a [capacity] table");
    const toml::table& t = *cap->as_table();
    CapacitySpec& c = e.capacity_;
    c.where = where_of(*cap, source_name);
    p.check_keys(t, "capacity",
                 {"target", "knob", "start", "min", "max", "tolerance", "max_probes", "cheapest_at", "require_stationary",
                  "cliff_slope", "extend_up_to", "headroom"});
    auto positive = [&](const char* key) -> std::optional<double> {
      const toml::node* n = t.get(key);
      if (!n) return std::nullopt;
      const double v = p.number(*n, std::string("capacity.") + key);
      if (!(v > 0)) p.fail(*n, std::string("capacity.") + key, "must be > 0");
      return v;
    };
    if (const toml::node* n = t.get("target")) {
      c.target = p.number(*n, "capacity.target");
      if (!(c.target > 0 && c.target <= 1))
        p.fail(*n, "capacity.target", "the SLO attainment target is a fraction in (0, 1], e.g. 0.9");
    }
    if (const toml::node* n = t.get("knob")) {
      c.knob = p.string(*n, "capacity.knob");
      if (!valid_key_path(c.knob)) p.fail(*n, "capacity.knob", core::in_quotes(c.knob) + " is not a configuration key");
    }
    c.start = positive("start");
    if (auto v = positive("min")) c.min = *v;
    if (auto v = positive("max")) c.max = *v;
    if (!(c.max > c.min)) p.fail(*cap, "capacity.max", "max must be above min");
    if (const toml::node* n = t.get("tolerance")) {
      c.tolerance = p.number(*n, "capacity.tolerance");
      if (!(c.tolerance >= 1e-4 && c.tolerance < 1))
        p.fail(*n, "capacity.tolerance", "a relative tolerance in [0.0001, 1), e.g. 0.02 for 2%");
    }
    if (const toml::node* n = t.get("max_probes")) c.max_probes = p.integer(*n, "capacity.max_probes", 2, 1000);
    c.cheapest_at = positive("cheapest_at");
    if (const toml::node* n = t.get("require_stationary")) {
      if (!n->is_boolean()) p.fail(*n, "capacity.require_stationary", "expected true or false");
      c.require_stationary = *n->value<bool>();
    }
    if (auto v = positive("cliff_slope")) c.cliff_slope = *v;
    if (const toml::node* n = t.get("extend_up_to"))
      c.extend_up_to = p.integer(*n, "capacity.extend_up_to", 0, 1'000'000'000);
    if (const toml::node* n = t.get("headroom")) {
      const std::string kind = p.string(*n, "capacity.headroom");
      if (kind != "none" && kind != "replica" && kind != "node")
        p.fail(*n, "capacity.headroom",
               core::in_quotes(kind) + " is not a headroom: \"replica\" (N+1: the SLO must hold with one replica "
               "down), \"node\" (with one node down) or \"none\"");
      if (kind != "none") {
        e.set_headroom(kind, where_of(*n, source_name));
        return e;  // set_headroom expanded the points
      }
    }
  }

  e.expand();
  return e;
}

void Experiment::set_headroom(const std::string& kind, const core::SourceLocation& where) {
  axes_.erase(std::remove_if(axes_.begin(), axes_.end(), [](const Axis& a) { return a.name == "headroom"; }),
              axes_.end());
  capacity_.headroom = kind;
  if (!kind.empty()) {
    if (kind != "replica" && kind != "node")
      throw core::ConfigError(where, "capacity.headroom", "'" + kind + "' is not a headroom (replica or node)");
    for (const Axis& a : axes_)
      for (const std::string& key : a.keys)
        if (key == "faults" || key.rfind("faults.", 0) == 0)
          throw core::ConfigError(a.where, "axis.key",
                                  "capacity.headroom injects the failure itself (faults.events); remove this faults "
                                  "axis or the headroom");
    Axis axis;
    axis.name = "headroom";
    axis.keys = {"faults.events"};
    axis.where = where;
    const int index = static_cast<int>(axes_.size());
    const std::string down = kind == "replica" ? "[{replica = 0, at_s = 0.0}]" : "[{node = 0, at_s = 0.0}]";
    // "All up" is an event that changes nothing (replica 0 "slowed" to its full speed at 0 s), so
    // that both halves of a pair set the same key and differ only in the failure.
    axis.steps.push_back({Setting{"faults.events", "[{replica = 0, at_s = 0.0, kind = \"slow\", speed = 1.0}]", where,
                                  where, index, "headroom", "all up"}});
    axis.steps.push_back({Setting{"faults.events", down, where, where, index, "headroom",
                                  kind == "replica" ? "one replica down" : "one node down"}});
    axes_.push_back(std::move(axis));
  }
  if (repetitions_ > 0) seeds_.clear();  // expand() draws them again
  expand();
}

std::vector<std::vector<Setting>> Experiment::configurations() const {
  std::vector<std::vector<Setting>> out{{}};
  for (const Axis& axis : axes_) {
    std::vector<std::vector<Setting>> next;
    next.reserve(out.size() * axis.steps.size());
    for (const auto& prefix : out) {
      for (const auto& step : axis.steps) {
        auto s = prefix;
        s.insert(s.end(), step.begin(), step.end());
        next.push_back(std::move(s));
      }
    }
    out = std::move(next);
  }
  return out;
}

void Experiment::expand() {
  size_t total = 1;
  for (const Axis& axis : axes_) {
    total *= axis.steps.size();
    if (total > kMaxPoints)
      throw core::ConfigError(axis.where, "axis",
                              "the axes expand to more than " + std::to_string(kMaxPoints) + " points");
  }
  auto configs = configurations();
  if (repetitions_ > 0) {
    const core::Params first = resolve(configs.front(), "the first configuration");
    // Replications of a trace replay are block bootstraps of it (experiments/replications.h): every
    // point gets resample_trace unless the experiment sets it.
    if (replications_ > 0 && replays_trace(first) && !first.section("replication").given("resample_trace")) {
      base_settings_.push_back(Setting{"replication.resample_trace", "true", seeds_where_, seeds_where_});
      replication_resamples_ = true;
    }
    const uint64_t base_seed = static_cast<uint64_t>(first.get_int("seed"));
    for (int64_t i = 0; i < repetitions_; ++i) seeds_.push_back(base_seed + static_cast<uint64_t>(i));
  }
  if (configs.size() * std::max<size_t>(1, seeds_.size()) > kMaxPoints)
    throw core::ConfigError(seeds_where_, "seeds", "the experiment expands to more than " +
                                                       std::to_string(kMaxPoints) + " points");
  points_.clear();
  for (const auto& config : configs) {
    if (seeds_.empty()) {
      Point p;
      p.index = static_cast<int64_t>(points_.size());
      p.settings = config;
      points_.push_back(std::move(p));
      continue;
    }
    for (uint64_t seed : seeds_) {
      Point p;
      p.index = static_cast<int64_t>(points_.size());
      p.settings = config;
      p.settings.push_back(Setting{"seed", std::to_string(seed), seeds_where_, seeds_where_});
      points_.push_back(std::move(p));
    }
  }
}

void Experiment::rethrow_located(const core::ConfigError& e, const std::vector<Setting>& settings,
                                 const std::string& context) const {
  core::SourceLocation where = e.where();
  const std::string message = bare_message(e);
  auto all = base_settings_;
  all.insert(all.end(), settings.begin(), settings.end());
  if (where.file.rfind(kSetPrefix, 0) == 0) {
    // Raised at one of our --set style overrides: point at the setting in the experiment file.
    const std::string assignment = where.file.substr(kSetPrefix.size());
    for (const auto& s : all) {
      if (s.override_text() != assignment) continue;
      where = message.rfind("unknown key", 0) == 0 ? s.key_where : s.value_where;
      break;
    }
  } else if (base_file_.empty() && where.file == base_source_) {
    // The inline [base] is applied as settings over nothing: point at the setting nearest the key.
    size_t best = 0;
    where = base_where_;
    for (const auto& s : all) {
      const size_t n = common_prefix(s.key, e.key());
      if (n > best) {
        best = n;
        where = s.key_where;
      }
    }
  }
  throw core::ConfigError(where, e.key(), context.empty() ? message : context + ": " + message);
}

core::Params Experiment::resolve(const std::vector<Setting>& settings, const std::string& context) const {
  std::vector<Setting> all = base_settings_;
  all.insert(all.end(), settings.begin(), settings.end());
  auto parse = [&](const std::vector<Setting>& with) {
    std::vector<std::string> overrides;
    overrides.reserve(with.size());
    for (const auto& s : with) overrides.push_back(s.override_text());
    try {
      return core::parse_config(base_text_, base_source_, run_schema(), overrides, base_dir_of_base_);
    } catch (const core::ConfigError& e) {
      rethrow_located(e, settings, context);
    }
  };
  core::Params params = parse(all);
  // Paths the experiment sets resolve against the experiment file's directory, not the working
  // directory (as they would for a command-line --set).
  bool changed = false;
  for (auto& s : all) {
    auto str = toml_string(s.value);
    if (!str || str->empty()) continue;
    const core::ParamSpec* spec = find_param_spec(params, s.key);
    if (!spec || spec->type != core::ParamType::kPath) continue;
    std::filesystem::path path(*str);
    if (path.is_absolute()) continue;
    s.value = core::toml_quote((std::filesystem::path(base_dir_) / path).lexically_normal().string());
    changed = true;
  }
  return changed ? parse(all) : params;
}

void Experiment::check(int jobs) {
  const int threads = resolve_jobs(jobs);
  const size_t n = points_.size();
  std::vector<std::exception_ptr> errors(n);
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, n, [&](size_t i) {
      Point& p = points_[i];
      const std::string context = point_context(p);
      try {
        core::Params config = resolve(p.settings, context);
        p.seed = static_cast<uint64_t>(config.get_int("seed"));
        RunOutputs outputs;
        outputs.build_only = true;
        try {
          run_simulation(config, outputs);
        } catch (const core::ConfigError& e) {
          if (!skip_infeasible_) rethrow_located(e, p.settings, context);
          p.skipped = true;
          p.skip_reason = (e.key().empty() ? "" : "'" + core::printable(e.key(), 120) + "': ") + bare_message(e);
        }
        // After building, which reports an unreadable file at its key: the key covers the content
        // of every file the point reads.
        p.key = config_hash(config);
      } catch (const core::ConfigError&) {
        errors[i] = std::current_exception();
      } catch (const core::InputError& e) {
        errors[i] = std::make_exception_ptr(core::Error(context + ": " + e.what()));
      } catch (const std::exception& e) {
        errors[i] = std::make_exception_ptr(core::Error(context + ": " + e.what()));
      }
    });
  });
  for (const auto& err : errors)
    if (err) std::rethrow_exception(err);
  std::map<std::string, const Point*> by_key;
  for (const Point& p : points_) {
    auto [it, inserted] = by_key.emplace(p.key, &p);
    if (!inserted) {
      const core::SourceLocation where = p.settings.empty() ? base_where_ : p.settings.front().value_where;
      throw core::ConfigError(where, "axis",
                              "points " + std::to_string(it->second->index) + " (" + it->second->label() + ") and " +
                                  std::to_string(p.index) + " (" + p.label() +
                                  ") resolve to the same configuration and seed; remove the repeated value");
    }
  }
  checked_ = true;
}

std::string Experiment::identity() const {
  if (!checked_) throw core::Error("internal: the experiment's identity needs check() first");
  std::string all = "servesim experiment v1\n";
  for (const Point& p : points_) all += p.key + "\n";
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(core::fnv1a64(all)));
  return buf;
}

}  // namespace servesim::experiments
