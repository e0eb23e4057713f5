// servesim list: registered kinds and their parameters.
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "experiments/network_presets.h"
#include "experiments/run.h"
#include "sim/core/format.h"
#include "sim/core/params.h"

namespace servesim::experiments {
namespace {


void print_params(std::ostream& out, const std::vector<core::ParamSpec>& params, const std::string& indent) {
  if (params.empty()) {
    out << indent << "(no parameters)\n";
    return;
  }
  size_t w_name = 4, w_type = 4, w_def = 7, w_unit = 4;
  for (const auto& p : params) {
    w_name = std::max(w_name, p.name.size());
    w_type = std::max(w_type, p.type_name().size());
    w_def = std::max(w_def, p.default_str().size());
    w_unit = std::max(w_unit, p.unit.size());
  }
  auto row = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                 const std::string& e) {
    out << indent << std::left << std::setw(static_cast<int>(w_name)) << a << "  " << std::setw(static_cast<int>(w_type))
        << b << "  " << std::setw(static_cast<int>(w_def)) << c << "  " << std::setw(static_cast<int>(w_unit)) << d
        << "  " << e << "\n";
  };
  row("name", "type", "default", "unit", "description");
  for (const auto& p : params) {
    std::string desc = p.description;
    if (p.type == core::ParamType::kSection) desc += " [" + p.family + "]";
    const std::string range = p.range_str();
    if (!range.empty()) desc += " (" + range + ")";
    row(p.name, p.type_name(), p.default_str(), p.unit, desc);
  }
  // A table list's elements have their own keys: listed under it.
  for (const auto& p : params) {
    if (p.type != core::ParamType::kTableList) continue;
    out << indent << "each [[" << p.name << "]] element:\n";
    print_params(out, p.fields, indent + "  ");
  }
}

const core::KindFamily* family_named(const std::string& name) {
  if (const auto* f = core::find_family(name)) return f;
  if (const auto* f = core::find_family(name + "s")) return f;  // "router" -> "routers"
  return nullptr;
}

int cmd_list(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  if (args.size() > 1) throw UsageError("list takes at most one argument, the kind family to show");
  if (args.empty()) {
    out << "kind families (servesim list FAMILY shows each kind's parameters):\n";
    for (const auto* f : core::all_families()) {
      out << "  " << std::left << std::setw(22) << f->name() << f->description() << "\n      ";
      out << core::join(f->kind_names()) << "\n";
    }
    out << "\nrun configuration sections (top level of CONFIG.toml):\n";
    print_params(out, run_schema(), "  ");
    for (const auto& p : run_schema()) {
      if (p.type != core::ParamType::kTable) continue;
      out << "\n[" << p.name << "] " << p.description << "\n";
      print_params(out, p.fields, "  ");
    }
    return 0;
  }
  if (args[0] == "networks" || args[0] == "network") {
    // Not a kind family: [network] preset values (experiments/network_presets.cc).
    out << "networks: [network] preset values (docs/policies.md, \"Topology presets\"); fields the "
           "configuration writes override them\n";
    for (const NetworkPreset& p : network_presets()) {
      out << "\n" << p.name << " (gpu.kind = " << p.gpu << ")\n  " << p.description << "\n";
      for (const auto& [field, value] : p.fields) {
        std::string v = field == std::string_view("rails") ? (value != 0 ? "true" : "false") : core::format_double(value);
        out << "  " << std::left << std::setw(22) << field << v << "\n";
      }
    }
    return 0;
  }
  const core::KindFamily* family = family_named(args[0]);
  if (!family) {
    std::string valid;
    for (const auto* f : core::all_families()) valid += (valid.empty() ? "" : ", ") + f->name();
    throw UsageError("unknown kind family '" + args[0] + "'; valid: " + valid + ", networks (the [network] presets)");
  }
  out << family->name() << ": " << family->description() << "\n";
  for (const auto* kind : family->kinds()) {
    out << "\n" << kind->name << "\n  " << kind->description << "\n";
    print_params(out, kind->params, "  ");
  }
  return 0;
}


const bool kRegistered = register_command(
    {"list", "[routers|schedulers|decoding|workloads|arrivals|models|gpus|cost_models|engines|length_distributions|networks]",
     "registered kinds and every parameter: type, default, unit, range, description", cmd_list});

}  // namespace
}  // namespace servesim::experiments
