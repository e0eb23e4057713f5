#include "sim/metrics/invariant_checker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/core/error.h"

namespace servesim::metrics {
namespace {

std::string time_str(core::Time t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "t = %lld ns (%.9f s)", static_cast<long long>(t.ns()), t.seconds());
  return buf;
}

std::string n(int64_t v) { return std::to_string(v); }
std::string n(uint64_t v) { return std::to_string(v); }
std::string n(uint32_t v) { return std::to_string(v); }

}  // namespace

void InvariantChecker::fail(const std::string& invariant, const std::string& what, core::Time t) const {
  throw core::Error("invariant violated [" + invariant + "] at " + time_str(t) + ": " + what +
                    " (a simulator bug, not an input problem: please report it with the configuration and seed)");
}

void InvariantChecker::advance_clock(core::Time t, const char* signal) {
  ++totals_.checks;
  if (t < now_)
    fail("clock",
         std::string(signal) + " signal at " + n(t.ns()) + " ns, after a signal at " + n(now_.ns()) +
             " ns: simulated time went back",
         t);
  now_ = t;
}

void InvariantChecker::advance_replica_clock(ReplicaView& rv, uint32_t index, core::Time t, const char* signal) {
  ++totals_.checks;
  if (t < rv.clock)
    fail("clock",
         std::string(signal) + " signal of replica " + n(index) + " at " + n(t.ns()) + " ns, after its signal at " +
             n(rv.clock.ns()) + " ns: simulated time went back (on the replica's own clock; replicas run ahead)",
         t);
  rv.clock = t;
}

InvariantChecker::ReplicaView& InvariantChecker::replica(uint32_t index, const char* signal, core::Time t) {
  ++totals_.checks;
  if (index >= replicas_.size() || !replicas_[index].seen)
    fail("replicas",
         std::string(signal) + " names replica " + n(index) + ", which never reported its state (" +
             n(static_cast<uint64_t>(replicas_.size())) + " replicas known)",
         t);
  return replicas_[index];
}

InvariantChecker::Pending& InvariantChecker::pending(uint64_t id, const char* signal, core::Time t) {
  ++totals_.checks;
  auto it = in_flight_.find(id);
  if (it == in_flight_.end())
    fail("requests",
         std::string(signal) + " for request " + n(id) + ", which is not in flight (" +
             (id < totals_.arrived ? "it already finished" : "it never arrived") + ")",
         t);
  return it->second;
}

void InvariantChecker::on_arrival(uint64_t id, core::Time t) {
  advance_clock(t, "arrival");
  check(id == totals_.arrived, "requests", t, [&] {
    return std::string("request " + n(id) + " arrived, expected id " + n(totals_.arrived) +
                       " (ids are the arrival order from 0)");
  });
  in_flight_.emplace(id, Pending{t, 0});
  ++totals_.arrived;
  if (next_) next_->on_arrival(id, t);
}

