"""The window's simulated GPU is this user's one simulated machine (issue 32): a job another process runs on
its simulated GPU shows on the window's Dashboard and Processes page, and the window's own simulated workloads
are published for the other processes (a `rigscope record --simulate` beside it records them).

A real child process (tests/unit/telemetry/sim_load_child.py) and real files in the runtime folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from desktop.telemetry.simulated import WORKLOADS
from tests.waits import until

REPO = Path(__file__).resolve().parents[3]
CHILD = REPO / "tests" / "unit" / "telemetry" / "sim_load_child.py"


def _folder() -> Path:
    return Path(os.environ["RIGSCOPE_RUNTIME_DIR"]) / "sim-loads"


def test_another_processes_job_shows_on_the_windows_simulated_gpu(make_app: Any, tmp_path: Path) -> None:
    """Before the shared loads the window's GPU stayed idle and its Processes page empty while the job ran."""
    h = make_app(shared=True)
    app = h.app
    idle = h.tick()
    assert idle.gpus[0].sample is not None and (idle.gpus[0].sample.utilization_gpu_pct or 0.0) == 0.0
    go = tmp_path / "stop"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with subprocess.Popen([sys.executable, str(CHILD), str(go)], env=env, stdout=subprocess.PIPE,
                          text=True) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "loaded"
            busy = h.tick(20)
            sample = busy.gpus[0].sample
            limit = busy.gpus[0].info.power_limit_enforced_w
            assert sample is not None and limit is not None
            assert (sample.utilization_gpu_pct or 0.0) > 90.0 and (sample.power_w or 0.0) >= 0.9 * limit
            rows = {p.pid: p for p in app.processes.model.rows}
            assert child.pid in rows, rows
            assert (rows[child.pid].name, rows[child.pid].command) == ("sim-child", "sim-child --train")
        finally:
            go.write_text("stop")
            child.communicate(timeout=60)
    until(lambda: not (_folder() / f"{child.pid}.json").exists())
    h.tick(3)
    assert child.pid not in {p.pid for p in app.processes.model.rows}


def test_the_windows_workloads_are_published_for_the_other_processes(make_app: Any) -> None:
    h = make_app(shared=True)
    h.app.start_workload("training")
    body = json.loads((_folder() / f"{os.getpid()}.json").read_text())
    assert [(e["pid"], e["workload"], e["command"]) for e in body["loads"]] == [
        (WORKLOADS["training"].pid, "training", WORKLOADS["training"].command)]
    h.app.simulated.stop_workloads()
    assert not (_folder() / f"{os.getpid()}.json").exists()
