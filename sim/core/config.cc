#include "sim/core/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "sim/core/format.h"
#include "sim/core/input_file.h"
#include "sim/core/toml_node.h"

namespace servesim::core {
namespace {

constexpr std::string_view kSetPrefix = "--set ";

SourceLocation location_of(const toml::source_region& src, const std::string& fallback_file) {
  SourceLocation loc;
  const std::string path = src.path ? std::string(*src.path) : fallback_file;
  if (path.rfind(kSetPrefix, 0) == 0) {
    loc.file = path;  // "--set a.b=c": the override itself is the location
    return loc;
  }
  loc.file = path;
  loc.line = src.begin.line;
  loc.column = src.begin.column;
  return loc;
}

SourceLocation location_of(const toml::node& node, const std::string& fallback_file) {
  return location_of(node.source(), fallback_file);
}

// A key's own position when it has one (keys inserted by --set have none: use the value's).
SourceLocation location_of(const toml::key& key, const toml::node& node, const std::string& fallback_file) {
  return key.source().path ? location_of(key.source(), fallback_file) : location_of(node, fallback_file);
}


class Validator {
 public:
  Validator(std::string file, std::string base_dir) : file_(std::move(file)), base_dir_(std::move(base_dir)) {}

  void fill(Params& out, const toml::table* table, const std::vector<ParamSpec>& specs) {
    // Unknown keys first: a typo must never fall back silently to a default.
    if (table) {
      for (const auto& [key, node] : *table) {
        const std::string name(key.str());
        if (name == "kind" && !out.kind().empty()) continue;
        bool known = false;
        for (const auto& s : specs) known = known || s.name == name;
        if (!known) {
          std::vector<std::string> valid;
          if (!out.kind().empty()) valid.push_back("kind");
          for (const auto& s : specs) valid.push_back(s.name);
          std::string msg = "unknown key" + did_you_mean(name, valid) + "; valid keys";
          if (!out.kind().empty()) msg += " for kind '" + out.kind() + "'";
          throw ConfigError(location_of(key, node, file_), out.key_path(name), msg + ": " + join(valid));
        }
      }
    }
    for (const auto& spec : specs) {
      const toml::node* node = table ? table->get(spec.name) : nullptr;
      // An optional section or table that is absent is simply not there (Params::has is false).
      if (!node && spec.optional_ &&
          (spec.type == ParamType::kSection || spec.type == ParamType::kTable || spec.type == ParamType::kTableList))
        continue;
      switch (spec.type) {
        case ParamType::kSection: fill_section(out, spec, node); break;
        case ParamType::kTable: fill_table(out, spec, node); break;
        case ParamType::kTableList: fill_table_list(out, spec, node); break;
        default: fill_scalar(out, spec, node); break;
      }
    }
  }

 private:
  void fill_table(Params& out, const ParamSpec& spec, const toml::node* node) {
    const toml::table* table = as_table(out, spec, node);
    SourceLocation where = node ? location_of(*node, file_) : out.where();
    Params child(out.key_path(spec.name), "", where);
    fill(child, table, spec.fields);
    out.add_section(spec.name, std::move(child));
  }

  // An array of tables ([[key]] sections, or key = [{...}, ...]), each element checked against the
  // list's fields; element i's keys are reported as key[i].field.
  void fill_table_list(Params& out, const ParamSpec& spec, const toml::node* node) {
    const std::string key = out.key_path(spec.name);
    auto fields_hint = [&] {
      std::vector<std::string> names;
      for (const auto& f : spec.fields) names.push_back(f.name);
      return " (" + spec.description + "; each element has the keys " + join(names) + ")";
    };
    if (!node)
      throw ConfigError(out.where(), key, "missing required list of tables [[" + key + "]]" + fields_hint());
    const toml::array* array = node->as_array();
    if (!array)
      throw ConfigError(location_of(*node, file_), key,
                        "expected a list of tables ([[" + key + "]] sections), got " + toml_type_name(*node) +
                            fields_hint());
    if (array->empty())
      throw ConfigError(location_of(*node, file_), key, "the list is empty; give at least one [[" + key + "]]" +
                                                           fields_hint());
    std::vector<Params> elements;
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::node& element = *array->get(i);
      const std::string element_key = key + "[" + std::to_string(i) + "]";
      if (!element.is_table())
        throw ConfigError(location_of(element, file_), element_key,
                          "expected a table, got " + toml_type_name(element) + fields_hint());
      Params child(element_key, "", location_of(element, file_));
      fill(child, element.as_table(), spec.fields);
      elements.push_back(std::move(child));
    }
    out.add_list(spec.name, std::move(elements), location_of(*node, file_));
  }