void InvariantChecker::on_request_done(const core::RequestRecord& r) {
  const bool completed = r.outcome == core::RequestOutcome::kCompleted;
  const bool timed_out = r.outcome == core::RequestOutcome::kTimedOut;
  const bool failed = r.outcome == core::RequestOutcome::kFailed;
  advance_clock(r.finish, "request-done");
  Pending& p = pending(r.id, "request-done", r.finish);
  const auto who = [&] {
    return "request " + n(r.id) + " (" + std::string(core::outcome_name(r.outcome)) + ", replica " + n(r.replica) + ")";
  };
  replica(r.replica, "request-done", r.finish);
  check(r.arrival == p.arrival, "requests", r.finish, [&] {
    return std::string(who() + " reports arrival " + n(r.arrival.ns()) + " ns, but arrived at " + n(p.arrival.ns()) +
                       " ns");
  });
  check(r.prompt_tokens >= 1 && r.output_tokens >= 1, "tokens", r.finish, [&] {
    return std::string(who() + " has " + n(r.prompt_tokens) + " prompt and " + n(r.output_tokens) +
                       " output tokens (each must be >= 1)");
  });
  check(r.preemptions == p.preemptions, "requests", r.finish, [&] {
    return std::string(who() + " reports " + n(r.preemptions) + " preemptions, " + n(p.preemptions) +
                       " were signalled");
  });
  check(r.cached_tokens >= 0 && r.cached_tokens <= r.prompt_tokens, "prefix", r.finish, [&] {
    return std::string(who() + " reports " + n(r.cached_tokens) + " cached tokens of a " + n(r.prompt_tokens) +
                       "-token prompt");
  });
  check(std::fabs(r.kv_transfer_bytes - p.kv_transfer_bytes) <= 1e-9 * std::fabs(p.kv_transfer_bytes), "transfers",
        r.finish, [&] {
          return std::string(who() + " reports " + std::to_string(r.kv_transfer_bytes) +
                             " KV bytes transferred, its transfers moved " + std::to_string(p.kv_transfer_bytes));
        });
  // Client retries: a first attempt was sent at its arrival, a retry after it; only a failure that
  // a client can retry (time-out, shed, lost with a replica) is retried.
  check(r.attempt == 0 || r.first_sent <= r.arrival, "requests", r.finish, [&] {
    return std::string(who() + " is attempt " + n(r.attempt) + ", first sent at " + n(r.first_sent.ns()) +
                       " ns, arrived at " + n(r.arrival.ns()) + " ns");
  });
  check(!r.retried || timed_out || failed || r.outcome == core::RequestOutcome::kRejectedAdmission, "requests",
        r.finish, [&] { return std::string(who() + " was retried, but its outcome is not one a client retries"); });
  check(r.cached_tokens == (p.looked_up ? p.first_hit : 0), "prefix", r.finish, [&] {
    return std::string(who() + " reports " + n(r.cached_tokens) + " cached tokens, its first lookup hit " +
                       (p.looked_up ? n(p.first_hit) : std::string("nothing (none was signalled)")));
  });
  totals_.cached_tokens += r.cached_tokens;
  if (completed) {
    check(r.arrival < r.first_token && r.first_token <= r.finish, "requests", r.finish, [&] {
      return std::string(who() + ": expected arrival < first token <= finish, got " + n(r.arrival.ns()) + ", " +
                         n(r.first_token.ns()) + ", " + n(r.finish.ns()) + " ns");
    });
    // It leaves when an iteration of the replica that produced its last token ends.
    ReplicaView& dv = replica(r.decode_replica, "request-done (decode replica)", r.finish);
    if (run_ahead_) {
      // The replica's iterations may have run ahead: one of them, not behind the global clock (a
      // later completion finishes no earlier), ends at the finish. Those ending before it are done
      // with.
      while (!dv.ends.empty() && dv.ends.front() < r.finish.ns()) dv.ends.pop_front();
      check(!dv.ends.empty() && dv.ends.front() == r.finish.ns(), "requests", r.finish, [&] {
        return std::string(who() + " finished at " + n(r.finish.ns()) + " ns, but no iteration of replica " +
                           n(r.decode_replica) + " ends then (its next one " +
                           (dv.ends.empty() ? std::string("has not been signalled")
                                            : "ends at " + n(dv.ends.front()) + " ns") +
                           ")");
      });
    } else {
      check(dv.iterated && dv.iteration_end == r.finish, "requests", r.finish, [&] {
        return std::string(who() + " finished at " + n(r.finish.ns()) + " ns, but the last iteration of replica " +
                           n(r.decode_replica) + " ended at " +
                           (dv.iterated ? n(dv.iteration_end.ns()) + " ns" : std::string("(none ran)")));
      });
    }
    check((r.finish - r.first_token).ns() >= r.output_tokens - 1, "tokens", r.finish, [&] {
      return std::string(who() + " emitted " + n(r.output_tokens) + " tokens within " +
                         n((r.finish - r.first_token).ns()) +
                         " ns of its first: consecutive tokens must be >= 1 ns apart");
    });
    ++totals_.completed;
    totals_.completed_prompt_tokens += r.prompt_tokens;
    totals_.completed_output_tokens += r.output_tokens;
  } else if (timed_out) {
    check(r.arrival <= r.finish && r.arrival < r.client_finish, "requests", r.finish, [&] {
      return std::string(who() + ": expected arrival <= finish and arrival < the client's give-up, got arrival " +
                         n(r.arrival.ns()) + ", finish " + n(r.finish.ns()) + ", client gave up at " +
                         n(r.client_finish.ns()) + " ns");
    });
    check(r.generated_tokens >= 0 && r.generated_tokens <= r.output_tokens, "tokens", r.finish, [&] {
      return std::string(who() + " produced " + n(r.generated_tokens) + " of " + n(r.output_tokens) +
                         " output tokens");
    });
    check(r.generated_tokens > 0 ? r.arrival < r.first_token && r.first_token <= r.finish : r.first_token == r.finish,
          "requests", r.finish, [&] {
            return std::string(who() + " produced " + n(r.generated_tokens) + " tokens, first at " +
                               n(r.first_token.ns()) + " ns (arrival " + n(r.arrival.ns()) + ", finish " +
                               n(r.finish.ns()) + " ns)");
          });
    ++totals_.timed_out;
    totals_.timed_out_gaps += std::max<int64_t>(0, r.generated_tokens - 1);
  } else if (failed) {
    // Lost with a failed replica: it leaves at the failure, with the tokens it had produced.
    check(r.arrival <= r.finish && r.client_finish == r.finish, "requests", r.finish, [&] {
      return std::string(who() + ": expected arrival <= finish = the client's error, got arrival " +
                         n(r.arrival.ns()) + ", finish " + n(r.finish.ns()) + ", client " + n(r.client_finish.ns()) +
                         " ns");
    });
    check(r.generated_tokens >= 0 && r.generated_tokens < r.output_tokens, "tokens", r.finish, [&] {
      return std::string(who() + " failed after " + n(r.generated_tokens) + " of " + n(r.output_tokens) +
                         " output tokens");
    });
    check(r.generated_tokens > 0 ? r.arrival < r.first_token && r.first_token <= r.finish : r.first_token == r.finish,
          "requests", r.finish, [&] {
            return std::string(who() + " produced " + n(r.generated_tokens) + " tokens, first at " +
                               n(r.first_token.ns()) + " ns (finish " + n(r.finish.ns()) + " ns)");
          });
    ++totals_.failed;
    totals_.timed_out_gaps += std::max<int64_t>(0, r.generated_tokens - 1);
  } else {
    check(r.first_token == r.arrival && r.finish == r.arrival, "requests", r.finish, [&] {
      return std::string(who() + ": a rejected request leaves when it arrives (first token and finish = arrival " +
                         n(r.arrival.ns()) + " ns), got first token " + n(r.first_token.ns()) + ", finish " +
                         n(r.finish.ns()) + " ns");
    });
    check(r.preemptions == 0, "requests", r.finish,
          [&] { return std::string(who() + " was rejected after " + n(r.preemptions) + " preemptions"); });
    ++totals_.rejected;
  }
  // arrived = completed + rejected + in flight holds by construction from here on: the exactly-once
  // check above is what can fail.
  in_flight_.erase(r.id);
  if (next_) next_->on_request_done(r);
}

