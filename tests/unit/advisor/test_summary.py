"""Weekly summary and the statistics under it, on crafted frames with known answers."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from advisor.frame import GpuSeries
from advisor.rules import run_rules
from advisor.stats import busy_intervals, busy_seconds, reason_seconds, weighted_mean, weighted_percentile
from advisor.summary import weekday_hour, weekly_summary
from tests.unit.advisor.crafted import START_S, STEP_S, N, busy_mask, frame, gpu, processes

BUSY = busy_mask()
MINUTE = np.arange(N)


def test_weighted_mean_and_percentile_ignore_nan() -> None:
    values = np.array([10.0, np.nan, 30.0])
    weights = np.array([3.0, 100.0, 1.0])
    assert weighted_mean(values, weights) == pytest.approx((30 + 30) / 4)  # (10x3 + 30x1) / 4
    assert weighted_percentile(values, weights, 50) == 10.0
    assert weighted_percentile(values, weights, 95) == 30.0
    assert np.isnan(weighted_mean(np.array([np.nan]), np.array([1.0])))


def test_busy_seconds_from_utilization_and_from_processes_where_unknown() -> None:
    g = gpu()
    assert busy_seconds(g).sum() == 360 * 60
    unknown = gpu(utilization_gpu_pct=np.full(N, np.nan))
    assert busy_seconds(unknown, processes()).sum() == 360 * 60  # train.py present while busy
    assert busy_seconds(unknown, None).sum() == 0
    (interval,) = busy_intervals(g)
    assert (interval.start_s, interval.end_s) == (START_S + 60 * STEP_S, START_S + 420 * STEP_S)


def test_busy_intervals_bridge_short_pauses_only() -> None:
    pause = BUSY & ~((MINUTE >= 200) & (MINUTE < 201))  # a 1-minute checkpoint pause: one run
    assert len(busy_intervals(gpu(utilization_gpu_pct=np.where(pause, 90.0, 0.0)))) == 1
    gap = BUSY & ~((MINUTE >= 200) & (MINUTE < 230))  # 30 minutes: two runs
    assert len(busy_intervals(gpu(utilization_gpu_pct=np.where(gap, 90.0, 0.0)))) == 2


def test_rollup_reason_seconds_use_the_per_bit_seconds() -> None:
    g = gpu()
    rolled = dataclasses.replace(g, reason_seconds={0x20: np.full(N, 30.0), 0x40: np.full(N, 20.0)})
    # SW and HW thermal overlap: per row the larger (30 s), not the sum
    assert reason_seconds(rolled, (0x20, 0x40)).sum() == pytest.approx(30.0 * N)


def test_heatmap_is_in_local_time() -> None:
    # busy 01:00-07:00 UTC on Monday 2025-11-24 = Sunday 20:00 - Monday 02:00 in New York (UTC-5)
    s = weekly_summary(frame(), tz=ZoneInfo("America/New_York"))
    heat = s.gpus[0].heatmap_pct
    assert heat[6][19] == 0.0 and heat[6][20] == 95.0 and heat[6][23] == 95.0  # Sunday evening
    assert heat[0][0] == 95.0 and heat[0][1] == 95.0 and heat[0][2] == 0.0  # Monday night
    assert np.isnan(heat[3][12])  # Thursday: nothing recorded
    assert s.gpus[0].daily_busy_hours[6] == pytest.approx(4.0) and s.gpus[0].daily_busy_hours[0] == pytest.approx(2.0)
    utc = weekly_summary(frame()).gpus[0].heatmap_pct
    assert utc[0][0] == 0.0 and utc[0][1] == 95.0 and utc[0][6] == 95.0 and utc[0][7] == 0.0


def test_weekday_hour_follows_daylight_saving_changes() -> None:
    # Europe/Berlin moved from UTC+1 to UTC+2 at 01:00 UTC on Sunday 2026-03-29
    t = np.array([datetime(2026, 3, 29, 0, 30, tzinfo=UTC).timestamp(),
                  datetime(2026, 3, 29, 1, 30, tzinfo=UTC).timestamp()])
    weekday, hour = weekday_hour(t, ZoneInfo("Europe/Berlin"))
    assert weekday.tolist() == [6, 6] and hour.tolist() == [1, 3]


def test_weekly_summary_figures() -> None:
    hot = BUSY & (MINUTE >= 360)  # the last busy hour: 88 °C, thermally throttled, VRAM at 95 %
    g = gpu(temperature_c=np.where(hot, 88.0, np.where(BUSY, 70.0, 40.0)),
            clock_event_reasons=np.where(hot, 0x60, np.where(BUSY, 0, 1)).astype(np.int64),
            vram_used_mib=np.where(hot, 0.95 * 24564, np.where(BUSY, 0.6 * 24564, 400.0)))
    f = frame(gpus=(g,), processes=processes([(0, 1, "train.py", 14000.0, BUSY),
                                              (0, 2, "ipykernel", 2000.0, np.ones(N, dtype=bool))]))
    s = weekly_summary(f, price_per_kwh=0.25, recommendations=run_rules(f))
    w = s.gpus[0]
    assert w.busy_hours == pytest.approx(6.0)
    assert w.mean_util_busy_pct == pytest.approx(95.0)
    # energy from power x time: 6 h x 300 W + 2 h x 20 W = 1.84 kWh; x 0.25 = 0.46
    assert w.energy_kwh == pytest.approx(1.84)
    assert w.energy_cost == pytest.approx(0.46)
    assert w.peak_temp_c == 88.0
    # p95 over 8 h: the hottest 1 h is 12.5 % of the time, so p95 is 88
    assert w.p95_temp_c == 88.0
    assert w.throttle_minutes == {"thermal": 60.0, "power cap": 0.0, "HW slowdown": 0.0}
    assert w.vram_above_90_minutes == pytest.approx(60.0)
    assert w.vram_peak_mib == pytest.approx(0.95 * 24564)
    top = s.top_processes
    assert [p.name for p in top] == ["train.py", "ipykernel"]  # both 6 GPU-hours: the bigger VRAM first
    assert top[1].present_hours == pytest.approx(8.0) and top[1].gpu_hours == pytest.approx(6.0)
    assert [r.rule_id for r in s.recommendations] == ["thermal_throttling"]
    assert s.changes == () and not s.has_previous


def test_changes_against_the_previous_week() -> None:
    before = frame()
    cooler: GpuSeries = gpu(utilization_gpu_pct=np.where(BUSY, 80.0, 0.0))
    s = weekly_summary(frame(gpus=(cooler,)), previous=before)
    changes = {c.label: c for c in s.changes}
    assert changes["Mean utilization while busy"].before == pytest.approx(95.0)
    assert changes["Mean utilization while busy"].delta == pytest.approx(-15.0)
    assert changes["Busy hours"].delta == pytest.approx(0.0)
    assert s.has_previous


def test_empty_and_unknown_data_give_no_advice_and_no_errors() -> None:
    from advisor.frame import HistoryFrame

    empty = HistoryFrame(start_s=START_S, end_s=START_S + 3600, gpus=())
    assert run_rules(empty) == []
    assert weekly_summary(empty).notes == ("No history recorded in this week.",)
    g = gpu()
    no_rows = dataclasses.replace(g, **{f.name: getattr(g, f.name)[:0] for f in dataclasses.fields(g)
                                        if isinstance(getattr(g, f.name), np.ndarray)})
    f = frame(gpus=(no_rows,), host=None, processes=None)
    assert run_rules(f) == []
    assert weekly_summary(f).gpus[0].busy_hours == 0.0
    # a GPU that reports no utilization: busy time comes from its processes; nothing to advise
    blind = gpu(utilization_gpu_pct=np.full(N, np.nan), temperature_c=np.full(N, np.nan))
    s = weekly_summary(frame(gpus=(blind,)))
    assert s.gpus[0].busy_hours == pytest.approx(6.0) and np.isnan(s.gpus[0].mean_util_busy_pct)
    assert np.isnan(s.gpus[0].peak_temp_c)
    assert run_rules(frame(gpus=(blind,))) == []