  void fill_section(Params& out, const ParamSpec& spec, const toml::node* node) {
    const std::string key = out.key_path(spec.name);
    const toml::table* table = as_table(out, spec, node);
    KindFamily* family = find_family(spec.family);
    if (!family) throw Error("internal: no kind family '" + spec.family + "' for '" + key + "'");
    SourceLocation where = node ? location_of(*node, file_) : out.where();

    std::string kind = spec.default_kind;
    const toml::node* kind_node = table ? table->get("kind") : nullptr;
    if (kind_node) {
      auto value = kind_node->value<std::string>();
      if (!value || !kind_node->is_string())
        throw ConfigError(location_of(*kind_node, file_), key + ".kind",
                          "expected a string naming a kind, got " + toml_type_name(*kind_node) +
                              "; valid kinds: " + join(family->kind_names()));
      kind = *value;
      where = location_of(*kind_node, file_);
      if (kind.empty())
        throw ConfigError(where, key + ".kind", "empty kind; valid kinds: " + join(family->kind_names()));
    }
    if (kind.empty()) {
      throw ConfigError(where, key + ".kind",
                        std::string(table ? "missing 'kind'" : "missing section [" + key + "]") +
                            " (" + spec.description + "); valid kinds: " + join(family->kind_names()));
    }
    const KindInfo* info = family->find(kind);
    if (!info) {
      auto names = family->kind_names();
      throw ConfigError(where, key + ".kind",
                        "unknown " + family->name() + " kind " + in_quotes(kind) + did_you_mean(kind, names) +
                            "; valid kinds: " + join(names));
    }
    Params child(key, info->name, node ? location_of(*node, file_) : out.where());
    fill(child, table, info->params);
    out.add_section(spec.name, std::move(child));
  }

  const toml::table* as_table(const Params& out, const ParamSpec& spec, const toml::node* node) {
    if (!node) return nullptr;
    if (!node->is_table())
      throw ConfigError(location_of(*node, file_), out.key_path(spec.name),
                        "expected a table (section [" + out.key_path(spec.name) + "]), got " +
                            toml_type_name(*node));
    return node->as_table();
  }

  [[noreturn]] void type_error(const Params& out, const ParamSpec& spec, const toml::node& node) {
    std::string expected = spec.type_name();
    throw ConfigError(location_of(node, file_), out.key_path(spec.name),
                      "expected " + std::string(spec.type == ParamType::kInt ? "an " : "a ") + expected +
                          (spec.unit.empty() ? "" : " (" + spec.unit + ")") + ", got " +
                          toml_type_name(node) + describe(spec));
  }

  static std::string describe(const ParamSpec& spec) {
    std::string r = spec.range_str();
    return "; " + spec.description + (r.empty() ? "" : ", " + r);
  }

  void check_range(const Params& out, const ParamSpec& spec, const toml::node& node, double v) {
    const bool low = spec.min_exclusive ? !(v > spec.min) : v < spec.min;
    if ((low || v > spec.max) && !(spec.zero_allowed && v == 0))
      throw ConfigError(location_of(node, file_), out.key_path(spec.name),
                        "value " + format_double(v) + " is out of range; valid: " + spec.range_str() +
                            (spec.unit.empty() ? "" : " " + spec.unit) + " (" + spec.description + ")");
  }

  void fill_scalar(Params& out, const ParamSpec& spec, const toml::node* node) {
    if (!node) {
      if (spec.is_required())
        throw ConfigError(out.where(), out.key_path(spec.name),
                          "missing required key in " +
                              (out.path().empty() ? std::string("the top level") : "[" + out.path() + "]") +
                              " (" + spec.type_name() + (spec.unit.empty() ? "" : ", " + spec.unit) + ": " +
                              spec.description + ")");
      out.set(spec.name, spec.default_value, out.where(), false);
      return;
    }
    const SourceLocation where = location_of(*node, file_);
    switch (spec.type) {
      case ParamType::kInt: {
        int64_t v = 0;
        if (auto i = node->value_exact<int64_t>()) {
          v = *i;
        } else if (node->is_floating_point()) {
          const double d = *node->value<double>();
          if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) >= 9.2e18)
            throw ConfigError(where, out.key_path(spec.name),
                              "expected an integer, got " + format_double(d) + describe(spec));
          v = static_cast<int64_t>(d);
        } else {
          type_error(out, spec, *node);
        }
        check_range(out, spec, *node, static_cast<double>(v));
        out.set(spec.name, v, where, true);
        break;
      }
      case ParamType::kFloat: {
        if (!node->is_number()) type_error(out, spec, *node);
        const double d = *node->value<double>();
        if (!std::isfinite(d))
          throw ConfigError(where, out.key_path(spec.name),
                            "expected a finite number, got " + format_double(d) + describe(spec));
        check_range(out, spec, *node, d);
        out.set(spec.name, d, where, true);
        break;
      }
      case ParamType::kFloatList: {
        const toml::array* array = node->as_array();
        if (!array) type_error(out, spec, *node);
        std::vector<double> values;
        for (size_t i = 0; i < array->size(); ++i) {
          const toml::node& item = *array->get(i);
          const std::string key = out.key_path(spec.name) + "[" + std::to_string(i) + "]";
          if (!item.is_number())
            throw ConfigError(location_of(item, file_), key,
                              "expected a number, got " + toml_type_name(item) + describe(spec));
          const double d = *item.value<double>();
          const bool low = spec.min_exclusive ? !(d > spec.min) : d < spec.min;
          if (!std::isfinite(d) || low || d > spec.max)
            throw ConfigError(location_of(item, file_), key,
                              "value " + format_double(d) + " is out of range; valid: " + spec.range_str() +
                                  (spec.unit.empty() ? "" : " " + spec.unit) + " (" + spec.description + ")");
          values.push_back(d);
        }
        out.set(spec.name, std::move(values), where, true);
        break;
      }
      case ParamType::kBool: {
        if (!node->is_boolean()) type_error(out, spec, *node);
        out.set(spec.name, *node->value<bool>(), where, true);
        break;
      }
      case ParamType::kString:
      case ParamType::kPath: {
        if (!node->is_string()) type_error(out, spec, *node);
        std::string s = *node->value<std::string>();
        // A path may also be one of its keywords (`calibration = "none"`), kept as written.
        const bool keyword = spec.type == ParamType::kPath &&
                             std::find(spec.choices.begin(), spec.choices.end(), s) != spec.choices.end();
        if (!spec.choices.empty() && spec.type != ParamType::kPath) {
          bool ok = false;
          for (const auto& c : spec.choices) ok = ok || c == s;
          if (!ok)
            throw ConfigError(where, out.key_path(spec.name),
                              "invalid value " + in_quotes(s) + did_you_mean(s, spec.choices) + "; valid: " +
                                  join(spec.choices));
        }
        if (spec.type == ParamType::kPath && !keyword) {
          std::string resolved = resolve_path(s, where);
          out.set_path(spec.name, std::move(resolved), std::move(s), where);
        } else {
          out.set(spec.name, std::move(s), where, true);
        }
        break;
      }
      default: break;
    }
  }

  // Absolute: relative paths resolve against the configuration file's directory (against the
  // working directory for --set), so that messages and the stored configuration say where the file
  // is, whatever the working directory.
  std::string resolve_path(const std::string& s, const SourceLocation& where) const {
    if (s.empty()) throw ConfigError(where, "", "empty path");
    std::filesystem::path p(s);
    if (p.is_relative() && where.file.rfind(kSetPrefix, 0) != 0) p = std::filesystem::path(base_dir_) / p;
    return absolute_path(p.string());
  }

  std::string file_;
  std::string base_dir_;
};

