"""The simulated GpuBackend: the thermal/power model behind the same contract as the NVML backend.

One ``SimulatedMachine`` is one simulated computer: its GPUs' model and the load they carry.
Everything that looks at it (the window's sampler thread, a stress run on its own thread)
reads it through its own ``SimulatedBackend`` (``backend.view()``), as programs share one real
GPU: the model advances once, under the machine's lock, to the latest time anyone passed in
(an earlier time never moves it back), and each backend gets its own throttle-counter
intervals, as each NVML client gets its own.
"""

from __future__ import annotations

import dataclasses
import getpass
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from advisor.envelope import PowerEnvelope
from desktop.safeio import read_bounded
from desktop.telemetry.model import (
    CLOCK_EVENT_COUNTERS,
    GPU_METRIC_NAMES,
    DeviceState,
    GpmActivity,
    GpuInfo,
    GpuProcess,
    GpuReading,
    GpuSample,
    SourceInfo,
)
from desktop.telemetry.simulated.envelope import SHIFT_MODES, SimulatedEnvelope, enforced_limit_w, thermal_r_c_per_w
from desktop.telemetry.simulated.load import Demand, ManualLoad, ProcessDetail, Scenario, Workload
from desktop.telemetry.simulated.physics import SimulatedGpuModel
from desktop.telemetry.simulated.profiles import GpuProfile, profile_info
from desktop.telemetry.simulated.shared import SharedLoads

#: The GpuSample fields that count seconds under a throttle cause since the reader's last reading.
_HELD_FIELDS = tuple(name for name, _reason in CLOCK_EVENT_COUNTERS)
_Counts = tuple[float, ...]


class _LastDemand:
    """The scenario as the model sees it, remembering the demand of each GPU's latest step."""

    def __init__(self, scenario: Scenario, gpus: int) -> None:
        self.scenario = scenario
        self.last: list[Demand] = [Demand() for _ in range(gpus)]

    def demand(self, gpu_index: int, time_s: float) -> Demand:
        demand = self.scenario.demand(gpu_index, time_s)
        self.last[gpu_index] = demand
        return demand


