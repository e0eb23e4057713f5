#include "traces/mooncake_jsonl.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <memory>

#include "sim/core/error.h"
#include "traces/field_parse.h"
#include "traces/workload_common.h"

namespace servesim::traces {

namespace {

constexpr const char* kRequiredKeys = "timestamp, input_length, output_length, hash_ids";
constexpr int kMaxDepth = 128;  // nesting of ignored values; deeper is refused, not recursed into

// A hand-written parser of one JSON object per line. nlohmann::json builds a DOM per line and ran
// 5x slower on the Mooncake conversation trace (41 ms against 8 ms: its lines are mostly long
// arrays of small integers); at 10M requests that is the difference between seconds and a minute.
// It follows the JSON grammar (RFC 8259) for structure, numbers and literals; the insides of strings
// are not checked (escapes, UTF-8) since their content is never used. Keys other than the four it
// reads are skipped whatever their value; a key spelled with escape sequences counts as unknown.
class LineParser {
 public:
  LineParser(std::string_view line, const std::string& file, int64_t line_no, const ClassAssigner* classes)
      : begin_(line.data()),
        p_(line.data()),
        end_(line.data() + line.size()),
        file_(file),
        line_(line_no),
        classes_(classes) {}

  // Fills `out` (all but the arrival) and returns the timestamp's text.
  std::string_view parse(RequestSpec& out, int64_t& timestamp_ns) {
    ws();
    if (p_ == end_) syntax("empty line");
    if (*p_ != '{')
      throw core::InputError(file_, line_, "",
                             "each line must be a JSON object ({...}), got " + value_kind(*p_));
    ++p_;
    bool have_ts = false, have_in = false, have_out = false, have_hashes = false, have_class = false;
    if (classes_) out.request_class = -1;
    std::string_view ts_text;
    out.block_hashes.clear();
    ws();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
    } else {
      for (;;) {
        ws();
        bool escaped = false;
        const std::string_view key = parse_key(escaped);
        ws();
        expect(':', "':' after the key");
        ws();
        if (p_ == end_) truncated();
        if (!escaped && key == "timestamp") {
          once(have_ts, key);
          ts_text = parse_timestamp(timestamp_ns);
        } else if (!escaped && key == "input_length") {
          once(have_in, key);
          out.prompt_tokens = parse_length_value(key);
        } else if (!escaped && key == "output_length") {
          once(have_out, key);
          out.output_tokens = parse_length_value(key);
        } else if (!escaped && key == "hash_ids") {
          once(have_hashes, key);
          parse_hashes(out);
        } else if (!escaped && classes_ && key == "class") {
          once(have_class, key);
          parse_class(out);
        } else {
          skip_value(0);
        }
        ws();
        if (p_ == end_) truncated();
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ == '}') {
          ++p_;
          break;
        }
        syntax("expected ',' or '}' after the value of '" + std::string(key) + "', got " + excerpt(rest()));
      }
    }
    ws();
    if (p_ != end_) syntax("unexpected text after the JSON object: " + excerpt(rest()));
    if (!have_ts) missing("timestamp");
    if (!have_in) missing("input_length");
    if (!have_out) missing("output_length");
    if (!have_hashes) missing("hash_ids");
    return ts_text;
  }

 private:
  struct Number {
    std::string_view text;
    bool integral = true;
  };

  std::string column() const { return std::to_string(p_ - begin_ + 1); }
  std::string_view rest() const { return std::string_view(p_, static_cast<size_t>(end_ - p_)); }

