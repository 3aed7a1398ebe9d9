"""One simulated machine for a job (issue 32): `rigscope run --simulate` beside a simulated recorder.

Two real processes: `rigscope record --simulate` writes its simulated GPU into the history, and
`rigscope run --simulate -o` loads its own. The job's card and its record were built from both: "GPU busy 0 %"
next to "at its 150 W power limit the whole run", and a record with power p50 149 W and mean 12 W. The card,
the verdict and the record now read the one machine the job loaded, and agree with themselves. And the
recorder's simulated GPU is the same machine: the job's load is published (desktop/telemetry/simulated/
shared.py), so the recorder's history shows the job's load and its process over the job's span (it recorded
an idle GPU before).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from advisor.busy import busy_share
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


#: The wrapped job: it lasts until the recorder has committed 3 s of GPU samples of its run and a process sample
#: of its own pid on the GPU (the recorder can only see it on the one shared simulated machine).
WAIT_FOR_ITS_OWN_ROWS = """
import os, sqlite3, sys, time
started = time.time()
def seen():
    conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    try:
        latest = (conn.execute("SELECT max(ts) FROM gpu_samples").fetchone()[0] or 0) / 1000.0  # ms
        mine = conn.execute("SELECT count(*) FROM process_samples WHERE pid = ?", (os.getpid(),)).fetchone()[0]
        return latest >= started + 3.0 and mine > 0
    finally:
        conn.close()
deadline = started + 60  # the test fails without its rows; a minute is plenty on a busy machine
while not seen() and time.time() < deadline:
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


def _samples_over(store: HistoryStore, start_s: float, end_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The recorder's stored utilization (%) and power (W) of its one GPU over [start_s, end_s), raw rows."""
    (gpu,) = store.gpus()
    result = store.query(gpu.uuid, ["utilization_gpu_pct", "power_w"], start_s, end_s, max_points=0,
                         resolution="raw")
    return result.columns["utilization_gpu_pct"], result.columns["power_w"]


def test_the_recorder_beside_a_simulated_job_records_the_jobs_load_on_the_one_simulated_gpu(tmp_path: Path) -> None:
    """The recorder's history over the job's span shows the job's load (busy, power at the limit) and the job's
    process; its busy share and mean power agree with the job's card within 0.15 (share) and 10 % (power).

    Before the shared loads: the recorder's own simulated GPU stayed idle (utilization 0 %, ~10 W) and the job's
    pid was never among its process rows (the job's wait for it ran out)."""
    settings = Path(os.environ["RIGSCOPE_CONFIG_DIR"]) / "settings.toml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text("[sampling]\ninterval_s = 0.2\nprocess_interval_s = 0.5\n")  # both processes read it
    db, output = tmp_path / "h.sqlite", tmp_path / "job.json"
    recorder = subprocess.Popen([sys.executable, "-m", "desktop", "record", "--simulate", "--interval", "0.2",
                                 "--db", str(db)], stderr=subprocess.PIPE, text=True, env=_env())
    try:
        until(lambda: _host_rows(db) >= 3)
        job = subprocess.run([sys.executable, "-m", "desktop", "run", "--simulate", "--interval", "0.2", "--db",
                              str(db), "-o", str(output), "--name", "shared-job", "--", sys.executable, "-c",
                              WAIT_FOR_ITS_OWN_ROWS, str(db)],
                             check=False, capture_output=True, text=True, env=_env(), timeout=180)
    finally:
        recorder.send_signal(signal.SIGTERM)
        recorder.communicate(timeout=60)
    assert job.returncode == 0, job.stderr
    with HistoryStore.open(db, readonly=True) as store:
        (stored,) = store.jobs()
        assert stored.ended_s is not None and stored.card is not None
        start, end = stored.started_s, stored.ended_s
        util, power = _samples_over(store, start, end)
        procs = store.process_history(start, end)
        (gpu_info,) = store.gpus()
    assert end - start >= 3.0 and len(util) >= 10, (end - start, len(util))
    # The job's process on the recorder's GPU: its pid, name and command (the shared machine lists it).
    job_pid = next((p.pid for _t, p in procs if p.name == "shared-job"), None)
    assert job_pid is not None, sorted({(p.pid, p.name) for _t, p in procs})
    row = next(p for _t, p in procs if p.pid == job_pid)
    assert row.command is not None and "WAIT_FOR" not in row.command and row.command.startswith(sys.executable)
    assert row.vram_mib is not None and row.vram_mib > 1000
    # Its load in the recorder's samples: busy and near the power limit (before: 0 % and ~10 W).
    assert float(np.nanmean(util)) > 80.0, util
    limit = gpu_info.power_limit_enforced_w
    assert limit is not None
    assert float(np.nanmedian(power)) >= 0.9 * limit, (np.nanmedian(power), limit)
    # The job's card (its own simulated GPU) and the recorder's history agree on the one machine.
    (card_gpu,) = stored.card["gpus"]
    history_busy = float(np.nanmean(busy_share(util)))
    assert abs(card_gpu["busy_share"] - history_busy) <= 0.15, (card_gpu["busy_share"], history_busy)
    history_power = float(np.nanmean(power))
    assert card_gpu["mean_power_w"] == pytest.approx(history_power, rel=0.10), (card_gpu["mean_power_w"],
                                                                                 history_power)
