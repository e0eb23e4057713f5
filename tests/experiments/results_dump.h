#pragma once
// A canonical text of a results database's content, for comparing databases written in different
// ways (threads, shards, resumed after a kill): every table but SQLite's own, sorted by name, every
// row ordered by all its columns, numbers printed exactly.

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

namespace servesim::testing {

// `skip` names columns left out of every table (for content compared across machines: the config
// text names files by absolute path); `rows`, when given, receives the number of rows dumped.
inline std::string dump_results(const std::string& path, const std::set<std::string>& skip = {},
                                int64_t* rows = nullptr) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  std::vector<std::string> tables;
  {
    SQLite::Statement st(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    while (st.executeStep()) tables.push_back(st.getColumn(0).getString());
  }
  std::string out;
  int64_t count = 0;
  for (const auto& t : tables) {
    SQLite::Statement cols(db, "PRAGMA table_info(" + t + ")");
    std::string select, order;
    int n = 0;
    while (cols.executeStep()) {
      const std::string name = cols.getColumn(1).getString();
      if (skip.count(name)) continue;
      select += (n ? ", " : "") + name;
      order += (n ? ", " : "") + std::to_string(n + 1);
      ++n;
    }
    out += "== " + t + "\n";
    SQLite::Statement st(db, "SELECT " + select + " FROM " + t + " ORDER BY " + order);
    while (st.executeStep()) {
      ++count;
      for (int i = 0; i < st.getColumnCount(); ++i) {
        const SQLite::Column c = st.getColumn(i);
        if (c.isNull()) {
          out += "NULL";
        } else if (c.isInteger()) {
          out += std::to_string(c.getInt64());
        } else if (c.isFloat()) {
          char buf[40];
          std::snprintf(buf, sizeof buf, "%.17g", c.getDouble());
          out += buf;
        } else {
          out += "'" + c.getString() + "'";
        }
        out += i + 1 < st.getColumnCount() ? "|" : "\n";
      }
    }
  }
  if (rows) *rows = count;
  return out;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace servesim::testing