  [[noreturn]] void syntax(const std::string& what) const {
    throw core::InputError(file_, line_, "", "invalid JSON at column " + column() + ": " + what);
  }
  [[noreturn]] void truncated() const { syntax("unexpected end of line (truncated line?)"); }
  [[noreturn]] void field(std::string_view key, const std::string& what) const {
    throw core::InputError(file_, line_, std::string(key), what);
  }
  [[noreturn]] void missing(const char* key) const {
    field(key, std::string("missing key '") + key + "' (each line needs " + kRequiredKeys + ")");
  }
  void once(bool& seen, std::string_view key) const {
    if (seen) field(key, "duplicate key '" + std::string(key) + "'");
    seen = true;
  }

  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r' || *p_ == '\n')) ++p_;
  }
  void expect(char c, const char* what) {
    if (p_ == end_) truncated();
    if (*p_ != c) syntax(std::string("expected ") + what + ", got " + excerpt(rest()));
    ++p_;
  }

  static std::string value_kind(char c) {
    switch (c) {
      case '"':
        return "a string";
      case '{':
        return "an object";
      case '[':
        return "an array";
      case 't':
      case 'f':
        return "a boolean";
      case 'n':
        return "null";
      default:
        return (c == '-' || (c >= '0' && c <= '9')) ? "a number" : "an invalid token";
    }
  }

  // The text up to the next delimiter, for quoting a bad token.
  std::string_view token_at(const char* from) const {
    const char* q = from;
    while (q < end_ && *q != ',' && *q != '}' && *q != ']' && *q != ' ' && *q != '\t') ++q;
    return std::string_view(from, static_cast<size_t>(q - from));
  }

  // At the opening quote of a key; returns its raw text.
  // "class": a string naming one of the workload's classes (no escape sequences: no class name
  // needs one); null or "" names none.
  void parse_class(RequestSpec& out) {
    if (*p_ == 'n' && token_at(p_) == "null") {
      p_ += 4;
      return;
    }
    if (*p_ != '"') field("class", "expected a string naming a request class, got " + value_kind(*p_));
    bool escaped = false;
    const std::string_view name = parse_key(escaped);
    if (escaped) field("class", "a class name with escape sequences names no class ([[workload.classes]] names "
                                "hold no quotes or control characters)");
    out.request_class = resolve_class(*classes_, name, {file_, line_, "class"});
  }

  std::string_view parse_key(bool& escaped) {
    if (p_ == end_) truncated();
    if (*p_ != '"') syntax("expected a quoted key, got " + excerpt(rest()));
    ++p_;
    const char* start = p_;
    escaped = false;
    for (;;) {
      if (p_ == end_) truncated();
      if (*p_ == '"') break;
      if (*p_ == '\\') {
        escaped = true;
        if (++p_ == end_) truncated();
      }
      ++p_;
    }
    const std::string_view key(start, static_cast<size_t>(p_ - start));
    ++p_;
    return key;
  }

  // Scans a JSON number at p_; false (p_ unchanged) when the text there is not one.
  bool scan_number(Number& n) {
    const char* q = p_;
    bool integral = true;
    if (q < end_ && *q == '-') ++q;
    if (q == end_ || *q < '0' || *q > '9') return false;
    if (*q == '0') {
      ++q;
    } else {
      while (q < end_ && *q >= '0' && *q <= '9') ++q;
    }
    if (q < end_ && *q == '.') {
      integral = false;
      ++q;
      if (q == end_ || *q < '0' || *q > '9') return false;
      while (q < end_ && *q >= '0' && *q <= '9') ++q;
    }
    if (q < end_ && (*q == 'e' || *q == 'E')) {
      integral = false;
      ++q;
      if (q < end_ && (*q == '+' || *q == '-')) ++q;
      if (q == end_ || *q < '0' || *q > '9') return false;
      while (q < end_ && *q >= '0' && *q <= '9') ++q;
    }
    // A number runs up to a delimiter: "12a" is one bad token, not 12 followed by garbage.
    if (q < end_ && *q != ',' && *q != '}' && *q != ']' && *q != ' ' && *q != '\t' && *q != '\r')
      return false;
    n.text = std::string_view(p_, static_cast<size_t>(q - p_));
    n.integral = integral;
    p_ = q;
    return true;
  }

  // A number for `key`, or an error that says what is there instead.
  Number number_for(std::string_view key, const char* expected) {
    Number n;
    if (scan_number(n)) return n;
    const char c = *p_;
    std::string got;
    if (c == '"' || c == '{' || c == '[' || c == 'n' || (c == 't' && token_at(p_) == "true") ||
        (c == 'f' && token_at(p_) == "false"))
      got = value_kind(c);
    else
      got = excerpt(token_at(p_));
    std::string note;
    const std::string_view tok = token_at(p_);
    if (tok.find("NaN") != std::string_view::npos || tok.find("nan") != std::string_view::npos ||
        tok.find("Infinity") != std::string_view::npos || tok.find("inf") != std::string_view::npos)
      note = " (JSON has no NaN or Infinity; the value must be finite)";
    if (c == '"') {
      const char* q = p_ + 1;
      while (q < end_ && *q != '"') ++q;
      got += ' ';
      got += excerpt(std::string_view(p_, static_cast<size_t>(std::min(q + 1, end_) - p_)));
    }
    field(key, std::string("expected ") + expected + ", got " + got + note);
  }

  std::string_view parse_timestamp(int64_t& ns) {
    constexpr const char* kKey = "timestamp";
    const Number n = number_for(kKey, "a number of milliseconds");
    if (n.integral) {
      int64_t ms = 0;
      const auto [ptr, ec] = std::from_chars(n.text.data(), n.text.data() + n.text.size(), ms);
      (void)ptr;
      if (ec != std::errc() || __builtin_mul_overflow(ms, int64_t{1'000'000}, &ns))
        field(kKey, "timestamp " + excerpt(n.text) + " ms is out of range (at most 292 years)");
    } else {
      double ms = 0;
      const auto [ptr, ec] = std::from_chars(n.text.data(), n.text.data() + n.text.size(), ms);
      (void)ptr;
      if (ec != std::errc() || !std::isfinite(ms) || std::fabs(ms) >= 9.2e12)
        field(kKey, "timestamp " + excerpt(n.text) + " ms is not a finite number within 292 years");
      ns = std::llround(ms * 1e6);
    }
    return n.text;
  }

  int64_t parse_length_value(std::string_view key) {
    const Number n = number_for(key, "an integer token count");
    if (!n.integral) field(key, "expected an integer token count, got " + excerpt(n.text));
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(n.text.data(), n.text.data() + n.text.size(), v);
    (void)ptr;
    if (ec != std::errc())
      field(key, "integer " + excerpt(n.text) + " is out of range (at most " +
                     std::to_string(std::numeric_limits<int64_t>::max()) + ")");
    if (v < 1) field(key, "must be >= 1 (a token count), got " + std::to_string(v));
    return v;
  }

  void parse_hashes(RequestSpec& out) {
    constexpr const char* kKey = "hash_ids";
    if (*p_ != '[') field(kKey, "expected an array of non-negative integers, got " + value_kind(*p_));
    ++p_;
    ws();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return;
    }
    for (;;) {
      ws();
      if (p_ == end_) truncated();
      // The element's name for a message, built only when there is one to give (building it for
      // every element cost more than parsing the element).
      const auto what = [&out] { return "hash_ids[" + std::to_string(out.block_hashes.size()) + "]"; };
      const char c = *p_;
      if (c >= '0' && c <= '9') {
        // The common case: a plain unsigned integer, parsed inline.
        // Up to 19 digits cannot overflow (10^19 - 1 < 2^64), so they are read without checks; a
        // 20th digit reads the number again with them.
        uint64_t v = 0;
        const char* q = p_;
        bool overflow = false;
        const char* unchecked_end = end_ - p_ > 19 ? p_ + 19 : end_;
        while (q < unchecked_end && *q >= '0' && *q <= '9') v = v * 10 + static_cast<uint64_t>(*q++ - '0');
        if (q < end_ && *q >= '0' && *q <= '9') {
          v = 0;
          q = p_;
          while (q < end_ && *q >= '0' && *q <= '9') {
            overflow |= __builtin_mul_overflow(v, uint64_t{10}, &v);
            overflow |= __builtin_add_overflow(v, static_cast<uint64_t>(*q - '0'), &v);
            ++q;
          }
        }
        const bool delimited = q == end_ || *q == ',' || *q == ']' || *q == ' ' || *q == '\t';
        if (!delimited || (q - p_ > 1 && *p_ == '0'))  // "1.5", "12a", "07": not JSON integers
          field(kKey, what() + " must be a non-negative integer, got " + excerpt(token_at(p_)));
        if (overflow) field(kKey, what() + " " + excerpt(token_at(p_)) + " is out of range (at most 2^64-1)");
        p_ = q;
        out.block_hashes.push_back(v);
      } else {
        Number n;
        if (scan_number(n)) field(kKey, what() + " must be a non-negative integer, got " + excerpt(n.text));
        field(kKey, "expected an array of non-negative integers; " + what() + " is " +
                        (value_kind(c) == "an invalid token" ? excerpt(token_at(p_)) : value_kind(c)));
      }
      ws();
      if (p_ == end_) truncated();
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return;
      }
      syntax("expected ',' or ']' in hash_ids, got " + excerpt(rest()));
    }
  }

  void skip_string() {
    ++p_;  // opening quote
    for (;;) {
      if (p_ == end_) truncated();
      if (*p_ == '"') {
        ++p_;
        return;
      }
      if (*p_ == '\\' && ++p_ == end_) truncated();
      ++p_;
    }
  }

  void skip_literal(std::string_view word) {
    if (rest().substr(0, word.size()) != word) {
      if (static_cast<size_t>(end_ - p_) < word.size() && word.substr(0, rest().size()) == rest())
        truncated();
      syntax("invalid value " + excerpt(token_at(p_)));
    }
    p_ += word.size();
  }

  void skip_value(int depth) {
    if (depth > kMaxDepth) syntax("values nested too deeply");
    if (p_ == end_) truncated();
    switch (*p_) {
      case '"':
        skip_string();
        return;
      case 't':
        skip_literal("true");
        return;
      case 'f':
        skip_literal("false");
        return;
      case 'n':
        skip_literal("null");
        return;
      case '[':
      case '{': {
        const char close = *p_ == '[' ? ']' : '}';
        ++p_;
        ws();
        if (p_ < end_ && *p_ == close) {
          ++p_;
          return;
        }
        for (;;) {
          ws();
          if (close == '}') {
            bool escaped = false;
            parse_key(escaped);
            ws();
            expect(':', "':' after the key");
            ws();
          }
          skip_value(depth + 1);
          ws();
          if (p_ == end_) truncated();
          if (*p_ == ',') {
            ++p_;
            continue;
          }
          if (*p_ == close) {
            ++p_;
            return;
          }
          syntax(std::string("expected ',' or '") + close + "', got " + excerpt(rest()));
        }
      }
      default: {
        Number n;
        if (!scan_number(n)) {
          if (p_ + 1 >= end_ && *p_ == '-') truncated();
          syntax("invalid value " + excerpt(token_at(p_)));
        }
      }
    }
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  const std::string& file_;
  int64_t line_;
  const ClassAssigner* classes_;
};

}  // namespace