void InvariantChecker::on_preempt(uint64_t id, uint32_t replica_index, core::Time t) {
  advance_clock(t, "preemption");
  replica(replica_index, "preemption", t);
  ++pending(id, "preemption", t).preemptions;
  ++totals_.preemptions;
  if (next_) next_->on_preempt(id, replica_index, t);
}

void InvariantChecker::on_iteration(const core::IterationRecord& it) {
  if (!run_ahead_) advance_clock(it.start, "iteration");
  ReplicaView& rv = replica(it.replica, "iteration", it.start);
  if (run_ahead_) advance_replica_clock(rv, it.replica, it.start, "iteration");
  const auto who = [&] { return "iteration of replica " + n(it.replica) + " starting at " + n(it.start.ns()) + " ns"; };
  check(it.duration.ns() > 0, "iterations", it.start,
        [&] { return std::string(who() + " lasts " + n(it.duration.ns()) + " ns (must be > 0)"); });
  check(!rv.iterated || it.start >= rv.iteration_end, "iterations", it.start, [&] {
    return std::string(who() + " overlaps the replica's previous iteration, which ends at " + n(rv.iteration_end.ns()) +
                       " ns");
  });
  const int64_t prefill_seqs = it.batch_size - it.decode_tokens;
  check(it.batch_size >= 1 && it.decode_tokens >= 0 && it.prefill_tokens >= 0 && prefill_seqs >= 0 &&
            prefill_seqs <= it.prefill_tokens && (prefill_seqs == 0) == (it.prefill_tokens == 0),
        "iterations", it.start, [&] {
          return std::string(who() + " has batch size " + n(it.batch_size) + ", " + n(it.decode_tokens) +
                             " decode tokens and " + n(it.prefill_tokens) +
                             " prefill tokens: every sequence must decode one token or prefill at least one");
        });
  check(it.verify_seqs >= 0 && it.verify_seqs <= it.decode_tokens && it.draft_tokens >= it.verify_seqs &&
            (it.draft_tokens == 0) == (it.verify_seqs == 0) && it.accepted_tokens >= 0 &&
            it.accepted_tokens <= it.draft_tokens && it.extra_decode_tokens >= 0 &&
            it.extra_decode_tokens <= it.accepted_tokens,
        "iterations", it.start, [&] {
          return std::string(who() + " has " + n(it.verify_seqs) + " of its " + n(it.decode_tokens) +
                             " decodes verifying " + n(it.draft_tokens) + " draft tokens, " + n(it.accepted_tokens) +
                             " accepted, " + n(it.extra_decode_tokens) +
                             " emitted beyond one per decode: a verifying decode has at least one draft, accepts "
                             "at most its drafts and emits at most what it accepts");
        });
  check(std::isfinite(it.flops) && it.flops >= 0 && std::isfinite(it.bytes) && it.bytes >= 0, "iterations", it.start,
        [&] {
          return std::string(who() + " reports " + std::to_string(it.flops) + " FLOPs and " + std::to_string(it.bytes) +
                             " bytes (must be finite and >= 0)");
        });
  int64_t end = 0;
  check(!__builtin_add_overflow(it.start.ns(), it.duration.ns(), &end), "clock", it.start,
        [&] { return std::string(who() + " ends beyond the largest representable time"); });
  check(!rv.down, "fleet", it.start,
        [&] { return std::string(who() + ": the replica is down (failed, not repaired)"); });
  check(rv.phase == ReplicaView::Phase::kUp || rv.phase == ReplicaView::Phase::kDraining, "fleet", it.start,
        [&] { return std::string(who() + ": the replica is not in service (off, or still starting)"); });
  rv.iteration_end = core::Time::from_ns(end);
  rv.iterated = true;
  if (run_ahead_) {
    while (!rv.ends.empty() && rv.ends.front() < now_.ns()) rv.ends.pop_front();  // no completion can end these
    rv.ends.push_back(end);
  }
  rv.last_decodes = it.decode_tokens;
  rv.last_output = it.decode_tokens + it.extra_decode_tokens;
  ++totals_.iterations;
  totals_.decode_tokens += it.decode_tokens;
  totals_.decode_output += it.decode_tokens + it.extra_decode_tokens;
  totals_.prefill_tokens += it.prefill_tokens;
  if (next_) next_->on_iteration(it);
}