class SimulatedMachine:
    """One simulated computer's GPUs: the model, its load and the lock every reader of them takes."""

    def __init__(self, profiles: Sequence[GpuProfile], scenario: Scenario | None = None, seed: int = 0,
                 user: str | None = None, shared: SharedLoads | None = None) -> None:
        # ``shared``: this machine is the one simulated machine of every process of this user (its hand-set
        # load is published, the others' add to it); without it, a machine of this process alone.
        self.scenario: Scenario = scenario if scenario is not None else ManualLoad(shared=shared)
        self._tap = _LastDemand(self.scenario, len(profiles))
        self.model = SimulatedGpuModel(profiles, self._tap, seed=seed)
        self.profiles = self.model.profiles
        self.infos = [profile_info(p, i) for i, p in enumerate(profiles)]
        self.user = user if user is not None else _current_user()
        self.lock = threading.RLock()
        # Seconds under each throttle cause, summed over every reader's readings: each backend
        # takes its own intervals from these (the model's own counter interval is per reading).
        self._counted: list[_Counts] = [(0.0,) * len(_HELD_FIELDS) for _ in profiles]
        #: The utilization of each GPU's latest reading, which its processes' SM shares add up to.
        self._util: list[tuple[float, float] | None] = [None for _ in profiles]
        #: The simulated laptop's charger, nvidia-powerd and firmware mode (``set_envelope`` changes them).
        self.envelope_state = SimulatedEnvelope()
        #: An msi-ec ``shift_mode`` file the firmware mode follows (``follow_mode_file``), as a real EC's does.
        self._mode_file: Path | None = None

    # --- the simulated laptop's power envelope ------------------------------------------
    @property
    def laptop(self) -> bool:
        return any(p.is_laptop for p in self.profiles)

    def follow_mode_file(self, path: Path) -> None:
        """Take the firmware mode from ``path`` (a fake msi-ec tree's ``shift_mode``) at each reading, as a real
        laptop's EC takes what is written there: a mode this laptop has switches it, anything else is ignored
        (msi-ec refuses an unknown mode)."""
        with self.lock:
            self._mode_file = path
            self._follow_mode_file()

    def devices(self) -> list[GpuInfo]:
        """Each GPU's info, its enforced power limit as the firmware mode in force sets it."""
        with self.lock:
            self._follow_mode_file()
            return list(self.infos)

    def _follow_mode_file(self) -> None:
        if self._mode_file is None:
            return
        try:
            raw = read_bounded(self._mode_file, 4096, truncate=True)
        except OSError:
            return
        words = raw.decode("utf-8", "replace").split()
        if words and words[0] in SHIFT_MODES and words[0] != self.envelope_state.shift_mode:
            self.set_envelope(shift_mode=words[0])

    def power_envelope(self) -> PowerEnvelope:
        """The envelope as the sysfs reader would give it on a real laptop; empty for simulated desktops."""
        with self.lock:
            self._follow_mode_file()
            return self.envelope_state.power_envelope() if self.laptop else PowerEnvelope(simulated=True)

    def set_envelope(self, *, on_ac: bool | None = None, powerd_running: bool | None = None,
                     shift_mode: str | None = None, battery_pct: float | None = None) -> SimulatedEnvelope:
        """Plug or unplug, stop or start nvidia-powerd, switch the firmware mode (ValueError for an unknown one).

        The laptop GPUs' enforced power limit follows at once, in the model and in their info.
        """
        with self.lock:
            self.envelope_state = self.envelope_state.with_changes(
                on_ac=on_ac, powerd_running=powerd_running, shift_mode=shift_mode, battery_pct=battery_pct)
            for i, profile in enumerate(self.profiles):
                watts = enforced_limit_w(profile, self.envelope_state)
                self.model.set_power_limit(i, watts, thermal_r_c_per_w(profile, self.envelope_state))
                if self.infos[i].power_limit_enforced_w != watts:
                    self.infos[i] = dataclasses.replace(self.infos[i], power_limit_enforced_w=watts)
            return self.envelope_state

    @property
    def manual(self) -> ManualLoad | None:
        """The hand-set load, when the scenario is one (the stress runner and the window's workloads drive it)."""
        return self.scenario if isinstance(self.scenario, ManualLoad) else None

    def read(self, now_s: float) -> list[tuple[GpuSample | None, _Counts, GpmActivity | None]]:
        """Advance to ``now_s`` (never back) and read every GPU: its sample (None when lost), the counters and
        what GPM measures (None where the profile has no GPM)."""
        with self.lock:
            self._follow_mode_file()
            manual = self.manual
            if manual is not None:
                manual.refresh()  # the other processes' loads, read once per reading (at most)
            self.model.advance(now_s)
            out: list[tuple[GpuSample | None, _Counts, GpmActivity | None]] = []
            for info in self.infos:
                index = info.index
                if self.model.is_lost(index):
                    out.append((None, self._counted[index], None))
                    continue
                sample = self.model.reading(index)
                held = [getattr(sample, name) for name in _HELD_FIELDS]
                if all(h is not None for h in held):
                    self._counted[index] = tuple(c + h for c, h in zip(self._counted[index], held, strict=True))
                self._util[index] = (sample.utilization_gpu_pct or 0.0, sample.utilization_mem_pct or 0.0)
                activity = self.model.activity(index) if info.gpm_supported else None
                out.append((sample, self._counted[index], activity))
            return out

    def throughput_tflops(self, index: int) -> float:
        with self.lock:
            return self.model.throughput_tflops(index)

    def processes(self, user: str) -> list[GpuProcess]:
        """Who holds memory on each GPU now, with their share of its utilization (the SM shares sum to it)."""
        out = []
        with self.lock:
            for info in self.infos:
                index = info.index
                if self.model.is_lost(index):
                    continue
                demand = self._tap.last[index]
                procs = demand.processes
                details = demand.details if len(demand.details) == len(procs) else tuple(
                    ProcessDetail(demand.load / len(procs)) for _ in procs)
                total = sum(d.load for d in details)
                util = self._util[index]
                if util is None:  # not read yet: the load stands for the utilization
                    util = (100.0 * demand.load, 100.0 * demand.load * demand.mem_util)
                for (pid, name, vram), detail in zip(procs, details, strict=True):
                    share = detail.load / total if total > 0 else 0.0
                    out.append(GpuProcess(pid=pid, gpu_index=index, name=name, user=user, vram_mib=vram,
                                          kind="compute", started_s=detail.started_s, own=True,
                                          sm_util_pct=util[0] * share, mem_util_pct=util[1] * share,
                                          enc_util_pct=0.0, dec_util_pct=0.0, command=detail.command,
                                          container=None))
        return out

    def set_lost(self, index: int, lost: bool) -> None:
        with self.lock:
            self.model.set_lost(index, lost)

    def reinit(self) -> None:
        with self.lock:
            for info in self.infos:
                self.model.set_lost(info.index, False)

    # --- the window's simulated workloads ------------------------------------------------
    def start_workload(self, key: str, gpu_index: int = 0, now_s: float | None = None) -> Workload:
        """Run one of ``WORKLOADS`` on a GPU (ValueError for an unknown one, or without a hand-set load)."""
        manual = self._manual_or_refuse()
        if not 0 <= gpu_index < len(self.infos):
            raise ValueError(f"no simulated GPU {gpu_index}")
        return manual.start(gpu_index, key, self.profiles[gpu_index].vram_total_mib, now_s)

    def stop_workloads(self, gpu_index: int | None = None) -> int:
        manual = self.manual
        return manual.stop(gpu_index) if manual is not None else 0

    def workloads(self) -> list[Workload]:
        manual = self.manual
        return manual.workloads() if manual is not None else []

    def end_process(self, pid: int, started_s: float | None = None) -> str | None:
        """The window's "End process" on a simulated process: stop its workload (an error message, or None).
        ``started_s`` is for the real ender's signature: a simulated PID is never handed out again."""
        manual = self.manual
        if manual is not None:
            for index in range(len(self.infos)):
                for workload in manual.workloads(index):
                    if workload.pid == pid:
                        manual.stop(index, workload.key)
                        return None
            if any(p[0] == pid for d in manual.loads.values() for p in d.processes):
                return f"Process {pid} is the simulated stress test: stop it with Cancel on the Stress test page."
            if manual.shared is not None and any(e.pid == pid for e in manual.shared.others):
                return (f"Process {pid} loads the simulated GPU from another process (a `rigscope run --simulate` "
                        "job or a simulated stress test): end it where it runs.")
        return f"Process {pid} is not a simulated workload that can be ended here."

    def _manual_or_refuse(self) -> ManualLoad:
        manual = self.manual
        if manual is None:
            raise ValueError("this simulated GPU replays a scenario; it takes no workloads by hand")
        return manual


