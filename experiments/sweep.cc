#include "experiments/sweep.h"

#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <iomanip>
#include <memory>
#include <mutex>
#include <ostream>
#include <sstream>
#include <unordered_map>

#include "experiments/run.h"
#include "sim/core/error.h"
#include "sim/metrics/buffer_sink.h"

namespace servesim::experiments {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = static_cast<int64_t>(std::llround(s));
  std::ostringstream out;
  if (t >= 3600) out << t / 3600 << ":" << std::setw(2) << std::setfill('0') << (t % 3600) / 60 << ":" << std::setw(2) << t % 60;
  else out << t / 60 << ":" << std::setw(2) << std::setfill('0') << t % 60;
  return out.str();
}

std::string rate_text(double r) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(r < 10 ? 2 : 1) << r;
  return out.str();
}

// The error of a point, with the point named (configuration errors are already located and named).
std::exception_ptr point_error(const Point& p) {
  const std::string context = point_context(p);
  try {
    throw;
  } catch (const core::ConfigError&) {
    return std::current_exception();
  } catch (const std::exception& e) {
    return std::make_exception_ptr(core::Error(context + ": " + e.what()));
  }
}

struct Slot {
  size_t position = 0;
  metrics::BufferSink run;
  std::exception_ptr error;
};

// The pipeline's slots, recycled: a point's rows go into a slot whose vectors kept the capacity an
// earlier point grew them to, so the simulations do not fault fresh pages in for every point (and
// the process does not unmap them again, which on several cores interrupts the other threads).
// At most as many slots as the pipeline has tokens (2 x jobs), as before.
class SlotPool {
 public:
  Slot* take(size_t position) {
    Slot* slot = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (free_.empty()) {
        all_.push_back(std::make_unique<Slot>());
        slot = all_.back().get();
      } else {
        slot = free_.back();
        free_.pop_back();
      }
    }
    slot->position = position;
    slot->error = nullptr;
    slot->run.reset();
    return slot;
  }
  void give_back(Slot* slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(slot);
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Slot>> all_;
  std::vector<Slot*> free_;
};

}  // namespace

Progress::Progress(std::ostream* out, bool tty, std::string what, int64_t total, double period_s)
    : out_(out), tty_(tty), what_(std::move(what)), total_(total), period_s_(period_s) {
  start_s_ = last_print_s_ = now_s();
  if (out_ && tty_ && total_ > 0) print(false);
}

void Progress::advance(int64_t n) {
  done_ += n;
  if (!out_) return;
  const double t = now_s();
  if (t - last_print_s_ >= (tty_ ? 0.1 : period_s_) && done_ < total_) {
    last_print_s_ = t;
    print(false);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (out_ && total_ > 0) print(true);
}

void Progress::print(bool final) {
  const double elapsed = now_s() - start_s_;
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : NAN;
  const double pct = total_ > 0 ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100;
  std::ostringstream line;
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done_ / std::max<int64_t>(1, total_));
    line << "\r" << what_ << " [" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] " << done_
         << "/" << total_ << "  " << rate_text(rate) << "/s  "
         << (final ? "done in " + duration_text(elapsed) : "ETA " + duration_text(eta)) << "   ";
    if (final) line << "\n";
  } else if (final) {
    line << what_ << ": " << done_ << "/" << total_ << " done in " << std::fixed << std::setprecision(1) << elapsed
         << " s (" << rate_text(rate) << "/s)\n";
  } else {
    line << what_ << ": " << done_ << "/" << total_ << " (" << std::fixed << std::setprecision(1) << pct << "%), "
         << rate_text(rate) << "/s, ETA " << duration_text(eta) << "\n";
  }
  *out_ << line.str() << std::flush;
}