void InvariantChecker::on_token_gaps(std::span<const core::GapRun> runs) {
  for (const core::GapRun& run : runs) {
    check(run.gap_ns > 0, "tokens", now_, [&] {
      return std::string("an inter-token gap of " + n(run.gap_ns) + " ns (consecutive tokens must be > 0 ns apart)");
    });
    check(run.count > 0, "tokens", now_, [&] { return std::string("a run of " + n(run.count) + " inter-token gaps"); });
    check(run.tokens > 0, "tokens", now_,
          [&] { return std::string("inter-token gaps delivering " + n(run.tokens) + " tokens each (must be >= 1)"); });
    totals_.token_gaps += static_cast<uint64_t>(std::max<int64_t>(0, run.count));
    totals_.gap_tokens += std::max<int64_t>(0, run.count) * std::max<int64_t>(0, run.tokens);
  }
  if (next_) next_->on_token_gaps(runs);
}

void InvariantChecker::on_replica_state(const core::ReplicaState& s) {
  if (!run_ahead_) advance_clock(s.time, "replica-state");
  if (s.replica >= replicas_.size()) replicas_.resize(s.replica + 1);
  ReplicaView& rv = replicas_[s.replica];
  if (run_ahead_) advance_replica_clock(rv, s.replica, s.time, "replica-state");
  const auto who = [&] { return "replica " + n(s.replica); };
  if (rv.seen) {
    check(s.kv_blocks_total == rv.state.kv_blocks_total, "kv", s.time, [&] {
      return std::string(who() + "'s KV capacity changed from " + n(rv.state.kv_blocks_total) + " to " +
                         n(s.kv_blocks_total) + " blocks");
    });
  } else {
    check(s.kv_blocks_total >= 0, "kv", s.time,
          [&] { return std::string(who() + " reports a capacity of " + n(s.kv_blocks_total) + " KV blocks"); });
  }
  check(s.kv_blocks_used >= 0 && s.kv_blocks_used <= s.kv_blocks_total, "kv", s.time, [&] {
    return std::string(who() + " reports " + n(s.kv_blocks_used) + " KV blocks in use of " + n(s.kv_blocks_total) +
                       " (must be within [0, capacity])");
  });
  check(s.queued >= 0 && s.running >= 0, "requests", s.time, [&] {
    return std::string(who() + " reports " + n(s.queued) + " queued and " + n(s.running) + " running requests");
  });
  replica_queued_running_ += (s.queued + s.running) - (rv.seen ? rv.state.queued + rv.state.running : 0);
  check(replica_queued_running_ <= static_cast<int64_t>(in_flight_.size()), "requests", s.time, [&] {
    return std::string("the replicas hold " + n(replica_queued_running_) + " queued or running requests, but only " +
                       n(static_cast<uint64_t>(in_flight_.size())) + " are in flight (arrived " + n(totals_.arrived) +
                       " - completed " + n(totals_.completed) + " - rejected " + n(totals_.rejected) +
                       " - timed out " + n(totals_.timed_out) + ")");
  });
  if (rv.down)
    check(s.queued == 0 && s.running == 0 && s.kv_blocks_used == 0, "fleet", s.time, [&] {
      return std::string(who() + " is down (failed, not repaired) but reports " + n(s.queued) + " queued, " +
                         n(s.running) + " running, " + n(s.kv_blocks_used) + " KV blocks");
    });
  rv.seen = true;
  rv.state = s;
  if (next_) next_->on_replica_state(s);
}

