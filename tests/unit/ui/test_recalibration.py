"""A stress run saved while the window runs re-calibrates the effective-load estimate without a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from pytestqt.qtbot import QtBot

from advisor.frame import StressResult
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuInfo
from tests.unit.ui.conftest import Harness


def _save_run(path: Path, info: GpuInfo, snapshot: object, power_w: float, clock_mhz: float) -> None:
    """What the Stress page (or `rigscope stress`) stores: a TFLOP/s run with its settled power and clock."""
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot])  # type: ignore[list-item]
        started_s = 1_790_000_000.0
        run_id = store.add_stress_run(StressResult(
            run_id=0, started_s=started_s, ended_s=started_s + 600, gpu_uuid=info.uuid, gpu_name=info.name,
            workload="gemm", dtype="bf16", unit="TFLOP/s", peak_throughput=70.0, sustained_throughput=61.0,
            throttled=False, errors=0, driver_version="simulated", summary="ok"))
        n = 600
        store.add_stress_points(run_id, started_s + np.arange(n, dtype=np.float64), {
            "power_w": np.full(n, power_w), "sm_clock_mhz": np.full(n, clock_mhz)})


def test_a_run_saved_on_the_stress_page_recalibrates_the_sampler(
        make_app: Callable[..., Harness], qtbot: QtBot, tmp_path: Path) -> None:
    h = make_app()
    h.app.db_path = tmp_path / "history.sqlite"
    snap = h.tick()
    info = snap.gpus[0].info
    effective = h.app.sampler.effective_load
    before = effective.calibration(info)
    assert before is not None and before.source == "datasheet"
    _save_run(h.app.db_path, info, snap, power_w=131.0, clock_mhz=1830.0)
    h.app.stress.finished.emit(None)  # the page judged and saved the run
    qtbot.waitUntil(lambda: getattr(effective.calibration(info), "source", None) == "stress run", timeout=5000)
    after = effective.calibration(info)
    assert after is not None and (after.full_w, after.full_clock_mhz) == (131.0, 1830.0)
    # The next reading is estimated against the new calibration.
    reading = h.tick().gpus[0]
    assert reading.sample is not None and reading.sample.effective_load_pct is not None


def test_a_run_saved_from_a_terminal_is_picked_up_by_the_periodic_reload(
        make_app: Callable[..., Harness], qtbot: QtBot, tmp_path: Path) -> None:
    h = make_app()
    h.app.db_path = tmp_path / "history.sqlite"
    h.app.start(show=False)
    assert h.app.calibration_timer.isActive()
    snap = h.tick()
    info = snap.gpus[0].info
    _save_run(h.app.db_path, info, snap, power_w=128.0, clock_mhz=1800.0)  # `rigscope stress` in a terminal
    h.app.calibration_timer.timeout.emit()  # the timer's period, without waiting five minutes
    effective = h.app.sampler.effective_load
    qtbot.waitUntil(lambda: getattr(effective.calibration(info), "full_w", None) == 128.0, timeout=5000)
    h.app.shutdown()
    assert not h.app.calibration_timer.isActive()
