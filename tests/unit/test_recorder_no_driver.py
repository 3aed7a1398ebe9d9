"""No usable driver (issue 32): `rigscope record` records the host, never a simulated GPU, and the GPU when it is back.

A real recorder process over the fake NVML whose ``nvmlInit`` fails with LIB_RM_VERSION_MISMATCH ("driver/library
version mismatch", what every NVML client gets after a driver update until the reboot) and then answers again,
switched by a file the fake reads at every init (tests/unit/no_driver_recorder_child.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest

from desktop.history.store import HistoryStore
from tests.waits import until

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
REPO = Path(__file__).resolve().parents[2]
CHILD = REPO / "tests" / "unit" / "no_driver_recorder_child.py"
MISMATCH = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH


def _switch(path: Path, **state: object) -> None:
    """What the fake NVML answers at its next init: written whole (a rename), never read half-written."""
    part = path.with_suffix(".part")
    part.write_text(json.dumps(state))
    os.replace(part, path)


def _start(db: Path, switch: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, str(CHILD), str(db), str(switch)], stderr=subprocess.PIPE, text=True,
                            env=env)


def _counts(db: Path) -> dict[str, int]:
    if not db.exists():
        return {}
    with HistoryStore.open(db, readonly=True) as store:
        return store.counts()


def _events(db: Path, kind: str) -> list[str]:
    with HistoryStore.open(db, readonly=True) as store:
        return [e.detail for e in store.events(0.0, 4e9, [kind])]


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


@posix_only
def test_record_with_a_driver_mismatch_records_the_host_and_the_gpu_when_it_is_back(tmp_path: Path) -> None:
    db, switch = tmp_path / "h.sqlite", tmp_path / "nvml.json"
    # Before the update: the GPU recorded under driver 565.57.01.
    _switch(switch, init_error=None, driver_version="565.57.01")
    proc = _start(db, switch)
    try:
        until(lambda: _counts(db).get("gpu_samples", 0) >= 3)
    finally:
        _stop(proc)
    before = _counts(db)

    # The driver was updated underneath: every nvmlInit fails with the mismatch until the "reboot".
    _switch(switch, init_error=MISMATCH, driver_version="570.86.16")
    proc = _start(db, switch)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "no GPU readable" in first and "version mismatch" in first, first
        until(lambda: _counts(db).get("host_samples", 0) >= before["host_samples"] + 10)
        during = _counts(db)
        assert during["gpu_samples"] == before["gpu_samples"]  # nothing simulated, nothing at all of a GPU
        assert during["gpus"] == 1  # no simulated GPU joined the real one
        until(lambda: bool(_events(db, "gpu_unavailable")))
        assert "version mismatch" in _events(db, "gpu_unavailable")[0]

        # The reboot: NVML answers again (new driver); the recorder finds it on its next try.
        _switch(switch, init_error=None, driver_version="570.86.16")
        until(lambda: _counts(db).get("gpu_samples", 0) >= during["gpu_samples"] + 3)
        until(lambda: bool(_events(db, "gpu_available")) and bool(_events(db, "driver_change")))
    finally:
        err = _stop(proc)
    assert "the GPU is back" in err, err
    assert _events(db, "driver_change") == ["565.57.01 -> 570.86.16"]
    after = _counts(db)
    assert after["gpus"] == 1 and after["host_samples"] > during["host_samples"]
