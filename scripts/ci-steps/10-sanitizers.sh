#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the whole test suite, and its run.
#
# Built once per CI run in its own directory (g++, debugoptimized: -O2 keeps the run fast while
# -g keeps the reports readable), run through `meson test` so the tests see exactly the environment
# tests/meson.build gives them (SERVESIM_SHARED_DIR, SERVESIM_BIN = the sanitized binary, ...).
# Any sanitizer report stops the binary (halt_on_error) and fails the step.
#
# Each GoogleTest case counts: meson's JUnit report is copied to build/ci-results/asan.xml with every
# suite and class name prefixed "asan.", so the cases are told apart from the normal run's.
set -uo pipefail
cd "$(dirname "$0")/../.."

dir=${SERVESIM_ASAN_BUILD_DIR:-build-asan}
results=build/ci-results
mkdir -p "$results"

if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --buildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false \
    >/dev/null || exit 1
fi
# Wall and CPU seconds of each phase (CPU / cores is what an idle machine would take).
TIMEFORMAT="10-sanitizers: build %R s wall, %U s user + %S s sys CPU"
time ninja -C "$dir" >"$dir/ci-build.log" 2>&1 || { tail -50 "$dir/ci-build.log"; echo "10-sanitizers: build failed"; exit 1; }

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
rm -f "$dir/meson-logs/testlog.junit.xml"
TIMEFORMAT="10-sanitizers: tests %R s wall, %U s user + %S s sys CPU"
time meson test -C "$dir" --print-errorlogs --num-processes "$(nproc)"
status=$?

python3 - "$dir/meson-logs/testlog.junit.xml" "$results/asan.xml" <<'PY'
import os, sys, xml.etree.ElementTree as ET
src, dst = sys.argv[1], sys.argv[2]
if not os.path.exists(src):
    sys.exit(0)  # meson died before its report: the step's exit status fails it
tree = ET.parse(src)
for suite in tree.getroot().iter("testsuite"):
    suite.set("name", "asan." + suite.get("name", ""))
for case in tree.getroot().iter("testcase"):
    case.set("classname", "asan." + case.get("classname", ""))
tree.write(dst, encoding="utf-8", xml_declaration=True)
PY
exit $status
