#!/usr/bin/env bash
# Issue 20's reproduction, long form: the window (offscreen, simulated GPU) records into one
# database while 30 command-line writes (run, stress, import) go to the same file over ~5 minutes;
# then the window's samples over that span are counted against one a second.
# Usage: tools/one_database_repro.sh [FOLDER]   (default: a new temporary folder)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$(mktemp -d)}"
cd "$dir"
rm -f h.sqlite h.sqlite-wal h.sqlite-shm
export QT_QPA_PLATFORM=offscreen RIGSCOPE_CONFIG_DIR="$dir/cfg" RIGSCOPE_DATA_DIR="$dir/data"
R="$repo/.venv/bin/rigscope"
"$R" --db h.sqlite --simulate > window.log 2>&1 &
wpid=$!
sleep 12
start=$(date +%s)
for i in $(seq 1 30); do
  case $((i % 3)) in
    0) "$R" run --db h.sqlite --simulate -- true >/dev/null 2>&1 || true ;;
    1) "$R" stress --device sim --minutes 0.05 --db h.sqlite >/dev/null 2>&1 || true ;;
    2) "$R" import --db h.sqlite "$repo/tests/fixtures/nvsmi_a10_idle_power_cap.csv" >/dev/null 2>&1 || true ;;
  esac
  sleep 7
  lines=$("$R" export --db h.sqlite --from -2m --format csv 2>/dev/null | wc -l)
  deleted=$(ls -l "/proc/$wpid/fd" 2>/dev/null | grep -c deleted || true)
  echo "$(date +%T) write $i: export -2m lines $lines; deleted files the window holds: $deleted"
done
end=$(date +%s)
sleep 3
"$repo/.venv/bin/python" - "$start" "$end" <<'PY'
import sqlite3, sys
start, end = int(sys.argv[1]), int(sys.argv[2])
conn = sqlite3.connect("h.sqlite")
gpu = conn.execute("SELECT id FROM gpus WHERE name LIKE '%simulated%'").fetchone()[0]
n = conn.execute("SELECT count(*) FROM gpu_samples WHERE gpu = ? AND ts >= ? AND ts < ?",
                 (gpu, start * 1000, end * 1000)).fetchone()[0]
print(f"window samples over the {end - start} s of command-line writes: {n} (one a second: {end - start})")
print("integrity:", conn.execute("PRAGMA integrity_check").fetchone()[0])
PY
kill -TERM "$wpid"; wait "$wpid" || true
