#include "sim/core/format.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace servesim::core {

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string toml_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
  return out;
}

namespace {

// The length of an invisible character's UTF-8 encoding at the start of `s` (0 when none) and its
// code point.
size_t invisible_at(std::string_view s, uint32_t& code) {
  auto u = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  if (s.size() >= 2 && u(0) == 0xC2 && u(1) == 0xA0) return code = 0xA0, 2;  // no-break space
  if (s.size() >= 2 && u(0) == 0xC2 && u(1) == 0xAD) return code = 0xAD, 2;  // soft hyphen
  if (s.size() >= 3 && u(0) == 0xEF && u(1) == 0xBB && u(2) == 0xBF) return code = 0xFEFF, 3;
  if (s.size() >= 3 && u(0) == 0xE2 && u(1) == 0x80 && ((u(2) >= 0x8B && u(2) <= 0x8F) || (u(2) >= 0xAA && u(2) <= 0xAE)))
    return code = 0x2000 + (u(2) - 0x80), 3;  // zero-width spaces and joiners, direction marks
  if (s.size() >= 3 && u(0) == 0xE2 && u(1) == 0x81 && u(2) >= 0xA0 && u(2) <= 0xA4)
    return code = 0x2040 + (u(2) - 0x80), 3;  // word joiner, invisible operators
  return 0;
}

// The length of a well-formed UTF-8 sequence at the start of `s` (0 when it is not one).
size_t utf8_at(std::string_view s) {
  const auto c = static_cast<unsigned char>(s[0]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || n > s.size()) return 0;
  for (size_t i = 1; i < n; ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) return 0;
  return n;
}

std::string escaped(std::string_view s, size_t max, bool& invisible) {
  std::string out;
  size_t i = 0;
  while (i < s.size() && out.size() < max) {
    uint32_t code = 0;
    char buf[16];
    if (const size_t n = invisible_at(s.substr(i), code); n > 0) {
      std::snprintf(buf, sizeof buf, "\\u%04X", code);
      out += buf;
      invisible = true;
      i += n;
      continue;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_at(s.substr(i));
    if (c < 0x20 || c == 0x7f || n == 0) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      invisible = invisible || c < 0x20 || c == 0x7f;
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size() - i) + " more bytes)";
  return out;
}

}  // namespace

std::string printable(std::string_view s, size_t max) {
  bool invisible = false;
  return escaped(s, max, invisible);
}

std::string in_quotes(std::string_view s, size_t max) {
  bool invisible = false;
  std::string out = "'" + escaped(s, max, invisible);
  const size_t more = out.find("... (");
  if (more != std::string::npos && out.compare(out.size() - 7, 7, " bytes)") == 0)
    out.insert(more, "'");
  else
    out += "'";
  if (invisible) out += " (with invisible characters, shown escaped)";
  return out;
}

std::string visible(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    uint32_t code = 0;
    if (const size_t n = invisible_at(s.substr(i), code); n > 0) {
      i += n;
      continue;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != 0x7f) out += s[i];
    ++i;
  }
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

}  // namespace servesim::core
