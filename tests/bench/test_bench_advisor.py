"""Benchmark: weekly summary from a stored week of 1 Hz data for 2 GPUs, and advice over 30 days.

Targets (issue 6): summary < 300 ms, advice over 30 days < 1 s. The history is written by the
real `rigscope demo` code (desktop.history.demo.write_demo: 30 days of 1 Hz GPU samples for two
GPUs, 5 s host and process samples, minute and hour rollups, day blocks). ``load_frame`` reads
spans over two days from the minute rollups, whole days from their day blocks, as the app does.
"Stored week -> summary" loads the week and the week before (for the changes), runs the rules
(for the top recommendations) and builds the summary. The same load without day blocks (row by
row from SQLite, as before the blocks existed) is measured for comparison.
Timings are the median of several runs; nothing asserts on them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from advisor.frame import HistoryFrame
from advisor.rules import run_rules
from advisor.summary import weekly_summary
from desktop import config
from desktop.advice import compute_advice, load_cloud_offers, load_gpu_specs
from desktop.history.demo import write_demo
from desktop.history.frames import load_frame
from desktop.history.store import HistoryStore
from desktop.telemetry.scenarios import week_start
from desktop.telemetry.simulated import parse_profile_list
from tests.bench.timing import median_s
from tests.unit.advisor.demo_frame import demo_week_frame

WEEK_S = 7 * 86400.0
MONTH_S = 30 * 86400.0
END_S = week_start(1_795_000_000.0)  # a Monday 00:00 UTC: the stored week is one whole ISO week


def _median_s(fn: Callable[[], object], repeat: int = 5) -> float:
    return median_s(fn, repeat)


def test_bench_advisor(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    started = time.perf_counter()
    write_demo(path, parse_profile_list("rtx4090-laptop,rtx4090"), days=30, now_s=END_S)
    build_s = time.perf_counter() - started
    settings = config.Settings()
    offers, specs = load_cloud_offers(), load_gpu_specs()
    with HistoryStore.open(path, readonly=True) as store:
        rows = store.counts()["gpu_samples"]

        def load() -> HistoryFrame:
            return load_frame(store, END_S - WEEK_S, END_S, platform=sys.platform)

        def load_month() -> HistoryFrame:
            return load_frame(store, END_S - MONTH_S, END_S, platform=sys.platform)

        week = load()
        previous = load_frame(store, END_S - 2 * WEEK_S, END_S - WEEK_S, platform=sys.platform)
        load_s = _median_s(load)
        summary_s = _median_s(lambda: weekly_summary(week, previous=previous, price_per_kwh=0.17))

        def stored_week_summary() -> object:
            frame = load()
            before = load_frame(store, END_S - 2 * WEEK_S, END_S - WEEK_S, platform=sys.platform)
            return weekly_summary(frame, previous=before, price_per_kwh=0.17, recommendations=run_rules(frame))

        end_to_end_s = _median_s(stored_week_summary)
        month = load_month()
        month_load_s = _median_s(load_month, repeat=3)
        advice_s = _median_s(lambda: compute_advice(month, settings, offers, specs), repeat=3)
        month_end_to_end_s = _median_s(lambda: compute_advice(load_month(), settings, offers, specs), repeat=3)
    with HistoryStore.open(path) as store:
        store.conn.execute("SAVEPOINT unpacked")
        store.conn.execute("DELETE FROM day_blocks")
        unpacked_s = _median_s(lambda: load_frame(store, END_S - WEEK_S, END_S, platform=sys.platform), repeat=3)
        store.conn.execute("ROLLBACK TO unpacked")
        store.conn.execute("RELEASE unpacked")
    raw = demo_week_frame("rtx4090-laptop,rtx4090")
    raw_summary_s = _median_s(lambda: weekly_summary(raw, price_per_kwh=0.17), repeat=3)
    raw_rules_s = _median_s(lambda: run_rules(raw), repeat=3)
    rows_week = sum(len(g) for g in week.gpus)
    rows_month = sum(len(g) for g in month.gpus)
    rows_raw = sum(len(g) for g in raw.gpus)
    print()
    print(f"stored demo history: {rows:,} GPU samples (30 days at 1 Hz, 2 GPUs), written in {build_s:.1f} s")
    print("| step | rows read/analysed | median | target |")
    print("| --- | --- | --- | --- |")
    print(f"| load_frame, 1 week, 2 GPUs (minute rollups) | {rows_week:,} | {load_s * 1000:.0f} ms | |")
    print(f"| load_frame, 1 week, without day blocks (row by row) | {rows_week:,} | {unpacked_s * 1000:.0f} ms | |")
    print(f"| weekly_summary on that frame (+ previous week) | {rows_week:,} | {summary_s * 1000:.0f} ms | |")
    print(f"| stored week -> summary (2 loads, rules, summary) | {rows_week:,} | {end_to_end_s * 1000:.0f} ms "
          "| < 300 ms |")
    print(f"| load_frame, 30 days, 2 GPUs (minute rollups) | {rows_month:,} | {month_load_s * 1000:.0f} ms | |")
    print(f"| advice on that frame (rules, profiles, costs) | {rows_month:,} | {advice_s * 1000:.0f} ms | |")
    print(f"| load + advice (stored 30 days -> advice) | {rows_month:,} | {month_end_to_end_s * 1000:.0f} ms "
          "| < 1 s |")
    print(f"| weekly_summary on raw 1 Hz rows (in memory), 2 GPUs | {rows_raw:,} | {raw_summary_s * 1000:.0f} ms | |")
    print(f"| run_rules on raw 1 Hz rows (in memory), 2 GPUs | {rows_raw:,} | {raw_rules_s * 1000:.0f} ms | |")
    assert rows == 2 * 30 * 86400
    assert len(month.gpus) == 2 and rows_month == 2 * 30 * 1440
