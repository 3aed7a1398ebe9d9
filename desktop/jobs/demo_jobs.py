"""The demo week with its jobs: the training runs of the week's scenario recorded as `rigscope run` records them.

``desktop.history.demo`` writes the simulated week (samples, processes, events, rollups); this adds the
week's training runs as jobs (the Jobs page and `rigscope jobs` list them), each with the throughput a
tqdm bar would have printed (following the GPU's utilization and clock in the samples) and the card
built from the demo's own samples by the one card function (``desktop.jobs.card.build_card``), so every
figure on it agrees with the charts and the other pages. `rigscope demo` and the window's "Load demo
week" both write the week through ``write_demo_week``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from advisor.frame import GpuSeries
from advisor.progress import JobSeries
from desktop.config import CostSettings
from desktop.history.demo import DemoSummary, write_demo
from desktop.history.store import HistoryStore
from desktop.jobs.card import build_card, job_frame
from desktop.jobs.model import JobRecord
from desktop.telemetry.scenarios import WEEK_S, Episode, WeekScenario, week_start
from desktop.telemetry.simulated import GpuProfile

#: The episodes of GPU 0 that are jobs (kind -> throughput unit, items per second at full load and max clock).
JOB_KINDS: dict[str, tuple[str, float]] = {
    "training": ("it/s", 3.2), "finetune": ("samples/s", 48.0), "memory-bound": ("samples/s", 5200.0),
    "starved": ("it/s", 9.5), "battery": ("it/s", 14.0),
}
#: A tqdm bar reports about every 10 s in the series, its rate an exponential moving average over ~40 s.
REPORT_EVERY_S = 10.0
SMOOTH_S = 40.0


def write_demo_week(path: Path, profiles: list[GpuProfile], *, days: float = 7.0, seed: int = 0,
                    now_s: float | None = None, costs: CostSettings | None = None,
                    progress: Callable[[float, str], None] | None = None) -> DemoSummary:
    """``write_demo`` and then the week's jobs (``add_demo_jobs``); the summary counts them under "jobs"."""
    summary = write_demo(path, profiles, days=days, seed=seed, now_s=now_s, progress=progress)
    jobs = add_demo_jobs(path, profiles, seed=seed, start_s=summary.start_s, end_s=summary.end_s, costs=costs)
    return replace(summary, counts={**summary.counts, "jobs": jobs})


def job_episodes(scenario: WeekScenario, start_s: float, end_s: float) -> list[tuple[float, float, Episode]]:
    """GPU 0's job episodes wholly inside [start_s, end_s], in time order: (start, end, episode)."""
    out = []
    week = week_start(start_s)
    while week < end_s:
        for episode in scenario.episodes(0):
            begin, finish = week + episode.start_s, week + episode.end_s
            if episode.kind in JOB_KINDS and begin >= start_s and finish <= end_s:
                out.append((begin, finish, episode))
        week += WEEK_S
    return sorted(out, key=lambda e: e[0])


def tqdm_series(gpu: GpuSeries, start_s: float, end_s: float, rate: float) -> JobSeries:
    """What a tqdm bar would have printed: ``rate`` x utilization x clock share, smoothed, every ~10 s."""
    rows = (gpu.time_s >= start_s) & (gpu.time_s < end_s)
    times = gpu.time_s[rows]
    if len(times) == 0:
        return JobSeries()
    top = gpu.meta.sm_clock_max_mhz or float(np.nanmax(gpu.sm_clock_mhz[rows]))
    instant = np.nan_to_num(rate * gpu.utilization_gpu_pct[rows] / 100.0 * gpu.sm_clock_mhz[rows] / top)
    step = float(np.median(np.diff(times))) if len(times) > 1 else 1.0
    weights = np.exp(-np.arange(int(3 * SMOOTH_S / step) + 1) * step / SMOOTH_S)
    shown = np.convolve(instant, weights / weights.sum())[: len(instant)]
    every = max(1, round(REPORT_EVERY_S / step))
    return JobSeries(time_s=times[::every].copy(), throughput=shown[::every].copy())


def add_demo_jobs(path: Path, profiles: list[GpuProfile], *, seed: int = 0, start_s: float, end_s: float,
                  costs: CostSettings | None = None) -> int:
    """The demo week's job episodes (GPU 0) that lie wholly in [start_s, end_s] of the demo database at
    ``path``, stored as jobs run under `rigscope run` with their cards; returns how many."""
    from desktop.advice import load_cloud_offers, load_gpu_specs

    scenario = WeekScenario([p.vram_total_mib for p in profiles], seed=seed)
    costs = costs if costs is not None else CostSettings()
    offers, specs = load_cloud_offers(), load_gpu_specs()
    written = 0
    with HistoryStore.open(path) as store:
        if not store.is_demo:  # jobs that never ran go only into a database labelled as demo data
            raise ValueError(f"{path} is not a demo database")
        info = next((i for i in store.gpus() if i.index == 0), None)
        if info is None:
            return 0
        for begin, finish, episode in job_episodes(scenario, start_s, end_s):
            unit, rate = JOB_KINDS[episode.kind]
            argv = tuple(episode.command.split()) if episode.command else ("python", episode.process)
            record = JobRecord(job_id=0, name=episode.process, argv=argv, started_s=begin, ended_s=finish,
                               exit_code=0, pids=(episode.pid,), gpu_uuids=(info.uuid,), gpu_indices=(info.index,),
                               throughput_unit=unit, source="simulated", last_seen_s=finish)
            frame = job_frame(store, record, finish)
            gpus = [g for g in frame.gpus if g.meta.uuid == info.uuid]
            if not gpus:
                continue
            series = tqdm_series(gpus[0], begin, finish, rate)
            job_id = store.add_job(record)
            stored = replace(record, job_id=job_id)
            card = build_card(stored, series, frame, costs, offers=offers, specs=specs, now_s=finish)
            store.update_job(replace(stored, card=card.as_dict()))
            store.set_job_series(job_id, series)
            written += 1
    return written
