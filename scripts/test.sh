#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. The last line is "N passed, N failed",
# counted from the GoogleTest XML reports (a test binary that crashes counts as one failure).
set -uo pipefail
cd "$(dirname "$0")/.."

if ! scripts/bootstrap.sh; then
  echo "build failed"
  echo "0 passed, 1 failed"
  exit 1
fi

report=build/meson-logs/testlog.junit.xml
rm -f "$report"
meson test -C build --print-errorlogs --num-processes "$(nproc)"
status=$?

python3 - "$status" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
passed = failed = 0
# meson's JUnit report lists every GoogleTest case of every test binary (protocol: gtest) and
# every plain test; a binary that crashed shows as a failed case of its own.
for path in glob.glob("build/meson-logs/testlog.junit.xml"):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        failed += 1
        continue
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            continue
        else:
            passed += 1
if int(sys.argv[1]) != 0 and failed == 0:
    failed = 1  # a test binary that died before writing its report
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