MooncakeJsonlReader::MooncakeJsonlReader(std::string path, const ClassAssigner* classes)
    : lines_(std::move(path)), classes_(classes) {
  std::string_view first;
  if (!lines_.next_data_line(first))
    throw core::InputError(
        lines_.path(), 1, "",
        std::string("empty file, expected one JSON object per line with ") + kRequiredKeys);
  parse_line(first, pending_request_);
  pending_ = true;
}

bool MooncakeJsonlReader::read(RequestSpec& out) {
  if (pending_) {
    pending_ = false;
    // Swapping hands over the hashes without a copy; `out`'s old buffer is reused by the next line.
    out.arrival = pending_request_.arrival;
    out.prompt_tokens = pending_request_.prompt_tokens;
    out.output_tokens = pending_request_.output_tokens;
    out.block_hashes.swap(pending_request_.block_hashes);
    out.session = 0;
    if (classes_) out.request_class = pending_request_.request_class;
    return true;
  }
  std::string_view line;
  if (!lines_.next_data_line(line)) return false;
  parse_line(line, out);
  return true;
}

void MooncakeJsonlReader::parse_line(std::string_view line, RequestSpec& out) {
  const int64_t line_no = lines_.line_number();
  int64_t ns = 0;
  LineParser parser(line, lines_.path(), line_no, classes_);
  const std::string_view ts_text = parser.parse(out, ns);
  if (have_previous_ && ns < previous_ns_)
    throw core::InputError(lines_.path(), line_no, "timestamp",
                           "timestamp goes backwards: " + std::string(ts_text) + " < previous " +
                               previous_text_ + " (ms; requests must be in arrival order)");
  if (!have_previous_) {
    first_ns_ = ns;
    have_previous_ = true;
  }
  int64_t offset = 0;
  if (__builtin_sub_overflow(ns, first_ns_, &offset))
    throw core::InputError(lines_.path(), line_no, "timestamp",
                           "timestamp is more than 292 years after the first line's");
  previous_ns_ = ns;
  previous_text_.assign(ts_text);
  out.arrival = core::Time::from_ns(offset);
  out.session = 0;
}

