#pragma once
// Running the real servesim binary from tests: in a chosen working directory, with a time limit,
// capturing stdout and stderr; and killing it at a chosen moment (crash-safety tests).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace servesim::testing {

struct ProcessResult {
  int exit_code = -1;     // when it exited
  int signal = 0;         // when a signal ended it (SIGKILL from a timeout or a crash test, SIGSEGV, ...)
  bool timed_out = false; // killed because it ran past the limit
  std::string out, err;
  double wall_seconds = 0;
};

// Runs argv[0] (a path) with `argv` in `cwd`, with this process's environment plus `extra_env`
// ("NAME=value" entries, which win over inherited ones). When `kill_after_s` >= 0 the process gets
// SIGKILL at that moment (if still running); otherwise it is killed at `timeout_s` and marked
// timed_out. `file_size_limit` > 0 caps every file the process writes (RLIMIT_FSIZE, SIGXFSZ
// ignored): a write beyond it fails as on a full disk, deterministically.
inline ProcessResult run_process(const std::vector<std::string>& argv, const std::string& cwd, double timeout_s,
                                 double kill_after_s = -1, const std::vector<std::string>& extra_env = {},
                                 uint64_t file_size_limit = 0) {
  ProcessResult r;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.err = "pipe failed";
    return r;
  }
  // Built before fork(): between fork and exec the child may only make async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : extra_env) envp.push_back(const_cast<char*>(e.c_str()));
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    bool overridden = false;
    for (const auto& x : extra_env)
      overridden = overridden || entry.substr(0, entry.find('=') + 1) == std::string_view(x).substr(0, x.find('=') + 1);
    if (!overridden) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    if (file_size_limit > 0) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigaction(SIGXFSZ, &ignore, nullptr);
      const struct rlimit limit = {file_size_limit, file_size_limit};
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(125);
    }
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  const double limit = kill_after_s >= 0 ? kill_after_s : timeout_s;
  bool killed = false;
  int status = 0;
  bool reaped = false;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  for (;;) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!killed && elapsed >= limit) {
      kill(pid, SIGKILL);
      killed = true;
      r.timed_out = kill_after_s < 0;
    }
    if (open_fds == 0) {
      if (!reaped) {
        if (killed) {
          waitpid(pid, &status, 0);
          reaped = true;
        } else {
          const pid_t w = waitpid(pid, &status, WNOHANG);
          if (w == pid) reaped = true;
          else std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
      if (reaped) break;
      continue;
    }
    const int wait_ms = killed ? 50 : std::max(0, static_cast<int>((limit - elapsed) * 1000) + 1);
    poll(fds, 2, std::min(wait_ms, 50));
    for (auto& f : fds) {
      if (f.fd < 0) continue;
      for (;;) {
        const ssize_t n = read(f.fd, buf, sizeof buf);
        if (n > 0) {
          (f.fd == out_pipe[0] ? r.out : r.err).append(buf, static_cast<size_t>(n));
          continue;
        }
        if (n == 0) {
          close(f.fd);
          f.fd = -1;
          --open_fds;
        }
        break;
      }
    }
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace servesim::testing
