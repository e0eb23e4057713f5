#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the whole test suite, and its run.
#
# The sanitized build (scripts/sanitized_build.sh: clang, ASan + UBSan, built once per CI run and
# shared with the fuzz step) runs the suite through `meson test`, so the tests see exactly the
# environment tests/meson.build gives them (SERVESIM_SHARED_DIR, SERVESIM_BIN = the sanitized binary,
# ...). Any sanitizer report stops the binary (halt_on_error) and fails the step.
#
# Each GoogleTest case counts: meson's JUnit report is copied to build/ci-results/asan.xml with every
# suite and class name prefixed "asan.", so the cases are told apart from the normal run's.
set -uo pipefail
cd "$(dirname "$0")/../.."

dir=${SERVESIM_SAN_BUILD_DIR:-build-san}
results=build/ci-results
mkdir -p "$results"
scripts/sanitized_build.sh "$dir" || exit 1

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
