#include "sim/engine/simulation.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"

namespace servesim::sim {

void Simulation::schedule_at(core::Time t, EventHandler* handler, uint64_t payload) {
  if (t < now_)
    throw core::Error("internal: event scheduled in the past (" + std::to_string(t.ns()) + " ns < now " +
                      std::to_string(now_.ns()) + " ns)");
  heap_.push_back(Event{t.ns(), next_seq_++, handler, payload});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

bool Simulation::step() {
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), later);
  const Event e = heap_.back();
  heap_.pop_back();
  now_ = core::Time::from_ns(e.t);
  ++processed_;
  e.handler->on_event(e.payload);
  return true;
}

void Simulation::run() {
  while (step()) {
  }
}

}  // namespace servesim::sim
