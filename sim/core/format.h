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

// `s` for a message: control characters, bytes that are not UTF-8 and invisible characters (a
// byte-order mark, zero-width spaces, direction marks, a no-break space) written as escapes (\x00,
// \uFEFF), cut after `max` bytes with how many more there were. Without quotes.
std::string printable(std::string_view s, size_t max = 80);
// printable(s) in single quotes, followed by " (with invisible characters, shown escaped)" when it
// has any, so that 'llama' and '\uFEFFllama' are told apart.
std::string in_quotes(std::string_view s, size_t max = 80);
// `s` without its invisible characters (for "did you mean" matching).
std::string visible(std::string_view s);

}  // namespace servesim::core
