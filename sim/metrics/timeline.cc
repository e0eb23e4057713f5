#include "sim/metrics/timeline.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/output_file.h"

namespace servesim::metrics {
namespace {

// Trace-event timestamps are microseconds; print nanoseconds exactly as "us.fff".
std::string micros(int64_t ns) {
  char buf[32];
  const int64_t whole = ns / 1000, frac = ns % 1000;
  if (ns < 0) return core::format_double(static_cast<double>(ns) / 1000.0);
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(whole), static_cast<long long>(frac));
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

constexpr int kIterationsTid = 0;
constexpr int kRequestsTid = 1;
constexpr int kEventsTid = 2;

}  // namespace

bool TimelineRecorder::take(uint64_t events) {
  if (kept_ + events > max_events_) {
    dropped_ += events;
    return false;
  }
  kept_ += events;
  return true;
}

void TimelineRecorder::on_request_done(const core::RequestRecord& r) {
  replicas_seen_ = std::max({replicas_seen_, r.replica + 1, r.decode_replica + 1});
  const bool completed = r.outcome == core::RequestOutcome::kCompleted;
  const bool handed_off = completed && r.decode_replica != r.replica;
  if (!take(!completed ? 1 : handed_off ? 4 : 6)) return;
  Record rec{};
  rec.kind = completed ? Kind::kRequest : Kind::kRejected;
  rec.outcome = static_cast<uint8_t>(r.outcome);
  rec.replica = r.replica;
  rec.other = r.decode_replica;
  rec.preemptions = r.preemptions;
  rec.t0_ns = r.arrival.ns();
  rec.t1_ns = r.first_token.ns();
  rec.t2_ns = r.finish.ns();
  rec.id = r.id;
  rec.a = r.prompt_tokens;
  rec.b = r.output_tokens;
  records_.push_back(rec);
}

void TimelineRecorder::on_preempt(uint64_t id, uint32_t replica, core::Time t) {
  replicas_seen_ = std::max(replicas_seen_, replica + 1);
  if (!take(1)) return;
  Record rec{};
  rec.kind = Kind::kPreempt;
  rec.replica = replica;
  rec.t0_ns = t.ns();
  rec.id = id;
  records_.push_back(rec);
}

void TimelineRecorder::on_fleet_event(const core::FleetEvent& e) {
  replicas_seen_ = std::max(replicas_seen_, e.replica + 1);
  if (!take(1)) return;
  Record rec{};
  rec.kind = Kind::kFleet;
  rec.outcome = static_cast<uint8_t>(e.kind);
  rec.replica = e.replica;
  rec.t0_ns = e.time.ns();
  rec.id = e.request;
  rec.a = static_cast<int64_t>(e.value);
  records_.push_back(rec);
}

void TimelineRecorder::on_iteration(const core::IterationRecord& it) {
  replicas_seen_ = std::max(replicas_seen_, it.replica + 1);
  if (!take(1)) return;
  Record rec{};
  rec.kind = Kind::kIteration;
  rec.replica = it.replica;
  rec.other = static_cast<uint32_t>(it.batch_size);
  rec.t0_ns = it.start.ns();
  rec.t1_ns = it.start.ns() + it.duration.ns();
  rec.a = it.prefill_tokens;
  rec.b = it.decode_tokens;
  records_.push_back(rec);
}

void TimelineRecorder::on_kv_transfer(const core::KvTransfer& t) {
  replicas_seen_ = std::max({replicas_seen_, t.from_replica + 1, t.to_replica + 1});
  if (!take(1)) return;
  Record rec{};
  rec.kind = Kind::kKvTransfer;
  rec.replica = t.to_replica;
  rec.other = t.from_replica;
  rec.t0_ns = t.start.ns();
  rec.t1_ns = t.end.ns();
  rec.id = t.id;
  rec.a = static_cast<int64_t>(t.bytes);
  records_.push_back(rec);
}

void TimelineRecorder::write(const std::string& path, const RunInfo& info) const {
  core::AtomicFile file(path, kTimelineWhat, core::starts_with(kTimelinePrefix));
  write(file.stream(), info);
  file.publish();
}

void TimelineRecorder::write(std::ostream& out, const RunInfo& info) const {
  out << kTimelinePrefix << " " << info.version
      << "\",\"config_hash\":" << json_string(info.config_hash) << ",\"seed\":" << info.seed
      << ",\"max_events\":" << max_events_ << ",\"events_kept\":" << kept_ << ",\"events_dropped\":" << dropped_
      << ",\"note\":"
      << json_string(dropped_ ? "truncated: the first " + std::to_string(kept_) +
                                    " trace events in simulation order are kept; raise --timeline-max-events "
                                    "for more"
                              : "complete")
      << "},\n\"traceEvents\":[\n";
  bool first = true;
  auto event = [&](const std::string& body) {
    out << (first ? "" : ",\n") << "{" << body << "}";
    first = false;
  };
  for (uint32_t r = 0; r < replicas_seen_; ++r) {
    const std::string pid = "\"pid\":" + std::to_string(r);
    event("\"ph\":\"M\",\"name\":\"process_name\"," + pid + ",\"args\":{\"name\":\"replica " + std::to_string(r) +
          "\"}");
    event("\"ph\":\"M\",\"name\":\"process_sort_index\"," + pid + ",\"args\":{\"sort_index\":" + std::to_string(r) +
          "}");
    const std::pair<int, const char*> threads[] = {
        {kIterationsTid, "iterations"}, {kRequestsTid, "requests"}, {kEventsTid, "preemptions and KV transfers"}};
    for (const auto& [tid, name] : threads)
      event("\"ph\":\"M\",\"name\":\"thread_name\"," + pid + ",\"tid\":" + std::to_string(tid) +
            ",\"args\":{\"name\":\"" + name + "\"}");
  }
  for (const Record& rec : records_) {
    const std::string pid = "\"pid\":" + std::to_string(rec.replica);
    switch (rec.kind) {
      case Kind::kIteration:
        event("\"ph\":\"X\",\"cat\":\"iteration\",\"name\":\"" +
              std::string(rec.a > 0 ? (rec.b > 0 ? "mixed" : "prefill") : "decode") + "\"," + pid +
              ",\"tid\":0,\"ts\":" + micros(rec.t0_ns) + ",\"dur\":" + micros(rec.t1_ns - rec.t0_ns) +
              ",\"args\":{\"prefill_tokens\":" + std::to_string(rec.a) + ",\"decode_tokens\":" +
              std::to_string(rec.b) + ",\"batch\":" + std::to_string(rec.other) + "}");
        break;
      case Kind::kRequest: {
        const std::string id = "\"id\":" + std::to_string(rec.id);
        if (rec.other != rec.replica) {
          // Disaggregated: the prefill on the prefill replica, the decode (from the first token, so
          // including the KV transfer) on the decode replica. Async ids are per process.
          const std::string args = ",\"args\":{\"prompt_tokens\":" + std::to_string(rec.a) +
                                   ",\"output_tokens\":" + std::to_string(rec.b) +
                                   ",\"preemptions\":" + std::to_string(rec.preemptions) + "}";
          const std::string prefill = "\"name\":\"request " + std::to_string(rec.id) +
                                      " prefill\",\"cat\":\"request\"," + id + "," + pid + ",\"tid\":1,\"ts\":";
          const std::string decode = "\"name\":\"request " + std::to_string(rec.id) +
                                     " decode\",\"cat\":\"request\"," + id + ",\"pid\":" +
                                     std::to_string(rec.other) + ",\"tid\":1,\"ts\":";
          event("\"ph\":\"b\"," + prefill + micros(rec.t0_ns) + args);
          event("\"ph\":\"e\"," + prefill + micros(rec.t1_ns));
          event("\"ph\":\"b\"," + decode + micros(rec.t1_ns) + args);
          event("\"ph\":\"e\"," + decode + micros(rec.t2_ns));
          break;
        }
        const std::string common = "\"cat\":\"request\"," + id + "," + pid + ",\"tid\":1,\"ts\":";
        const std::string name = "\"name\":\"request " + std::to_string(rec.id) + "\",";
        event("\"ph\":\"b\"," + name + common + micros(rec.t0_ns) + ",\"args\":{\"prompt_tokens\":" +
              std::to_string(rec.a) + ",\"output_tokens\":" + std::to_string(rec.b) +
              ",\"preemptions\":" + std::to_string(rec.preemptions) +
              ",\"decode_replica\":" + std::to_string(rec.other) + "}");
        event("\"ph\":\"b\",\"name\":\"queued+prefill\"," + common + micros(rec.t0_ns));
        event("\"ph\":\"e\",\"name\":\"queued+prefill\"," + common + micros(rec.t1_ns));
        event("\"ph\":\"b\",\"name\":\"decode\"," + common + micros(rec.t1_ns));
        event("\"ph\":\"e\",\"name\":\"decode\"," + common + micros(rec.t2_ns));
        event("\"ph\":\"e\"," + name + common + micros(rec.t2_ns));
        break;
      }
      case Kind::kRejected: {
        // A rejected request leaves at its arrival; a timed-out one when the engine let go of it.
        const auto outcome = static_cast<core::RequestOutcome>(rec.outcome);
        const bool timed_out = outcome == core::RequestOutcome::kTimedOut;
        event("\"ph\":\"i\",\"s\":\"t\",\"cat\":\"request\",\"name\":\"" +
              (timed_out ? std::string("timed_out") : "rejected " + std::string(core::outcome_name(outcome))) +
              "\"," + pid + ",\"tid\":1,\"ts\":" + micros(timed_out ? rec.t2_ns : rec.t0_ns) +
              ",\"args\":{\"request\":" + std::to_string(rec.id) +
              ",\"prompt_tokens\":" + std::to_string(rec.a) + ",\"output_tokens\":" + std::to_string(rec.b) +
              "}");
        break;
      }
      case Kind::kPreempt:
        event("\"ph\":\"i\",\"s\":\"t\",\"cat\":\"preemption\",\"name\":\"preempt " + std::to_string(rec.id) +
              "\"," + pid + ",\"tid\":2,\"ts\":" + micros(rec.t0_ns) + ",\"args\":{\"request\":" +
              std::to_string(rec.id) + "}");
        break;
      case Kind::kFleet:
        event("\"ph\":\"i\",\"s\":\"p\",\"cat\":\"fleet\",\"name\":\"" +
              std::string(core::fleet_event_name(static_cast<core::FleetEventKind>(rec.outcome))) + "\"," + pid +
              ",\"tid\":2,\"ts\":" + micros(rec.t0_ns) + ",\"args\":{\"request\":" + std::to_string(rec.id) +
              ",\"value\":" + std::to_string(rec.a) + "}");
        break;
      case Kind::kKvTransfer:
        event("\"ph\":\"X\",\"cat\":\"kv_transfer\",\"name\":\"KV of request " + std::to_string(rec.id) +
              " from replica " + std::to_string(rec.other) + "\"," + pid + ",\"tid\":2,\"ts\":" +
              micros(rec.t0_ns) + ",\"dur\":" + micros(rec.t1_ns - rec.t0_ns) + ",\"args\":{\"bytes\":" +
              std::to_string(rec.a) + "}");
        break;
    }
  }
  out << "\n]}\n";
}

}  // namespace servesim::metrics
