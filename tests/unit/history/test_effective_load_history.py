"""Effective load in the history: schema v9, rollups, frames, and each GPU's stress-run calibration."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from advisor.frame import StressResult
from desktop.history import layout
from desktop.history.calibration import load_calibrations, stress_calibrations
from desktop.history.frames import load_frame
from desktop.history.rollup import run_rollups
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuInfo
from tests.unit.history.helpers import FULL_INFO, FULL_SAMPLE, snapshot
from tests.unit.history.test_migrations import _old_file

T0 = 1_790_000_040.0
LAPTOP = GpuInfo(index=0, uuid="GPU-laptop", name="NVIDIA GeForce RTX 4090 Laptop GPU", power_limit_enforced_w=150.0,
                 sm_clock_max_mhz=2040.0)


def test_v9_appends_effective_load_and_old_rows_keep_null(tmp_path: Path) -> None:
    path = tmp_path / "v8.sqlite"
    _old_file(path, 8)
    conn = sqlite3.connect(path, isolation_level=None)
    assert "effective_load_pct" not in [r[1] for r in conn.execute("PRAGMA table_info(gpu_samples)")]
    conn.execute("INSERT INTO day_blocks (day, source, gpu, rows, columns, data) "
                 "VALUES (20000, 'gpu_minute', 1, 0, 'ts', x'00')")
    conn.close()
    with HistoryStore.open(path) as store:
        assert [r[1] for r in store.conn.execute("PRAGMA table_info(gpu_samples)")] == ["gpu", "ts", "pack", "counters",
                                                                                         *layout.ROW_METRICS]
        for table in ("gpu_minute", "gpu_hour"):
            columns = [r[1] for r in store.conn.execute(f"PRAGMA table_info({table})")]
            # v11 appended the power-capped seconds and their mean power after it.
            assert columns == ["gpu", "ts", *layout.rollup_columns()]
            assert columns[-3:] == ["effective_load_pct", *layout.CAPPED_ROLLUP_COLUMNS]
        old = store.query("GPU-old", ["temperature_c", "effective_load_pct"], T0 - 100, T0 + 100)
        assert old.columns["temperature_c"].tolist() == [65.5]
        assert np.isnan(old.columns["effective_load_pct"]).all()  # nobody estimated then: missing, not 0
        assert store.conn.execute("SELECT count(*) FROM day_blocks").fetchone()[0] == 0


def test_stored_raw_rolled_up_and_in_the_advisor_frame(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        # Two minutes: 30 % for the first, 60 % for the second (0.1 % grid).
        snaps = [snapshot(T0 + i, sample=dataclasses.replace(FULL_SAMPLE, effective_load_pct=30.0 if i < 60 else 60.0))
                 for i in range(120)]
        store.write_snapshots(snaps)
        raw = store.query(FULL_INFO.uuid, ["effective_load_pct"], T0, T0 + 120, max_points=0, resolution="raw")
        assert raw.columns["effective_load_pct"][[0, 119]].tolist() == [30.0, 60.0]
        run_rollups(store, T0 + 3 * 3600)
        minutes = store.query(FULL_INFO.uuid, ["effective_load_pct"], T0, T0 + 120, resolution="minute")
        assert minutes.columns["effective_load_pct"].tolist() == pytest.approx([30.0, 60.0])
        hour = store.query(FULL_INFO.uuid, ["effective_load_pct"], T0 - 3600, T0 + 3600, resolution="hour")
        assert hour.columns["effective_load_pct"].tolist() == pytest.approx([45.0])  # time-weighted mean
        frame = load_frame(store, T0, T0 + 120)
        (gpu,) = frame.gpus
        assert gpu.effective_load_pct is not None
        assert gpu.effective_load_pct[[0, -1]].tolist() == [30.0, 60.0]


def _run(store: HistoryStore, uuid: str, started_s: float, power_w: float, clock_mhz: float, *,
         errors: int = 0, unit: str = "TFLOP/s", sustained: float = 61.0) -> int:
    result = StressResult(run_id=0, started_s=started_s, ended_s=started_s + 600, gpu_uuid=uuid, gpu_name="x",
                          workload="gemm", dtype="bf16", unit=unit, peak_throughput=70.0,
                          sustained_throughput=sustained, throttled=True, errors=errors, driver_version="575",
                          summary="ok")
    run_id = store.add_stress_run(result)
    n = 600
    store.add_stress_points(run_id, started_s + np.arange(n, dtype=np.float64), {
        "power_w": np.r_[np.full(n // 2, 170.0), np.full(n // 2, power_w)],  # boost first, then settled
        "sm_clock_mhz": np.r_[np.full(n // 2, 2300.0), np.full(n // 2, clock_mhz)],
    })
    return run_id


def test_each_gpu_is_calibrated_by_its_newest_usable_stress_run(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0, info=LAPTOP), snapshot(T0 + 1, info=FULL_INFO)])
        _run(store, LAPTOP.uuid, T0 + 100, 140.0, 1850.0)
        _run(store, LAPTOP.uuid, T0 + 2000, 145.0, 1900.0, sustained=63.0)  # newest: wins
        _run(store, LAPTOP.uuid, T0 + 4000, 99.0, 1000.0, errors=3)  # wrong results: never a calibration
        _run(store, LAPTOP.uuid, T0 + 5000, 99.0, 1000.0, unit="GB/s")  # a memory test: not a full load
        cals = stress_calibrations(store)
    assert set(cals) == {LAPTOP.uuid}  # FULL_INFO ran no stress test: it keeps its datasheet calibration
    cal = cals[LAPTOP.uuid]
    assert (cal.full_w, cal.full_clock_mhz, cal.tflops, cal.source) == (145.0, 1900.0, 63.0, "stress run")
    assert cal.idle_w == 12.0  # the RTX 4090 Laptop's datasheet idle
    assert load_calibrations(path) == cals
    assert load_calibrations(tmp_path / "missing.sqlite") == {}
