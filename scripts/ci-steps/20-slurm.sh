#!/usr/bin/env bash
# The Slurm round trip of `servesim slurm` (issue 5), against a real Slurm on this one machine:
# installs Debian's slurm-wlm and munge (as root), starts munged, slurmctld and slurmd (a single-node
# cluster named after `hostname`, proctrack/linuxproc, task/none; its slurm.conf, state and logs live
# in a temporary directory and reach the clients through SLURM_CONF, so /etc/slurm is not touched),
# submits a 4-task array sweep of experiments/sweeps/smoke.toml plus the dependent merge job, waits,
# and checks that the merged database holds the same results as a local `servesim sweep --jobs 2`.
# It stops the daemons it started, cancels what it submitted, and writes
# build/ci-results/20-slurm.xml (one test case per stage).
#
#   scripts/ci-steps/20-slurm.sh   (SERVESIM_BIN=another/servesim, SERVESIM_CI_RESULTS=another/dir)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
servesim=$(realpath "${SERVESIM_BIN:-build/servesim}")
experiment="$root/experiments/sweeps/smoke.toml"
report="${SERVESIM_CI_RESULTS:-$root/build/ci-results}/20-slurm.xml"
mkdir -p "$(dirname "$report")"
work=$(mktemp -d /tmp/servesim-slurm-XXXXXX)
step_start=$(date +%s.%N)

cases=()
failed=0
xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'; }
record() {  # name seconds [failure message]
  local name=$1 secs=$2 message=${3:-}
  if [ -z "$message" ]; then
    cases+=("<testcase classname=\"ci.slurm\" name=\"$name\" time=\"$secs\"/>")
  else
    failed=1
    cases+=("<testcase classname=\"ci.slurm\" name=\"$name\" time=\"$secs\"><failure message=\"$(printf '%s' "$message" | head -c 4000 | xml_escape)\"/></testcase>")
  fi
}
write_report() {
  {
    echo "<testsuite name=\"slurm\" tests=\"${#cases[@]}\">"
    printf '%s\n' "${cases[@]}"
    echo "</testsuite>"
  } > "$report"
}
since() { awk -v now="$(date +%s.%N)" -v then="$1" 'BEGIN { printf "%.2f", now - then }'; }

started_pids=()
stop_daemons() {
  if [ -n "${SLURM_CONF:-}" ] && command -v scancel >/dev/null; then
    scancel --user=root >/dev/null 2>&1 || true
  fi
  for pid in "${started_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${started_pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  started_pids=()
}
finish() {
  stop_daemons
  write_report
  rm -rf "$work"
}
trap finish EXIT

# ---- 1. Install and start a one-node cluster.
t=$(date +%s.%N)
setup_error=""
if [ "$(id -u)" -ne 0 ]; then
  setup_error="the Slurm round trip installs and starts slurm-wlm and munge, which needs root"
elif [ ! -x "$servesim" ]; then
  setup_error="no servesim binary at $servesim (build first: scripts/bootstrap.sh)"
fi
munged_before=$(pidof munged || true)
if [ -z "$setup_error" ]; then
  missing=()
  for p in slurm-wlm munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" > "$work/apt.log" 2>&1; then
      apt-get update -qq >> "$work/apt.log" 2>&1
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >> "$work/apt.log" 2>&1 ||
        setup_error="apt-get install ${missing[*]} failed: $(tail -5 "$work/apt.log")"
    fi
  fi
fi
if [ -z "$setup_error" ] && pidof slurmctld slurmd >/dev/null; then
  setup_error="a Slurm daemon is already running on this machine ($(pidof slurmctld slurmd)); not starting a second cluster"
fi
if [ -z "$setup_error" ]; then
  # A munged that installing the package started (where services may start) is ours to stop.
  if [ -z "$munged_before" ] && pidof munged >/dev/null; then
    for pid in $(pidof munged); do started_pids+=("$pid"); done
  fi
  # munged: the package made a key; start our own daemon unless one runs already.
  if ! pidof munged >/dev/null; then
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chown -R munge:munge /etc/munge
    [ -s /etc/munge/munge.key ] || runuser -u munge -- mungekey --create >/dev/null 2>&1 || true
    if runuser -u munge -- /usr/sbin/munged > "$work/munged.log" 2>&1; then
      for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
      started_pids+=("$(cat /run/munge/munged.pid)")
    else
      setup_error="munged did not start: $(cat "$work/munged.log")"
    fi
  fi
