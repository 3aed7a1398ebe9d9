"""Rollups against a plain re-computation, incremental and late data, retention by resolution."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from desktop.config import RetentionSettings
from desktop.history import bulk
from desktop.history.rollup import apply_retention, run_rollups
from desktop.history.rollup_math import row_durations
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import FULL_INFO

DAY = 86400.0
T0 = 1_790_006_400.0  # a whole hour (and minute) in epoch seconds
assert T0 % 3600 == 0


@pytest.fixture
def store(tmp_path: Path):
    with HistoryStore.open(tmp_path / "h.sqlite") as opened:
        yield opened


def _raw(n: int, seed: int = 1) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    t = T0 + np.cumsum(rng.choice([1.0, 1.0, 1.0, 2.0], n))
    t[n // 2:] += 600.0  # a ten-minute pause in recording
    util = rng.choice([0.0, 35.0, 100.0], n)
    util[rng.random(n) < 0.05] = np.nan
    power = np.round(rng.uniform(20, 150, n), 1)
    energy = 1e6 + np.cumsum(power * 1000.0)
    reasons = rng.choice([0, 1, 4, 0x44], n).astype(np.float64)
    return t, {"utilization_gpu_pct": util, "power_w": power, "energy_mj": energy, "clock_event_reasons": reasons,
               "temperature_c": np.round(rng.uniform(30, 90, n), 1)}


def test_minute_rollups_match_a_plain_computation(store: HistoryStore) -> None:
    t, cols = _raw(4000)
    bulk.write_gpu_columns(store, FULL_INFO, t, cols)
    run_rollups(store, float(t[-1]) + 120)
    dur = row_durations(t)
    assert dur.max() <= 2.0  # the pause counts as one typical interval, not ten minutes
    gid = store.gpu_id(FULL_INFO.uuid)
    rows = store.conn.execute("SELECT ts, utilization_gpu_pct, temperature_c_min, temperature_c_max, busy_ds, dur_ds, "
                              "energy_used_mj, r_4_ds, r_64_ds, reasons_any FROM gpu_minute WHERE gpu = ? ORDER BY ts",
                              (gid,)).fetchall()
    buckets = np.floor(t / 60) * 60
    # energy used = the counter's step to the next sample; across the pause, power x one interval
    used = np.r_[np.diff(cols["energy_mj"]), cols["power_w"][-1] * 1000.0]
    pause = np.flatnonzero(np.diff(t) > 3.0)
    used[pause] = cols["power_w"][pause] * 1000.0 * dur[pause]
    assert [r[0] for r in rows] == sorted(set(buckets.astype(int).tolist()))
    for ts, util_x10, tmin, tmax, busy_ds, dur_ds, energy, r4, r64, anyr in rows[1:-1]:
        sel = buckets == ts
        d, u = dur[sel], cols["utilization_gpu_pct"][sel]
        ok = np.isfinite(u)
        assert util_x10 / 10 == pytest.approx(np.sum(u[ok] * d[ok]) / np.sum(d[ok]), abs=0.05)
        assert (tmin / 10, tmax / 10) == (cols["temperature_c"][sel].min(), cols["temperature_c"][sel].max())
        assert busy_ds / 10 == pytest.approx(np.sum(d[ok & (u > 0)]), abs=0.05)
        assert dur_ds / 10 == pytest.approx(np.sum(d), abs=0.05)
        mask = cols["clock_event_reasons"][sel].astype(int)
        assert r4 / 10 == pytest.approx(np.sum(d[(mask & 4) != 0]), abs=0.05)
        assert r64 / 10 == pytest.approx(np.sum(d[(mask & 64) != 0]), abs=0.05)
        assert anyr == int(np.bitwise_or.reduce(mask))
        assert energy == pytest.approx(np.sum(used[sel]), rel=1e-6, abs=2)
    hours = store.conn.execute("SELECT sum(dur_ds), sum(busy_ds) FROM gpu_hour WHERE gpu = ?", (gid,)).fetchone()
    minutes = store.conn.execute("SELECT sum(dur_ds), sum(busy_ds) FROM gpu_minute WHERE gpu = ? AND ts < ?",
                                 (gid, int(float(store.meta("rollup_hour_until") or 0)))).fetchone()
    assert hours[0] == pytest.approx(minutes[0], abs=len(rows)) and hours[1] == pytest.approx(minutes[1], abs=len(rows))


def test_rollups_are_incremental_and_catch_late_rows(store: HistoryStore) -> None:
    t = T0 + np.arange(0, 600, 1.0)
    bulk.write_gpu_columns(store, FULL_INFO, t[:300], {"power_w": np.full(300, 100.0)})
    run_rollups(store, T0 + 300)
    assert float(store.meta("rollup_minute_until") or 0) == T0 + 300
    # rows for minutes already rolled up arrive late (a buffer flushed after a full disk)
    bulk.write_gpu_columns(store, FULL_INFO, t[100:600:2] + 0.5, {"power_w": np.full(250, 200.0)})
    assert float(store.meta("rollup_minute_until") or 0) == T0 + 60
    run_rollups(store, T0 + 600)
    result = store.query(FULL_INFO.uuid, ["power_w", "duration_s"], T0, T0 + 600, max_points=10_000)
    assert result.resolution == "raw"
    minute = store.query(FULL_INFO.uuid, ["power_w"], T0, T0 + 600, max_points=10)
    assert minute.resolution == "minute" and len(minute) == 10
    assert minute.columns["power_w"][0] == 100.0 and 100.0 < minute.columns["power_w"][3] < 200.0


def test_minute_queries_include_the_rows_not_rolled_up_yet(store: HistoryStore) -> None:
    t = T0 + np.arange(0, 7200, 1.0)
    bulk.write_gpu_columns(store, FULL_INFO, t, {"temperature_c": np.full(len(t), 50.0)})
    run_rollups(store, T0 + 3600)
    result = store.query(FULL_INFO.uuid, ["temperature_c"], T0, T0 + 7200, max_points=120)
    assert result.resolution == "minute" and len(result) == 120
    assert result.time_s[-1] == T0 + 7200 - 60
    assert np.all(result.columns["temperature_c"] == 50.0)


def test_retention_keeps_each_resolution_for_its_time(store: HistoryStore) -> None:
    t = T0 + np.arange(0, 20 * DAY, 30.0)
    bulk.write_gpu_columns(store, FULL_INFO, t, {"power_w": np.full(len(t), 80.0)})
    now = T0 + 20 * DAY
    retention = RetentionSettings(raw_days=3, minute_days=10, hour_days=0)
    apply_retention(store, retention, now)
    assert store.counts()["gpu_samples"] == len(t)  # nothing is rolled up yet: nothing may go
    run_rollups(store, now)
    deleted = apply_retention(store, retention, now)
    assert deleted["gpu_samples"] > 0 and deleted["gpu_minute"] > 0 and "gpu_hour" not in deleted
    first = lambda table, unit: store.conn.execute(f"SELECT min(ts) FROM {table}").fetchone()[0] / unit  # noqa: E731
    assert first("gpu_samples", 1000.0) >= now - 3 * DAY
    assert first("gpu_minute", 1.0) >= now - 10 * DAY
    assert first("gpu_hour", 1.0) == T0
    # An old range is still answered, from the hours.
    old = store.query(FULL_INFO.uuid, ["power_w"], T0, T0 + DAY, max_points=100)
    assert old.resolution == "hour" and len(old) == 24 and np.all(old.columns["power_w"] == 80.0)
    apply_retention(store, RetentionSettings(raw_days=3, minute_days=10, hour_days=15), now)
    assert first("gpu_hour", 1.0) >= now - 15 * DAY


def test_counted_clock_event_seconds_are_summed_in_minutes_hours_and_day_blocks(store: HistoryStore) -> None:
    # A day at 1 Hz (over two UTC days, so two day blocks): every sample counted 0.3 s of SW power
    # cap (the first one nothing yet) and once an hour 0.125 s of HW thermal, which no sampled
    # reason bit ever showed.
    n = int(DAY)
    t = T0 + np.arange(n, dtype=np.float64)
    power_cap = np.full(n, 0.3)
    power_cap[0] = np.nan
    hw_thermal = np.where(np.arange(n) % 3600 == 17, 0.125, 0.0)
    bulk.write_gpu_columns(store, FULL_INFO, t, {
        "utilization_gpu_pct": np.full(n, 100.0), "clock_event_reasons": np.zeros(n),
        "clock_event_sw_power_cap_s": power_cap, "clock_event_hw_thermal_s": hw_thermal})
    run_rollups(store, T0 + 2 * DAY)
    assert store.conn.execute("SELECT count(*) FROM day_blocks WHERE source = 'gpu_minute'").fetchone()[0] == 2
    names = ["clock_event_sw_power_cap_s", "clock_event_hw_thermal_s", "clock_event_hw_power_brake_s",
             "reason_s_64"]
    for resolution, rows, per_row in (("minute", 1440, 18.0), ("hour", 24, 1080.0)):
        result = store.query(FULL_INFO.uuid, names, T0, T0 + DAY, max_points=0, resolution=resolution)
        cols = result.columns
        assert len(result) == rows
        assert cols["clock_event_sw_power_cap_s"][1:] == pytest.approx(np.full(rows - 1, per_row))
        assert float(cols["clock_event_sw_power_cap_s"][0]) == pytest.approx(per_row - 0.3)
        assert float(np.sum(cols["clock_event_sw_power_cap_s"])) == pytest.approx(0.3 * (n - 1))
        assert float(np.sum(cols["clock_event_hw_thermal_s"])) == pytest.approx(24 * 0.125)
        assert float(np.sum(cols["reason_s_64"])) == 0.0  # the bits never saw it
        assert np.isnan(cols["clock_event_hw_power_brake_s"]).all()  # never counted: missing, not 0