namespace {

class MooncakeJsonlSource final : public ShapedSource {
 public:
  MooncakeJsonlSource(const core::Params& p, uint64_t seed, std::string path)
      : ShapedSource(p, seed), reader_(std::move(path), class_table()), block_tokens_(p.get_int("block_tokens")) {}
  int64_t hash_block_tokens() const override { return block_tokens_; }

 protected:
  bool next_raw(RequestSpec& out) override { return reader_.read(out); }
  std::string describe() const override { return "trace file " + reader_.path(); }

 private:
  MooncakeJsonlReader reader_;
  int64_t block_tokens_;
};

const bool kRegistered = workload_registry().add(
    {"mooncake_jsonl",
     "replays a Mooncake trace (JSON lines with timestamp in ms, input_length, output_length, "
     "hash_ids); arrivals are offsets from the first line, hash_ids become prefix block ids",
     with_common_params(
         {core::ParamSpec::path("path", "the trace, one JSON object per line"),
          core::ParamSpec::integer("block_tokens", 512, "tokens",
                                   "prompt tokens covered by one entry of hash_ids (512 in the "
                                   "published Mooncake traces)")
              .range(1, 1 << 20)})},
    [](const core::Params& p, uint64_t seed) -> std::unique_ptr<ArrivalSource> {
      return std::make_unique<MooncakeJsonlSource>(p, seed, readable_file(p, "path"));
    });

}  // namespace

}  // namespace servesim::traces
