#include "sim/engine/simulation.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::sim {

void Simulation::sift_up(size_t i, Event e) {
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!before(e, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

// Floyd's method: the hole at the root moves down to a leaf along the smaller children (one
// comparison per level), then `e` rises from there. A replica's next iteration usually belongs
// near the bottom, so it rarely rises far.
void Simulation::replace_root(Event e) {
  const size_t n = heap_.size();
  size_t i = 0;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
    heap_[i] = heap_[child];
    i = child;
  }
  sift_up(i, e);
}

void Simulation::push_back(Event e) {
  heap_.push_back(e);
  sift_up(heap_.size() - 1, e);
}

void Simulation::clock_limit(core::Duration d) const { clock_limit_from(now_, d); }

void Simulation::clock_limit_from(core::Time from, core::Duration d) const {
  throw core::Error("the simulated clock would pass its limit (int64 nanoseconds: 292 years): an event " +
                    core::format_double(d.seconds()) + " s after t = " + core::format_double(from.seconds()) +
                    " s; the run's time span (arrival rates, time windows) or its iteration times (hardware "
                    "speeds, overheads) are out of proportion");
}

void Simulation::in_the_past(core::Time t) const {
  throw core::Error("internal: event scheduled in the past (" + std::to_string(t.ns()) + " ns < now " +
                    std::to_string(now_.ns()) + " ns)");
}

void Simulation::not_in_line(core::Time t) const {
  throw core::Error("internal: an event handled in line at " + std::to_string(t.ns()) + " ns (now " +
                    std::to_string(now_.ns()) + " ns) is not the next event");
}

void Simulation::schedule_reserved(core::Time t, uint64_t seq, EventHandler* handler, uint64_t payload) {
  if (t <= now_ || seq >= next_seq_)
    throw core::Error("internal: a reserved event not after now (" + std::to_string(t.ns()) + " ns, now " +
                      std::to_string(now_.ns()) + " ns) or with a number never reserved");
  push(Event{t.ns(), seq, handler, payload});
}

void Simulation::schedule_weak_at(core::Time t, EventHandler* handler, uint64_t payload) {
  if (t < now_) in_the_past(t);
  weak_.push_back(Event{t.ns(), next_seq_++, handler, payload});
  std::push_heap(weak_.begin(), weak_.end(), [](const Event& a, const Event& b) { return before(b, a); });
}

bool Simulation::step() {
  if (root_is_done_) {  // the previous handler scheduled nothing (or threw): drop its event
    root_is_done_ = false;
    const Event last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) replace_root(last);
  }
  if (heap_.empty()) return false;  // nothing, or weak events only: they never keep the run going
  if (!weak_.empty() && before(weak_.front(), heap_[0])) [[unlikely]] {
    step_weak();
    return true;
  }
  const Event e = heap_[0];
  now_ = core::Time::from_ns(e.t);
  ++processed_;
  root_is_done_ = true;
  e.handler->on_event(e.payload);
  return true;
}

void Simulation::step_weak() {
  std::pop_heap(weak_.begin(), weak_.end(), [](const Event& a, const Event& b) { return before(b, a); });
  const Event e = weak_.back();
  weak_.pop_back();
  now_ = core::Time::from_ns(e.t);
  ++processed_;
  e.handler->on_event(e.payload);
}

void Simulation::run() {
  while (step()) {
  }
  weak_.clear();  // what is left is weak: dropped unhandled
}

}  // namespace servesim::sim
