#include "calibration/sample_store.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "calibration/csv.h"
#include "sim/core/error.h"

namespace servesim::calibration {

int64_t store_microbench_samples(const std::string& db_path, const MicrobenchRun& run,
                                 const hwmodels::CalibrationProfile& profile) {
  try {
    SQLite::Database db(db_path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("PRAGMA busy_timeout = 10000");
    SQLite::Transaction tx(db);
    db.exec(
        "CREATE TABLE IF NOT EXISTS calibration_runs (\n"
        "  calibration_id INTEGER PRIMARY KEY,\n"
        "  raw_dir TEXT NOT NULL,\n"
        "  gpu TEXT NOT NULL,\n"
        "  device TEXT NOT NULL,\n"
        "  profile TEXT NOT NULL\n"
        ");\n"
        "CREATE TABLE IF NOT EXISTS calibration_samples (\n"
        "  calibration_id INTEGER NOT NULL REFERENCES calibration_runs(calibration_id),\n"
        "  file TEXT NOT NULL,\n"
        "  line INTEGER NOT NULL,\n"
        "  fields TEXT NOT NULL\n"
        ");\n"
        "CREATE INDEX IF NOT EXISTS calibration_samples_by_run ON calibration_samples(calibration_id, file);");
    nlohmann::ordered_json device(run.device);
    SQLite::Statement insert_run(db, "INSERT INTO calibration_runs (raw_dir, gpu, device, profile) VALUES (?, ?, ?, ?)");
    insert_run.bind(1, run.dir);
    insert_run.bind(2, profile.gpu);
    insert_run.bind(3, device.dump());
    insert_run.bind(4, hwmodels::calibration_profile_toml(profile));
    insert_run.exec();
    const int64_t id = db.getLastInsertRowid();
    SQLite::Statement insert(db, "INSERT INTO calibration_samples (calibration_id, file, line, fields) VALUES (?, ?, ?, ?)");
    for (const std::string& path : run.files) {
      const CsvTable t = parse_csv(read_text_file(path), path);
      const std::string file = std::filesystem::path(path).filename().string();
      for (size_t r = 0; r < t.rows.size(); ++r) {
        nlohmann::ordered_json fields;
        for (size_t c = 0; c < t.header.size(); ++c) fields[t.header[c]] = t.rows[r][c];
        insert.bind(1, id);
        insert.bind(2, file);
        insert.bind(3, t.lines[r]);
        insert.bind(4, fields.dump());
        insert.exec();
        insert.reset();
      }
    }
    tx.commit();
    return id;
  } catch (const SQLite::Exception& e) {
    throw core::Error("cannot store the raw samples in " + db_path + ": " + e.what());
  }
}

}  // namespace servesim::calibration