// Applies one "a.b.c=value" override to the document.
void apply_override(toml::table& doc, const std::string& assignment) {
  const std::string source = std::string(kSetPrefix) + assignment;
  const auto eq = assignment.find('=');
  SourceLocation where{source, 0, 0};
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(where, "", "expected section.key=value");
  std::string dotted = assignment.substr(0, eq);
  std::string value_text = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(dotted);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty()) throw ConfigError(where, dotted, "empty component in key path");
    parts.push_back(part);
  }
  toml::table* table = &doc;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* child = table->get(parts[i]);
    if (!child) {
      table->insert(parts[i], toml::table{});
      child = table->get(parts[i]);
      child->as_table()->is_inline(false);
    }
    if (!child->is_table())
      throw ConfigError(where, dotted, "'" + parts[i] + "' is a value, not a section");
    table = child->as_table();
  }
  // Parse the value as TOML; anything that is not a single TOML value (a bare word) is a string.
  toml::table parsed;
  auto as_string = [&] {
    try {
      return toml::parse("v = " + toml_quote(value_text), source);
    } catch (const toml::parse_error& e) {
      // Only text TOML cannot hold at all gets here (invalid UTF-8, control characters).
      throw ConfigError(where, dotted, "the value is not valid TOML text: " + std::string(e.description()));
    }
  };
  try {
    parsed = toml::parse("v = " + value_text, source);
  } catch (const toml::parse_error&) {
    parsed = as_string();
  }
  if (parsed.size() != 1 || !parsed.get("v")) parsed = as_string();
  for (auto&& [k, v] : parsed) table->insert_or_assign(parts.back(), std::move(v));
}

}  // namespace

Params parse_config(const std::string& text, const std::string& source_name,
                    const std::vector<ParamSpec>& schema, const std::vector<std::string>& overrides,
                    const std::string& base_dir) {
  toml::table doc;
  try {
    doc = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    SourceLocation where{source_name, e.source().begin.line, e.source().begin.column};
    // toml++ quotes the offending text, which can hold line breaks: keep the message one line.
    std::string what(e.description());
    for (char& c : what)
      if (c == '\n' || c == '\r') c = ' ';
    throw ConfigError(where, "", "TOML syntax error: " + printable(what, 300));
  }
  for (const auto& o : overrides) apply_override(doc, o);
  Params root("", "", SourceLocation{source_name, 0, 0});
  Validator(source_name, base_dir).fill(root, &doc, schema);
  return root;
}

Params load_config(const std::string& file, const std::vector<ParamSpec>& schema,
                   const std::vector<std::string>& overrides) {
  const std::string text = read_input_file(file, "a TOML run configuration", kMaxConfigBytes);
  const std::string base = std::filesystem::path(absolute_path(file)).parent_path().string();
  return parse_config(text, file, schema, overrides, base);
}

std::string toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a bool";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

}  // namespace servesim::core
