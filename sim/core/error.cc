#include "sim/core/error.h"

#include "sim/core/format.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <vector>

namespace servesim::core {

std::string SourceLocation::str() const {
  // A --set argument can hold anything the shell passes: shown escaped and cut short.
  std::string out = file.empty() ? std::string("<input>") : file.rfind("--set ", 0) == 0 ? printable(file, 160) : file;
  if (line > 0) {
    out.append(":").append(std::to_string(line));
    if (column > 0) out.append(":").append(std::to_string(column));
  }
  return out;
}

static std::string config_message(const SourceLocation& where, const std::string& key,
                                  const std::string& message) {
  std::string out = where.str() + ": ";
  if (!key.empty()) out += "'" + printable(key, 120) + "': ";
  return out + message;
}

ConfigError::ConfigError(SourceLocation where, std::string key, const std::string& message)
    : Error(config_message(where, key, message)), where_(std::move(where)), key_(std::move(key)) {}

static std::string input_message(const std::string& file, int64_t line, const std::string& field,
                                 const std::string& message) {
  std::string out = file;
  if (line > 0) out.append(":").append(std::to_string(line));
  out.append(": ");
  if (!field.empty()) out += "field '" + field + "': ";
  return out + message;
}

InputError::InputError(std::string file, int64_t line, std::string field, const std::string& message)
    : Error(input_message(file, line, field, message)),
      file_(std::move(file)),
      line_(line),
      field_(std::move(field)) {}

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const size_t cost = (std::tolower(a[i - 1]) == std::tolower(b[j - 1])) ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest_match(const std::string& raw, const std::string* candidates, size_t count) {
  // Invisible characters (a byte-order mark pasted in) are no part of what was meant.
  const std::string word = visible(raw);
  if (word.empty() || word.size() > 200) return "";
  const std::string lower = to_lower(word);
  // The name without its unit or last word ("ttft" for "ttft_ms", "peak" for "peak_tflops"): the one
  // candidate that starts with it and a '_'.
  auto unique = [&](const std::function<bool(const std::string&)>& match) {
    std::string hit;
    for (size_t i = 0; i < count; ++i) {
      if (!match(to_lower(candidates[i]))) continue;
      if (!hit.empty()) return std::string();
      hit = candidates[i];
    }
    return hit;
  };
  if (word.size() >= 3)
    if (std::string hit = unique([&](const std::string& c) { return c.rfind(lower + "_", 0) == 0; }); !hit.empty())
      return hit;
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (size_t i = 0; i < count; ++i) {
    const size_t d = edit_distance(word, candidates[i]);
    if (d < best_distance) {
      best_distance = d;
      best = candidates[i];
    }
  }
  if (!best.empty() || word.size() < 3) return best;
  // A word of the name ("efficiency" for "compute_efficiency" when it is the only one), or the name
  // with a word too many ("ttft_ms_limit").
  return unique([&](const std::string& c) {
    return c.find("_" + lower) != std::string::npos || lower.rfind(c + "_", 0) == 0;
  });
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& valid) {
  const std::string best = closest_match(word, valid.data(), valid.size());
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace servesim::core
