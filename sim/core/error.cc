#include "sim/core/error.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace servesim::core {

std::string SourceLocation::str() const {
  std::string out = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    out.append(":").append(std::to_string(line));
    if (column > 0) out.append(":").append(std::to_string(column));
  }
  return out;
}

static std::string config_message(const SourceLocation& where, const std::string& key,
                                  const std::string& message) {
  std::string out = where.str() + ": ";
  if (!key.empty()) out += "'" + key + "': ";
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

std::string closest_match(const std::string& word, const std::string* candidates, size_t count) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (size_t i = 0; i < count; ++i) {
    const size_t d = edit_distance(word, candidates[i]);
    if (d < best_distance) {
      best_distance = d;
      best = candidates[i];
    }
  }
  return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& valid) {
  const std::string best = closest_match(word, valid.data(), valid.size());
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace servesim::core
