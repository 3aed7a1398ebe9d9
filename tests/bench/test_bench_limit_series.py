"""Benchmark: judging a fast log whose power limit moves (issue 32), against the same log without the series.

A 1 M-row log sampled every 7 ms (one load, four Dynamic Boost steps 80 -> 105 -> 150 -> 175 W) is judged
by ``verdicts_for_log`` with its per-row ``power_limit_w`` column and without it. Timings are the best of
three runs; nothing asserts on them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from advisor.log_verdict import verdicts_for_log

ROWS = 1_000_000
STEP_S = 0.007


def _best_s(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def test_bench_limit_series() -> None:
    rng = np.random.default_rng(1)
    time_s = np.arange(ROWS) * STEP_S
    limit = np.repeat([80.0, 105.0, 150.0, 175.0], ROWS // 4)
    columns = {"utilization_gpu_pct": np.full(ROWS, 100.0), "power_w": limit - np.abs(rng.normal(0.0, 1.0, ROWS)),
               "sm_clock_mhz": 1500.0 + limit * 4.0 + rng.normal(0.0, 15.0, ROWS)}
    without = _best_s(lambda: verdicts_for_log(time_s, columns, power_limit_w=175.0))
    series = {**columns, "power_limit_w": limit}
    with_series = _best_s(lambda: verdicts_for_log(time_s, series, power_limit_w=175.0))
    print(f"\n1 M rows at 7 ms, one load: judged without the limit series {without:.2f} s, "
          f"with it (4 steps) {with_series:.2f} s")
