#pragma once
// Small helpers over toml++ nodes shared by the readers of TOML files (run configurations,
// experiments).

#include <toml++/toml.h>

#include <string>

namespace servesim::core {

// "a table", "an array", "a string", "an integer", "a float", "a bool", "a date", ...: what a value
// is, for "expected X, got Y" messages.
std::string toml_type_name(const toml::node& node);

}  // namespace servesim::core
