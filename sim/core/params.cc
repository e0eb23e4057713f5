#include "sim/core/params.h"

#include <algorithm>
#include <cmath>

#include "sim/core/format.h"
#include "sim/core/input_file.h"

namespace servesim::core {

// ---- ParamSpec ---------------------------------------------------------------------------------

ParamSpec ParamSpec::integer(std::string name, int64_t def, std::string unit, std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kInt;
  p.default_value = def;
  p.unit = std::move(unit);
  p.description = std::move(description);
  return p;
}

ParamSpec ParamSpec::real(std::string name, double def, std::string unit, std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kFloat;
  p.default_value = def;
  p.unit = std::move(unit);
  p.description = std::move(description);
  return p;
}

ParamSpec ParamSpec::boolean(std::string name, bool def, std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kBool;
  p.default_value = def;
  p.description = std::move(description);
  return p;
}

ParamSpec ParamSpec::real_list(std::string name, std::vector<double> def, std::string unit,
                               std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kFloatList;
  p.default_value = std::move(def);
  p.unit = std::move(unit);
  p.description = std::move(description);
  return p;
}

ParamSpec ParamSpec::string(std::string name, std::string def, std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kString;
  p.default_value = std::move(def);
  p.description = std::move(description);
  return p;
}

ParamSpec ParamSpec::path(std::string name, std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kPath;
  p.description = std::move(description);
  return p;
}

ParamSpec ParamSpec::section(std::string name, std::string family, std::string default_kind,
                             std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kSection;
  p.family = std::move(family);
  p.default_kind = std::move(default_kind);
  p.description = std::move(description);
  return p;
}

ParamSpec ParamSpec::table(std::string name, std::vector<ParamSpec> fields, std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kTable;
  p.fields = std::move(fields);
  p.description = std::move(description);
  return p;
}

ParamSpec ParamSpec::table_list(std::string name, std::vector<ParamSpec> fields, std::string description) {
  ParamSpec p = table(std::move(name), std::move(fields), std::move(description));
  p.type = ParamType::kTableList;
  return p;
}

bool ParamSpec::is_required() const {
  switch (type) {
    case ParamType::kSection: return !optional_ && default_kind.empty();
    case ParamType::kTable: return false;
    case ParamType::kTableList: return !optional_;
    default: return !optional_ && std::holds_alternative<std::monostate>(default_value);
  }
}

std::string ParamSpec::type_name() const {
  switch (type) {
    case ParamType::kInt: return "integer";
    case ParamType::kFloat: return "float";
    case ParamType::kBool: return "bool";
    case ParamType::kString: return "string";
    case ParamType::kPath: return "path";
    case ParamType::kSection: return "section";
    case ParamType::kTable: return "table";
    case ParamType::kTableList: return "table list";
    case ParamType::kFloatList: return "list of floats";
  }
  return "?";
}

static std::string scalar_str(const Scalar& v) {
  struct {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_double(d); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const std::string& s) const { return toml_quote(s); }
    std::string operator()(const std::vector<double>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + format_double(v[i]);
      return out + "]";
    }
  } visitor;
  return std::visit(visitor, v);
}

std::string ParamSpec::default_str() const {
  if (type == ParamType::kSection) {
    if (optional_) return "(optional)";
    return default_kind.empty() ? "(required)" : "kind = " + toml_quote(default_kind);
  }
  if (type == ParamType::kTable) return optional_ ? "(optional)" : "";
  if (type == ParamType::kTableList) return optional_ ? "(optional)" : "(required)";
  if (optional_) return "(unset)";
  if (std::holds_alternative<std::monostate>(default_value)) return "(required)";
  return scalar_str(default_value);
}

std::string ParamSpec::range_str() const {
  if (!choices.empty()) {
    if (type == ParamType::kPath) return "a path, or " + join(choices);
    return "one of: " + join(choices);
  }
  if (type != ParamType::kInt && type != ParamType::kFloat && type != ParamType::kFloatList) return "";
  const bool has_min = std::isfinite(min), has_max = std::isfinite(max);
  std::string out = zero_allowed ? "0 or " : "";
  if (has_min && has_max) {
    out.append(min_exclusive ? "(" : "[").append(format_double(min)).append(", ").append(format_double(max)).append("]");
  } else if (has_min) {
    out.append(min_exclusive ? "> " : ">= ").append(format_double(min));
  } else if (has_max) {
    out.append("<= ").append(format_double(max));
  }
  if (type == ParamType::kFloatList && !out.empty()) out = (out[0] == '[' || out[0] == '(' ? "each in " : "each ") + out;
  return out;
}

// ---- Params ------------------------------------------------------------------------------------

const Params::Entry& Params::entry(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return e;
  // Reading an undeclared parameter is a programming error in the kind that reads it.
  throw Error("internal: parameter '" + key_path(name) + "' is not declared");
}

bool Params::has(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return !std::holds_alternative<std::monostate>(e.value) || !e.section.empty();
  return false;
}

bool Params::given(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return e.given;
  return false;
}

template <class V>
static const V& get_as(const Scalar& v, const std::string& key, const char* what) {
  if (auto* p = std::get_if<V>(&v)) return *p;
  throw Error("internal: parameter '" + key + "' is not set or is not " + what);
}

int64_t Params::get_int(std::string_view name) const {
  return get_as<int64_t>(entry(name).value, key_path(name), "an integer");
}

double Params::get_float(std::string_view name) const {
  const auto& v = entry(name).value;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return get_as<double>(v, key_path(name), "a float");
}

bool Params::get_bool(std::string_view name) const {
  return get_as<bool>(entry(name).value, key_path(name), "a bool");
}

const std::string& Params::get_string(std::string_view name) const {
  return get_as<std::string>(entry(name).value, key_path(name), "a string");
}

