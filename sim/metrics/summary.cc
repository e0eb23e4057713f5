#include "sim/metrics/summary.h"

namespace servesim::metrics {

RequestMetrics request_metrics(const core::RequestRecord& r, const Slo& slo) {
  RequestMetrics m;
  m.ttft_ms = (r.client_first_token - r.arrival).ms();
  m.e2e_ms = (r.client_finish - r.arrival).ms();
  if (r.output_tokens > 1) m.tpot_ms = (m.e2e_ms - m.ttft_ms) / static_cast<double>(r.output_tokens - 1);
  if (r.outcome != core::RequestOutcome::kCompleted) return m;
  m.meets_slo = (!slo.ttft_ms || m.ttft_ms <= *slo.ttft_ms) &&
                (!slo.tpot_ms || !m.tpot_ms || *m.tpot_ms <= *slo.tpot_ms) &&
                (!slo.e2e_ms || m.e2e_ms <= *slo.e2e_ms);
  return m;
}

std::vector<NamedValue> flatten(const RunSummary& s) {
  auto i = [](const char* n, uint64_t v) { return NamedValue{n, static_cast<double>(v), true}; };
  auto f = [](const char* n, double v) { return NamedValue{n, v, false}; };
  std::vector<NamedValue> out = {
      i("requests_total", s.requests_total),
      i("requests_completed", s.requests_completed),
      i("requests_rejected", s.requests_rejected),
      i("rejected_context", s.rejected_context),
      i("rejected_kv_capacity", s.rejected_kv_capacity),
      i("requests_timed_out", s.requests_timed_out),
      f("sim_seconds", s.sim_seconds),
      i("events", s.events),
      i("iterations", s.iterations),
  };
  auto latency = [&](const std::string& name, const LatencyStats& l) {
    out.push_back({name + "_mean", l.mean, false});
    out.push_back({name + "_p50", l.p50, false});
    out.push_back({name + "_p90", l.p90, false});
    out.push_back({name + "_p99", l.p99, false});
  };
  latency("ttft_ms", s.ttft_ms);
  latency("tpot_ms", s.tpot_ms);
  latency("itl_ms", s.itl_ms);
  latency("e2e_ms", s.e2e_ms);
  out.insert(out.end(), {
                            i("prompt_tokens", static_cast<uint64_t>(s.prompt_tokens)),
                            i("output_tokens", static_cast<uint64_t>(s.output_tokens)),
                            f("throughput_req_s", s.throughput_req_s),
                            f("throughput_output_tok_s", s.throughput_output_tok_s),
                            i("requests_meeting_slo", s.requests_meeting_slo),
                            f("goodput_req_s", s.goodput_req_s),
                            f("slo_attainment", s.slo_attainment),
                            f("gpu_hours", s.gpu_hours),
                            f("cost_usd", s.cost_usd),
                            f("cost_usd_per_mtok_output", s.cost_usd_per_mtok_output),
                            f("arrival_window_s", s.arrival_window_s),
                            f("throughput_req_s_window", s.throughput_req_s_window),
                            f("throughput_output_tok_s_window", s.throughput_output_tok_s_window),
                            f("goodput_req_s_window", s.goodput_req_s_window),
                            f("cost_usd_per_mtok_output_window", s.cost_usd_per_mtok_output_window),
                            f("mean_requests_in_system", s.mean_requests_in_system),
                            f("mfu_mean", s.mfu_mean),
                            f("mbu_mean", s.mbu_mean),
                            f("kv_util_mean", s.kv_util_mean),
                            f("mean_batch_size", s.mean_batch_size),
                            i("preemptions", s.preemptions),
                            i("prefix_prompt_blocks", s.prefix_prompt_blocks),
                            i("prefix_matched_blocks", s.prefix_matched_blocks),
                            f("prefix_block_hit_rate", s.prefix_block_hit_rate),
                            i("prefix_prompt_tokens", static_cast<uint64_t>(s.prefix_prompt_tokens)),
                            i("prefix_hit_tokens", static_cast<uint64_t>(s.prefix_hit_tokens)),
                            f("prefix_token_hit_rate", s.prefix_token_hit_rate),
                            f("prefix_saved_tflop", s.prefix_saved_tflop),
                            i("kv_transfers", s.kv_transfers),
                            f("kv_transfer_gb", s.kv_transfer_gb),
                        });
  latency("kv_transfer_ms", s.kv_transfer_ms);
  out.insert(out.end(), {
                            i("pull_waits", s.pull_waits),
                            f("pull_wait_s", s.pull_wait_s),
                            f("pull_wait_max_ms", s.pull_wait_max_ms),
                            i("pulls_waiting_peak", s.pulls_waiting_peak),
                        });
  out.insert(out.end(), {
                            i("spec_verify_steps", s.spec_verify_steps),
                            i("spec_draft_tokens", static_cast<uint64_t>(s.spec_draft_tokens)),
                            i("spec_accepted_tokens", static_cast<uint64_t>(s.spec_accepted_tokens)),
                            f("spec_acceptance_rate", s.spec_acceptance_rate),
                            f("spec_mean_accepted_length", s.spec_mean_accepted_length),
                            f("tokens_per_gap", s.tokens_per_gap),
                        });
  append_named(s.steady, out);
  return out;
}

std::vector<NamedValue> flatten(const ReplicaStats& r) {
  auto i = [](const char* n, int64_t v) { return NamedValue{n, static_cast<double>(v), true}; };
  auto f = [](const char* n, double v) { return NamedValue{n, v, false}; };
  return {
      i("tensor_parallel", r.tensor_parallel),
      i("routed", static_cast<int64_t>(r.routed)),
      i("completed", static_cast<int64_t>(r.completed)),
      i("iterations", static_cast<int64_t>(r.iterations)),
      f("busy_seconds", r.busy_seconds),
      i("prefill_tokens", r.prefill_tokens),
      i("decode_tokens", r.decode_tokens),
      i("preemptions", static_cast<int64_t>(r.preemptions)),
      i("prefix_prompt_blocks", static_cast<int64_t>(r.prefix_prompt_blocks)),
      i("prefix_matched_blocks", static_cast<int64_t>(r.prefix_matched_blocks)),
      i("prefix_prompt_tokens", r.prefix_prompt_tokens),
      i("prefix_hit_tokens", r.prefix_hit_tokens),
      f("prefix_saved_tflop", r.prefix_saved_tflop),
      f("mfu", r.mfu),
      f("mbu", r.mbu),
      f("kv_util_mean", r.kv_util_mean),
      i("spec_draft_tokens", r.spec_draft_tokens),
      i("spec_accepted_tokens", r.spec_accepted_tokens),
  };
}

}  // namespace servesim::metrics

