"""A stand-in for the NVML C library beneath the real ``pynvml``: every C symbol is a ctypes callback.

``NvmlDriver(personality).install(monkeypatch)`` makes ``pynvml.nvmlLib`` an object whose attributes
are the symbols this driver exports (a missing one raises AttributeError, so pynvml's own
``_nvmlGetFunctionPointer`` raises ``NVMLError_FunctionNotFound``) and empties pynvml's symbol cache.
Each symbol is a ``CFUNCTYPE`` callback returning ``nvmlReturn_t`` that writes the caller's
out-parameters (``byref`` structs, ``c_uint``, char buffers) at their raw addresses, in the driver's
own layouts; so pynvml's structures, versioned calls, fallbacks, error classes and string decoding
run as on a real machine. A symbol the driver exports but this stand-in does not model answers
NotSupported and is counted in ``unmodelled``.

Counting: ``calls`` has one entry per C invocation, keyed by symbol (a process query that asks for
the size and then fills the buffer counts twice, as the driver sees it). A Python error inside a
callback would otherwise come back as SUCCESS from ctypes: it is kept in ``faults`` and the call
answers UNKNOWN; ``check()`` fails a test that caused one. Driver time moves ``tick_s`` at each
``nvmlDeviceGetFieldValues`` call, or by ``advance``; energy and PCIe byte counters follow it.

Per-process utilization: as time moves, the driver samples every ``util_period_s`` each process
with non-zero utilization into a buffer of the last ``UTIL_BUFFER_S`` (the values its spec holds
then), and ``nvmlDeviceGetProcessUtilization`` / ``...ProcessesUtilizationInfo`` answer the samples
newer than the caller's ``lastSeenTimeStamp``, NOT_FOUND when there are none.
"""

from __future__ import annotations

import ctypes
import sys
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import pynvml as _nv

from tests.fakes import nvml_abi as abi
from tests.fakes.personalities import GpuSpec, MigSpec, Personality, ProcessSpec

MIB = 1024**2
NOT_AVAILABLE_ULL = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE for unsigned long long
OK = abi.NVML_SUCCESS
NOT_SUPPORTED = abi.NVML_ERROR_NOT_SUPPORTED
INVALID = abi.NVML_ERROR_INVALID_ARGUMENT


class _UInt(ctypes.c_uint):
    """An ``unsigned int`` parameter that takes any ctypes integer, as a C function without argtypes does."""

    @classmethod
    def from_param(cls, value: Any) -> ctypes.c_uint:  # type: ignore[override]
        return ctypes.c_uint(getattr(value, "value", value))


class _Int(ctypes.c_int):
    @classmethod
    def from_param(cls, value: Any) -> ctypes.c_int:  # type: ignore[override]
        return ctypes.c_int(getattr(value, "value", value))


_P = ctypes.c_void_p


# --- the driver's own structure layouts (nvml.h), independent of the binding's ---------------------


