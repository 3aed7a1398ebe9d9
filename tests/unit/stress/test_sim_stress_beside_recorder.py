"""`rigscope stress --device sim` beside `rigscope record --simulate` (issue 32, one simulated machine): the
recorder's history shows the stress run's load and its `rigscope-stress` process (before: an idle GPU).

Two real processes on one history file and the real runtime folder they share.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from desktop.history.store import HistoryStore
from tests.waits import until

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGTERM ends the recorder cleanly")
REPO = Path(__file__).resolve().parents[3]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _host_rows(db: Path) -> int:
    if not db.exists():
        return 0
    with HistoryStore.open(db, readonly=True) as store:
        return store.counts()["host_samples"]


def test_the_recorder_records_a_simulated_stress_run_of_another_process(tmp_path: Path) -> None:
    settings = Path(os.environ["RIGSCOPE_CONFIG_DIR"]) / "settings.toml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text("[sampling]\ninterval_s = 0.2\nprocess_interval_s = 0.5\n")
    db = tmp_path / "h.sqlite"
    recorder = subprocess.Popen([sys.executable, "-m", "desktop", "record", "--simulate", "--interval", "0.2",
                                 "--db", str(db)], stderr=subprocess.PIPE, text=True, env=_env())
    try:
        until(lambda: _host_rows(db) >= 3)
        stress = subprocess.Popen([sys.executable, "-m", "desktop", "stress", "--device", "sim", "--minutes", "0.08",
                                   "--db", str(db), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=_env())
        _out, err = stress.communicate(timeout=180)
        assert stress.returncode in (0, 7), err  # 7: inconclusive, as a 5 s run is: what it loaded is the point
    finally:
        recorder.send_signal(signal.SIGTERM)
        recorder.communicate(timeout=60)
    with HistoryStore.open(db, readonly=True) as store:
        rows = [(t, p) for t, p in store.process_history(0.0, 4e9) if p.pid == stress.pid]
        assert rows, "the stress run's process is not among the recorder's process rows"
        assert {p.name for _t, p in rows} == {"rigscope-stress"}
        first, last = min(t for t, _p in rows), max(t for t, _p in rows)
        (gpu,) = store.gpus()
        util = store.query(gpu.uuid, ["utilization_gpu_pct"], first, last + 0.01, max_points=0,
                           resolution="raw").columns["utilization_gpu_pct"]
    assert len(util) >= 3 and float(np.nanmean(util)) > 80.0, util  # before: 0 % (the recorder's own idle GPU)
