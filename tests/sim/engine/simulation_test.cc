#include "sim/engine/simulation.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace servesim::sim
