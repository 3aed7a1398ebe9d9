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


def test_bench_shared_loads_refresh() -> None:
    """What a simulated machine pays per reading for the loads other processes share (shared.py): a listing
    and one tiny file per process, with 1, 8 and 64 publishers (64: the most it reads)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from desktop.telemetry.simulated import SharedEntry, SharedLoads
    from desktop.telemetry.simulated.shared import process_mark

    folder = Path(os.environ["RIGSCOPE_RUNTIME_DIR"]) / "sim-loads"
    folder.mkdir(parents=True, mode=0o700)
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    parent = other.pid  # alive and not this process: its file is read as a live one
    body = {"version": 1, "pid": parent, "mark": process_mark(parent),
            "loads": [SharedEntry(0, parent, "job", 1.0, 6144.0, "python train.py").as_json()]}
    print()
    print("| publishers | µs per refresh | µs per file |")
    print("| --- | --- | --- |")
    for count in (1, 8, 64):
        (folder / f"{parent}.json").write_text(json.dumps(body))
        for n in range(count - 1):  # the others: files of the same live pid under other names are skipped as
            (folder / f"{n + 1_000_000}.json").write_text("{}")  # not the format: costs a stat and a read each
        shared = SharedLoads(folder, min_period_s=0.0)
        rounds = 500
        started = time.perf_counter()
        for _ in range(rounds):
            shared.refresh()
        per = (time.perf_counter() - started) / rounds * 1e6
        assert [e.pid for e in shared.others] == [parent]
        print(f"| {count} | {per:.0f} | {per / count:.0f} |")
        for path in folder.iterdir():
            path.unlink()
    other.communicate(timeout=60)