void InvariantChecker::on_prefix_lookup(const core::PrefixLookup& l) {
  replica(l.replica, "prefix-lookup", now_);
  check(l.prompt_units >= 0 && l.matched_units >= 0 && l.matched_units <= l.prompt_units && l.hit_tokens >= 0 &&
            l.hit_tokens <= l.prompt_tokens && std::isfinite(l.saved_flops) && l.saved_flops >= 0,
        "prefix", now_, [&] {
          return std::string("a lookup on replica " + n(l.replica) + " matched " + n(l.matched_units) + " of " +
                             n(l.prompt_units) + " units, " + n(l.hit_tokens) + " of " + n(l.prompt_tokens) +
                             " prompt tokens, saving " + std::to_string(l.saved_flops) + " FLOPs");
        });
  check(l.host_hit_tokens >= 0 && l.store_hit_tokens >= 0 && l.nvme_hit_tokens >= 0 &&
            l.host_hit_tokens + l.store_hit_tokens + l.nvme_hit_tokens <= l.hit_tokens,
        "prefix", now_, [&] {
          return std::string("a lookup on replica " + n(l.replica) + " hit " + n(l.hit_tokens) + " tokens, of which " +
                             n(l.host_hit_tokens) + " host, " + n(l.store_hit_tokens) + " store and " +
                             n(l.nvme_hit_tokens) + " NVMe tokens (the tiers' hits are part of the hit)");
        });
  if (l.reload) {
    // A request admitted again whose hits were decided again: its KV was dropped before.
    ++totals_.reloads;
    totals_.reload_hit_tokens += l.hit_tokens;
    check(totals_.reloads <= totals_.preemptions + totals_.reroutes, "prefix", now_, [&] {
      return std::string(n(totals_.reloads) + " reload lookups (admissions again after a recompute preemption or a "
                         "failover), but only " + n(totals_.preemptions) + " preemptions and " +
                         n(totals_.reroutes) + " failovers");
    });
  } else {
    // A request's first lookup, signalled once (its hits count in the hit rates once).
    Pending& p = pending(l.id, "prefix-lookup", now_);
    check(!p.looked_up, "prefix", now_, [&] {
      return std::string("request " + n(l.id) + " signalled a second first lookup (hit " + n(l.hit_tokens) +
                         " tokens; the first hit " + n(p.first_hit) + ")");
    });
    p.looked_up = true;
    p.first_hit = l.hit_tokens;
    ++totals_.prefix_lookups;
    totals_.prefix_hit_tokens += l.hit_tokens;
  }
  if (next_) next_->on_prefix_lookup(l);
}

