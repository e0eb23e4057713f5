#pragma once
// Text formatting shared by config printing, result tables and CSV/JSON writers.

#include <string>
#include <string_view>

namespace servesim::core {

// Shortest text that reads back to the same double ("0.1", "1e+20", "3").
std::string format_double(double v);
// A TOML basic string literal, quoted and escaped.
std::string toml_quote(std::string_view s);
// Lower-case ASCII copy.
std::string to_lower(std::string_view s);

}  // namespace servesim::core
