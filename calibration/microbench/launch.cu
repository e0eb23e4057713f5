// Launch costs, each measured so that the host's launch queue cannot limit it:
// - host_launch_kernel: CPU time of one cudaLaunchKernel call (an empty kernel), and
//   gpu_kernel_stream: GPU time per empty kernel queued back to back on a stream, both from trials
//   in which a spin kernel held the GPU until the host had queued every launch (checked per trial:
//   then no launch waited for a queue slot, and the GPU never waited for the host);
// - host_launch_graph: CPU time of one cudaGraphLaunch of a one-node graph, the same way;
// - gpu_kernel_graph: GPU time per node of a replayed graph of empty kernels, from the difference
//   between graphs of N and 2N nodes (the replay's fixed cost cancels);
// - graph_replay_idle: wall time from cudaGraphLaunch of a one-node graph to cudaStreamSynchronize
//   returning, the GPU idle: what a replay costs a step that waits for it.
// raw_format.h names the columns; docs/calibration.md says how the fit maps them to the profile.
#include <chrono>
#include <vector>

#include "common.cuh"

namespace mb {
namespace {

__global__ void empty_kernel() {}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void launch_empty(cudaStream_t s) { MB_CUDA(cudaLaunchKernel(empty_kernel, dim3(1), dim3(32), nullptr, 0, s)); }

struct Queued {
  std::vector<double> host_s, gpu_s;  // per call, one entry per counted trial
};

// `trials` counted trials of plan::LaunchTrial's calls to `enqueue` (one call each) behind a spin;
// a trial the host did not finish queueing before the spin ended is retried as the plan says.
template <class Enqueue>
Queued queued_trials(cudaStream_t s, int trials, double host_ns_per_call, Enqueue&& enqueue) {
  Queued q;
  Event start, stop;
  plan::LaunchTrial trial = plan::first_launch_trial(host_ns_per_call);
  while (static_cast<int>(q.host_s.size()) < trials) {
    if (trial.launches == 0)
      throw Failure("every trial found the launch queue full or the host slower than a 2 s spin; launch costs "
                    "cannot be measured without the queue limiting them");
    MB_CUDA(cudaStreamSynchronize(s));
    spin(s, trial.spin_ns);
    MB_CUDA(cudaEventRecord(start, s));
    const double t0 = now_ns();
    for (int i = 0; i < trial.launches; ++i) enqueue();
    const double host_ns = now_ns() - t0;
    MB_CUDA(cudaEventRecord(stop, s));
    const bool queued_ahead = !event_done(start);
    MB_CUDA(cudaEventSynchronize(stop));
    if (!queued_ahead) {
      trial = plan::retry_launch_trial(trial);
      continue;
    }
    q.host_s.push_back(host_ns * 1e-9 / trial.launches);
    q.gpu_s.push_back(elapsed_seconds(start, stop) / trial.launches);
  }
  return q;
}

// Captures `nodes` empty kernels into a graph on `s`.
struct EmptyGraph {
  static cudaStream_t capture(cudaStream_t s, int nodes) {
    MB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < nodes; ++i) {
      empty_kernel<<<1, 32, 0, s>>>();
      MB_CHECK_LAUNCH();
    }
    return s;
  }
  GraphExec exec;
  EmptyGraph(cudaStream_t s, int nodes) : exec(capture(s, nodes)) {}
};

// GPU seconds of one replay of `g`, queued behind a spin (one host call: the queue cannot fill).
double replay_gpu_seconds(cudaStream_t s, const EmptyGraph& g) {
  Event start, stop;
  MB_CUDA(cudaStreamSynchronize(s));
  spin(s, 1e6);
  MB_CUDA(cudaEventRecord(start, s));
  MB_CUDA(cudaGraphLaunch(g.exec, s));
  MB_CUDA(cudaEventRecord(stop, s));
  MB_CUDA(cudaEventSynchronize(stop));
  return elapsed_seconds(start, stop);
}

}  // namespace

void run_launch(const Options& o) {
  CsvOut out(o.out_dir, servesim::calibration::raw::kLaunchFile, servesim::calibration::raw::kLaunchHeader);
  Stream s;
  const int trials = o.quick ? 3 : 7;

  // An untimed estimate of the host's time per launch sizes the first trial's spin.
  for (int i = 0; i < 16; ++i) launch_empty(s);  // module loading, first-launch costs
  MB_CUDA(cudaStreamSynchronize(s));
  const double t0 = now_ns();
  for (int i = 0; i < 64; ++i) launch_empty(s);
  const double estimate_ns = (now_ns() - t0) / 64;
  MB_CUDA(cudaStreamSynchronize(s));

  const Queued kernels = queued_trials(s, trials, estimate_ns, [&] { launch_empty(s); });
  out.row("host_launch_kernel", median(kernels.host_s), trials);
  out.row("gpu_kernel_stream", median(kernels.gpu_s), trials);

  const EmptyGraph one(s, 1);
  MB_CUDA(cudaGraphLaunch(one.exec, s));  // the first replay uploads the graph
  MB_CUDA(cudaStreamSynchronize(s));
  const Queued graphs = queued_trials(s, trials, estimate_ns, [&] { MB_CUDA(cudaGraphLaunch(one.exec, s)); });
  out.row("host_launch_graph", median(graphs.host_s), trials);

  constexpr int kNodes = 256;
  const EmptyGraph n_nodes(s, kNodes), two_n_nodes(s, 2 * kNodes);
  for (const EmptyGraph* g : {&n_nodes, &two_n_nodes}) MB_CUDA(cudaGraphLaunch(g->exec, s));  // uploads
  std::vector<double> per_node;
  for (int t = 0; t < trials; ++t)
    per_node.push_back((replay_gpu_seconds(s, two_n_nodes) - replay_gpu_seconds(s, n_nodes)) / kNodes);
  out.row("gpu_kernel_graph", median(per_node), trials);

  const int replays = o.quick ? 5 : 25;
  std::vector<double> idle;
  for (int r = 0; r < replays; ++r) {
    MB_CUDA(cudaStreamSynchronize(s));
    const double start = now_ns();
    MB_CUDA(cudaGraphLaunch(one.exec, s));
    MB_CUDA(cudaStreamSynchronize(s));
    idle.push_back((now_ns() - start) * 1e-9);
  }
  out.row("graph_replay_idle", median(idle), replays);
}

}  // namespace mb
