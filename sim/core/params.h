#pragma once
// Declared parameters, resolved values and registries of pluggable kinds.
//
// Every configurable key is declared exactly once, as a ParamSpec beside the code that reads it, with
// type, default, unit and description. A configuration section names a registered kind
// (`kind = "round_robin"`) and its other keys are that kind's parameters; config.h validates a TOML
// document against these declarations and produces a Params tree that factories read.

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sim/core/error.h"

namespace servesim::core {

enum class ParamType { kInt, kFloat, kBool, kString, kPath, kSection, kTable, kTableList, kFloatList };

// monostate = no value (an optional parameter that was not given). A list of numbers is a TOML
// array (`acceptance = [0.8, 0.7]`).
using Scalar = std::variant<std::monostate, int64_t, double, bool, std::string, std::vector<double>>;

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kInt;
  Scalar default_value;        // monostate: required, or optional() with no default
  bool optional_ = false;      // absent is allowed and means "not set" (has() == false)
  std::string unit;            // "ms", "tokens", "req/s", ... empty when dimensionless
  std::string description;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool zero_allowed = false;         // 0 is valid besides [min, max] (0 = "none", e.g. no fp8 units)
  std::vector<std::string> choices;  // allowed values of a string parameter (empty = any); for a path,
                                     // keywords accepted besides paths and kept as written
  std::string family;                // kSection: the kind family its `kind` is looked up in
  std::string default_kind;          // kSection: kind used when the section or its `kind` is absent
  std::vector<ParamSpec> fields;     // kTable, kTableList: the fixed keys of the table (of each element)

  static ParamSpec integer(std::string name, int64_t def, std::string unit, std::string description);
  static ParamSpec real(std::string name, double def, std::string unit, std::string description);
  static ParamSpec boolean(std::string name, bool def, std::string description);
  // A TOML array of numbers; range() bounds every element.
  static ParamSpec real_list(std::string name, std::vector<double> def, std::string unit, std::string description);
  static ParamSpec string(std::string name, std::string def, std::string description);
  // A file path; relative paths resolve against the directory of the config file that holds them.
  static ParamSpec path(std::string name, std::string description);
  // A sub-section whose `kind` selects an entry of `family`; its other keys are that kind's params.
  static ParamSpec section(std::string name, std::string family, std::string default_kind,
                           std::string description);
  // A sub-section with a fixed set of keys.
  static ParamSpec table(std::string name, std::vector<ParamSpec> fields, std::string description);
  // A list of tables with the same fixed keys, written as TOML's array of tables ([[name]] headers,
  // or an inline array of inline tables); required and non-empty unless optional().
  static ParamSpec table_list(std::string name, std::vector<ParamSpec> fields, std::string description);

  ParamSpec& range(double lo, double hi) { min = lo; max = hi; return *this; }
  ParamSpec& at_least(double lo) { min = lo; return *this; }
  ParamSpec& above(double lo) { min = lo; min_exclusive = true; return *this; }
  // 0, or a value in [lo, hi]: for a quantity where 0 means "none" and tiny values are not physical.
  ParamSpec& zero_or(double lo, double hi) { min = lo; max = hi; zero_allowed = true; return *this; }
  ParamSpec& one_of(std::vector<std::string> values) { choices = std::move(values); return *this; }
  // An optional parameter has no default: when absent, Params::has() is false. For sections and
  // tables this means the whole section may be left out.
  ParamSpec& optional() { optional_ = true; default_value = std::monostate{}; return *this; }
  // Makes a parameter that has a default required (no default) instead.
  ParamSpec& required() { default_value = std::monostate{}; optional_ = false; return *this; }

  bool is_required() const;
  std::string type_name() const;     // "integer", "float", "bool", "string", "path", "section", "table",
                                     // "table list", "list of floats"
  std::string default_str() const;   // "256", "\"fcfs\"", "(required)", "(unset)"
  std::string range_str() const;     // "[1, 1024]", "> 0", "0 or [0.1, 1e+05]", "one of: a, b", or ""
};

// The resolved, validated values of one section (or of the whole document, at the root).
class Params {
 public:
  Params() = default;
  Params(std::string path, std::string kind, SourceLocation where)
      : path_(std::move(path)), kind_(std::move(kind)), where_(std::move(where)) {}

  const std::string& path() const { return path_; }   // dotted section path; "" at the root
  const std::string& kind() const { return kind_; }   // "" for fixed tables
  const SourceLocation& where() const { return where_; }  // the section header, or the file

