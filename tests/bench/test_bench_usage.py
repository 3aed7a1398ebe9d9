"""Benchmark: usage accounting over a week of process samples (issue 16).

A week of process polls every 5 s on one GPU, two processes each poll (241,920 rows, the SM
share reported on nine polls in ten), against the GPU's minute rows of energy (10,080): the
split and the totals by user, as `rigscope usage` and the weekly report compute them. The
median of five runs is printed; nothing asserts on it.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from advisor.usage import GpuEnergy, ProcessUsageRows, account_usage

T0 = 1_763_942_400.0
WEEK_S = 7 * 86400.0


def _week() -> tuple[ProcessUsageRows, GpuEnergy]:
    polls = T0 + np.arange(0.0, WEEK_S, 5.0)
    n = polls.size
    rng = np.random.default_rng(0)
    sm = rng.uniform(0.0, 100.0, 2 * n)
    sm[rng.uniform(size=2 * n) < 0.1] = np.nan
    rows = ProcessUsageRows(
        time_s=np.repeat(polls, 2), duration_s=np.full(2 * n, 5.0), gpu=np.zeros(2 * n, dtype=np.int64),
        pid=np.tile(np.array([10, 20], dtype=np.int64), n), vram_mib=np.tile(np.array([6000.0, 2000.0]), n),
        sm_util_pct=sm, user=np.tile(np.array([0, 1], dtype=np.int64), n),
        command=np.tile(np.array([2, 3], dtype=np.int64), n), container=np.full(2 * n, -1, dtype=np.int64),
        labels=("ana", "bo", "python train.py", "python infer.py"), gpu_uuids=("GPU-a",))
    minutes = T0 + np.arange(0.0, WEEK_S, 60.0)
    energy = GpuEnergy("GPU-a", minutes, np.full(minutes.size, 60.0), rng.uniform(0.5, 3.0, minutes.size))
    return rows, energy


def test_bench_usage_week() -> None:
    rows, energy = _week()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        table = account_usage(rows, [energy], "user", start_s=T0, end_s=T0 + WEEK_S, price_per_kwh=0.3,
                              currency="EUR")
        times.append(time.perf_counter() - start)
    print(f"\nUsage accounting, one week ({len(rows):,} process rows, {energy.time_s.size:,} energy rows): "
          f"median {statistics.median(times) * 1000:.0f} ms; basis {table.basis}")
