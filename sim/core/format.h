#pragma once
// Text formatting shared by config printing, result tables and CSV/JSON writers.

#include <string>
#include <string_view>
#include <vector>

namespace servesim::core {

// Shortest text that reads back to the same double ("0.1", "1e+20", "3").
std::string format_double(double v);
// A TOML basic string literal, quoted and escaped.
std::string toml_quote(std::string_view s);
// The items separated by `sep` ("a, b, c").
std::string join(const std::vector<std::string>& items, std::string_view sep = ", ");
// Lower-case ASCII copy.
std::string to_lower(std::string_view s);

}  // namespace servesim::core
