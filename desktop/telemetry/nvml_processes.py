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

Only ``desktop/telemetry/nvml*.py`` import this; it calls NVML through the module it is handed.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from desktop.telemetry.nvml_codes import FUNCTION_NOT_FOUND

_SUCCESS: Final = 0
_INSUFFICIENT_SIZE: Final = 7
_NO_INSTANCE: Final = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId outside MIG
_NOT_AVAILABLE_ULL: Final = 0xFFFFFFFFFFFFFFFF  # usedGpuMemory under Windows WDDM


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


def detect_layout(nvml: ModuleType) -> ProcessCallLayout | None:
    """The layout of this driver's process calls; None when ``nvml`` hands out no C symbols (a fake)."""
    lookup = getattr(nvml, "_nvmlGetFunctionPointer", None)
    error_type = getattr(nvml, "NVMLError", None)
    if not callable(lookup) or not (isinstance(error_type, type) and issubclass(error_type, BaseException)):
        return None

    def exports(symbol: str) -> bool | None:
        try:
            lookup(symbol)
        except error_type as exc:
            # FUNCTION_NOT_FOUND: the driver lacks it; anything else (not initialised): cannot tell.
            return False if getattr(exc, "value", None) == FUNCTION_NOT_FOUND else None
        return True

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


def binding_function(nvml: ModuleType, layout: ProcessCallLayout | None, func: str) -> str | None:
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
    entry = getattr(nvml, struct, None)
    fits = (isinstance(entry, type) and issubclass(entry, ctypes.Structure)
            and ctypes.sizeof(entry) == layout.entry_bytes)
    return name if fits and callable(getattr(nvml, name, None)) else None


def running_processes(nvml: ModuleType, layout: ProcessCallLayout, func: str, handle: Any) -> list[RunningProcess]:
    """``func`` ("nvmlDeviceGetComputeRunningProcesses", …) for ``handle``; raises ``nvml.NVMLError`` like pynvml."""
    fn = nvml._nvmlGetFunctionPointer(func + layout.suffix)
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == _SUCCESS:
        return []
    if ret != _INSUFFICIENT_SIZE:
        raise nvml.NVMLError(ret)
    # Room for processes that start between the two calls (pynvml does the same).
    count.value = count.value * 2 + 5
    entries = (layout.entry * count.value)()
    ret = fn(handle, ctypes.byref(count), entries)
    if ret != _SUCCESS:
        raise nvml.NVMLError(ret)
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
