#pragma once
// Deterministic crash points for crash-safety tests.
//
// A test that kills a process with a signal at a wall-clock moment tests whatever the machine's
// speed makes it test: on a loaded machine the kill lands after the commit, on a fast one before
// the first row. Instead, the writers name the moments that matter (inside a transaction, between
// two renames, after a commit) with crash_point("name"), and the environment variable
//
//   SERVESIM_CRASH_AT=name:N[,name:N...]
//
// makes the process kill itself with SIGKILL the N-th time it reaches point `name` (counted from
// 1, per name, over the whole process). The process dies exactly as a `kill -9` would kill it (no
// destructors, no flushes, no rollback), but always at the same place. Unset (every user's case),
// a crash point costs one load of a flag. The variable is for tests only; docs/architecture.md
// lists the points.

#include <string_view>

namespace servesim::core {

// Kills the process here if SERVESIM_CRASH_AT says so (see above); returns otherwise.
void crash_point(std::string_view name);

// Whether any crash point is armed (for tests of the parser).
bool crash_points_armed();

}  // namespace servesim::core
