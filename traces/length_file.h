#pragma once
// Readers of length files: per-request token counts in a JSON array of objects, a JSON-lines file or
// a CSV file with a header (ShareGPT-style datasets reduced to token counts, benchmark request
// logs). Used by the `empirical` length distribution. Each reads one column (a key of every object,
// or a CSV column), streaming the file through LineReader, and refuses malformed input with a
// core::InputError naming the file, the line and the field.

#include <cstdint>
#include <string>
#include <vector>

namespace servesim::traces {

enum class LengthFileFormat : uint8_t {
  kJson,   // [{"input_length": 12, ...}, ...], over any number of lines
  kJsonl,  // one object per line
  kCsv,    // a header naming the columns, then comma-separated rows (RFC 4180 quotes within a line)
};

struct LengthColumn {
  std::string column;            // the key or column read
  std::vector<int64_t> values;   // in file order; each >= 1; never empty
};

// The values of `column` (a JSON key, exact; a CSV column, any case) or, when `column` is empty, of
// the one key among `candidates` the first record has (none or several is an error that lists what
// the record has). Every record must have the column, holding an integer >= 1.
LengthColumn read_length_column(const std::string& path, LengthFileFormat format, const std::string& column,
                                const std::vector<std::string>& candidates);

}  // namespace servesim::traces
