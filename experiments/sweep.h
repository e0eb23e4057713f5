#pragma once
// servesim sweep: every point of an experiment, in parallel (oneTBB, one independent simulation per
// task), into one results database.
//
// Determinism: points run on any number of threads but are written in point order (a pipeline whose
// last stage is serial and in order), so the database file is byte-identical for any --jobs.
// Memory: at most 2 x jobs finished or running points are held (their request and time-series rows,
// 128 bytes per request) before they are written; their buffers are recycled from point to point
// (they keep the capacity the largest point grew them to), so points do not fault in fresh memory.
// Resumable: a point and its run are committed in one transaction; a re-run skips committed points.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "experiments/experiment.h"
#include "experiments/results_db.h"

namespace servesim::experiments {

// Progress on stderr: on a terminal one line redrawn in place (bar, done/total, rate, ETA); otherwise
// a plain line every `period_s` seconds and one at the end.
class Progress {
 public:
  Progress(std::ostream* out, bool tty, std::string what, int64_t total, double period_s = 10);
  void advance(int64_t n = 1);
  void finish();

 private:
  void print(bool final);

  std::ostream* out_;
  bool tty_;
  std::string what_;
  int64_t total_, done_ = 0;
  double period_s_;
  double start_s_, last_print_s_;
  bool finished_ = false;
};

// Runs `points` with `threads` threads and hands each finished point over in the order given:
// committed to `db` (when not null; run_id = point index + 1), then `on_done(i, figures)`. A point that
// fails stops the batch with its error once every point before it has been handed over. `check`
// runs each point under the invariant checker.
void run_points(const Experiment& experiment, const std::vector<Point>& points, ResultsDb* db, int threads,
                Progress* progress, bool check = false,
                const std::function<void(size_t, const RunFigures&)>& on_done = {});

struct SweepOptions {
  std::string db_path;
  int jobs = 0;               // 0 = all cores
  int64_t shard_index = 0;    // run the points with index % shard_count == shard_index
  int64_t shard_count = 1;
  std::ostream* progress = nullptr;
  bool progress_tty = false;
  double progress_period_s = 10;
  bool check = false;         // every point under the invariant checker (servesim run --check)
};

struct SweepStats {
  int64_t points = 0;          // the experiment's
  int64_t in_shard = 0;
  int64_t skipped = 0;         // infeasible, in this shard
  int64_t already_done = 0;    // in this shard, found in the database
  int64_t ran = 0;
  double wall_seconds = 0;
  // Every committed point of this shard, in point order: (point index, what its run reports).
  std::vector<std::pair<int64_t, RunFigures>> results;
};

ExperimentRecord sweep_record(const Experiment& experiment);

// Checks every point (if not yet), opens the database, and runs this shard's missing points.
SweepStats run_sweep(Experiment& experiment, const SweepOptions& options);

// "I/N" with 0 <= I < N.
std::pair<int64_t, int64_t> parse_shard(const std::string& text);

}  // namespace servesim::experiments
