#pragma once
// The small CSV dialect of measured tables: a header line, comma-separated (or tab-separated) cells, optional double
// quotes around a cell, a UTF-8 byte-order mark and CRLF line endings accepted, blank lines skipped.
// Every error is a core::InputError naming the file, the line and the column.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::calibration {

struct CsvTable {
  std::string source;                         // file name, for errors
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as wide as the header
  std::vector<int64_t> lines;                  // the 1-based line of each row

  // Index of a header column, -1 when absent.
  int column(std::string_view name) const;
  // Index of a column that must be there (core::InputError on line 1 naming it otherwise).
  size_t require(std::string_view name) const;
  // Cell of row `r` in column `c` as a finite number / a non-negative integer (InputError naming
  // the file, line and column otherwise).
  double number(size_t r, size_t c) const;
  int64_t integer(size_t r, size_t c) const;
};

// Files above this size are refused (measured tables are a few megabytes).
inline constexpr size_t kMaxCsvBytes = size_t{256} << 20;

// `delimiter`: ',' for CSV, '\t' for tab-separated tables.
CsvTable parse_csv(std::string_view text, const std::string& source, char delimiter = ',');
// Reads a whole file (core::InputError when it is missing, unreadable or too large).
std::string read_text_file(const std::string& path);

}  // namespace servesim::calibration
