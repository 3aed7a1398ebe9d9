"""A stress run saved while the window runs re-calibrates the effective-load estimate without a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from pytestqt.qtbot import QtBot

from advisor.frame import StressResult
from desktop.history.store import HistoryStore
from desktop.recorder import CALIBRATION_RELOAD_S
from desktop.sessions.recording import RecordingSession
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
    db = tmp_path / "history.sqlite"
    recording = RecordingSession.open(db)
    assert recording.mode == "recording", recording.detail
    h = make_app(recording=recording)
    h.app.db_path = db
    snap = h.tick()
    info = snap.gpus[0].info
    effective = h.app.sampler.effective_load
    before = effective.calibration(info)
    assert before is not None and before.source == "datasheet"
    _save_run(db, info, snap, power_w=131.0, clock_mhz=1830.0)
    h.app.stress.finished.emit(None)  # the page judged and saved the run
    # The recording's next tick reads them on the writer thread; the one after applies them.
    qtbot.waitUntil(lambda: _tick_until(h, lambda: getattr(effective.calibration(info), "source", None)
                                        == "stress run"), timeout=5000)
    after = effective.calibration(info)
    assert after is not None and (after.full_w, after.full_clock_mhz) == (131.0, 1830.0)
    # The next reading is estimated against the new calibration.
    reading = h.tick().gpus[0]
    assert reading.sample is not None and reading.sample.effective_load_pct is not None


def test_a_run_saved_from_a_terminal_is_picked_up_on_the_recordings_period(
        make_app: Callable[..., Harness], qtbot: QtBot, tmp_path: Path) -> None:
    """The window's period is `rigscope record`'s (one schedule, on the sampler's clock), also while it only
    reads the history that another process records."""
    db = tmp_path / "history.sqlite"
    with HistoryStore.open(db):
        pass
    store = HistoryStore.open(db, readonly=True)
    h = make_app(recording=RecordingSession("reading", "another process records", store=store, db_path=db))
    h.app.db_path = db
    snap = h.tick()
    info = snap.gpus[0].info
    _save_run(db, info, snap, power_w=128.0, clock_mhz=1800.0)  # `rigscope stress` in a terminal
    effective = h.app.sampler.effective_load
    h.clock.step_s = CALIBRATION_RELOAD_S / 2
    h.tick()  # half the period: not read yet
    recorder = h.app.recording.recorder
    assert recorder is not None
    recorder.wait_calibration()
    h.tick()
    assert getattr(effective.calibration(info), "full_w", None) != 128.0
    h.tick()  # the period is up: read off the sampling thread, applied on the next tick
    recorder.wait_calibration()
    h.clock.step_s = 1.0
    h.tick()
    assert getattr(effective.calibration(info), "full_w", None) == 128.0
    h.app.shutdown()


def _tick_until(h: Harness, done: Callable[[], bool]) -> bool:
    h.tick()
    return done()