namespace servesim::metrics {

std::vector<NamedValue> flatten(const ClassSummary& c) {
  auto i = [](const char* n, uint64_t v) { return NamedValue{n, static_cast<double>(v), true}; };
  auto f = [](const char* n, double v) { return NamedValue{n, v, false}; };
  std::vector<NamedValue> out = {
      NamedValue{"priority", static_cast<double>(c.priority), true, false, true},
      i("requests", c.requests),
      i("completed", c.completed),
      i("rejected", c.rejected),
      i("rejected_admission", c.rejected_admission),
      i("timed_out", c.timed_out),
      i("failed", c.failed),
      i("meeting_slo", c.meeting_slo),
      i("output_tokens", static_cast<uint64_t>(c.output_tokens)),
  };
  auto latency = [&](const std::string& name, const LatencyStats& l) {
    for (const auto& [suffix, v] : {std::pair{"_mean", l.mean}, {"_p50", l.p50}, {"_p90", l.p90}, {"_p99", l.p99}})
      out.push_back({name + suffix, v, false});
  };
  latency("ttft_ms", c.ttft_ms);
  latency("tpot_ms", c.tpot_ms);
  latency("e2e_ms", c.e2e_ms);
  out.push_back(f("throughput_req_s", c.throughput_req_s));
  out.push_back(f("goodput_req_s", c.goodput_req_s));
  out.push_back(f("slo_attainment", c.slo_attainment));
  out.push_back(NamedValue{"ttft_slo_ms", c.ttft_slo_ms, false, true});
  out.push_back(NamedValue{"tpot_slo_ms", c.tpot_slo_ms, false, true});
  return out;
}

}  // namespace servesim::metrics
