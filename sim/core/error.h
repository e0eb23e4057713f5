#pragma once
// Errors are exceptions carrying a message a person can act on; only main() turns them into an
// exit code. Every error about user input names where the input came from.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim::core {

// Where a piece of user input came from: a file position, or a command-line override.
struct SourceLocation {
  std::string file;     // path as the user gave it, or "--set" for command-line overrides
  int64_t line = 0;     // 1-based; 0 when unknown
  int64_t column = 0;   // 1-based; 0 when unknown
  std::string str() const;  // "file:line:column", "file:line", or "file"
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A usage problem of the command line (an unknown or conflicting option, an output that would
// overwrite an input): the command line turns it into exit code 2, like a configuration error.
class UsageError : public Error {
 public:
  using Error::Error;
};

// A configuration problem: unknown key or kind, wrong type, value out of range, inconsistent values.
class ConfigError : public Error {
 public:
  ConfigError(SourceLocation where, std::string key, const std::string& message);
  const SourceLocation& where() const { return where_; }
  const std::string& key() const { return key_; }

 private:
  SourceLocation where_;
  std::string key_;
};

// A problem in an input data file (trace, profile): names the file, the line and the field.
class InputError : public Error {
 public:
  InputError(std::string file, int64_t line, std::string field, const std::string& message);
  const std::string& file() const { return file_; }
  int64_t line() const { return line_; }
  const std::string& field() const { return field_; }

 private:
  std::string file_;
  int64_t line_;
  std::string field_;
};

// Closest candidate by edit distance, for "did you mean" hints; empty when nothing is close.
std::string closest_match(const std::string& word, const std::string* candidates, size_t count);
// " (did you mean 'X'?)" for the closest of `valid`, or "" when nothing is close: for error messages.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& valid);

}  // namespace servesim::core
