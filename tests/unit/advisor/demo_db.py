"""Test helper: write the simulated demo week into a real history database (store, bulk writes, rollups).

Used until (and beside) `rigscope demo`: it exercises the same path the app reads, load_frame
over minute rollups, with the same scenario the demo uses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from desktop.history.bulk import write_gpu_columns, write_host_samples, write_process_samples
from desktop.history.rollup import run_rollups
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuProcess
from desktop.telemetry.scenarios import WeekScenario
from desktop.telemetry.simulated import SimulatedGpuModel, parse_profile_list, profile_info
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S


def write_demo_db(path: Path, profiles: str = "rtx4090-laptop", *, days: float = 7.0, interval_s: float = 5.0,
                  start_s: float = DEMO_WEEK_START_S, seed: int = 0) -> tuple[float, float]:
    """Simulate ``days`` from ``start_s`` into ``path``; returns (start, end)."""
    end = start_s + days * 86400
    gpus = parse_profile_list(profiles)
    scenario = WeekScenario([p.vram_total_mib for p in gpus], seed=seed)
    model = SimulatedGpuModel(gpus, scenario, seed=seed)
    with HistoryStore.open(path) as store:
        store.set_meta("demo", "1")
        for index, prof in enumerate(gpus):
            trace = model.trace(index, start_s, end, interval_s)
            # trace times end each step; stored rows start it, so the week holds exactly [start, end)
            write_gpu_columns(store, profile_info(prof, index), trace.time_s - interval_s, trace.columns)
        host_t = np.arange(start_s, end, 10.0).tolist()
        write_host_samples(store, [(t, scenario.host(t)) for t in host_t])
        procs = []
        for t in np.arange(start_s, end, 10.0).tolist():
            for index, prof in enumerate(gpus):
                for pid, name, vram in scenario.demand(index, t).processes:
                    procs.append((t, profile_info(prof, index).uuid,
                                  GpuProcess(pid=pid, gpu_index=index, name=name, user="demo", vram_mib=vram)))
        write_process_samples(store, procs)
        run_rollups(store, end + 3600.0)
    return start_s, end
