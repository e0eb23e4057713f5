#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. The last line is "N passed, N failed",
# counted from JUnit reports: meson's (every GoogleTest case of every test binary) and those the
# extra CI steps in scripts/ci-steps/ write to build/ci-results/. A step that writes no report
# counts as one case, passed or failed by its exit code.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! scripts/bootstrap.sh; then
  echo "build failed"
  echo "0 passed, 1 failed"
  exit 1
fi

report=build/meson-logs/testlog.junit.xml
rm -f "$report"
rm -rf build/ci-results
mkdir -p build/ci-results
meson test -C build --print-errorlogs --num-processes "$(nproc)"
meson_status=$?

for step in scripts/ci-steps/*.sh; do
  [ -e "$step" ] || continue
  name=$(basename "$step" .sh)
  echo "== ci step: $name"
  before=$(ls build/ci-results | wc -l)
  bash "$step"
  status=$?
  after=$(ls build/ci-results | wc -l)
  if [ "$before" = "$after" ]; then
    # No report of its own: one case.
    if [ "$status" -eq 0 ]; then
      printf '<testsuite><testcase name="%s"/></testsuite>\n' "$name" > "build/ci-results/$name.xml"
    else
      printf '<testsuite><testcase name="%s"><failure/></testcase></testsuite>\n' "$name" > "build/ci-results/$name.xml"
    fi
  elif [ "$status" -ne 0 ]; then
    printf '<testsuite><testcase name="%s-exit"><failure/></testcase></testsuite>\n' "$name" \
      > "build/ci-results/$name-exit.xml"
  fi
done

python3 - "$meson_status" "$report" build/ci-results <<'PY'
import glob, os, sys, xml.etree.ElementTree as ET
status, report, extra = int(sys.argv[1]), sys.argv[2], sys.argv[3]
passed = failed = 0
paths = ([report] if os.path.exists(report) else []) + sorted(glob.glob(os.path.join(extra, "*.xml")))
for path in paths:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        failed += 1
        continue
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is None:
            passed += 1
if status != 0 and not os.path.exists(report):
    failed += 1  # meson died before writing its report
elif status != 0 and failed == 0:
    failed = 1   # a test binary that died before writing its own report
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
