#include "sim/engine/simulation.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

#include "sim/core/error.h"

namespace servesim::sim {
namespace {

struct Recorder : EventHandler {
  Simulation* sim = nullptr;
  std::vector<std::pair<int64_t, uint64_t>> seen;
  void on_event(uint64_t payload) override { seen.emplace_back(sim->now().ns(), payload); }
};

TEST(SimulationTest, OrdersByTimeThenSchedulingOrder) {
  Simulation sim;
  Recorder r;
  r.sim = &sim;
  sim.schedule_at(core::Time::from_ns(30), &r, 1);
  sim.schedule_at(core::Time::from_ns(10), &r, 2);
  sim.schedule_at(core::Time::from_ns(30), &r, 3);
  sim.schedule_at(core::Time::from_ns(10), &r, 4);
  sim.schedule_at(core::Time::from_ns(20), &r, 5);
  sim.run();
  const std::vector<std::pair<int64_t, uint64_t>> expected = {{10, 2}, {10, 4}, {20, 5}, {30, 1}, {30, 3}};
  EXPECT_EQ(r.seen, expected);
  EXPECT_EQ(sim.events_processed(), 5u);
  EXPECT_EQ(sim.now().ns(), 30);
}

TEST(SimulationTest, AReservedNumberOrdersTheEventAsIfScheduledWhenReserved) {
  // At t = 5 a handler takes a number, another event for t = 30 is scheduled, and only then is the
  // reserved event placed at t = 30: it runs first of the two, as if scheduled when it reserved.
  Simulation sim;
  Recorder r;
  r.sim = &sim;
  struct Late : EventHandler {
    Simulation* sim = nullptr;
    Recorder* r = nullptr;
    uint64_t seq = 0;
    void on_event(uint64_t payload) override {
      if (payload == 0) {
        seq = sim->reserve_seq();
        sim->schedule_at(core::Time::from_ns(30), r, 2);
        sim->schedule_at(core::Time::from_ns(5), this, 1);  // later in the same instant
      } else {
        sim->schedule_reserved(core::Time::from_ns(30), seq, r, 1);
      }
    }
  } late;
  late.sim = &sim;
  late.r = &r;
  sim.schedule_at(core::Time::from_ns(5), &late, 0);
  sim.run();
  const std::vector<std::pair<int64_t, uint64_t>> expected = {{30, 1}, {30, 2}};
  EXPECT_EQ(r.seen, expected);
  // Not after now, or a number never handed out: refused.
  Simulation s2;
  EXPECT_THROW(s2.schedule_reserved(core::Time::from_ns(0), s2.reserve_seq(), &r), core::Error);
  EXPECT_THROW(s2.schedule_reserved(core::Time::from_ns(10), 99, &r), core::Error);
}

TEST(SimulationTest, ManyTiesKeepInsertionOrder) {
  Simulation sim;
  Recorder r;
  r.sim = &sim;
  for (uint64_t i = 0; i < 1000; ++i) sim.schedule_at(core::Time::from_ns(static_cast<int64_t>(i % 7)), &r, i);
  sim.run();
  ASSERT_EQ(r.seen.size(), 1000u);
  for (size_t i = 1; i < r.seen.size(); ++i) {
    ASSERT_LE(r.seen[i - 1].first, r.seen[i].first);
    if (r.seen[i - 1].first == r.seen[i].first) {
      ASSERT_LT(r.seen[i - 1].second, r.seen[i].second);
    }
  }
}

struct Chain : EventHandler {
  Simulation* sim = nullptr;
  int left = 0;
  void on_event(uint64_t) override {
    if (--left > 0) sim->schedule_after(core::Duration::from_ns(5), this);
  }
};

TEST(SimulationTest, HandlersScheduleFollowUps) {
  Simulation sim;
  Chain c;
  c.sim = &sim;
  c.left = 4;
  sim.schedule_at(core::Time::from_ns(1), &c);
  sim.run();
  EXPECT_EQ(sim.now().ns(), 16);
  EXPECT_EQ(sim.events_processed(), 4u);
}

TEST(SimulationTest, SchedulingInThePastThrows) {
  Simulation sim;
  Recorder r;
  r.sim = &sim;
  sim.schedule_at(core::Time::from_ns(100), &r);
  sim.run();
  EXPECT_THROW(sim.schedule_at(core::Time::from_ns(99), &r), core::Error);
}

// A weak event (a client time-out timer) is handled in (time, seq) order among the others, but once
// only weak events are left the run ends without them: the clock stays at the last ordinary event.
TEST(SimulationTest, WeakEventsNeverKeepTheRunGoing) {
  Simulation sim;
  Recorder r;
  r.sim = &sim;
  sim.schedule_weak_at(core::Time::from_ns(15), &r, 1);
  sim.schedule_at(core::Time::from_ns(20), &r, 2);
  sim.schedule_weak_at(core::Time::from_ns(20), &r, 3);  // a tie after an ordinary event: still handled
  sim.schedule_weak_at(core::Time::from_ns(50), &r, 4);  // after the last ordinary event: never handled
  sim.schedule_at(core::Time::from_ns(10), &r, 5);
  sim.run();
  const std::vector<std::pair<int64_t, uint64_t>> expected = {{10, 5}, {15, 1}, {20, 2}};
  EXPECT_EQ(r.seen, expected);
  EXPECT_EQ(sim.now().ns(), 20);
  EXPECT_EQ(sim.events_processed(), 3u);
  EXPECT_EQ(sim.pending(), 0u);
  EXPECT_THROW(sim.schedule_weak_at(core::Time::from_ns(19), &r, 6), core::Error);
}

// A handler that schedules an ordinary event from a weak one keeps the run alive.
TEST(SimulationTest, AWeakEventsFollowUpKeepsTheRunGoing) {
  Simulation sim;
  struct Chain : EventHandler {
    Simulation* sim = nullptr;
    std::vector<int64_t> seen;
    void on_event(uint64_t payload) override {
      seen.push_back(sim->now().ns());
      if (payload == 1) sim->schedule_at(sim->now() + core::Duration::from_ns(100), this, 2);
    }
  } c;
  c.sim = &sim;
  sim.schedule_at(core::Time::from_ns(5), &c, 0);
  sim.schedule_weak_at(core::Time::from_ns(3), &c, 1);
  sim.run();
  EXPECT_EQ(c.seen, (std::vector<int64_t>{3, 5, 103}));
}

// The in-line rule (Simulation::push): a handler's first event runs next without a pass through
// the heap only when it comes before every queued event. Two handlers, A every 3, 3, 4, 10 ns from
// t = 0 and B at 10, then after 5 and 2 ns, and a weak event at t = 4. Worked out by hand:
// A@0 -> A@3 (before B@10: in line), A@3 -> A@6 (in line; the weak W@4 still runs first, weak
// events are compared at every step), A@6 -> A@10 ties B@10, which was scheduled first: it goes
// through the heap and runs after B. B@10 -> B@15 (A@10 is queued: heap), A@10 -> A@20 (B@15
// queued: heap), B@15 -> B@17 (before A@20: in line). Three in line out of the six follow-ups.
TEST(SimulationTest, TheNextEventInLineKeepsTheHeapsOrder) {
  Simulation sim;
  struct Script : EventHandler {
    Simulation* sim = nullptr;
    char name = '?';
    std::vector<int64_t> delays;
    size_t next = 0;
    std::vector<std::pair<char, int64_t>>* seen = nullptr;
    void on_event(uint64_t /*payload*/) override {
      seen->emplace_back(name, sim->now().ns());
      if (next < delays.size()) sim->schedule_after(core::Duration::from_ns(delays[next++]), this);
    }
  };
  std::vector<std::pair<char, int64_t>> seen;
  Script a, b, w;
  a.sim = b.sim = w.sim = &sim;
  a.seen = b.seen = w.seen = &seen;
  a.name = 'A';
  a.delays = {3, 3, 4, 10};
  b.name = 'B';
  b.delays = {5, 2};
  w.name = 'W';
  sim.schedule_at(core::Time::from_ns(0), &a);
  sim.schedule_at(core::Time::from_ns(10), &b);
  sim.schedule_weak_at(core::Time::from_ns(4), &w);
  sim.run();
  const std::vector<std::pair<char, int64_t>> expected = {{'A', 0},  {'A', 3},  {'W', 4},  {'A', 6}, {'B', 10},
                                                          {'A', 10}, {'B', 15}, {'B', 17}, {'A', 20}};
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(sim.events_processed(), 9u);
  EXPECT_EQ(sim.events_in_line(), 3u);
}

// Against an independent reference: the same handlers run by a plain ordered set of (t, seq),
// numbered in scheduling order. Each handler schedules zero to three follow-ups at delays of 0-3 ns
// (many ties, events in line and not), drawn from its own generator; the two orders must agree.
TEST(SimulationTest, InLineEventsRunInTheOrderOfAPlainPriorityQueue) {
  struct Script {
    uint64_t state;
    int budget;
    // The follow-ups of one event: delays in ns.
    std::vector<int64_t> follow_ups() {
      std::vector<int64_t> out;
      if (budget <= 0) return out;
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const int n = static_cast<int>((state >> 60) % 4);
      for (int i = 0; i < n && budget > 0; ++i, --budget) out.push_back(static_cast<int64_t>((state >> (40 - 4 * i)) % 4));
      return out;
    }
  };
  constexpr int kHandlers = 5;
  using Seen = std::vector<std::pair<int, int64_t>>;
  auto scripts = [] {
    std::vector<Script> s;
    for (int i = 0; i < kHandlers; ++i) s.push_back({0x9e3779b97f4a7c15ULL * (i + 1), 400});
    return s;
  };
  // The engine.
  Seen engine_seen;
  {
    Simulation sim;
    std::vector<Script> s = scripts();
    struct H : EventHandler {
      Simulation* sim;
      Script* script;
      int index;
      Seen* seen;
      void on_event(uint64_t) override {
        seen->emplace_back(index, sim->now().ns());
        for (int64_t d : script->follow_ups()) sim->schedule_after(core::Duration::from_ns(d), this);
      }
    };
    std::vector<H> hs(kHandlers);
    for (int i = 0; i < kHandlers; ++i) {
      hs[i].sim = &sim;
      hs[i].script = &s[i];
      hs[i].index = i;
      hs[i].seen = &engine_seen;
      sim.schedule_at(core::Time::from_ns(i % 2), &hs[i]);
    }
    sim.run();
    EXPECT_GT(sim.events_in_line(), 0u);
    EXPECT_LT(sim.events_in_line(), sim.events_processed());
  }
  // The reference.
  Seen reference;
  {
    std::vector<Script> s = scripts();
    std::set<std::tuple<int64_t, uint64_t, int>> queue;
    uint64_t seq = 0;
    for (int i = 0; i < kHandlers; ++i) queue.emplace(i % 2, seq++, i);
    while (!queue.empty()) {
      const auto [t, q, i] = *queue.begin();
      queue.erase(queue.begin());
      reference.emplace_back(i, t);
      for (int64_t d : s[i].follow_ups()) queue.emplace(t + d, seq++, i);
    }
  }
  ASSERT_GT(reference.size(), 1000u);
  EXPECT_EQ(engine_seen, reference);
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// A handler running its own next events in line (Simulation::in_line_horizon_ns, advance_in_line):
// H at 10 ns, ordinary events Y at 20 and X at 30, a weak W at 25. While H runs and has scheduled
// nothing, an event of its own is the next one while it comes before 20 (Y); H handles one at 15
// (the clock moves, the event counts), then one at 20 is refused (it would go behind Y). With a weak
// event at 12 instead, 12 is the limit. Once H schedules something, the rule no longer applies.
TEST(SimulationTest, AHandlerRunsItsOwnNextEventsOnlyBeforeEveryQueuedOne) {
  for (const int64_t weak_at : {25, 12}) {
    Simulation sim;
    struct Script : EventHandler {
      Simulation* sim = nullptr;
      int64_t weak_at = 0;
      std::vector<int64_t> seen;
      bool refused = false;
      int64_t horizon = 0, after_schedule = 0;
      void on_event(uint64_t payload) override {
        seen.push_back(sim->now().ns());
        if (payload != 1) return;
        horizon = sim->in_line_horizon_ns();
        sim->advance_in_line(core::Time::from_ns(11));
        seen.push_back(sim->now().ns());
        try {
          sim->advance_in_line(core::Time::from_ns(horizon));
        } catch (const core::Error&) {
          refused = true;
        }
        sim->schedule_after(core::Duration::from_ns(100), this, 0);
        after_schedule = sim->in_line_horizon_ns();
      }
    } h;
    h.sim = &sim;
    sim.schedule_at(core::Time::from_ns(10), &h, 1);
    sim.schedule_at(core::Time::from_ns(30), &h, 0);
    sim.schedule_at(core::Time::from_ns(20), &h, 0);
    sim.schedule_weak_at(core::Time::from_ns(weak_at), &h, 0);
    sim.run();
    EXPECT_EQ(h.horizon, weak_at == 25 ? 20 : 12);
    EXPECT_TRUE(h.refused);
    EXPECT_EQ(h.after_schedule, INT64_MIN);
    // 10, 11 in line, then the queue: 20, the weak one, 30, and H's 111 (weak events before it run).
    const std::vector<int64_t> expected =
        weak_at == 25 ? std::vector<int64_t>{10, 11, 20, 25, 30, 111} : std::vector<int64_t>{10, 11, 12, 20, 30, 111};
    EXPECT_EQ(h.seen, expected);
    EXPECT_EQ(sim.events_processed(), 6u);  // the event handled in line counts
  }
}

}  // namespace
}  // namespace servesim::sim