const std::vector<double>& Params::get_float_list(std::string_view name) const {
  return get_as<std::vector<double>>(entry(name).value, key_path(name), "a list of floats");
}

const Params& Params::section(std::string_view name) const {
  const auto& e = entry(name);
  if (e.section.empty() || e.list) throw Error("internal: '" + key_path(name) + "' is not a section");
  return e.section.front();
}

const std::vector<Params>& Params::list(std::string_view name) const {
  const auto& e = entry(name);
  if (!e.list) throw Error("internal: '" + key_path(name) + "' is not a table list");
  return e.section;
}

const SourceLocation& Params::where(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return e.given || !e.section.empty() ? e.where : where_;
  return where_;
}

std::string Params::key_path(std::string_view name) const {
  return path_.empty() ? std::string(name) : path_ + "." + std::string(name);
}

void Params::fail(std::string_view name, const std::string& message) const {
  throw ConfigError(where(name), key_path(name), message);
}

const std::string& Params::readable_file(std::string_view name, const std::string& what, uint64_t max_bytes) const {
  const std::string& path = get_string(name);
  const std::string& shown = written(name).empty() ? path : written(name);
  if (const std::string problem = input_problem(path, what, max_bytes, shown); !problem.empty())
    fail(name, shown + ": " + problem);
  return path;
}

void Params::set(std::string name, Scalar value, SourceLocation where, bool given) {
  entries_.push_back(Entry{std::move(name), std::move(value), std::move(where), given, {}, false, false, {}});
}

void Params::set_path(std::string name, std::string resolved, std::string written, SourceLocation where) {
  entries_.push_back(Entry{std::move(name), std::move(resolved), std::move(where), true, {}, false, true, std::move(written)});
}

const std::string& Params::written(std::string_view name) const {
  static const std::string kNone;
  for (const auto& e : entries_)
    if (e.name == name) return e.is_path ? e.written : kNone;
  return kNone;
}

void Params::for_each_path(const std::function<void(const Params&, const std::string&)>& fn) const {
  for (const auto& e : entries_)
    if (e.is_path && std::holds_alternative<std::string>(e.value)) fn(*this, e.name);
  for (const auto& e : entries_)
    for (const Params& s : e.section) s.for_each_path(fn);
}

Params& Params::add_section(std::string name, Params section) {
  SourceLocation where = section.where();
  entries_.push_back(Entry{std::move(name), std::monostate{}, std::move(where), true, {}, false, false, {}});
  entries_.back().section.push_back(std::move(section));
  return entries_.back().section.front();
}

void Params::add_list(std::string name, std::vector<Params> elements, SourceLocation where) {
  for (auto& e : elements) e.list_element_ = true;
  entries_.push_back(Entry{std::move(name), std::monostate{}, std::move(where), true, std::move(elements), true, false, {}});
}

std::string Params::to_toml() const {
  std::string out;
  emit_toml(out, nullptr);
  return out;
}

std::string Params::to_identity_toml(const std::function<std::string(const std::string&)>& content) const {
  std::string out;
  emit_toml(out, &content);
  return out;
}

void Params::emit_toml(std::string& out, const std::function<std::string(const std::string&)>* content) const {
  if (!path_.empty()) {
    if (!out.empty()) out += "\n";
    // A table-list element's path carries its index ("a.b[1]", "a.b[1].c"); TOML names it without:
    // [[a.b]] opens the next element, and [a.b.c] is a table of the element just opened.
    std::string header;
    for (size_t i = 0; i < path_.size(); ++i) {
      if (path_[i] == '[') {
        while (i < path_.size() && path_[i] != ']') ++i;
        continue;
      }
      header += path_[i];
    }
    out += list_element_ ? "[[" + header + "]]\n" : "[" + header + "]\n";
    if (!kind_.empty()) out += "kind = " + toml_quote(kind_) + "\n";
  }
  for (const auto& e : entries_) {
    if (!e.section.empty() || std::holds_alternative<std::monostate>(e.value)) continue;
    if (content && e.is_path) {
      out += e.name + " = " + toml_quote((*content)(std::get<std::string>(e.value))) + "\n";
      continue;
    }
    out += e.name + " = " + scalar_str(e.value) + "\n";
  }
  for (const auto& e : entries_)
    for (const Params& s : e.section) s.emit_toml(out, content);
}

// ---- Families ----------------------------------------------------------------------------------

static std::map<std::string, KindFamily*>& family_index() {
  static std::map<std::string, KindFamily*> index;
  return index;
}

KindFamily::KindFamily(std::string name, std::string description)
    : name_(std::move(name)), description_(std::move(description)) {
  family_index()[name_] = this;
}

void KindFamily::add_info(KindInfo info) {
  std::string key = to_lower(info.name);
  kinds_[key] = std::move(info);
}

std::vector<const KindInfo*> KindFamily::kinds() const {
  std::vector<const KindInfo*> out;
  for (const auto& [key, info] : kinds_) out.push_back(&info);
  return out;
}

const KindInfo* KindFamily::find(std::string_view kind) const {
  auto it = kinds_.find(to_lower(kind));
  return it == kinds_.end() ? nullptr : &it->second;
}

std::vector<std::string> KindFamily::kind_names() const {
  std::vector<std::string> out;
  for (const auto& [key, info] : kinds_) out.push_back(info.name);
  return out;
}

KindFamily* find_family(std::string_view name) {
  auto& index = family_index();
  auto it = index.find(std::string(name));
  return it == index.end() ? nullptr : it->second;
}

std::vector<KindFamily*> all_families() {
  std::vector<KindFamily*> out;
  for (const auto& [name, family] : family_index()) out.push_back(family);
  return out;
}

}  // namespace servesim::core
