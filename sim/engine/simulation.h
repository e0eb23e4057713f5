#pragma once
// The discrete-event engine: one clock and one event queue, no globals, so many simulations can run
// side by side in threads. Events are ordered by (time, sequence number): ties resolve in the order
// they were scheduled, which makes every run deterministic.

#include <cstdint>
#include <vector>

#include "sim/core/time.h"

namespace servesim::sim {

// Something that receives events. The payload's meaning belongs to the handler (a replica uses it
// as an iteration number, the cluster ignores it); nothing is cast by a tag.
class EventHandler {
 public:
  virtual void on_event(uint64_t payload) = 0;

 protected:
  ~EventHandler() = default;
};

class Simulation {
 public:
  core::Time now() const { return now_; }
  uint64_t events_processed() const { return processed_; }
  // Of those, the events that were next in line when scheduled (see push): handled without a
  // pass through the heap. A measure of the engine, not of the system simulated.
  uint64_t events_in_line() const { return in_line_; }
  size_t pending() const { return heap_.size() - (root_is_done_ ? 1 : 0) + weak_.size(); }

  // Schedules `handler` at `t` (>= now); throws core::Error if `t` is in the past.
  void schedule_at(core::Time t, EventHandler* handler, uint64_t payload = 0) {
    if (t < now_) [[unlikely]] in_the_past(t);
    push(Event{t.ns(), next_seq_++, handler, payload});
  }
  // Throws core::Error when now + `d` would pass the clock's limit (never wraps around).
  void schedule_after(core::Duration d, EventHandler* handler, uint64_t payload = 0) {
    if (d.ns() > INT64_MAX - now_.ns()) clock_limit(d);
    schedule_at(now_ + d, handler, payload);
  }
  // A sequence number taken now for an event whose time is known only later: schedule_reserved()
  // orders it among the events of its time as if it had been scheduled when the number was taken
  // (for a handler that defers work to the end of an instant but must keep the order of events).
  uint64_t reserve_seq() { return next_seq_++; }
  // Schedules with a number from reserve_seq(); `t` must be later than now (the event being handled
  // may hold a larger number).
  void schedule_reserved(core::Time t, uint64_t seq, EventHandler* handler, uint64_t payload = 0);
  // A weak event: ordered and handled like any other, but it does not keep the simulation going.
  // run() ends when only weak events are left, without handling them (the clock stays at the last
  // ordinary event). For timers that guard against something that may never happen, such as a
  // client time-out after the last request has completed.
  void schedule_weak_at(core::Time t, EventHandler* handler, uint64_t payload = 0);

  // For a handler that runs its own next events itself (a replica's decode iterations): while a
  // handler runs and has scheduled nothing yet, the time (ns) before which an event it would
  // schedule now is the next one handled - the earliest queued event, weak ones included (an event
  // at the same time as a queued one goes behind it) - INT64_MAX when nothing is queued; INT64_MIN
  // when the handler has scheduled something (the rule no longer applies).
  int64_t in_line_horizon_ns() const {
    if (!root_is_done_) return INT64_MIN;
    const size_t n = heap_.size();
    int64_t h = INT64_MAX;
    if (n > 1) h = heap_[1].t;
    if (n > 2 && heap_[2].t < h) h = heap_[2].t;
    if (!weak_.empty() && weak_.front().t < h) h = weak_.front().t;
    return h;
  }
  // Handles, inside the running handler, an event it would have scheduled at `t` with a number
  // from reserve_seq(): the clock moves to `t` and the event counts as handled (in line), exactly as
  // if it had gone through the queue. `t` must be at or after now and before in_line_horizon_ns().
  void advance_in_line(core::Time t) {
    if (t < now_ || t.ns() >= in_line_horizon_ns()) [[unlikely]] not_in_line(t);
    now_ = t;
    ++processed_;
    ++in_line_;
  }
  // Counts, inside the running handler, an event it handled itself ahead of the clock (a replica
  // running ahead: Cluster::runs_ahead), as advance_in_line does, but the clock stays.
  void count_ahead() {
    ++processed_;
    ++in_line_;
  }
  // Throws the clock's-limit error for an event `d` after `from` (a time a handler running ahead
  // has reached, past now).
  [[noreturn]] void clock_limit_from(core::Time from, core::Duration d) const;

  // Processes events until none but weak ones are left (those are dropped).
  void run();
  // Processes one event; false when no ordinary (not weak) event is left.
  bool step();

 private:
  struct Event {
    int64_t t;
    uint64_t seq;
    EventHandler* handler;
    uint64_t payload;
  };
  static bool before(const Event& a, const Event& b) { return a.t != b.t ? a.t < b.t : a.seq < b.seq; }
  [[noreturn]] void clock_limit(core::Duration d) const;
  [[noreturn, gnu::noinline]] void in_the_past(core::Time t) const;
  [[noreturn, gnu::noinline]] void not_in_line(core::Time t) const;
  void sift_up(size_t i, Event e);
  [[gnu::noinline]] void step_weak();  // handles the earliest weak event (off the hot path)
  void replace_root(Event e);
  // Into heap_. The first event a handler schedules takes the root place of the event being
  // handled: in line when it comes before every queued event (before the root's children, the
  // smallest of the rest), which makes it the next one handled without a pass down the heap (with
  // one replica, nearly every next iteration: it ends before the next arrival), else by
  // replace_root. `before` is the heap's own order, (t, seq), so an event that ties a queued one in
  // time goes behind it exactly as the heap would put it: the order of events cannot change.
  void push(Event e) {
    if (root_is_done_) {
      root_is_done_ = false;
      const size_t n = heap_.size();
      if (n == 1 || (before(e, heap_[1]) && (n == 2 || before(e, heap_[2])))) [[likely]] {
        heap_[0] = e;
        ++in_line_;
        return;
      }
      replace_root(e);
      return;
    }
    push_back(e);
  }
  void push_back(Event e);  // a new leaf, sifted up

  core::Time now_;
  uint64_t next_seq_ = 0;
  uint64_t processed_ = 0;
  uint64_t in_line_ = 0;
  // Binary min-heap on (t, seq). While an event's handler runs, the event stays at the root (its
  // (t, seq) is below anything the handler can schedule): the first event the handler schedules
  // takes its place (one pass down the heap instead of a pop and a push), the common case of a
  // replica scheduling its next iteration. (t, seq) is a total order, so the order events run in
  // is the same for any valid heap.
  std::vector<Event> heap_;
  bool root_is_done_ = false;  // heap_[0] is the event being handled
  // Weak events, in a heap of their own (by the same (t, seq) order, seq shared with heap_), so that
  // the ordinary events keep the hot path and run() knows when only weak ones are left.
  std::vector<Event> weak_;
};

}  // namespace servesim::sim
