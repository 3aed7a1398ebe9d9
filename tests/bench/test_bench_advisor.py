"""Benchmark: weekly summary from a stored week of 1 Hz data for 2 GPUs, and advice over 30 days.

Targets (issue 6): summary < 300 ms, advice over 30 days < 1 s. The stored week is written by
the real `rigscope demo` code (desktop.history.demo.write_demo: 1 Hz GPU samples, 5 s host and
process samples, minute and hour rollups). load_frame reads a week from the minute rollups, as
the app does for any span over two days. For 30 days the stored week's minute-resolution frame
is repeated back to back (the shape and size `load_frame` returns for 30 days, 43,200 rows per
GPU) because simulating and storing 30 days at 1 Hz here would take minutes.
Timings are the median of several runs; nothing asserts on them.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from advisor.frame import GpuSeries, HistoryFrame, HostSeries, ProcessSamples
from advisor.rules import run_rules
from advisor.summary import weekly_summary
from desktop import config
from desktop.advice import compute_advice, load_cloud_offers, load_gpu_specs
from desktop.history.demo import write_demo
from desktop.history.frames import load_frame
from desktop.history.store import HistoryStore
from desktop.telemetry.scenarios import week_start
from desktop.telemetry.simulated import parse_profile_list
from tests.unit.advisor.demo_frame import demo_week_frame

WEEK_S = 7 * 86400.0
END_S = week_start(1_795_000_000.0)  # a Monday 00:00 UTC: the stored week is one whole ISO week


def _median_s(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _shift(arr: np.ndarray, offset: float) -> np.ndarray:
    return arr + offset


def _repeat(frame: HistoryFrame, copies: int) -> HistoryFrame:
    """``copies`` weeks back to back (the same week, shifted by whole weeks)."""
    def cat(arrays: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(arrays)

    offsets = [k * WEEK_S for k in range(copies)]
    gpus = []
    for g in frame.gpus:
        changes: dict[str, object] = {"time_s": cat([g.time_s + o for o in offsets])}
        for f in dataclasses.fields(GpuSeries):
            value = getattr(g, f.name)
            if f.name in ("meta", "time_s"):
                continue
            if isinstance(value, np.ndarray):
                changes[f.name] = cat([value] * copies)
            elif isinstance(value, dict):
                changes[f.name] = {k: cat([v] * copies) for k, v in value.items()}
        gpus.append(dataclasses.replace(g, **changes))
    host = frame.host
    if host is not None:
        host = HostSeries(**{f.name: (cat([getattr(host, f.name) + o for o in offsets]) if f.name == "time_s"
                                      else cat([getattr(host, f.name)] * copies)) for f in dataclasses.fields(host)})
    procs = frame.processes
    if procs is not None:
        procs = ProcessSamples(**{f.name: (cat([procs.time_s + o for o in offsets]) if f.name == "time_s"
                                           else getattr(procs, f.name) if f.name in ("names", "users")
                                           else cat([getattr(procs, f.name)] * copies))
                                  for f in dataclasses.fields(procs)})
    return dataclasses.replace(frame, end_s=frame.start_s + copies * WEEK_S, gpus=tuple(gpus), host=host,
                               processes=procs)


def test_bench_advisor(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    started = time.perf_counter()
    write_demo(path, parse_profile_list("rtx4090-laptop,rtx4090"), days=7, now_s=END_S)
    build_s = time.perf_counter() - started
    settings = config.Settings()
    offers, specs = load_cloud_offers(), load_gpu_specs()
    with HistoryStore.open(path, readonly=True) as store:
        rows = store.counts()["gpu_samples"]

        def load() -> HistoryFrame:
            return load_frame(store, END_S - WEEK_S, END_S, platform=sys.platform)

        week = load()
        previous = load_frame(store, END_S - 2 * WEEK_S, END_S - WEEK_S, platform=sys.platform)
        load_s = _median_s(load)
        summary_s = _median_s(lambda: weekly_summary(week, previous=previous, price_per_kwh=0.17))
        end_to_end_s = _median_s(lambda: weekly_summary(load(), previous=previous, price_per_kwh=0.17,
                                                       recommendations=run_rules(week)))
    month = _repeat(week, 5)  # 35 days; cut to 30 below
    month = dataclasses.replace(month, end_s=month.start_s + 30 * 86400)
    month = dataclasses.replace(month, gpus=tuple(
        dataclasses.replace(g, **{f.name: getattr(g, f.name)[g.time_s < month.end_s]
                                  for f in dataclasses.fields(g)
                                  if isinstance(getattr(g, f.name), np.ndarray)},
                            reason_seconds={k: v[g.time_s < month.end_s] for k, v in g.reason_seconds.items()})
        for g in month.gpus))
    advice_s = _median_s(lambda: compute_advice(month, settings, offers, specs), repeat=3)
    raw = demo_week_frame("rtx4090-laptop,rtx4090")
    raw_summary_s = _median_s(lambda: weekly_summary(raw, price_per_kwh=0.17), repeat=3)
    raw_rules_s = _median_s(lambda: run_rules(raw), repeat=3)
    rows_week = sum(len(g) for g in week.gpus)
    rows_month = sum(len(g) for g in month.gpus)
    rows_raw = sum(len(g) for g in raw.gpus)
    print()
    print(f"stored demo week: {rows:,} GPU samples at 1 Hz for 2 GPUs, written in {build_s:.1f} s")
    print("| step | rows read/analysed | median | target |")
    print("| --- | --- | --- | --- |")
    print(f"| load_frame, 1 week, 2 GPUs (minute rollups) | {rows_week:,} | {load_s * 1000:.0f} ms | |")
    print(f"| weekly_summary on that frame (+ previous week) | {rows_week:,} | {summary_s * 1000:.0f} ms | |")
    print(f"| load + summary (stored week -> summary) | {rows_week:,} | {end_to_end_s * 1000:.0f} ms | < 300 ms |")
    print(f"| advice over 30 days (rules, profiles, costs), 2 GPUs | {rows_month:,} | {advice_s * 1000:.0f} ms "
          "| < 1 s |")
    print(f"| weekly_summary on raw 1 Hz rows (in memory), 2 GPUs | {rows_raw:,} | {raw_summary_s * 1000:.0f} ms | |")
    print(f"| run_rules on raw 1 Hz rows (in memory), 2 GPUs | {rows_raw:,} | {raw_rules_s * 1000:.0f} ms | |")
    assert rows == 2 * 7 * 86400
    assert len(month.gpus) == 2 and rows_month == 2 * 30 * 1440
