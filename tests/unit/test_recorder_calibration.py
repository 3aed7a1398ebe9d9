"""`rigscope record` re-reads the stress-run calibrations on the window's period: a run saved meanwhile counts."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from advisor.frame import StressResult
from desktop.history.calibration import load_calibrations
from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter
from desktop.recorder import CALIBRATION_RELOAD_S, Recorder
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

T0 = 1_790_000_000.0


def _save_stress_run(path: Path, uuid: str, started_s: float) -> None:
    """What `rigscope stress` stores in another process: a usable TFLOP/s run with its power and clock."""
    n = 600
    with HistoryStore.open(path) as store:
        run_id = store.add_stress_run(StressResult(
            run_id=0, started_s=started_s, ended_s=started_s + n, gpu_uuid=uuid, gpu_name="x", workload="gemm",
            dtype="bf16", unit="TFLOP/s", peak_throughput=70.0, sustained_throughput=61.0, throttled=True,
            errors=0, driver_version="575", summary="ok"))
        store.add_stress_points(run_id, started_s + np.arange(n, dtype=np.float64), {
            "power_w": np.full(n, 140.0), "sm_clock_mhz": np.full(n, 1850.0)})


def test_a_stress_run_saved_while_recording_recalibrates_the_estimate(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    clock = [T0]
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=1)
    (info,) = backend.devices()
    sampler = Sampler(backend, clock=lambda: clock[0])
    writer = HistoryWriter(path)
    writer.start()
    try:
        recorder = Recorder(sampler, writer, clock=lambda: clock[0], maintenance_period_s=1e9,
                            calibrate=sampler.effective_load.calibrate_all)
        recorder.step()  # the GPU is in the history now; no stress run yet
        writer.flush()
        _save_stress_run(path, info.uuid, T0 + 10.0)
        own = load_calibrations(path)[info.uuid]
        assert own.source == "stress run"

        # Before the period is up the recorder keeps the calibration it started with (the datasheet's).
        for _ in range(3):
            clock[0] += CALIBRATION_RELOAD_S / 4
            recorder.step()
        recorder.wait_calibration()
        recorder.step()
        calibration = sampler.effective_load.calibration(info)
        assert calibration is not None and calibration.source == "datasheet"

        clock[0] += CALIBRATION_RELOAD_S / 4  # 300 s since the start: read again, applied on the next tick
        recorder.step()
        recorder.wait_calibration()
        recorder.step()
        assert sampler.effective_load.calibration(info) == own
    finally:
        writer.close()
        sampler.close()


def test_rigscope_record_recalibrates_on_the_period(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from desktop import cli

    db = tmp_path / "h.sqlite"
    seen: dict[str, Any] = {}

    class FastRecorder(Recorder):
        """The command's own recorder on a hand-turned clock: three ticks, a stress run saved between them."""

        def run(self, stop: threading.Event, max_ticks: int | None = None) -> int:
            clock = [T0]
            self.clock = lambda: clock[0]
            sampler = self.sampler
            assert isinstance(sampler, Sampler)
            (info,) = sampler.gpu.devices()
            self.step()
            self.writer.flush()
            _save_stress_run(db, info.uuid, T0 + 10.0)
            clock[0] += CALIBRATION_RELOAD_S
            self.step()
            self.wait_calibration()
            self.step()
            seen["calibration"] = sampler.effective_load.calibration(info)
            seen["uuid"] = info.uuid
            return self.ticks

    import desktop.recorder

    # The session imports the command's recorder where it runs it: replaced in its own module.
    monkeypatch.setattr(desktop.recorder, "Recorder", FastRecorder)
    assert cli.main(["record", "--simulate", "rtx4090-laptop", "--db", str(db)]) == 0
    assert seen["calibration"] == load_calibrations(db)[seen["uuid"]]
    assert seen["calibration"].source == "stress run"
