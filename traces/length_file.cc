#include "traces/length_file.h"

#include <string_view>

#include "sim/core/error.h"
#include "sim/core/format.h"
#include "traces/field_parse.h"
#include "traces/line_reader.h"

namespace servesim::traces {
namespace {

constexpr int kMaxDepth = 128;  // nesting of skipped values; deeper is refused, not recursed into

std::string join_quoted(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 20; ++i) out += (i ? ", " : "") + excerpt(names[i]);
  if (names.size() > 20) out += ", ...";
  return out.empty() ? "(none)" : out;
}

// The column to read among a record's keys: `column` when given, else the one candidate present.
// `names` are the record's keys; `match` compares a key with a wanted name.
template <class Match>
std::string choose_column(const std::vector<std::string>& names, const std::string& column,
                          const std::vector<std::string>& candidates, Match match, const std::string& path,
                          int64_t line, const char* record) {
  if (!column.empty()) {
    for (const auto& n : names)
      if (match(n, column)) return n;
    throw core::InputError(path, line, column,
                           "missing '" + column + "' in the " + record + "; it has " + join_quoted(names));
  }
  std::vector<std::string> found;  // distinct: a key written twice is the reader's error to report
  for (const auto& c : candidates)
    for (const auto& n : names) {
      if (!match(n, c)) continue;
      bool seen = false;
      for (const auto& f : found) seen = seen || match(f, n);
      if (!seen) found.push_back(n);
    }
  if (found.size() == 1) return found.front();
  std::string wanted;
  for (size_t i = 0; i < candidates.size(); ++i) wanted += (i ? ", " : "") + candidates[i];
  if (found.empty())
    throw core::InputError(path, line, "",
                           std::string("no length column in the ") + record + " (looked for " + wanted + "); it has " +
                               join_quoted(names) + "; name the column with `column`");
  throw core::InputError(path, line, found.front(),
                         std::string("several length columns in the ") + record + ": " + join_quoted(found) +
                             "; name the one to read with `column`");
}

// ---- JSON ---------------------------------------------------------------------------------------

// A JSON reader over the lines of a file. Tokens never span lines (JSON strings cannot hold a raw
// line break), so it works on one line at a time and reports every error at the line it is on. It
// follows the JSON grammar for structure; the insides of strings are not decoded (a key spelled
// with escapes does not match a plain name).
class JsonStream {
 public:
  explicit JsonStream(const std::string& path) : lines_(path) {}

  const std::string& path() const { return lines_.path(); }
  int64_t line() const { return lines_.line_number(); }

  // The next character that is not whitespace, not consumed; -1 at the end of the file.
  int peek() {
    for (;;) {
      while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t' || line_[pos_] == '\r')) ++pos_;
      if (pos_ < line_.size()) return static_cast<unsigned char>(line_[pos_]);
      if (end_ || !lines_.next(line_)) {
        end_ = true;
        line_ = {};
        return -1;
      }
      pos_ = 0;
    }
  }
  void advance() { ++pos_; }

  [[noreturn]] void syntax(const std::string& what) const {
    throw core::InputError(path(), line(), "", "invalid JSON at column " + std::to_string(pos_ + 1) + ": " + what);
  }
  std::string got() {
    const int c = peek();
    if (c < 0) return "the end of the file";
    return excerpt(token_text());
  }
  void expect(char c, const char* what) {
    if (peek() != static_cast<unsigned char>(c)) syntax(std::string("expected ") + what + ", got " + got());
    advance();
  }

  // At a '"': the raw text between the quotes (escapes left as written).
  std::string_view string_token(bool& escaped) {
    const size_t start = ++pos_;
    escaped = false;
    for (;;) {
      if (pos_ >= line_.size()) syntax("a string is not closed on its line");
      const char c = line_[pos_];
      if (c == '"') break;
      if (c == '\\') {
        escaped = true;
        ++pos_;
      }
      ++pos_;
    }
    const std::string_view s = line_.substr(start, pos_ - start);
    ++pos_;
    return s;
  }

  // The text of the token at the cursor, up to a delimiter.
  std::string_view token_text() const {
    size_t end = pos_;
    while (end < line_.size() && line_[end] != ',' && line_[end] != '}' && line_[end] != ']' && line_[end] != ' ' &&
           line_[end] != '\t' && line_[end] != ':')
      ++end;
    return line_.substr(pos_, std::max<size_t>(end - pos_, 1));
  }
  // At a number or a literal: its text, consumed.
  std::string_view scalar_token() {
    const std::string_view t = token_text();
    pos_ += t.size();
    return t;
  }

