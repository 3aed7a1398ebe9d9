"""Busy means busy (issue 22): above a utilization threshold, and with a compute process where processes are known.

A GPU that drives a desktop shows 1-5 % all day; with "busy = utilization > 0" it counted as busy
24 hours a day in the rollups, the own-vs-rent costs, a job's busy share and the weekly report.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC
from pathlib import Path

import numpy as np
import pytest

from advisor.busy import DEFAULT_BUSY_UTIL_PCT, busy_share
from advisor.job_figures import gpu_figures
from advisor.rules.base import RuleContext
from advisor.stats import busy_seconds
from advisor.summary import gpu_week, top_processes
from advisor.thresholds import Thresholds
from desktop.advice import usage_of
from desktop.config import Settings, validate
from desktop.history.rollup_math import aggregate, raw_as_rollup
from desktop.telemetry.model import GPU_METRIC_NAMES
from tests.unit.advisor import crafted

ALL_DAY = np.ones(crafted.N, dtype=bool)


def _display_gpu(util_pct: float = 3.0) -> crafted.GpuSeries:
    return crafted.gpu(utilization_gpu_pct=np.full(crafted.N, util_pct))


def _with_kinds(rows: list[tuple[int, int, str, float, np.ndarray]], compute: list[bool]) -> crafted.ProcessSamples:
    """crafted.processes(rows), each row's process marked compute or not (graphics: Xorg, a compositor)."""
    procs = crafted.processes(rows)
    kind_of_name = {name: compute[i] for i, (_g, _p, name, _v, _m) in enumerate(rows)}
    return dataclasses.replace(procs, compute=np.array([kind_of_name[procs.names[n]] for n in procs.name_id]))


XORG = [(0, 900, "Xorg", 300.0, ALL_DAY)]


def test_a_display_gpu_at_a_few_percent_is_idle_all_day() -> None:
    gpu = _display_gpu(3.0)
    frame = crafted.frame(gpus=(gpu,), processes=_with_kinds(XORG, [False]))
    assert float(busy_seconds(gpu, frame.processes).sum()) == 0.0
    # Without process lists at all the threshold alone decides: 3 % is not work either.
    assert float(busy_seconds(gpu, None).sum()) == 0.0
    week = gpu_week(frame, gpu, UTC, 0.17)
    assert week.busy_hours == 0.0
    assert usage_of(frame, 0).busy_s == 0.0  # the own-vs-rent costs
    assert gpu_figures(gpu, crafted.START_S, crafted.START_S + crafted.N * crafted.STEP_S,
                       processes=frame.processes).busy_s == 0.0  # a job's busy share
    assert top_processes(frame)[0].gpu_hours == 0.0  # the report's process table


def test_only_graphics_processes_listed_is_idle_whatever_the_utilization() -> None:
    gpu = _display_gpu(60.0)  # a game
    assert float(busy_seconds(gpu, _with_kinds(XORG, [False])).sum()) == 0.0
    training = [(0, 1234, "train.py", 9000.0, ALL_DAY)]
    assert float(busy_seconds(gpu, _with_kinds(training, [True])).sum()) == crafted.N * crafted.STEP_S
    # Processes never listed: above the threshold is busy.
    assert float(busy_seconds(gpu, None).sum()) == crafted.N * crafted.STEP_S


def test_unknown_utilization_is_busy_only_with_a_compute_process() -> None:
    gpu = crafted.gpu(utilization_gpu_pct=np.full(crafted.N, np.nan))
    assert float(busy_seconds(gpu, _with_kinds(XORG, [False])).sum()) == 0.0
    six_hours = 360 * crafted.STEP_S
    assert float(busy_seconds(gpu, crafted.processes()).sum()) == six_hours  # train.py while it ran
    np.testing.assert_array_equal(busy_share([np.nan, np.nan, 50.0], [1.0, np.nan, np.nan]), [1.0, np.nan, 1.0])


def test_rollups_count_busy_seconds_above_the_threshold_only() -> None:
    n = 120
    time_s = 1_763_942_400.0 + np.arange(n, dtype=np.float64)
    raw = {m: np.full(n, np.nan) for m in GPU_METRIC_NAMES}
    raw["utilization_gpu_pct"] = np.where(np.arange(n) < 60, 3.0, 40.0)  # a desktop minute, then a busy one
    _, minutes = aggregate(time_s, raw_as_rollup(time_s, raw), 60)
    assert minutes["busy_s"].tolist() == [0.0, 60.0]
    _, loose = aggregate(time_s, raw_as_rollup(time_s, raw, busy_util_pct=2.0), 60)
    assert loose["busy_s"].tolist() == [60.0, 60.0]


def test_the_threshold_is_a_setting() -> None:
    assert Settings().advisor.busy_util_pct == DEFAULT_BUSY_UTIL_PCT == 10.0
    settings, problems = validate({"advisor": {"busy_util_pct": 150.0}})
    assert settings is None and [key for key, _ in problems] == ["advisor.busy_util_pct"]
    assert validate({"advisor": {"busy_util_pct": 2.5}})[0] is not None
    gpu = _display_gpu(3.0)
    frame = crafted.frame(gpus=(gpu,), processes=None)
    assert float(RuleContext(frame, Thresholds(busy_util_pct=2.0), ()).gpu_busy(gpu).sum()) > 0.0
    assert float(RuleContext(frame, Thresholds(), ()).gpu_busy(gpu).sum()) == 0.0


def test_the_threshold_setting_reaches_stored_raw_samples(tmp_path: Path) -> None:
    """Stored frames carry busy seconds counted at the default: a raw sample is counted again at the setting."""
    from desktop.history.frames import load_frame
    from desktop.history.importer import import_result
    from desktop.history.nvsmi_csv import parse_nvsmi_csv
    from desktop.history.store import HistoryStore

    lines = ["timestamp, index, utilization.gpu [%]"]
    lines += [f"2025/06/10 10:{s // 60:02d}:{s % 60:02d}.000, 0, 5 %" for s in range(120)]  # a desktop at 5 %
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        result = parse_nvsmi_csv("\n".join(lines) + "\n")
        result.source = "desk.csv"
        import_result(store, result)
        ((time_s, _),) = result.series.values()
        frame = load_frame(store, float(time_s[0]), float(time_s[-1]) + 1.0)
    (gpu,) = frame.gpus
    assert gpu.samples
    assert float(busy_seconds(gpu).sum()) == 0.0
    assert float(busy_seconds(gpu, threshold_pct=2.0).sum()) == pytest.approx(120.0, abs=1.0)
    assert float(RuleContext(frame, Thresholds(busy_util_pct=2.0), ()).gpu_busy(gpu).sum()) > 0.0
