"""Process lists in the entry layout the driver really writes, whatever layout the pynvml binding declares.

The ``nvmlDevice*RunningProcesses_v3`` calls fill an array of process entries whose size changed
with the driver branch: R535 writes 32-byte entries (``usedGpuCcProtectedMemory`` added), the
branches before and after it 24-byte ones, and nvidia-ml-py declares one or the other depending on
its release. A binding and a driver that disagree read garbage for the second process on (a fake
pid 0, the rest dropped: gpustat and nvitop both hit it). So, as nvitop does, the layout is told
from the symbols the driver exports, and where the binding's entry type differs the call is made
with our own:

- ``_v3`` with ``nvmlDeviceGetConfComputeMemSizeInfo`` (new in R535) but without
  ``nvmlDeviceGetRunningProcessDetailList`` (new after it): 32 bytes;
- ``_v3`` otherwise: 24 bytes; no ``_v3`` (R470): ``_v2``, 24 bytes; neither: the unversioned
  call, 16 bytes.

It calls NVML only through the gateway (the binding's wrappers, or the driver's C symbols).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace
from typing import Any, Final

from desktop.telemetry.model import GpuProcess, ProcessKind
from desktop.telemetry.nvml.call_memory import CallMemory
from desktop.telemetry.nvml.device import NvmlDevice
from desktop.telemetry.nvml.gateway import NvmlGateway
from desktop.telemetry.nvml.outcomes import MISSING
from desktop.telemetry.nvml.proc_util import IDLE, read_process_utilization
from desktop.telemetry.nvml.values import as_int, as_mib

_SUCCESS: Final = 0
_INSUFFICIENT_SIZE: Final = 7
_NO_INSTANCE: Final = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId outside MIG
_NOT_AVAILABLE_ULL: Final = 0xFFFFFFFFFFFFFFFF  # usedGpuMemory under Windows WDDM
#: Per-process utilization is asked at every n-th process poll (every 10 s at the sampler's 5 s period)
#: and carried in between: its one call per GPU then costs 0.1 calls per tick, which keeps eight GPUs
#: within half of gpustat's calls. Each answer is the latest sample per pid, whatever the window.
UTIL_EVERY_POLLS: Final = 2
_PROCESS_CALLS: Final[tuple[tuple[ProcessKind, str, str], ...]] = (
    ("compute", "procs_compute", "nvmlDeviceGetComputeRunningProcesses"),
    ("graphics", "procs_graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
    # Clients of the MPS server are listed only here (the compute list shows the server alone).
    ("compute", "procs_mps", "nvmlDeviceGetMPSComputeRunningProcesses"),
)


class _EntryV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _EntryV2(ctypes.Structure):
    _fields_ = [*_EntryV1._fields_, ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _EntryV3ConfCompute(ctypes.Structure):
    _fields_ = [*_EntryV2._fields_, ("usedGpuCcProtectedMemory", ctypes.c_ulonglong)]


@dataclass(frozen=True, slots=True)
class ProcessCallLayout:
    """Which call to make (``suffix`` on the C symbol) and the entry type the driver fills."""

    suffix: str
    entry: type[ctypes.Structure]

    @property
    def entry_bytes(self) -> int:
        return ctypes.sizeof(self.entry)


@dataclass(frozen=True, slots=True)
class RunningProcess:
    pid: int
    used_bytes: int | None  # None: not available (Windows WDDM)
    gpu_instance_id: int | None  # None: not on a MIG instance
    compute_instance_id: int | None


def detect_layout(gateway: NvmlGateway) -> ProcessCallLayout | None:
    """The layout of this driver's process calls; None when the binding hands out no C symbols (a fake)."""
    exports = gateway.exports
    has_v3 = exports("nvmlDeviceGetComputeRunningProcesses_v3")
    if has_v3 is None:
        return None
    if has_v3:
        r535 = exports("nvmlDeviceGetConfComputeMemSizeInfo") and exports(
            "nvmlDeviceGetRunningProcessDetailList") is False
        return ProcessCallLayout("_v3", _EntryV3ConfCompute if r535 else _EntryV2)
    if exports("nvmlDeviceGetComputeRunningProcesses_v2"):
        return ProcessCallLayout("_v2", _EntryV2)
    return ProcessCallLayout("", _EntryV1)


def binding_function(gateway: NvmlGateway, layout: ProcessCallLayout | None, func: str) -> str | None:
    """The binding's own function for ``func`` when its entry type is the one the driver writes; None: it is not.

    The binding is used wherever it is right (its wrappers are what every test double models);
    the C symbol is called directly only where the binding would misread the entries.
    """
    if layout is None:
        return func
    if layout.suffix == "_v3":
        name, struct = func, "c_nvmlProcessInfo_v3_t"  # pynvml's unversioned call is its _v3
    elif layout.suffix == "_v2":
        name, struct = func + "_v2", "c_nvmlProcessInfo_v2_t"
    else:
        return None
    entry = gateway.binding_attr(struct)
    fits = (isinstance(entry, type) and issubclass(entry, ctypes.Structure)
            and ctypes.sizeof(entry) == layout.entry_bytes)
    return name if fits and callable(gateway.binding_attr(name)) else None


