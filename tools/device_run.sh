#!/usr/bin/env bash
# The one command to run on a lent GPU machine: `bash tools/device_run.sh` (about 8 minutes).
#
# Everything goes under $OUT (the device tool sets it; nothing is written in the checkout):
#   device_run.log        this script's own output (Python, nvidia-smi -L, driver, limits, imports)
#   fields_before.json    raw NVML field probe (return code, type, value of ids 74, 75, 82, 185,
#   fields_after.json     186, 193-198, 251-273) before and after the load (tools/field_probe.py)
#   nvidia-smi-log.csv    nvidia-smi --query-gpu=... -lms 500 in the background for the whole run
#   <gpu-slug>/           tools/device_check.py --out "$OUT": doctor.json, samples*.jsonl, stress.json, run.json
#   nvidia-smi-perf.txt   nvidia-smi -q -d PERFORMANCE,POWER,CLOCK after the load
# Runs under the machine's own python3 ($DEVICE_PYTHON to pick another); .device-deps/ (from
# tools/fetch_wheels.py, carried with the call) goes on the import path when present.
# DEVICE_SIMULATE=1 runs the same on the simulated GPU and the fake driver (no nvidia-smi),
# DEVICE_RUN_SHORT=1 with short samples and stress runs (the test).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${DEVICE_PYTHON:-python3}"
SIM="${DEVICE_SIMULATE:-0}"
OUT="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/rigscope-device-run-XXXXXX")}"
mkdir -p "$OUT" || { echo "device-run: cannot create OUT=$OUT"; exit 2; }
OUT="$(cd "$OUT" && pwd)"
exec > >(tee -a "$OUT/device_run.log") 2>&1
cd "$ROOT" || exit 2
export PYTHONDONTWRITEBYTECODE=1 PIP_NO_INDEX=1 QT_QPA_PLATFORM=offscreen
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
[ -d "$ROOT/.device-deps" ] && PYTHONPATH="$ROOT:$ROOT/.device-deps${PYTHONPATH#"$ROOT"}"
export PYTHONPATH
echo "device-run: OUT=$OUT simulate=$SIM $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# 1. Python: desktop needs 3.11.
if ! command -v "$PY" >/dev/null 2>&1; then echo "device-run: no $PY on PATH"; exit 2; fi
"$PY" -c 'import sys; print("python", sys.version.replace("\n", " "), sys.executable)'
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "device-run: $PY is older than 3.11, which Rigscope needs: set DEVICE_PYTHON to a python3.11+ and rerun"
  exit 2
fi

# 2. The GPU as nvidia-smi sees it, and which modules import.
SMI=""
if [ "$SIM" = 1 ]; then echo "nvidia-smi: skipped (DEVICE_SIMULATE=1)"
elif command -v nvidia-smi >/dev/null 2>&1; then SMI=nvidia-smi
else echo "nvidia-smi: not found, its steps are skipped"; fi
if [ -n "$SMI" ]; then
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,power.limit,enforced.power.limit,power.default_limit,power.min_limit,power.max_limit,clocks.max.sm,clocks.max.memory --format=csv
fi
for mod in numpy psutil pynvml torch; do
  "$PY" -c "import $mod as m; print('import $mod: ok', getattr(m, '__version__', ''), getattr(getattr(m, 'version', None), 'cuda', '') or '')" 2>/dev/null \
    || echo "import $mod: FAILED"
done

PROBE_ARGS=()
[ "$SIM" = 1 ] && PROBE_ARGS=(--simulate)
"$PY" tools/field_probe.py "$OUT/fields_before.json" --phase before "${PROBE_ARGS[@]}" || echo "device-run: field probe (before) failed"

# 3. nvidia-smi's own log every 500 ms in the background (older drivers name the reasons clocks_throttle_reasons).
LOG_PID=""
if [ -n "$SMI" ]; then
  Q="timestamp,index,pstate,utilization.gpu,power.draw,power.draw.average,power.draw.instant,enforced.power.limit,clocks.sm,clocks.max.sm,temperature.gpu,temperature.memory,clocks_event_reasons.active"
  if ! nvidia-smi --query-gpu="$Q" --format=csv -c 1 >/dev/null 2>&1; then
    echo "nvidia-smi: full query refused, logging without power.draw.average/instant and with clocks_throttle_reasons"
    Q="timestamp,index,pstate,utilization.gpu,power.draw,enforced.power.limit,clocks.sm,clocks.max.sm,temperature.gpu,temperature.memory,clocks_throttle_reasons.active"
  fi
  nvidia-smi --query-gpu="$Q" --format=csv -lms 500 > "$OUT/nvidia-smi-log.csv" 2>&1 &
  LOG_PID=$!
  trap '[ -n "$LOG_PID" ] && kill "$LOG_PID" 2>/dev/null' EXIT
else
  echo "nvidia-smi log: skipped (no nvidia-smi)"
fi

# 4. The recording, with a deadline (device_check's own is 450 s; timeout is the backstop).
CHECK_ARGS=(--out "$OUT")
[ "$SIM" = 1 ] && CHECK_ARGS+=(--simulate)
[ "${DEVICE_RUN_SHORT:-0}" = 1 ] && CHECK_ARGS+=(--sample-s 2 --stress-minutes 0.1 --deadline-s 60)
timeout -s INT -k 20 "${DEVICE_RUN_DEADLINE_S:-480}" "$PY" tools/device_check.py "${CHECK_ARGS[@]}"
CHECK_RC=$?
echo "device-check: exit $CHECK_RC"

"$PY" tools/field_probe.py "$OUT/fields_after.json" --phase after "${PROBE_ARGS[@]}" || echo "device-run: field probe (after) failed"
if [ -n "$LOG_PID" ]; then kill "$LOG_PID" 2>/dev/null; wait "$LOG_PID" 2>/dev/null; LOG_PID=""; fi

# 5. The driver's view after the load.
if [ -n "$SMI" ]; then nvidia-smi -q -d PERFORMANCE,POWER,CLOCK > "$OUT/nvidia-smi-perf.txt" 2>&1
else echo "nvidia-smi -q: skipped (no nvidia-smi)"; fi
echo "device-run: done, files under $OUT:"
ls -R "$OUT"
exit "$CHECK_RC"