class SimulatedBackend:
    """The GpuBackend over a ``SimulatedMachine``: same contract as the NVML backend.

    ``SimulatedBackend(profiles)`` builds a machine of its own; ``view()`` gives another
    backend over the same machine (the stress runner's, beside the window's sampler).
    """

    def __init__(self, profiles: Sequence[GpuProfile], scenario: Scenario | None = None, seed: int = 0,
                 reason: str | None = None, user: str | None = None, *,
                 machine: SimulatedMachine | None = None, shared: SharedLoads | None = None) -> None:
        self.machine = machine if machine is not None else SimulatedMachine(profiles, scenario, seed=seed, user=user,
                                                                           shared=shared)
        self.scenario = self.machine.scenario
        self.model = self.machine.model
        names = ", ".join(p.key for p in self.machine.profiles)
        self._source = SourceInfo(kind="simulated", detail=f"simulated GPU ({names})", fallback_reason=reason)
        self._user = user if user is not None else self.machine.user
        #: The machine's throttle counters at this backend's last reading, per GPU (None: not read yet).
        self._seen: list[_Counts | None] = [None for _ in self.machine.infos]

    def view(self) -> SimulatedBackend:
        """Another reader of the same simulated GPUs (closing it leaves the machine alone)."""
        return SimulatedBackend(self.machine.profiles, reason=self._source.fallback_reason, user=self._user,
                                machine=self.machine)

    @property
    def source(self) -> SourceInfo:
        return self._source

    @property
    def manual(self) -> ManualLoad | None:
        """The hand-set load, when the scenario is one (the stress runner drives it)."""
        return self.machine.manual

    def devices(self) -> list[GpuInfo]:
        return self.machine.devices()

    def sample(self, now_s: float) -> list[GpuReading]:
        readings = []
        for info, (read, counted, measured) in zip(self.machine.infos, self.machine.read(now_s), strict=True):
            if read is None:
                readings.append(GpuReading(info, DeviceState.LOST, None, "GPU is lost (simulated)"))
                continue
            before, self._seen[info.index] = self._seen[info.index], counted
            held: dict[str, Any] = dict.fromkeys(_HELD_FIELDS)
            if before is not None:
                held = {name: now - then for name, now, then in zip(_HELD_FIELDS, counted, before, strict=True)}
            # GPM answers from a reader's second sample on (the first has no interval), as NVML's does;
            # its SM activity is then the effective load, as the NVML backend has it.
            activity = measured if before is not None else None
            if activity is not None:
                held["effective_load_pct"] = activity.sm_active_pct
            readings.append(GpuReading(info, DeviceState.OK, dataclasses.replace(read, **held), activity=activity))
        return readings

    def processes(self) -> list[GpuProcess]:
        return self.machine.processes(self._user)

    def power_envelope(self) -> PowerEnvelope:
        """The simulated laptop's envelope (the sampler and `doctor` read it instead of sysfs)."""
        return self.machine.power_envelope()

    def throughput_tflops(self, index: int) -> float:
        """The bf16 GEMM rate the GPU would deliver now (the simulated stress test's throughput)."""
        return self.machine.throughput_tflops(index)

    def supported_metrics(self, index: int) -> dict[str, bool]:
        # From the profile, not from a reading: a reading takes the counters' interval with it.
        has_fan = self.machine.profiles[index].has_fan_reading
        return {name: has_fan or name != "fan_pct" for name in GPU_METRIC_NAMES}

    def reinit(self) -> None:
        self.machine.reinit()

    def end_process(self, pid: int, started_s: float | None = None) -> str | None:
        return self.machine.end_process(pid, started_s)

    def close(self) -> None:
        pass


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "user"

