"""What a simulated GPU is asked to do: the demand of a workload over time, and a host reading to go with it.

A ``Scenario`` says what load each GPU carries at each instant: ``ManualLoad`` is set by hand
(the stress runner's load, and the simulated workloads started from the window: training,
inference, a forgotten notebook), ``scenarios.WeekScenario`` replays a realistic week (demo history).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from desktop.telemetry.model import HostSample


@dataclass(frozen=True, slots=True)
class Demand:
    """What the workload asks of one GPU at one instant."""

    load: float = 0.0  # 0..1, share of time kernels run at full intensity
    vram_mib: float = 0.0  # memory held by processes
    mem_util: float = 0.3  # memory-controller busy share relative to load
    pcie_kib_s: float = 0.0
    processes: tuple[tuple[int, str, float], ...] = ()  # (pid, name, vram_mib)
    #: Power drawn per unit of load, relative to a compute-bound GEMM (1.0). A memory-bound or
    #: data-starved job keeps kernels running (high utilization) at a fraction of the power (~0.35).
    intensity: float = 1.0
    #: Per entry of ``processes`` (same order), what else is known of it; empty: nothing (equal SM shares).
    details: tuple[ProcessDetail, ...] = ()


@dataclass(frozen=True, slots=True)
class ProcessDetail:
    """What a simulated process adds to its ``(pid, name, vram_mib)``: its part of the load, its command."""

    #: The load it contributes (0..1): the GPU's utilization is split among processes in this proportion.
    load: float
    command: str | None = None
    started_s: float | None = None


class Scenario(Protocol):
    def demand(self, gpu_index: int, time_s: float) -> Demand: ...


@dataclass(frozen=True, slots=True)
class Workload:
    """A program the simulated GPU can be given from the window; its load over time is a repeating pattern."""

    key: str
    label: str
    pid: int
    name: str
    command: str
    #: Held memory: a share of the GPU's VRAM.
    vram_frac: float
    #: The load while busy, and (with ``period_s``) the load of the quiet part of each period.
    load: float
    quiet_load: float = 0.0
    period_s: float = 0.0
    quiet_s: float = 0.0
    mem_util: float = 0.5
    intensity: float = 1.0
    pcie_kib_s: float = 0.0

    def load_at(self, time_s: float) -> float:
        if self.period_s <= 0:
            return self.load
        return self.quiet_load if time_s % self.period_s < self.quiet_s else self.load


#: The simulated workloads the Dashboard offers, modelled on the demo week's episodes.
WORKLOADS: dict[str, Workload] = {w.key: w for w in (
    # Kernels back to back; evaluation and a checkpoint every 5 minutes (30 s at a third of the load).
    Workload("training", "Training (train.py)", 2311, "python", "python train.py --cfg llama.yaml",
             vram_frac=0.85, load=0.97, quiet_load=0.3, period_s=300.0, quiet_s=30.0, mem_util=0.6,
             pcie_kib_s=200_000.0),
    # Requests in bursts: 25 s of answers every 40 s, memory-bound decoding at a fraction of GEMM power.
    Workload("inference", "Inference server (llama-server)", 7300, "llama-server",
             "llama-server -m llama-3-8b-instruct.Q8_0.gguf --port 8080", vram_frac=0.55, load=0.65,
             quiet_load=0.03, period_s=40.0, quiet_s=15.0, mem_util=0.8, intensity=0.6, pcie_kib_s=5_000.0),
    # A notebook kernel nobody uses any more: 6 GiB held, nothing running.
    Workload("notebook", "Forgotten notebook (Jupyter kernel)", 5120, "python",
             "python -m ipykernel_launcher -f kernel-5120.json", vram_frac=0.375, load=0.0, mem_util=0.0),
)}


@dataclass(frozen=True, slots=True)
class SharedEntry:
    """One program's load on one simulated GPU, as published: what another process's machine adds."""

    gpu_index: int
    pid: int
    name: str
    load: float  # 0..1 (a workload's: its load at each moment, from ``WORKLOADS``)
    vram_mib: float
    command: str | None = None
    started_s: float | None = None
    mem_util: float = 0.5
    intensity: float = 1.0
    workload: str | None = None  # a key of ``WORKLOADS``: its load follows its pattern over time

    def demand(self, time_s: float) -> Demand:
        known = WORKLOADS.get(self.workload) if self.workload is not None else None
        load = known.load_at(time_s) if known is not None else self.load
        pcie = known.pcie_kib_s if known is not None and load > 0.05 else 0.0
        return Demand(load=load, vram_mib=self.vram_mib, mem_util=self.mem_util, pcie_kib_s=pcie,
                      processes=((self.pid, self.name, self.vram_mib),), intensity=self.intensity,
                      details=(ProcessDetail(load, self.command, self.started_s),))

    def as_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu_index, "pid": self.pid, "name": self.name, "load": self.load,
                "vram_mib": self.vram_mib, "command": self.command, "started_s": self.started_s,
                "mem_util": self.mem_util, "intensity": self.intensity, "workload": self.workload}


class LoadExchange(Protocol):
    """Where a ``ManualLoad`` shares its load with the other processes' simulated machines (shared.SharedLoads)."""

    def publish(self, entries: Sequence[SharedEntry]) -> None: ...

    def refresh(self) -> None: ...

    def demands(self, gpu_index: int, time_s: float) -> list[Demand]: ...

    @property
    def others(self) -> tuple[SharedEntry, ...]: ...