  static std::string kind_of(int c) {
    switch (c) {
      case '"': return "a string";
      case '{': return "an object";
      case '[': return "an array";
      case 't':
      case 'f': return "a boolean";
      case 'n': return "null";
      default: return (c == '-' || (c >= '0' && c <= '9')) ? "a number" : "an invalid token";
    }
  }

  void skip_value(int depth) {
    if (depth > kMaxDepth) syntax("values nested too deeply");
    const int c = peek();
    if (c < 0) syntax("unexpected end of the file");
    if (c == '"') {
      bool escaped = false;
      string_token(escaped);
      return;
    }
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      advance();
      if (peek() == close) {
        advance();
        return;
      }
      for (;;) {
        if (close == '}') {
          if (peek() != '"') syntax("expected a quoted key, got " + got());
          bool escaped = false;
          string_token(escaped);
          expect(':', "':' after the key");
        }
        skip_value(depth + 1);
        const int d = peek();
        if (d == ',') {
          advance();
          continue;
        }
        if (d == close) {
          advance();
          return;
        }
        syntax(std::string("expected ',' or '") + close + "', got " + got());
      }
    }
    const std::string_view t = scalar_token();
    if (t == "true" || t == "false" || t == "null") return;
    if (!valid_number(t)) syntax("invalid value " + excerpt(t));
  }

  static bool valid_number(std::string_view t) {
    size_t i = 0;
    auto digits = [&] {
      const size_t from = i;
      while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
      return i > from;
    };
    if (i < t.size() && t[i] == '-') ++i;
    if (i < t.size() && t[i] == '0') {
      ++i;
    } else if (!digits()) {
      return false;
    }
    if (i < t.size() && t[i] == '.') {
      ++i;
      if (!digits()) return false;
    }
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
      ++i;
      if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
      if (!digits()) return false;
    }
    return i == t.size();
  }

 private:
  LineReader lines_;
  std::string_view line_;
  size_t pos_ = 0;
  bool end_ = false;
};

// One object's top-level keys: for each, its line and, when a number, its text.
struct JsonField {
  std::string name;
  bool escaped = false;
  int kind = 0;  // the first character of the value ('"', '{', '[', 't', ...; '0' for numbers)
  std::string number;
  int64_t line = 0;
};

void read_object(JsonStream& in, std::vector<JsonField>& fields) {
  fields.clear();
  in.expect('{', "'{'");
  if (in.peek() == '}') {
    in.advance();
    return;
  }
  for (;;) {
    if (in.peek() != '"') in.syntax("expected a quoted key, got " + in.got());
    JsonField f;
    f.name = std::string(in.string_token(f.escaped));
    in.expect(':', "':' after the key");
    const int c = in.peek();
    if (c < 0) in.syntax("unexpected end of the file");
    f.line = in.line();
    if (c == '-' || (c >= '0' && c <= '9')) {
      f.kind = '0';
      const std::string_view t = in.scalar_token();
      if (!JsonStream::valid_number(t)) in.syntax("invalid number " + excerpt(t));
      f.number = std::string(t);
    } else {
      f.kind = c;
      in.skip_value(1);
    }
    fields.push_back(std::move(f));
    const int d = in.peek();
    if (d == ',') {
      in.advance();
      continue;
    }
    if (d == '}') {
      in.advance();
      return;
    }
    in.syntax("expected ',' or '}' after the value of '" + fields.back().name + "', got " + in.got());
  }
}