fi
if [ -z "$setup_error" ]; then
  host=$(hostname)
  mkdir -p "$work/state" "$work/spool"
  export SLURM_CONF="$work/slurm.conf"
  cat > "$SLURM_CONF" <<EOF
ClusterName=servesimci
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmdSpoolDir=$work/spool
StateSaveLocation=$work/state
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  if slurmctld -f "$SLURM_CONF" > "$work/slurmctld.out" 2>&1; then
    for _ in $(seq 50); do [ -s "$work/slurmctld.pid" ] && break; sleep 0.1; done
    started_pids+=("$(cat "$work/slurmctld.pid")")
  else
    setup_error="slurmctld did not start: $(cat "$work/slurmctld.out" "$work/slurmctld.log" 2>/dev/null | tail -20)"
  fi
fi
if [ -z "$setup_error" ]; then
  if slurmd -f "$SLURM_CONF" > "$work/slurmd.out" 2>&1; then
    for _ in $(seq 50); do [ -s "$work/slurmd.pid" ] && break; sleep 0.1; done
    started_pids+=("$(cat "$work/slurmd.pid")")
  else
    setup_error="slurmd did not start: $(cat "$work/slurmd.out" "$work/slurmd.log" 2>/dev/null | tail -20)"
  fi
fi
if [ -z "$setup_error" ]; then
  state=""
  for _ in $(seq 150); do
    state=$(sinfo -h -o %t 2>/dev/null | head -1)
    [ "$state" = "idle" ] && break
    sleep 0.2
  done
  [ "$state" = "idle" ] ||
    setup_error="the node did not come up idle (sinfo says '$state'): $(tail -20 "$work/slurmctld.log" "$work/slurmd.log" 2>/dev/null)"
fi
record "install_and_start_slurm" "$(since "$t")" "$setup_error"
echo "slurm: cluster $( [ -z "$setup_error" ] && echo "up" || echo "NOT up: $setup_error") after $(since "$t") s"
if [ -n "$setup_error" ]; then
  record "array_sweep_and_merge" 0 "not run: the cluster did not start"
  record "merged_equals_local_sweep" 0 "not run: the cluster did not start"
  exit 1
fi

# ---- 2. The array sweep and the merge, through `servesim slurm --submit --wait`.
t=$(date +%s.%N)
sweep_error=""
if ! timeout 180 "$servesim" slurm "$experiment" --tasks 4 --dir "$work/job" --submit --wait > "$work/submit.log" 2>&1; then
  sweep_error="servesim slurm --submit --wait failed: $(cat "$work/submit.log") $(tail -n 20 "$work"/job/logs/*.out 2>/dev/null)"
elif [ ! -s "$work/job/results.db" ]; then
  sweep_error="the merge job wrote no $work/job/results.db: $(cat "$work/submit.log")"
fi
cat "$work/submit.log"
record "array_sweep_and_merge" "$(since "$t")" "$sweep_error"

# ---- 3. The same results as a local run.
t=$(date +%s.%N)
compare_error=""
if [ -n "$sweep_error" ]; then
  compare_error="not compared: the Slurm sweep failed"
elif ! "$servesim" sweep "$experiment" --db "$work/local.db" --jobs 2 --quiet > "$work/local.log" 2>&1; then
  compare_error="the local sweep failed: $(cat "$work/local.log")"
else
  compare_error=$(python3 - "$work/job/results.db" "$work/local.db" <<'PY'
import sqlite3, sys
def dump(path):
    db = sqlite3.connect(path)
    tables = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    out = {}
    for t in tables:
        n = len(db.execute(f"PRAGMA table_info({t})").fetchall())
        order = ", ".join(str(i + 1) for i in range(n))
        out[t] = db.execute(f"SELECT * FROM {t} ORDER BY {order}").fetchall()
    return out
slurm, local = dump(sys.argv[1]), dump(sys.argv[2])
if sorted(slurm) != sorted(local):
    print(f"tables differ: {sorted(slurm)} vs {sorted(local)}")
for t in sorted(local):
    if slurm.get(t) != local[t]:
        print(f"table {t}: {len(slurm.get(t, []))} rows from Slurm, {len(local[t])} locally, contents differ")
points = len(local.get("points", []))
if points != 16:
    print(f"expected the smoke experiment's 16 points, the local sweep has {points}")
PY
)
fi
record "merged_equals_local_sweep" "$(since "$t")" "$compare_error"
echo "slurm: merged database $( [ -z "$compare_error" ] && echo "equals" || echo "DIFFERS from" ) the local --jobs 2 sweep ${compare_error:+($compare_error)}"
echo "slurm: step wall time $(since "$step_start") s"
exit $failed