@dataclass(frozen=True, slots=True)
class _Running:
    """A workload on one GPU since ``started_s``, holding ``vram_mib``."""

    workload: Workload
    vram_mib: float
    started_s: float | None


@dataclass
class ManualLoad:
    """A load set by hand: the stress runner's (``set``) plus the simulated workloads (``start``/``stop``).

    Safe to change from one thread while another advances the model: every change replaces a
    whole table (one reference), so a reader sees the load before or after it, never half.

    With ``shared`` (desktop/telemetry/simulated/shared.py) the load is one machine's across processes: every
    change is published for the other processes' simulated GPUs, and the loads they publish add to this one's
    demand on the same GPU index (read again by ``refresh``, once per reading of the machine).
    """

    loads: dict[int, Demand] = field(default_factory=dict)
    shared: LoadExchange | None = field(default=None, repr=False, compare=False)
    _running: dict[int, tuple[_Running, ...]] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def set(self, gpu_index: int, load: float, vram_mib: float = 0.0, name: str = "rigscope-stress",
            pid: int = 0, *, command: str | None = None, started_s: float | None = None) -> None:
        """The stress runner's load on ``gpu_index`` (0 and no memory: none)."""
        load = max(0.0, min(1.0, load))
        busy = load > 0 or vram_mib > 0
        procs = ((pid, name, vram_mib),) if busy else ()
        details = (ProcessDetail(load, command, started_s),) if busy else ()
        with self._lock:
            loads = dict(self.loads)
            loads[gpu_index] = Demand(load=load, vram_mib=vram_mib, mem_util=0.5, processes=procs, details=details)
            self.loads = loads
            self._publish()

    def start(self, gpu_index: int, key: str, vram_total_mib: float, started_s: float | None = None) -> Workload:
        """Start the workload ``key`` (one of ``WORKLOADS``) on a GPU; a running one of that kind restarts."""
        workload = WORKLOADS.get(key)
        if workload is None:
            raise ValueError(f"unknown simulated workload {key!r}; known: {', '.join(WORKLOADS)}")
        with self._lock:
            kept = tuple(r for r in self._running.get(gpu_index, ()) if r.workload.key != key)
            running = dict(self._running)
            running[gpu_index] = (*kept, _Running(workload, round(workload.vram_frac * vram_total_mib), started_s))
            self._running = running
            self._publish()
        return workload

    def stop(self, gpu_index: int | None = None, key: str | None = None) -> int:
        """Stop the workload ``key`` (None: all of them) on a GPU (None: every GPU); how many stopped."""
        with self._lock:
            running: dict[int, tuple[_Running, ...]] = {}
            stopped = 0
            for index, runs in self._running.items():
                kept = tuple(r for r in runs if (gpu_index is not None and index != gpu_index)
                             or (key is not None and r.workload.key != key))
                stopped += len(runs) - len(kept)
                if kept:
                    running[index] = kept
            self._running = running
            if stopped:
                self._publish()
        return stopped

    def workloads(self, gpu_index: int | None = None) -> list[Workload]:
        """The workloads running (on one GPU, or on all)."""
        return [r.workload for index, runs in self._running.items() for r in runs
                if gpu_index is None or index == gpu_index]

    def refresh(self) -> None:
        """Read the loads the other processes publish again (when shared; at most once per its period)."""
        if self.shared is not None:
            self.shared.refresh()

    def demand(self, gpu_index: int, time_s: float) -> Demand:
        hand = self.loads.get(gpu_index)
        runs = self._running.get(gpu_index, ())
        others = self.shared.demands(gpu_index, time_s) if self.shared is not None else []
        if not runs and not others:
            return hand if hand is not None else _IDLE
        parts = [hand] if hand is not None and hand.processes else []
        for run in runs:
            w = run.workload
            load = w.load_at(time_s)
            parts.append(Demand(load=load, vram_mib=run.vram_mib, mem_util=w.mem_util,
                                pcie_kib_s=w.pcie_kib_s if load > 0.05 else 0.0,
                                processes=((w.pid, w.name, run.vram_mib),), intensity=w.intensity,
                                details=(ProcessDetail(load, w.command, run.started_s),)))
        parts.extend(others)  # the other processes' programs on this GPU add up with this one's
        return combine(parts)

    def _publish(self) -> None:
        """Tell the other processes' simulated machines what this one carries now (called under the lock)."""
        if self.shared is None:
            return
        entries: list[SharedEntry] = []
        for index, hand in sorted(self.loads.items()):
            details = hand.details if len(hand.details) == len(hand.processes) else ()
            for n, (pid, name, vram) in enumerate(hand.processes):
                detail = details[n] if details else ProcessDetail(hand.load / len(hand.processes))
                entries.append(SharedEntry(index, pid, name, detail.load, vram, detail.command, detail.started_s,
                                           mem_util=hand.mem_util, intensity=hand.intensity))
        for index, runs in sorted(self._running.items()):
            for run in runs:
                w = run.workload
                entries.append(SharedEntry(index, w.pid, w.name, w.load, run.vram_mib, w.command, run.started_s,
                                           mem_util=w.mem_util, intensity=w.intensity, workload=w.key))
        self.shared.publish(entries)


