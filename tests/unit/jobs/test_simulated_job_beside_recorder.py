"""One simulated machine for a job (issue 32): `rigscope run --simulate` beside a simulated recorder.

Two real processes: `rigscope record --simulate` writes *its* simulated GPU (idle) into the history, and
`rigscope run --simulate -o` loads its own. The job's card and its record were built from both: "GPU busy 0 %"
next to "at its 150 W power limit the whole run", and a record with power p50 149 W and mean 12 W. The card,
the verdict and the record now read the one machine the job loaded, and agree with themselves.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.history.store import HistoryStore
from tests.waits import until

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals and the wrapped job's process group")
REPO = Path(__file__).resolve().parents[3]
#: The wrapped job: it waits until the recorder's committed samples cover 2 s of its own run, then ends.
WAIT_FOR_RECORDER = """
import sqlite3, sys, time
started = time.time()
def latest():
    conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    try:
        return (conn.execute("SELECT max(ts) FROM gpu_samples").fetchone()[0] or 0) / 1000.0  # ms
    finally:
        conn.close()
deadline = started + 120
while latest() < started + 2.0 and time.time() < deadline:
    time.sleep(0.05)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _host_rows(db: Path) -> int:
    if not db.exists():
        return 0
    with HistoryStore.open(db, readonly=True) as store:
        return store.counts()["host_samples"]


def test_a_simulated_job_beside_a_simulated_recorder_reads_its_own_machine_only(tmp_path: Path) -> None:
    db, output = tmp_path / "h.sqlite", tmp_path / "job.json"
    recorder = subprocess.Popen([sys.executable, "-m", "desktop", "record", "--simulate", "--interval", "0.2",
                                 "--db", str(db)], stderr=subprocess.PIPE, text=True, env=_env())
    try:
        until(lambda: _host_rows(db) >= 3)  # the recorder holds the writer lock and writes its idle GPU
        # The job lasts until the recorder has committed samples of its span (it commits every few seconds):
        # only then can the card mix the recorder's machine in, as it did.
        job = subprocess.run([sys.executable, "-m", "desktop", "run", "--simulate", "--interval", "0.2", "--db",
                              str(db), "-o", str(output), "--", sys.executable, "-c", WAIT_FOR_RECORDER, str(db)],
                             check=False, capture_output=True, text=True, env=_env(), timeout=180)
    finally:
        recorder.send_signal(signal.SIGTERM)
        recorder.communicate(timeout=60)
    assert job.returncode == 0, job.stderr
    assert "its own simulated GPU" in job.stderr
    busy = next(line for line in job.stderr.splitlines() if line.strip().startswith("GPU busy"))
    assert "100 %" in busy, job.stderr  # the machine the job loaded, not the recorder's idle one
    record = json.loads(output.read_text())
    power = record["power_w"]
    assert power["p5"] <= power["mean"] <= power["p95"], power  # before: p50 149 W, mean 12 W
    with HistoryStore.open(db, readonly=True) as store:
        (stored,) = store.jobs()
    assert stored.card is not None
    (gpu,) = stored.card["gpus"]
    assert gpu["mean_power_w"] == pytest.approx(power["mean"])  # one card: printed, stored, written
    assert power["p5"] <= gpu["mean_power_w"] <= power["p95"]
