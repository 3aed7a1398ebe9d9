"""load_frame: every GpuSeries field filled, raw for short spans, minute rollups for long ones."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from advisor.frame import GPU_SERIES_METRICS, StressResult
from desktop.history import bulk
from desktop.history.demo import write_demo
from desktop.history.frames import load_frame
from desktop.history.rollup import run_rollups
from desktop.history.store import HistoryStore
from desktop.telemetry.model import ClockEventReason
from desktop.telemetry.simulated import parse_profile_list
from tests.unit.history.helpers import FULL_INFO

NOW = 1_795_000_020.0  # a whole minute
assert NOW % 60 == 0


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.sqlite"
    write_demo(path, parse_profile_list("rtx4090-laptop,rtx4090"), days=1.0, seed=3, now_s=NOW)
    return path


def test_raw_frame_from_demo_history_fills_every_field(demo_db: Path) -> None:
    with HistoryStore.open(demo_db, readonly=True) as store:
        assert store.is_demo
        frame = load_frame(store, NOW - 86400, NOW, platform="win32")
    assert frame.demo and frame.platform == "windows" and len(frame.gpus) == 2
    series = frame.gpus[0]
    n = len(series)
    assert n == 86399  # the sample at NOW itself lies outside [NOW - 1 day, NOW)
    for name in (*GPU_SERIES_METRICS, "duration_s", "busy_s", "utilization_gpu_max_pct", "vram_used_max_mib",
                 "temperature_max_c", "clock_event_reasons"):
        values = getattr(series, name)
        assert values is not None and values.shape == (n,), name
    assert series.clock_event_reasons.dtype == np.int64
    assert set(series.reason_seconds) == {int(r) for r in ClockEventReason.decode(0x7FF)}
    idle = series.reason_seconds[int(ClockEventReason.GPU_IDLE)]
    np.testing.assert_array_equal(idle, np.where(series.clock_event_reasons & 1, series.duration_s, 0.0))
    assert float(np.sum(series.duration_s)) == pytest.approx(86400, abs=2)
    # energy from the counter agrees with power x time
    by_power = np.nansum(series.power_w * series.duration_s) * 1000.0
    assert np.nansum(series.energy_mj) == pytest.approx(by_power, rel=0.02)
    assert series.meta.power_limit_w is not None and series.meta.simulated
    assert frame.host is not None and len(frame.host.time_s) == 86400 // 5 - 1
    assert frame.processes is not None and len(frame.processes.names) >= 1
    assert len(frame.processes.users) == len(frame.processes.names)
    assert set(frame.processes.gpu_index.tolist()) <= {0, 1}
    assert np.all(frame.processes.duration_s == 5.0)
    # Throttle episodes, and the demo laptop's power envelope (issue 25: state, limit line, battery, powerd).
    assert {e.kind for e in frame.events} <= {"throttle_start", "throttle_end", "envelope.state", "envelope.limit",
                                              "envelope.ac", "envelope.powerd"}


def test_long_spans_use_minute_rollups_with_the_same_totals(tmp_path: Path) -> None:
    t = NOW - 3 * 86400 + np.arange(0, 3 * 86400, 5.0)
    util = np.where((t // 3600) % 2 == 0, 100.0, 0.0)
    reasons = np.where(util > 0, 0x44, 0x1).astype(np.float64)
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        bulk.write_gpu_columns(store, FULL_INFO, t, {"utilization_gpu_pct": util, "power_w": util + 20,
                                                     "clock_event_reasons": reasons, "temperature_c": util / 2 + 30})
        run = StressResult(0, NOW - 7200, NOW - 6000, FULL_INFO.uuid, "Test GPU", "gemm", "bf16", "TFLOP/s", 70.0,
                           60.0, True, 0, None, "throttled")
        run_id = store.add_stress_run(run)
        store.add_stress_run(dataclasses.replace(run, started_s=NOW + 10))  # after the range: left out
        run_rollups(store, NOW - 3600)  # the last hour is not rolled up yet: the frame still has it
        long = load_frame(store, NOW - 3 * 86400, NOW)
        short = load_frame(store, NOW - 86400, NOW)
    minute = long.gpus[0]
    assert len(minute) == 3 * 1440 and np.all(minute.duration_s == 60.0)
    assert minute.busy_s is not None and float(np.sum(minute.busy_s)) == pytest.approx(float(np.sum(util > 0) * 5))
    assert float(np.sum(minute.reason_seconds[0x40])) == pytest.approx(float(np.sum(util > 0) * 5))
    assert minute.temperature_max_c is not None and float(np.max(minute.temperature_max_c)) == 80.0
    assert set(np.unique(minute.clock_event_reasons).tolist()) == {0x1, 0x44}
    raw = short.gpus[0]
    assert len(raw) == 86400 // 5
    assert [r.run_id for r in long.stress_results] == [run_id]
    assert long.processes is None and long.host is None and not long.demo and long.platform in ("linux", "darwin",
                                                                                                "windows")


@pytest.mark.parametrize("cuts", [(), (130,), (7, 250, 251, 420), tuple(range(25, 600, 25))],
                         ids=["whole", "one-cut-in-an-episode", "uneven", "every-25-s"])
def test_demo_throttle_events_match_what_the_recorder_writes(tmp_path: Path, cuts: tuple[int, ...]) -> None:
    # The demo feeds its traces a day at a time (issue 38): however the trace is cut, the events are the
    # recorder's, none split at a cut and none lost at the end.
    from desktop.history.demo import _ThrottleEpisodes
    from tests.unit.history.helpers import FULL_SAMPLE, snapshot

    rng = np.random.default_rng(5)
    t = NOW + np.arange(600, dtype=np.float64)
    masks = np.where(rng.random(600) < 0.3, 0x4, 0x1) * (np.arange(600) % 200 < 120)
    with HistoryStore.open(tmp_path / "a.sqlite") as live, HistoryStore.open(tmp_path / "b.sqlite") as demo:
        live.write_snapshots([snapshot(float(ti), sample=dataclasses.replace(FULL_SAMPLE, clock_event_reasons=int(m)))
                              for ti, m in zip(t, masks, strict=True)])
        with demo.transaction():
            demo.ensure_gpu(FULL_INFO, NOW)
        episodes = _ThrottleEpisodes(demo, FULL_INFO.uuid)
        for lo, hi in zip((0, *cuts), (*cuts, 600), strict=True):
            episodes.feed(t[lo:hi], masks[lo:hi].astype(np.float64))
        episodes.finish()
        seen = [(e.time_s, e.kind, e.detail) for e in live.events(0, 2e9)]
        assert seen == [(e.time_s, e.kind, e.detail) for e in demo.events(0, 2e9)]
        assert [k for _, k, _ in seen].count("throttle_start") == 3


def test_frames_carry_the_counted_seconds_raw_and_rolled_up(demo_db: Path, tmp_path: Path) -> None:
    # The simulated history integrates time under each cause second by second, as NVML counts it.
    copy = tmp_path / "demo.sqlite"
    shutil.copy(demo_db, copy)  # rolled up here: the module's other tests keep the file as written
    with HistoryStore.open(copy) as store:
        raw = load_frame(store, NOW - 86400, NOW).gpus[0]
        run_rollups(store, NOW)
        minute = load_frame(store, NOW - 3 * 86400, NOW).gpus[0]
    assert set(raw.counted_seconds) == set(minute.counted_seconds) == {0x4, 0x20, 0x40, 0x80}
    for bit, counted in raw.counted_seconds.items():
        assert counted.shape == (len(raw),)
        by_bits = float(np.sum(raw.reason_seconds[bit]))
        assert float(np.nansum(counted)) == pytest.approx(by_bits, abs=2.0), hex(bit)
        assert float(np.nansum(minute.counted_seconds[bit])) == pytest.approx(float(np.nansum(counted)), abs=2.0)
    assert float(np.nansum(raw.counted_seconds[0x4])) > 0  # the demo laptop runs into its power cap