_IDLE = Demand()


def combine(parts: list[Demand]) -> Demand:
    """Several programs on one GPU: their loads add up (to 1 at most), memory too; load-weighted mix of the rest."""
    if not parts:
        return _IDLE
    if len(parts) == 1:
        return parts[0]
    total = sum(d.load for d in parts)
    weights = [d.load / total for d in parts] if total > 0 else [1.0 / len(parts)] * len(parts)
    details: list[ProcessDetail] = []
    for d in parts:
        known = d.details if len(d.details) == len(d.processes) else ()
        share = d.load / len(d.processes) if d.processes else 0.0
        details.extend(known or [ProcessDetail(share) for _ in d.processes])
    return Demand(
        load=min(1.0, total),
        vram_mib=sum(d.vram_mib for d in parts),
        mem_util=sum(w * d.mem_util for w, d in zip(weights, parts, strict=True)),
        pcie_kib_s=sum(d.pcie_kib_s for d in parts),
        processes=tuple(p for d in parts for p in d.processes),
        intensity=sum(w * d.intensity for w, d in zip(weights, parts, strict=True)),
        details=tuple(details),
    )


def simulated_host_sample(cpu_pct: float, on_ac_power: bool = True, cores: int = 16,
                          ram_total_mib: float = 32768.0, ram_used_mib: float = 12000.0) -> HostSample:
    """A host reading for demo history, where the real host cannot stand in for the past."""
    return HostSample(
        cpu_pct=cpu_pct,
        cpu_per_core_pct=tuple(cpu_pct for _ in range(cores)),
        cpu_freq_mhz=4200.0 if cpu_pct > 20 else 2400.0,
        ram_used_mib=ram_used_mib,
        ram_total_mib=ram_total_mib,
        swap_used_mib=0.0,
        swap_total_mib=8192.0,
        load_1m=cpu_pct / 100.0 * cores,
        load_5m=cpu_pct / 100.0 * cores,
        load_15m=cpu_pct / 100.0 * cores,
        cpu_temp_c=45.0 + cpu_pct * 0.4,
        battery_pct=80.0,
        on_ac_power=on_ac_power,
    )
