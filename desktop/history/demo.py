"""Demo history: a simulated week (or more) written into a separate, clearly labelled database.

The GPUs are simulated in bulk (``SimulatedGpuModel.trace``) under the demo week scenario,
ending now; host and process samples follow the same scenario every five seconds, each process
with its episode's user, command line and container (a shared workstation: dev, ana, sam);
throttle events and minute rollups are derived from the traces in memory. The meta key
``demo=1`` labels the file, so every view built from it can say "demo data".
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from desktop.config import RetentionSettings
from desktop.errors import UserError
from desktop.history import bulk, rollup
from desktop.history.lock import WriterLock
from desktop.history.snapshot_rows import THROTTLE_END_GAP_S
from desktop.history.store import HistoryStore
from desktop.telemetry.envelope import EnvelopeEvent, EnvelopeWatch
from desktop.telemetry.model import (
    THROTTLE_REASONS,
    ClockEventReason,
    DeviceState,
    GpuInfo,
    GpuProcess,
    GpuReading,
    Snapshot,
    SourceInfo,
)
from desktop.telemetry.scenarios import WeekScenario
from desktop.telemetry.simulated import GpuProfile, SimulatedGpuModel, profile_info
from desktop.telemetry.simulated.envelope import SimulatedEnvelope
from desktop.telemetry.simulated.load import Demand

_AUX_PERIOD_S = 5.0
_DEMO_USER = "demo"


@dataclass(frozen=True)
class DemoSummary:
    path: Path
    start_s: float
    end_s: float
    gpus: list[str]
    counts: dict[str, int]
    seconds: float


def _shares(demand: Demand) -> list[tuple[float, str | None]]:
    """Each process's share of the GPU's utilization (as the simulated backend splits it) and its command."""
    procs = demand.processes
    if len(demand.details) == len(procs) and procs:
        total = sum(d.load for d in demand.details)
        return [(d.load / total if total > 0 else 0.0, d.command) for d in demand.details]
    return [(1.0 / len(procs), None) for _ in procs]


class _ThrottleEpisodes:
    """The throttle events the recorder would have written, from a trace fed in consecutive chunks.

    Episodes are split by 30 s without a throttle reason. An episode is written once it is closed (30 s
    of calm seen after it); the open one carries its samples into the next chunk, so chunking never
    splits or drops one, and ``finish`` writes the start of an episode still open at the end."""

    def __init__(self, store: HistoryStore, uuid: str) -> None:
        self._store, self._uuid = store, uuid
        self._time = np.empty(0, dtype=np.float64)
        self._mask = np.empty(0, dtype=np.int64)

    def feed(self, time_s: np.ndarray, reasons: np.ndarray) -> None:
        mask = np.nan_to_num(reasons, nan=0.0).astype(np.int64) & int(THROTTLE_REASONS)
        self._time = np.concatenate([self._time, time_s])
        self._mask = np.concatenate([self._mask, mask])
        self._write(final=False)

    def finish(self) -> None:
        self._write(final=True)

    def _write(self, *, final: bool) -> None:
        time_s, mask = self._time, self._mask
        hot = np.flatnonzero(mask)
        if len(hot) == 0:
            self._time, self._mask = time_s[:0], mask[:0]
            return
        # Between two throttled samples the episode ends when the unthrottled ones span 30 s.
        apart = hot[1:] - hot[:-1] > 1
        first_calm = time_s[np.minimum(hot[:-1] + 1, len(time_s) - 1)]
        last_calm = time_s[np.maximum(hot[1:] - 1, 0)]
        breaks = np.flatnonzero(apart & (last_calm - first_calm >= THROTTLE_END_GAP_S))
        starts = np.r_[0, breaks + 1]
        ends = np.r_[breaks, len(hot) - 1]
        keep_from = len(time_s)
        with self._store.transaction():
            for first, last in zip(starts.tolist(), ends.tolist(), strict=True):
                after = hot[last] + 1
                closed = after < len(time_s) and time_s[-1] - time_s[after] >= THROTTLE_END_GAP_S
                if not closed and not final:  # the last episode may go on in the next chunk
                    keep_from = int(hot[first])
                    break
                episode = int(np.bitwise_or.reduce(mask[hot[first]:hot[last] + 1]))
                detail = ", ".join(r.label for r in ClockEventReason.decode(episode))
                self._store.add_event(float(time_s[hot[first]]), "throttle_start", self._uuid, detail)
                if closed:
                    self._store.add_event(float(time_s[after]), "throttle_end", self._uuid, detail)
        self._time, self._mask = time_s[keep_from:], mask[keep_from:]


def _day_chunks(start_s: float, end_s: float) -> list[tuple[float, float]]:
    """``(start_s, end_s]`` cut at UTC midnights, on the 1 s sample grid from ``start_s``: each chunk ends on
    the last sample before a midnight, so no minute (and no day block) is split between two chunks."""
    cuts = [start_s]
    day = (math.floor(start_s / 86400.0) + 1) * 86400.0
    while day < end_s:
        cut = start_s + math.ceil(day - start_s) - 1.0
        if cut > cuts[-1]:
            cuts.append(cut)
        day += 86400.0
    cuts.append(end_s)
    return list(itertools.pairwise(cuts))


#: The demo laptop's nvidia-powerd crashes while the forgotten notebook holds the GPU (Wed 12:00 - Thu
#: ~10:30) and is back when work resumes (issue reports: a crashed powerd leaves the GPU at its base power).
_POWERD_DOWN_KIND = "notebook-idle"


def envelope_events(scenario: WeekScenario, infos: list[GpuInfo], start_s: float, end_s: float,
                    step_s: float = 60.0) -> list[EnvelopeEvent]:
    """The envelope events the recorder would have written: the demo laptop in Balanced with nvidia-powerd,
    on battery for the bench.py hour, nvidia-powerd stopped over the idle notebook stretch.

    The GPU traces keep their 150 W limit throughout (the line then reads "capped at 150 W of 175 W: ...").
    """
    watch = EnvelopeWatch()
    source = SourceInfo("simulated", "demo week")
    readings = tuple(GpuReading(info, DeviceState.OK, None) for info in infos)
    base = SimulatedEnvelope()
    out: list[EnvelopeEvent] = []
    last: SimulatedEnvelope | None = None
    for t in np.arange(start_s, end_s, step_s).tolist():
        episode = scenario.episode(0, t)
        state = base.with_changes(on_ac=episode.on_ac_power if episode is not None else True,
                                  powerd_running=episode is None or episode.kind != _POWERD_DOWN_KIND,
                                  battery_pct=80.0)
        if state == last:
            continue
        last = state
        out.extend(watch.events(Snapshot(t, 0.0, source, readings, envelope=state.power_envelope())))
    return out


def _write_aux(store: HistoryStore, scenario: WeekScenario, infos: list[GpuInfo], start_s: float, *,
               lo_s: float, hi_s: float) -> None:
    """Host and process samples every five seconds from ``start_s``, those in ``(lo_s, hi_s]``."""
    first = math.floor((lo_s - start_s) / _AUX_PERIOD_S) + 1
    last = math.floor((hi_s - start_s) / _AUX_PERIOD_S)
    aux_times = start_s + _AUX_PERIOD_S * np.arange(max(first, 1), last + 1)
    if len(aux_times) == 0:
        return
    hosts = [(float(t), scenario.host(float(t))) for t in aux_times]
    bulk.write_host_samples(store, hosts)
    rollup.roll_host_arrays(store, aux_times, {
        "cpu_pct": np.array([h.cpu_pct for _, h in hosts], dtype=np.float64),
        "ram_used_mib": np.array([h.ram_used_mib for _, h in hosts], dtype=np.float64),
        "ram_total_mib": np.array([h.ram_total_mib for _, h in hosts], dtype=np.float64),
        "on_ac_power": np.array([h.on_ac_power for _, h in hosts], dtype=np.float64),
        "battery_pct": np.array([h.battery_pct for _, h in hosts], dtype=np.float64),
    })
    procs = []
    for t in aux_times.tolist():
        for info in infos:
            demand = scenario.demand(info.index, t)
            episode = scenario.episode(info.index, t)
            user, container = (episode.user, episode.container) if episode is not None else (_DEMO_USER, None)
            for (pid, name, vram), (share, command) in zip(demand.processes, _shares(demand), strict=True):
                procs.append((t, info.uuid, GpuProcess(
                    pid=pid, gpu_index=info.index, name=name, user=user, vram_mib=vram, own=True,
                    sm_util_pct=100.0 * demand.load * share,
                    mem_util_pct=100.0 * demand.load * demand.mem_util * share,
                    enc_util_pct=0.0, dec_util_pct=0.0, command=command, container=container)))
    bulk.write_process_samples(store, procs)


def write_demo(path: Path, profiles: list[GpuProfile], *, days: float = 7.0, seed: int = 0,
               now_s: float | None = None, progress: Callable[[float, str], None] | None = None,
               retention: RetentionSettings | None = None) -> DemoSummary:
    """Replace the demo database at ``path`` with ``days`` of simulated history ending at ``now_s``, kept as
    ``retention`` (the shipped one by default) would have kept it.

    ``progress(fraction, step)`` hears how far it is (the window's "Load demo week" shows it)."""
    def step(fraction: float, text: str) -> None:
        if progress is not None:
            progress(fraction, text)

    if not math.isfinite(days) or not 0 < days <= 366:
        raise UserError("--days must be between 0 and 366")
    clock_start = time.perf_counter()
    retention = retention if retention is not None else RetentionSettings()
    end = float(now_s if now_s is not None else time.time())
    start = end - days * 86400.0
    with WriterLock(path):
        if path.exists():
            with HistoryStore.open(path, readonly=True) as existing:
                if not existing.is_demo:
                    raise UserError(f"{path} holds real history, not demo data; refusing to overwrite it "
                                    "(choose another --db)")
            try:
                for suffix in ("", "-wal", "-shm"):
                    path.with_name(path.name + suffix).unlink(missing_ok=True)
            except OSError as exc:  # Windows: a window still has it open
                raise UserError(f"cannot replace the demo database {path}: {exc.strerror or exc} "
                                "(close windows that show it, then try again)") from exc
        with HistoryStore.open(path) as store:
            store.set_meta("demo", "1")
            store.set_meta("demo_seed", str(seed))
            scenario = WeekScenario([p.vram_total_mib for p in profiles], seed=seed)
            model = SimulatedGpuModel(profiles, scenario, seed=seed)
            infos = [profile_info(p, i) for i, p in enumerate(profiles)]
            episodes = [_ThrottleEpisodes(store, info.uuid) for info in infos]
            chunks = _day_chunks(start, end)
            # A day at a time (issue 38): memory stays that of one day whatever ``days`` is, each day rolled up
            # and the shipped retention applied as the recorder would have, so the file keeps raw samples for
            # its raw days and minutes for its minute days, not the whole span at 1 Hz.
            for n, (lo, hi) in enumerate(chunks):
                step(0.95 * n / len(chunks), f"Simulating day {n + 1} of {len(chunks)}…")
                for i, info in enumerate(infos):
                    trace = model.trace(i, lo, hi, 1.0)
                    bulk.write_gpu_columns(store, info, trace.time_s, trace.columns)
                    gid = store.gpu_id(info.uuid)
                    assert gid is not None
                    rollup.roll_arrays(store, gid, trace.time_s, trace.columns)
                    episodes[i].feed(trace.time_s, trace.columns["clock_event_reasons"])
                    del trace
                _write_aux(store, scenario, infos, start, lo_s=lo, hi_s=hi)
                store.set_meta("rollup_minute_until", repr(math.floor(hi / 60) * 60.0))
                rollup.maintain(store, retention, hi)
            for one in episodes:
                one.finish()
            with store.transaction():
                for event in envelope_events(scenario, infos, start, end):
                    store.add_event(*event)
            step(0.95, "Rolling up…")
            store.set_meta("rollup_minute_until", repr(math.floor(end / 60) * 60.0))
            rollup.maintain(store, retention, end)
            counts = store.counts()
    step(1.0, "Done")
    return DemoSummary(path, start, end, [i.name for i in infos], counts, time.perf_counter() - clock_start)