void InvariantChecker::on_kv_transfer(const core::KvTransfer& t) {
  Pending& p = pending(t.id, "kv-transfer", t.start);
  replica(t.from_replica, "kv-transfer (from)", t.start);
  replica(t.to_replica, "kv-transfer (to)", t.start);
  check(t.from_replica != t.to_replica && t.end >= t.start && std::isfinite(t.bytes) && t.bytes >= 0, "transfers",
        t.start, [&] {
          return std::string("request " + n(t.id) + "'s KV transfer from replica " + n(t.from_replica) + " to " +
                             n(t.to_replica) + " moves " + std::to_string(t.bytes) + " bytes from " + n(t.start.ns()) +
                             " to " + n(t.end.ns()) + " ns");
        });
  for (const uint32_t end : {t.from_replica, t.to_replica}) {
    const ReplicaView& rv = replicas_[end];
    check(!rv.down && (!rv.failed || rv.failed_at <= t.start), "transfers", t.end, [&] {
      return std::string("request " + n(t.id) + "'s KV transfer from replica " + n(t.from_replica) + " to " +
                         n(t.to_replica) + " (" + n(t.start.ns()) + " to " + n(t.end.ns()) + " ns) was in flight when replica " +
                         n(end) + " failed (at " + n(rv.failed_at.ns()) + " ns): a failure calls its transfers off");
    });
  }
  p.kv_transfer_bytes += t.bytes;
  ++totals_.kv_transfers;
  totals_.kv_transfer_bytes += t.bytes;
  if (next_) next_->on_kv_transfer(t);
}