def c_running_processes(gateway: NvmlGateway, layout: ProcessCallLayout, func: str,
                        handle: Any) -> list[RunningProcess]:
    """``func`` ("nvmlDeviceGetComputeRunningProcesses", …) for ``handle`` through its C symbol; raises NVMLError."""
    fn = gateway.c_function(func + layout.suffix)
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == _SUCCESS:
        return []
    if ret != _INSUFFICIENT_SIZE:
        raise gateway.error(ret)
    # Room for processes that start between the two calls (pynvml does the same).
    count.value = count.value * 2 + 5
    entries = (layout.entry * count.value)()
    ret = fn(handle, ctypes.byref(count), entries)
    if ret != _SUCCESS:
        raise gateway.error(ret)
    out = []
    for entry in entries[: count.value]:
        used = int(entry.usedGpuMemory)
        gpu_instance = int(getattr(entry, "gpuInstanceId", _NO_INSTANCE))
        compute_instance = int(getattr(entry, "computeInstanceId", _NO_INSTANCE))
        out.append(RunningProcess(
            pid=int(entry.pid),
            used_bytes=None if used == _NOT_AVAILABLE_ULL else used,
            gpu_instance_id=None if gpu_instance == _NO_INSTANCE else gpu_instance,
            compute_instance_id=None if compute_instance == _NO_INSTANCE else compute_instance,
        ))
    return out


def running_processes(gateway: NvmlGateway, memory: CallMemory, key: str, func: str,
                      handle: Any) -> list[RunningProcess] | None:
    """One process call (``func`` without its _vN) for ``handle``; None when it gave no list.

    Read in the entry layout this driver writes: through the binding where its entry type
    agrees, else through the C symbol with our own type, so a binding built for another driver
    branch cannot garble the list.
    """
    # A few symbol look-ups (cached by pynvml when found), no driver call: cheap at the
    # process period, and right again after a driver reload.
    layout = detect_layout(gateway)
    binding = binding_function(gateway, layout, func)
    if binding is not None or layout is None:
        found = gateway.device_call(memory, key, binding or func, handle)
        if found is MISSING:
            return None
        out = []
        for entry in found:
            pid = as_int(getattr(entry, "pid", None))
            if pid is not None:
                out.append(RunningProcess(pid, as_int(getattr(entry, "usedGpuMemory", None)),
                                          as_int(getattr(entry, "gpuInstanceId", None)),
                                          as_int(getattr(entry, "computeInstanceId", None))))
        return out
    listed = gateway.guarded(memory, key, func + layout.suffix,
                             lambda: c_running_processes(gateway, layout, func, handle))
    return None if listed is MISSING else listed


def device_processes(gateway: NvmlGateway, dev: NvmlDevice) -> list[GpuProcess]:
    """The compute and graphics processes on ``dev``, one entry per pid, with their utilization where known."""
    merged: dict[int, GpuProcess] = {}
    compute_listed: list[RunningProcess] | None = None
    for kind, key, func in _PROCESS_CALLS:
        if key == "procs_mps" and compute_listed == []:
            continue  # no MPS server holds a context (it is in the compute list), so no client: the call is saved
        found = running_processes(gateway, dev.calls, key, func, dev.handle)
        if key == "procs_compute":
            compute_listed = found
        if found is None:
            continue
        for entry in found:
            pid = entry.pid
            vram = as_mib(entry.used_bytes)
            seen = merged.get(pid)
            if seen is None:
                merged[pid] = GpuProcess(pid=pid, gpu_index=dev.index, name=f"pid {pid}", vram_mib=vram, kind=kind)
            else:
                both: ProcessKind = "mixed" if seen.kind != kind else seen.kind
                best = max((v for v in (seen.vram_mib, vram) if v is not None), default=None)
                merged[pid] = replace(seen, kind=both, vram_mib=best)
    if not merged:
        return []  # no process to attribute utilization to: the call is saved
    dev.process_polls += 1
    if (dev.process_polls - 1) % UTIL_EVERY_POLLS == 0:
        answer = read_process_utilization(gateway, dev)
        # Not supported (or failed this time): n/a, never 0. A listed pid the driver left out: idle.
        dev.util_last = None if answer is None else {pid: answer.get(pid, IDLE) for pid in merged}
    last = dev.util_last
    if last is None:
        return list(merged.values())
    out = []
    for proc in merged.values():
        util = last.get(proc.pid)  # None: it appeared after the last utilization poll (n/a until the next)
        if util is None:
            out.append(proc)
            continue
        out.append(replace(proc, sm_util_pct=util.sm_pct, mem_util_pct=util.mem_pct,
                           enc_util_pct=util.enc_pct, dec_util_pct=util.dec_pct))
    return out
