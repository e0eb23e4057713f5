#pragma once
// A canonical text of a results database's content, for comparing databases written in different
// ways (threads, shards, resumed after a kill): every table but SQLite's own, sorted by name, every
// row ordered by all its columns, numbers printed exactly.

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace servesim::testing {

inline std::string dump_results(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  std::vector<std::string> tables;
  {
    SQLite::Statement st(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    while (st.executeStep()) tables.push_back(st.getColumn(0).getString());
  }
  std::string out;
  for (const auto& t : tables) {
    SQLite::Statement cols(db, "PRAGMA table_info(" + t + ")");
    int n = 0;
    std::string order;
    while (cols.executeStep()) {
      order += (n ? ", " : "") + std::to_string(n + 1);
      ++n;
    }
    out += "== " + t + "\n";
    SQLite::Statement st(db, "SELECT * FROM " + t + " ORDER BY " + order);
    while (st.executeStep()) {
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
  return out;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace servesim::testing