void InvariantChecker::on_fleet_event(const core::FleetEvent& e) {
  advance_clock(e.time, "fleet");
  ReplicaView& rv = replica(e.replica, "fleet", e.time);
  const auto who = [&] {
    return std::string(core::fleet_event_name(e.kind)) + " of replica " + n(e.replica);
  };
  // Running ahead, a replica must stop at its failure, speed change or going off: its signals so far
  // are then no later than the event (so its last state is its state at the event).
  if (run_ahead_ && (e.kind == core::FleetEventKind::kReplicaDown || e.kind == core::FleetEventKind::kReplicaSpeed ||
                     e.kind == core::FleetEventKind::kReplicaOff))
    check(rv.clock <= e.time, "clock", e.time, [&] {
      return who() + ": the replica has already signalled at " + n(rv.clock.ns()) +
             " ns, past the event (it ran ahead across it)";
    });
  switch (e.kind) {
    case core::FleetEventKind::kReplicaDown:
      check(!rv.down, "fleet", e.time, [&] { return who() + ": it is down already"; });
      // The iteration in progress is lost: its decodes produce no tokens.
      if (rv.iterated && rv.iteration_end > e.time) {
        totals_.lost_decodes += rv.last_decodes;
        totals_.lost_output += rv.last_output;
      }
      check(rv.state.queued == 0 && rv.state.running == 0 && rv.state.kv_blocks_used == 0, "fleet", e.time, [&] {
        return who() + ": a failed replica must hold nothing, but it reports " + n(rv.state.queued) + " queued, " +
               n(rv.state.running) + " running, " + n(rv.state.kv_blocks_used) + " KV blocks";
      });
      rv.down = true;
      rv.failed = true;
      rv.failed_at = e.time;
      ++totals_.replica_failures;
      break;
    case core::FleetEventKind::kReplicaUp:
      check(rv.down && (!rv.iterated || e.time >= rv.iteration_end), "fleet", e.time,
            [&] { return who() + ": it was not down, or comes back before its lost iteration's end"; });
      rv.down = false;
      break;
    case core::FleetEventKind::kReplicaSpeed:
      check(e.value > 0 && e.value <= 1, "fleet", e.time,
            [&] { return who() + ": speed " + std::to_string(e.value) + " is not in (0, 1]"; });
      break;
    case core::FleetEventKind::kRequestRerouted:
      pending(e.request, "fleet (rerouted)", e.time);
      check(rv.down, "fleet", e.time, [&] { return who() + ": request " + n(e.request) + " left a replica that is up"; });
      ++totals_.reroutes;
      break;
    case core::FleetEventKind::kLinkDown:
    case core::FleetEventKind::kLinkUp:
      break;
    case core::FleetEventKind::kLinkSpeed:
      check(e.value > 0 && e.value <= 1, "fleet", e.time,
            [&] { return "link_speed of link " + n(e.request) + ": speed " + std::to_string(e.value) + " is not in (0, 1]"; });
      break;  // the network's: nothing a replica or request signals depends on it
    case core::FleetEventKind::kRequestRetried: {
      const Pending& p = pending(e.request, "fleet (retried)", e.time);
      check(p.arrival == e.time && e.value >= 1, "fleet", e.time, [&] {
        return who() + ": request " + n(e.request) + " (arrived at " + n(p.arrival.ns()) + " ns) is retry " +
               std::to_string(e.value) + "; a retry is signalled at its send and counts from 1";
      });
      break;
    }
    case core::FleetEventKind::kReplicaProvision:
      check(rv.phase == ReplicaView::Phase::kOff && !rv.down, "fleet", e.time,
            [&] { return who() + ": it is not off, or is down (failed and not repaired)"; });
      rv.phase = ReplicaView::Phase::kStarting;
      break;
    case core::FleetEventKind::kReplicaReady:
      check(rv.phase == ReplicaView::Phase::kStarting || rv.phase == ReplicaView::Phase::kDraining, "fleet", e.time,
            [&] { return who() + ": it is neither starting nor draining"; });
      rv.phase = ReplicaView::Phase::kUp;
      break;
    case core::FleetEventKind::kReplicaDrain:
      check(rv.phase == ReplicaView::Phase::kUp, "fleet", e.time, [&] { return who() + ": it is not up"; });
      rv.phase = ReplicaView::Phase::kDraining;
      break;
    case core::FleetEventKind::kReplicaOff:
      // From draining (once empty), starting (called off), up before anything ran (at the start), or
      // any phase in service when it has just failed ([faults]: it leaves the pool).
      check(rv.phase == ReplicaView::Phase::kDraining || rv.phase == ReplicaView::Phase::kStarting ||
                (rv.phase == ReplicaView::Phase::kUp && !rv.iterated && e.time.ns() == 0) ||
                (rv.down && rv.phase != ReplicaView::Phase::kOff),
            "fleet", e.time, [&] { return who() + ": only a draining or starting replica goes off"; });
      check(rv.state.queued == 0 && rv.state.running == 0 && rv.state.kv_blocks_used == 0, "fleet", e.time, [&] {
        return who() + ": a replica going off must hold nothing, but it reports " + n(rv.state.queued) + " queued, " +
               n(rv.state.running) + " running, " + n(rv.state.kv_blocks_used) + " KV blocks";
      });
      rv.phase = ReplicaView::Phase::kOff;
      break;
  }
  if (next_) next_->on_fleet_event(e);
}