  bool has(std::string_view name) const;  // false only for an unset optional parameter
  bool given(std::string_view name) const;  // true when the user wrote the key (not a default)
  int64_t get_int(std::string_view name) const;
  double get_float(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;  // strings and paths
  const std::vector<double>& get_float_list(std::string_view name) const;
  const Params& section(std::string_view name) const;
  // The elements of a table list, in the order written (each a Params whose path ends in "[i]").
  const std::vector<Params>& list(std::string_view name) const;
  const SourceLocation& where(std::string_view name) const;
  std::string key_path(std::string_view name) const;  // "scheduler.max_num_seqs"

  // Throws a ConfigError located at the key (for checks that involve several keys).
  [[noreturn]] void fail(std::string_view name, const std::string& message) const;
  // The path under `name`, checked without opening it (the reader opens it once) to be a regular
  // file of at most `max_bytes`: a ConfigError at the key otherwise, naming the path as the
  // configuration wrote it and where it was looked for. `what` names the file ("a trace file").
  const std::string& readable_file(std::string_view name, const std::string& what,
                                   uint64_t max_bytes = UINT64_MAX) const;

  // Canonical TOML of the resolved values, defaults included, in declaration order. Two configs
  // that mean the same thing print the same text (comments, order and spelling of numbers aside).
  std::string to_toml() const;
  // The same text with every file path replaced by what `content(path)` says of the file (its
  // content digest): what identifies a run, independent of where the files lie and of the working
  // directory. Without paths it is to_toml().
  std::string to_identity_toml(const std::function<std::string(const std::string& path)>& content) const;

  // A path parameter as the configuration wrote it (before it was resolved to an absolute path);
  // "" for other parameters and defaults.
  const std::string& written(std::string_view name) const;
  // Calls `fn(section, name)` for every path parameter that is set, in declaration order, the whole
  // tree down.
  void for_each_path(const std::function<void(const Params& section, const std::string& name)>& fn) const;

  // Used by the validator to fill the tree.
  void set(std::string name, Scalar value, SourceLocation where, bool given);
  // A path: `resolved` is absolute; `written` is the text the configuration gave.
  void set_path(std::string name, std::string resolved, std::string written, SourceLocation where);
  Params& add_section(std::string name, Params section);
  void add_list(std::string name, std::vector<Params> elements, SourceLocation where);

 private:
  struct Entry {
    std::string name;
    Scalar value;
    SourceLocation where;
    bool given = false;
    std::vector<Params> section;  // exactly one element for a section entry; the elements of a list
    bool list = false;
    bool is_path = false;
    std::string written;          // a path as the configuration wrote it
  };
  const Entry& entry(std::string_view name) const;
  void emit_toml(std::string& out, const std::function<std::string(const std::string&)>* content) const;

  std::string path_;
  std::string kind_;
  SourceLocation where_;
  bool list_element_ = false;  // an element of a table list: printed under a [[...]] header
  std::vector<Entry> entries_;
};

// What one registered kind is: its name, a description and its parameters.
struct KindInfo {
  std::string name;
  std::string description;
  std::vector<ParamSpec> params;
};

// The type-erased view of a registry, used by the config validator and by `servesim list`.
class KindFamily {
 public:
  explicit KindFamily(std::string name, std::string description);
  virtual ~KindFamily() = default;
  KindFamily(const KindFamily&) = delete;
  KindFamily& operator=(const KindFamily&) = delete;

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  // Kinds sorted by name.
  std::vector<const KindInfo*> kinds() const;
  // Lookup ignores ASCII case; nullptr when absent.
  const KindInfo* find(std::string_view kind) const;
  std::vector<std::string> kind_names() const;

 protected:
  void add_info(KindInfo info);

 private:
  std::string name_;
  std::string description_;
  std::map<std::string, KindInfo> kinds_;  // key: lower-case name
};

// All families, by name. Families register themselves when first constructed.
KindFamily* find_family(std::string_view name);
std::vector<KindFamily*> all_families();

// A registry of one pluggable kind. Each implementation registers with one line in its .cc:
//   static const bool kRegistered = router_registry().add({"round_robin", "...", {params}}, factory);
// Registries live in function-local statics, so registration order does not matter.
template <class T, class... Args>
class Registry : public KindFamily {
 public:
  using Factory = std::function<std::unique_ptr<T>(const Params&, Args...)>;
  using KindFamily::KindFamily;

  bool add(KindInfo info, Factory factory) {
    std::string key = lower(info.name);
    factories_[key] = std::move(factory);
    add_info(std::move(info));
    return true;
  }

  // Builds the kind named by `params.kind()`; the validator has already checked it exists.
  std::unique_ptr<T> make(const Params& params, Args... args) const {
    auto it = factories_.find(lower(params.kind()));
    if (it == factories_.end())
      throw ConfigError(params.where(), params.path() + ".kind",
                        "unknown " + name() + " kind '" + params.kind() + "'");
    return it->second(params, args...);
  }

 private:
  static std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
    return s;
  }
  std::map<std::string, Factory> factories_;
};

}  // namespace servesim::core