class _ProcessV1(ctypes.Structure):  # the unversioned calls
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _ProcessV2(ctypes.Structure):  # 24 bytes: _v2, and _v3 on every branch but R535
    _fields_ = [*_ProcessV1._fields_, ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _ProcessV3CC(ctypes.Structure):  # 32 bytes: _v3 on R535
    _fields_ = [*_ProcessV2._fields_, ("usedGpuCcProtectedMemory", ctypes.c_ulonglong)]


class BindingProcessInfoCC(_nv._PrintableStructure):
    """The 32-byte v3 entry as a binding built against R535 headers declares it (nvitop's c_nvmlProcessInfo_v3_t)."""

    _fields_ = _ProcessV3CC._fields_
    _fmt_: ClassVar[dict[str, str]] = {"usedGpuMemory": "%d B", "usedGpuCcProtectedMemory": "%d B"}


class _MemoryV1(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _TemperatureV1(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("sensorType", ctypes.c_uint), ("temperature", ctypes.c_int)]


class _Margin(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("marginTemperature", ctypes.c_int)]


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _ProcessUtilSample(ctypes.Structure):  # nvmlProcessUtilizationSample_t
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class _ProcessUtilInfoV1(ctypes.Structure):  # nvmlProcessUtilizationInfo_v1_t
    _fields_ = [("timeStamp", ctypes.c_ulonglong), ("pid", ctypes.c_uint), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint),
                ("jpgUtil", ctypes.c_uint), ("ofaUtil", ctypes.c_uint)]


class _ProcessesUtilInfo(ctypes.Structure):  # nvmlProcessesUtilizationInfo_t (v1)
    _fields_ = [("version", ctypes.c_uint), ("processSamplesCount", ctypes.c_uint),
                ("lastSeenTimeStamp", ctypes.c_ulonglong), ("procUtilArray", ctypes.c_void_p)]


def _version(struct: type[ctypes.Structure], number: int) -> int:
    return ctypes.sizeof(struct) | number << 24  # NVML_STRUCT_VERSION


_MEMORY_V2 = _version(_MemoryV2, 2)
_TEMPERATURE_V1 = _version(_TemperatureV1, 1)
_MARGIN_V1 = _version(_Margin, 1)
_PROCESSES_UTIL_V1 = _version(_ProcessesUtilInfo, 1)
#: How much per-process utilization history the driver keeps (u: not documented; a few seconds).
UTIL_BUFFER_S = 10.0
_PROCESS_LAYOUT = {"": _ProcessV1, "_v2": _ProcessV2}
_INIT_SYMBOLS = frozenset({"nvmlInit", "nvmlInit_v2", "nvmlInitWithFlags", "nvmlErrorString"})
#: What a MIG device handle answers; everything else is NotSupported on it.
_MIG_SYMBOLS = frozenset({
    "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceIsMigDeviceHandle", "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId", "nvmlDeviceGetFieldValues",
    *(f"nvmlDeviceGet{kind}RunningProcesses{suffix}"
      for kind in ("Compute", "Graphics", "MPSCompute") for suffix in ("", "_v2", "_v3")),
})


def _put(ptr: int | None, ctype: Any, value: int | None) -> int:
    if value is None:
        return NOT_SUPPORTED
    if not ptr:
        return INVALID
    ctype.from_address(ptr).value = value
    return OK


def _put_text(ptr: int | None, size: int, data: bytes) -> int:
    if not ptr:
        return INVALID
    if len(data) + 1 > size:
        return abi.NVML_ERROR_INSUFFICIENT_SIZE
    ctypes.memmove(ptr, data + b"\0", len(data) + 1)
    return OK


def _text(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _mw(watts: float | None) -> int | None:
    return round(watts * 1000) if watts is not None else None


@dataclass(eq=False)
class _Dev:
    """One handle: what ``nvmlDevice_t`` points at (a buffer whose address is the handle)."""

    gpu: int
    spec: GpuSpec
    mig: MigSpec | None = None
    parent: _Dev | None = None
    alive: bool = True

    def __post_init__(self) -> None:
        self.buffer = ctypes.create_string_buffer(16)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.buffer)


class _Lib:
    """What ``pynvml.nvmlLib`` becomes: one attribute per exported C symbol."""

    def __init__(self, driver: NvmlDriver) -> None:
        self._driver = driver

    def __getattr__(self, name: str) -> Any:
        return self._driver.symbol(name)


@dataclass
class _Failure:
    symbol: str
    code: int
    gpu: int | None
    remaining: int | None


class NvmlDriver:
    """The driver of one personality: its symbols, handles, clock, counters and injected failures."""

    def __init__(self, personality: Personality, *, tick_s: float = 1.0,
                 start_us: int = 1_700_000_000_000_000, util_period_s: float = 1.0) -> None:
        self.personality = personality
        self.tick_s = tick_s
        self.util_period_us = round(util_period_s * 1e6)
        #: Per GPU: the per-process utilization samples (time µs, pid, sm, mem, enc, dec) in the buffer.
        self.util_samples: dict[int, list[tuple[int, int, int, int, int, int]]] = {}
        self.now_us = start_us
        self._start_us = start_us
        #: GPM: the sample buffers callers allocated (address -> what the last nvmlGpmSampleGet put in it:
        #: GPU, time µs, active seconds per metric id; None before), and each GPU's active seconds so far.
        self.gpm_samples: dict[int, tuple[int, int, dict[int, float]] | None] = {}
        self.gpm_buffers: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self.gpm_active_s: dict[int, dict[int, float]] = {}
        self.calls: Counter[str] = Counter()
        self.calls_by_gpu: Counter[tuple[str, int | None]] = Counter()
        self.unmodelled: Counter[str] = Counter()
        self.faults: list[str] = []
        self.init_count = 0
        self._failures: list[_Failure] = []
        self._lost: set[int] = set()
        self._by_address: dict[int, _Dev] = {}
        self._handles: list[_Dev] = []
        self._mig_handles: dict[tuple[int, int], _Dev] = {}
        self._callbacks: dict[str, Any] = {}
        self._strings: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self._table = self._symbols()
        for index in range(len(personality.gpus)):
            self._handles.append(self._new_dev(index))

    # --- test API -------------------------------------------------------------------------------

    def install(self, monkeypatch: Any, *, binding_process_entry_bytes: int | None = None) -> types.ModuleType:
        """Put this driver under the real ``pynvml``; ``binding_process_entry_bytes=32`` also gives the
        binding the 32-byte v3 process entry that nvidia-ml-py builds for R535 declared."""
        monkeypatch.setitem(sys.modules, "pynvml", _nv)
        monkeypatch.setattr(_nv, "nvmlLib", _Lib(self))
        monkeypatch.setattr(_nv, "_nvmlGetFunctionPointer_cache", {})
        monkeypatch.setattr(_nv, "_nvmlLib_refcount", 0)
        monkeypatch.setattr(_nv.NVMLError, "_errcode_to_string", dict(_nv.NVMLError._errcode_to_string))
        if binding_process_entry_bytes == 32:
            monkeypatch.setattr(_nv, "c_nvmlProcessInfo_v3_t", BindingProcessInfoCC, raising=False)
            monkeypatch.setattr(_nv, "c_nvmlProcessInfo_t", BindingProcessInfoCC)
        elif binding_process_entry_bytes not in (None, 24):
            raise ValueError("the binding's v3 process entry is 24 or 32 bytes")
        return _nv

    def fail(self, symbol: str, code: int, gpu: int | None = None, times: int | None = None) -> None:
        """``symbol`` answers ``code`` (on ``gpu``, or every device call; ``times`` calls, or for good)."""
        self._failures.append(_Failure(symbol, code, gpu, times))

    def lose(self, gpu: int) -> None:
        self._lost.add(gpu)

    def recover(self, gpu: int) -> None:
        """Back on the bus; old handles stay dead, as after a reset."""
        self._lost.discard(gpu)
        self._handles[gpu].alive = False
        self._handles[gpu] = self._new_dev(gpu)

    def advance(self, dt_s: float) -> None:
        before = self.now_us
        self.now_us += round(dt_s * 1e6)
        self._sample_process_utilization(before)
        for gpu, spec in enumerate(self.personality.gpus):
            active = self.gpm_active_s.setdefault(gpu, {})
            for metric, pct in spec.gpm_activity_pct.items():
                active[metric] = active.get(metric, 0.0) + (self.now_us - before) / 1e6 * pct / 100.0

    def check(self) -> None:
        """Fail when a callback raised (ctypes would have let the caller see SUCCESS)."""
        assert not self.faults, self.faults

    def symbol(self, name: str) -> Any:
        """The exported C symbol ``name`` (AttributeError when this driver branch lacks it)."""
        if name in self._callbacks:
            return self._callbacks[name]
        if name in self.personality.driver.missing_symbols or not name.startswith("nvml"):
            raise AttributeError(name)
        entry = self._table.get(name)
        if entry is None:
            callback = ctypes.CFUNCTYPE(ctypes.c_int)(self._unmodelled(name))
        else:
            argtypes, thunk, restype = entry
            callback = ctypes.CFUNCTYPE(restype, *argtypes)(thunk)
        self._callbacks[name] = callback  # kept alive as long as the driver
        return callback

    # --- plumbing --------------------------------------------------------------------------------

    def _new_dev(self, gpu: int, mig: int | None = None) -> _Dev:
        spec = self.personality.gpus[gpu]
        dev = _Dev(gpu, spec) if mig is None else _Dev(gpu, spec, spec.mig_devices[mig], parent=self._handles[gpu])
        self._by_address[dev.address] = dev
        return dev

    def _mig_dev(self, gpu: int, index: int) -> _Dev:
        key = (gpu, index)
        dev = self._mig_handles.get(key)
        if dev is None or not dev.alive or dev.parent is not self._handles[gpu]:
            dev = self._mig_handles[key] = self._new_dev(gpu, index)
        return dev

    def _seconds(self) -> float:
        return (self.now_us - self._start_us) / 1e6

    def _sample_process_utilization(self, before_us: int) -> None:
        """The driver's per-process samples at each sample instant in (before_us, now]."""
        period = self.util_period_us
        first = before_us // period + 1
        instants = range(max(first, (self.now_us - round(UTIL_BUFFER_S * 1e6)) // period), self.now_us // period + 1)
        for gpu, spec in enumerate(self.personality.gpus):
            if not spec.process_utilization:
                continue
            buffer = self.util_samples.setdefault(gpu, [])
            busy = [p for p in spec.processes if (p.sm_util, p.mem_util, p.enc_util, p.dec_util) != (0, 0, 0, 0)]
            for k in instants:
                buffer.extend((k * period, p.pid, p.sm_util, p.mem_util, p.enc_util, p.dec_util) for p in busy)
            horizon = self.now_us - round(UTIL_BUFFER_S * 1e6)
            buffer[:] = [sample for sample in buffer if sample[0] > horizon]

    def util_since(self, dev: _Dev, last_seen_us: int) -> list[tuple[int, int, int, int, int, int]] | None:
        """The samples newer than ``last_seen_us``; None where this GPU samples none (NotSupported)."""
        if dev.mig is not None or not dev.spec.process_utilization or (dev.spec.mig_mode or (0,))[0] == 1:
            return None
        return [sample for sample in self.util_samples.get(dev.gpu, []) if sample[0] > last_seen_us]

    def _unmodelled(self, name: str) -> Callable[..., int]:
        def thunk() -> int:
            self.calls[name] += 1
            self.unmodelled[name] += 1
            return NOT_SUPPORTED if self.init_count > 0 else abi.NVML_ERROR_UNINITIALIZED
        return thunk

    def _guard(self, name: str, body: Callable[[], int], dev: _Dev | None, device_call: bool) -> int:
        try:
            gpu = dev.gpu if dev is not None else None
            self.calls[name] += 1
            self.calls_by_gpu[name, gpu] += 1
            if self.init_count <= 0 and name not in _INIT_SYMBOLS:
                return abi.NVML_ERROR_UNINITIALIZED
            if device_call:
                if dev is None:
                    return INVALID
                if gpu in self._lost or not dev.alive or (dev.parent is not None and not dev.parent.alive):
                    return abi.NVML_ERROR_GPU_IS_LOST
            for failure in self._failures:
                if failure.symbol == name and (failure.gpu is None or failure.gpu == gpu):
                    if failure.remaining is not None:
                        if failure.remaining <= 0:
                            continue
                        failure.remaining -= 1
                    return failure.code
            if device_call:
                code = self.personality.quirks.failing_symbols.get(name)
                if code is not None:
                    return code
                if dev is not None and dev.mig is not None and name not in _MIG_SYMBOLS:
                    return NOT_SUPPORTED
            return body()
        except Exception as exc:  # see the module docstring: never let ctypes turn this into SUCCESS
            self.faults.append(f"{name}: {type(exc).__name__}: {exc}")
            return abi.NVML_ERROR_UNKNOWN

    def _device(self, name: str, impl: Callable[..., int], *argtypes: Any) -> tuple[tuple[Any, ...], Any, Any]:
        def thunk(handle: int | None, *args: Any) -> int:
            dev = self._by_address.get(handle) if handle else None
            plain = [getattr(a, "value", a) if isinstance(a, (_UInt, _Int)) else a for a in args]
            return self._guard(name, lambda: impl(dev, *plain), dev, device_call=True)
        return (_P, *argtypes), thunk, ctypes.c_int

    def _system(self, name: str, impl: Callable[..., int], *argtypes: Any,
                restype: Any = ctypes.c_int) -> tuple[tuple[Any, ...], Any, Any]:
        def thunk(*args: Any) -> Any:
            plain = [getattr(a, "value", a) if isinstance(a, (_UInt, _Int)) else a for a in args]
            if restype is not ctypes.c_int:  # nvmlErrorString: a pointer, no nvmlReturn_t to answer
                self.calls[name] += 1
                return impl(*plain)
            return self._guard(name, lambda: impl(*plain), None, device_call=False)
        return tuple(argtypes), thunk, restype

    # --- what the symbols answer ------------------------------------------------------------------

    def _symbols(self) -> dict[str, tuple[tuple[Any, ...], Any, Any]]:
        from tests.fakes import nvml_driver_calls as calls  # the per-symbol answers, split out for size

        return calls.symbol_table(self)

    # helpers the call table uses

    def memory_bytes(self, dev: _Dev) -> tuple[int, int, int, int]:
        """(total, reserved, used, free) in bytes; a MIG device has its own, a MIG parent the sum."""
        if dev.mig is not None:
            total, used = round(dev.mig.memory_total_mib * MIB), round(dev.mig.memory_used_mib * MIB)
            return total, 0, used, total - used
        spec = dev.spec
        total = round(spec.memory_total_mib * MIB)
        reserved = round((spec.memory_reserved_mib or 0) * MIB)
        used = round(spec.memory_used_mib * MIB) + sum(round(m.memory_used_mib * MIB) for m in spec.mig_devices)
        free = round(spec.memory_free_mib * MIB) if spec.memory_free_mib is not None else total - reserved - used
        return total, reserved, used, free

    def power_mw(self, dev: _Dev) -> int | None:
        if dev.spec.power_draw_w is None:
            return None
        bogus = self.personality.quirks.bogus_power_mw
        return bogus if bogus is not None else _mw(dev.spec.power_draw_w)

    def energy_mj(self, dev: _Dev) -> int | None:
        spec = dev.spec
        if spec.energy_start_mj is None:
            return None
        return spec.energy_start_mj + round((spec.power_draw_w or 0.0) * 1000 * self._seconds())

    def pcie_bytes(self, rate_kb_s: int | None) -> int | None:
        if rate_kb_s is None:
            return None
        quirks = self.personality.quirks
        return (quirks.pcie_counter_start + round(rate_kb_s * 1024 * self._seconds())) % 2**quirks.pcie_counter_bits

    def counter_ns(self, ns_per_s: float) -> int:
        return round(ns_per_s * self._seconds())

    def reasons(self, dev: _Dev) -> int | None:
        """The clock-event mask now: the timeline's step at this moment, else the capture's mask."""
        spec, now = dev.spec, self._seconds()
        mask = spec.clock_event_reasons
        for start_s, step_mask in spec.clock_event_timeline:
            if start_s <= now:
                mask = step_mask
        return mask

    def bit_ns(self, dev: _Dev, bit: int) -> int:
        """Nanoseconds the timeline has had ``bit`` set since the driver started."""
        now, total = self._seconds(), 0.0
        steps = dev.spec.clock_event_timeline
        for i, (start_s, mask) in enumerate(steps):
            end_s = steps[i + 1][0] if i + 1 < len(steps) else now
            if mask & bit and start_s < now:
                total += min(end_s, now) - start_s
        return round(total * 1e9)

    def processes(self, dev: _Dev, kind: str) -> list[ProcessSpec]:
        if dev.mig is not None:
            pool = list(dev.mig.processes)
        else:
            pool = list(dev.spec.processes)
            if dev.spec.mig_mode and dev.spec.mig_mode[0] == 1:  # the parent lists every instance's too
                pool += [p for m in dev.spec.mig_devices for p in m.processes]
        # "both": compute and graphics; an MPS client is listed only by the MPS call.
        return [p for p in pool if p.kind == kind or (p.kind == "both" and kind != "mps")]

    def process_layout(self, suffix: str) -> type[ctypes.Structure]:
        if suffix == "_v3":
            return _ProcessV3CC if self.personality.driver.process_v3_entry_bytes == 32 else _ProcessV2
        return _PROCESS_LAYOUT[suffix]

    def error_string(self, code: int) -> int:
        text = _nv.NVMLError._errcode_to_string.get(code, f"Unknown Error code {code}")
        if code not in self._strings:
            self._strings[code] = ctypes.create_string_buffer(text.encode())
        return ctypes.addressof(self._strings[code])

    def handle_of(self, dev: _Dev) -> int:
        return dev.address

    def current_handle(self, gpu: int) -> _Dev:
        return self._handles[gpu]

    def mig_handle(self, gpu: int, index: int) -> _Dev:
        return self._mig_dev(gpu, index)

    def is_lost(self, gpu: int) -> bool:
        return gpu in self._lost

    def on_field_call(self) -> None:
        self.advance(self.tick_s)