void InvariantChecker::check_drained() {
  if (!in_flight_.empty()) {
    std::string ids;
    int listed = 0;
    for (const auto& [id, p] : in_flight_) {
      if (listed++ == 5) {
        ids += ", ...";
        break;
      }
      ids += (ids.empty() ? "" : ", ") + n(id);
    }
    fail("requests",
         n(static_cast<uint64_t>(in_flight_.size())) +
             " requests arrived but never completed, were rejected nor timed out (ids " + ids + "); arrived " +
             n(totals_.arrived) + ", completed " + n(totals_.completed) + ", rejected " + n(totals_.rejected) +
             ", timed out " + n(totals_.timed_out),
         now_);
  }
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const ReplicaView& rv = replicas_[i];
    check(rv.seen, "replicas", now_,
          [&] { return std::string("replica " + n(static_cast<uint64_t>(i)) + " never reported its state"); });
    check(rv.state.queued == 0 && rv.state.running == 0 && rv.state.kv_blocks_used == 0, "kv", now_, [&] {
      return std::string("after the run replica " + n(static_cast<uint64_t>(i)) + " reports " + n(rv.state.queued) +
                         " queued, " + n(rv.state.running) + " running, " + n(rv.state.kv_blocks_used) +
                         " KV blocks in use (expected 0)");
    });
  }
  // Every token but each request's first arrives after a gap, alone or with others in one chunk.
  const int64_t expected_tokens =
      totals_.completed_output_tokens - static_cast<int64_t>(totals_.completed) + totals_.timed_out_gaps;
  const int64_t tokens = totals_.gap_tokens;
  const int64_t gaps = static_cast<int64_t>(totals_.token_gaps);
  check(tokens == expected_tokens, "tokens", now_, [&] {
    return std::string("the completed requests produced " + n(totals_.completed_output_tokens) +
                       " output tokens and the timed-out ones " + n(totals_.timed_out_gaps) +
                       " after their first, so " + n(expected_tokens) +
                       " after an inter-token gap (all but each request's first token), but the " + n(gaps) +
                       " gaps signalled delivered " + n(tokens));
  });
  // Each preemption or failover may turn one more token into a prefill's; a failure loses the
  // decodes (and their accepted draft tokens) of the iteration it interrupts.
  const int64_t output = totals_.decode_output - totals_.lost_output;
  const int64_t slack = static_cast<int64_t>(totals_.preemptions) + static_cast<int64_t>(totals_.reroutes);
  check(output <= tokens && tokens <= output + slack, "tokens", now_, [&] {
    return std::string(n(totals_.decode_output) + " decode tokens (" + n(totals_.lost_output) +
                       " lost with failed replicas), " + n(totals_.preemptions) + " preemptions and " +
                       n(totals_.reroutes) + " failovers cannot produce " + n(tokens) +
                       " tokens after inter-token gaps (decodes <= tokens <= decodes + preemptions + failovers)");
  });
  const int64_t decodes = totals_.decode_tokens - totals_.lost_decodes;
  check(decodes <= gaps && gaps <= decodes + slack,
        "tokens", now_, [&] {
          return std::string(n(totals_.decode_tokens) + " decode steps (" + n(totals_.lost_decodes) +
                             " lost with failed replicas), " + n(totals_.preemptions) + " preemptions and " +
                             n(totals_.reroutes) + " failovers cannot produce " + n(gaps) +
                             " inter-token gaps (one per step: steps <= gaps <= steps + preemptions + failovers)");
        });
  check(totals_.prefix_hit_tokens == totals_.cached_tokens, "prefix", now_, [&] {
    return std::string(n(totals_.prefix_lookups) + " prefix lookups hit " + n(totals_.prefix_hit_tokens) +
                       " tokens, but the requests' records report " + n(totals_.cached_tokens) + " cached tokens");
  });
  check(totals_.prefill_tokens >=
            totals_.completed_prompt_tokens - totals_.cached_tokens - totals_.reload_hit_tokens,
        "tokens", now_, [&] {
          return std::string("iterations prefilled " + n(totals_.prefill_tokens) + " tokens, fewer than the " +
                             n(totals_.completed_prompt_tokens) + " prompt tokens of the completed requests less the " +
                             n(totals_.cached_tokens) + " a prefix cache spared and the " +
                             n(totals_.reload_hit_tokens) + " its reloads' hits spared");
        });
}

}  // namespace servesim::metrics
