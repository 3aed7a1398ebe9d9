"""Benchmark: how fast the simulated GPU runs a day, in bulk (demo history) and tick by tick (live)."""

from __future__ import annotations

import time

from desktop.telemetry.scenarios import WeekScenario, week_start
from desktop.telemetry.simulated import SimulatedBackend, SimulatedGpuModel, parse_profile_list

T0 = week_start(1_790_000_000.0)


def test_bench_simulated_week() -> None:
    profiles = parse_profile_list("rtx4090-laptop")
    model = SimulatedGpuModel(profiles, WeekScenario([p.vram_total_mib for p in profiles], seed=0), seed=0)
    started = time.perf_counter()
    trace = model.trace(0, T0, T0 + 7 * 86400)
    bulk_s = time.perf_counter() - started
    backend = SimulatedBackend(profiles, WeekScenario([p.vram_total_mib for p in profiles], seed=0))
    ticks = 20_000
    started = time.perf_counter()
    for second in range(ticks):
        backend.sample(T0 + second)
    live_s = time.perf_counter() - started
    print()
    print("| simulated GPU, 1 Hz, 1 GPU | seconds per simulated day | µs per sample |")
    print("| --- | --- | --- |")
    print(f"| bulk trace (demo history), 7 days | {bulk_s / 7:.2f} | {bulk_s / len(trace.time_s) * 1e6:.1f} |")
    print(f"| live sample() ({ticks} ticks) | {live_s / ticks * 86400:.2f} | {live_s / ticks * 1e6:.1f} |")
    assert len(trace.time_s) == 7 * 86400