void run_points(const Experiment& experiment, const std::vector<Point>& points, ResultsDb* db, int threads,
                Progress* progress, bool check, const std::function<void(size_t, const RunFigures&)>& on_done) {
  if (points.empty()) return;
  threads = resolve_jobs(threads);
  size_t next = 0;
  SlotPool slots;
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_pipeline(
        static_cast<size_t>(2 * threads),
        tbb::make_filter<void, Slot*>(tbb::filter_mode::serial_in_order,
                                      [&](tbb::flow_control& fc) -> Slot* {
                                        if (next == points.size()) {
                                          fc.stop();
                                          return nullptr;
                                        }
                                        return slots.take(next++);
                                      }) &
            tbb::make_filter<Slot*, Slot*>(
                tbb::filter_mode::parallel,
                [&](Slot* slot) {
                  const Point& p = points[slot->position];
                  try {
                    core::Params config =
                        experiment.resolve(p.settings, point_context(p));
                    RunOutputs outputs;
                    outputs.sinks = {&slot->run};
                    outputs.run_id = p.index + 1;
                    outputs.check = check;
                    run_simulation(config, outputs);
                  } catch (...) {
                    slot->error = point_error(p);
                  }
                  return slot;
                }) &
            tbb::make_filter<Slot*, void>(
                tbb::filter_mode::serial_in_order, [&](Slot* slot) {
                  if (slot->error) std::rethrow_exception(slot->error);
                  const size_t position = slot->position;
                  if (db) db->commit(points[position], slot->run);
                  const RunFigures figures = figures_of(slot->run);
                  slots.give_back(slot);  // its rows are dropped when its next point begins
                  if (on_done) on_done(position, figures);
                  if (progress) progress->advance();
                }));
  });
}

ExperimentRecord sweep_record(const Experiment& experiment) {
  ExperimentRecord r;
  r.identity = experiment.identity();
  r.kind = "sweep";
  r.name = experiment.name();
  r.points = static_cast<int64_t>(experiment.points().size());
  r.source = experiment.text();
  return r;
}

SweepStats run_sweep(Experiment& experiment, const SweepOptions& options) {
  if (options.shard_count < 1 || options.shard_index < 0 || options.shard_index >= options.shard_count)
    throw core::Error("--shard I/N needs 0 <= I < N");
  if (options.db_path.empty()) throw core::Error("a sweep needs a results database (--db FILE)");
  const double start = now_s();
  if (!experiment.checked()) experiment.check(options.jobs);
  ResultsDb db(options.db_path, sweep_record(experiment));

  SweepStats stats;
  stats.points = static_cast<int64_t>(experiment.points().size());
  std::vector<Point> todo;
  for (const Point& p : experiment.points()) {
    if (p.index % options.shard_count != options.shard_index) continue;
    ++stats.in_shard;
    if (p.skipped) {
      ++stats.skipped;
    } else if (db.done().count(p.key)) {
      ++stats.already_done;
    } else {
      todo.push_back(p);
    }
  }
  Progress progress(options.progress, options.progress_tty, "sweep", static_cast<int64_t>(todo.size()),
                    options.progress_period_s);
  // The figures of the points run now come from their runs in memory (figures_of, the values the
  // database holds); only points an earlier sweep ran are read back (a query over their requests).
  std::unordered_map<int64_t, RunFigures> ran;
  run_points(experiment, todo, &db, options.jobs, &progress, options.check,
             [&](size_t i, const RunFigures& f) { ran.emplace(todo[i].index, f); });
  progress.finish();
  stats.ran = static_cast<int64_t>(todo.size());
  for (const Point& p : experiment.points())
    if (p.index % options.shard_count == options.shard_index && !p.skipped) {
      const auto it = ran.find(p.index);
      stats.results.emplace_back(p.index, it != ran.end() ? it->second : db.figures(p.index));
    }
  stats.wall_seconds = now_s() - start;
  return stats;
}

std::pair<int64_t, int64_t> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  auto bad = [&]() -> std::pair<int64_t, int64_t> {
    throw core::Error("--shard '" + text + "': expected I/N with 0 <= I < N (shards are numbered from 0), e.g. 0/4");
  };
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) return bad();
  try {
    size_t used = 0;
    const std::string a = text.substr(0, slash), b = text.substr(slash + 1);
    const long long i = std::stoll(a, &used);
    if (used != a.size()) return bad();
    const long long n = std::stoll(b, &used);
    if (used != b.size()) return bad();
    if (n < 1 || i < 0 || i >= n) return bad();
    return {i, n};
  } catch (const std::invalid_argument&) {
    return bad();
  } catch (const std::out_of_range&) {
    return bad();
  }
}

}  // namespace servesim::experiments
