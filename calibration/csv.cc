#include "calibration/csv.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_file.h"

namespace servesim::calibration {

namespace {

std::vector<std::string> split(std::string_view line, const std::string& source, int64_t line_no, char delimiter) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"' && cell.empty()) {
      quoted = true;
    } else if (c == delimiter) {
      cells.push_back(std::move(cell));
      cell.clear();
    } else {
      cell += c;
    }
  }
  if (quoted) throw core::InputError(source, line_no, "", "unterminated quoted cell");
  cells.push_back(std::move(cell));
  return cells;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

int CsvTable::column(std::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

size_t CsvTable::require(std::string_view name) const {
  const int c = column(name);
  if (c < 0) throw core::InputError(source, 1, std::string(name), "column missing from the header");
  return static_cast<size_t>(c);
}

double CsvTable::number(size_t r, size_t c) const {
  const std::string_view cell = trim(rows[r][c]);
  double v = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (cell.empty() || ec != std::errc() || end != cell.data() + cell.size() || !std::isfinite(v))
    throw core::InputError(source, lines[r], header[c], "expected a number, got '" + std::string(cell.substr(0, 40)) + "'");
  return v;
}

int64_t CsvTable::integer(size_t r, size_t c) const {
  const double v = number(r, c);
  if (v < 0 || v != std::floor(v) || v > 9.0e15)
    throw core::InputError(source, lines[r], header[c], "expected a non-negative integer, got '" + rows[r][c] + "'");
  return static_cast<int64_t>(v);
}

CsvTable parse_csv(std::string_view text, const std::string& source, char delimiter) {
  if (text.size() > kMaxCsvBytes) throw core::InputError(source, 0, "", "larger than 256 MiB: not a measured table");
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  CsvTable t;
  t.source = source;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim(line).empty()) {
      if (end == text.size()) break;
      continue;
    }
    std::vector<std::string> cells = split(line, source, line_no, delimiter);
    if (t.header.empty()) {
      for (auto& c : cells) c = std::string(trim(c));
      t.header = std::move(cells);
    } else {
      if (cells.size() != t.header.size())
        throw core::InputError(source, line_no, "",
                               "expected " + std::to_string(t.header.size()) + " cells as in the header, got " +
                                   std::to_string(cells.size()));
      t.rows.push_back(std::move(cells));
      t.lines.push_back(line_no);
    }
    if (end == text.size()) break;
  }
  if (t.header.empty()) throw core::InputError(source, 1, "", "empty file: expected a header line");
  return t;
}

std::string read_text_file(const std::string& path) {
  return core::read_input_file(path, "a CSV table of measurements", kMaxCsvBytes);
}

}  // namespace servesim::calibration