LengthColumn read_json(const std::string& path, bool lines, const std::string& column,
                       const std::vector<std::string>& candidates) {
  JsonStream in(path);
  LengthColumn out;
  std::vector<JsonField> fields;
  const char* record = lines ? "first line's object" : "first object";
  auto take = [&](int64_t start_line) {
    read_object(in, fields);
    if (out.column.empty()) {
      std::vector<std::string> names;
      for (const auto& f : fields)
        if (!f.escaped) names.push_back(f.name);
      out.column = choose_column(
          names, column, candidates, [](const std::string& a, const std::string& b) { return a == b; }, path,
          start_line, record);
    }
    const JsonField* hit = nullptr;
    for (const auto& f : fields) {
      if (f.escaped || f.name != out.column) continue;
      if (hit) throw core::InputError(path, f.line, out.column, "duplicate key '" + out.column + "'");
      hit = &f;
    }
    if (!hit)
      throw core::InputError(path, start_line, out.column,
                             "missing key '" + out.column + "' (every record needs it, as the first one has it)");
    if (hit->kind != '0')
      throw core::InputError(path, hit->line, out.column,
                             "expected an integer token count, got " + JsonStream::kind_of(hit->kind));
    out.values.push_back(parse_length(hit->number, {path, hit->line, out.column}));
  };
  int c = in.peek();
  if (c < 0) throw core::InputError(path, 1, "", std::string("empty file, expected ") +
                                                     (lines ? "one JSON object per line" : "a JSON array of objects"));
  if (lines) {
    for (; c >= 0; c = in.peek()) {
      if (c != '{')
        throw core::InputError(path, in.line(), "",
                               "each line must be a JSON object ({...}), got " + JsonStream::kind_of(c));
      take(in.line());
    }
  } else {
    if (c != '[')
      throw core::InputError(path, in.line(), "",
                             "expected a JSON array of objects ([{...}, ...]), got " + JsonStream::kind_of(c) +
                                 (c == '{' ? " (one object per line is format = \"jsonl\")" : ""));
    in.advance();
    if (in.peek() != ']') {
      for (;;) {
        c = in.peek();
        if (c != '{')
          throw core::InputError(path, in.line(), "",
                                 "element " + std::to_string(out.values.size()) + " of the array is " +
                                     (c < 0 ? std::string("missing (the file ends)") : JsonStream::kind_of(c)) +
                                     ", expected an object");
        take(in.line());
        const int d = in.peek();
        if (d == ',') {
          in.advance();
          continue;
        }
        if (d == ']') break;
        in.syntax("expected ',' or ']' after an element of the array, got " + in.got());
      }
    }
    in.advance();
    if (in.peek() >= 0) in.syntax("unexpected text after the array: " + in.got());
  }
  if (out.values.empty()) throw core::InputError(path, in.line(), "", "no records: the array is empty");
  return out;
}

// ---- CSV ----------------------------------------------------------------------------------------

// Splits a CSV line into fields (views into `line`, quotes kept); RFC 4180 quotes within the line.
void split_csv(std::string_view line, std::vector<std::string_view>& fields, const std::string& path, int64_t line_no) {
  fields.clear();
  size_t i = 0;
  for (;;) {
    const size_t start = i;
    if (i < line.size() && line[i] == '"') {
      ++i;
      for (;;) {
        if (i >= line.size())
          throw core::InputError(path, line_no, "",
                                 "a quoted field is not closed on its line (fields spanning lines are not supported)");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        ++i;
      }
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] != ',')
        throw core::InputError(path, line_no, "",
                               "unexpected text after a quoted field at column " + std::to_string(i + 1));
    } else {
      while (i < line.size() && line[i] != ',') ++i;
    }
    fields.push_back(line.substr(start, i - start));
    if (i >= line.size()) return;
    ++i;  // the comma
  }
}

// A field without its surrounding spaces and quotes.
std::string_view unquote(std::string_view f) {
  f = trim(f);
  if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = trim(f.substr(1, f.size() - 2));
  return f;
}

LengthColumn read_csv(const std::string& path, const std::string& column, const std::vector<std::string>& candidates) {
  LineReader lines(path);
  std::string_view header;
  if (!lines.next_data_line(header)) throw core::InputError(path, 1, "", "empty file, expected a header line");
  const int64_t header_line = lines.line_number();
  std::vector<std::string_view> fields;
  split_csv(header, fields, path, header_line);
  std::vector<std::string> names;
  for (auto f : fields) names.emplace_back(unquote(f));
  LengthColumn out;
  out.column = choose_column(
      names, column, candidates,
      [](const std::string& a, const std::string& b) { return core::to_lower(a) == core::to_lower(b); }, path,
      header_line, "header");
  size_t col = names.size(), same = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (core::to_lower(names[i]) != core::to_lower(out.column)) continue;
    if (col == names.size()) col = i;
    ++same;
  }
  if (same > 1) throw core::InputError(path, header_line, out.column, "column appears twice in the header");
  std::string_view line;
  while (lines.next_data_line(line)) {
    const int64_t n = lines.line_number();
    split_csv(line, fields, path, n);
    if (fields.size() != names.size())
      throw core::InputError(path, n, fields.size() < names.size() ? names[fields.size()] : std::string(),
                             "expected " + std::to_string(names.size()) +
                                 " comma-separated fields as in the header, got " + std::to_string(fields.size()));
    out.values.push_back(parse_length(unquote(fields[col]), {path, n, out.column}));
  }
  if (out.values.empty())
    throw core::InputError(path, header_line, "", "no rows: the file has a header but no data rows");
  return out;
}

}  // namespace

LengthColumn read_length_column(const std::string& path, LengthFileFormat format, const std::string& column,
                                const std::vector<std::string>& candidates) {
  switch (format) {
    case LengthFileFormat::kJson: return read_json(path, false, column, candidates);
    case LengthFileFormat::kJsonl: return read_json(path, true, column, candidates);
    case LengthFileFormat::kCsv: return read_csv(path, column, candidates);
  }
  throw core::Error("internal: unknown length file format");
}

}  // namespace servesim::traces
