"""A fake ``pynvml`` module: several configurable GPUs, any NVML error on any call, call counting.

``FakeNvml(...).module`` is a real ``types.ModuleType`` that can stand in for ``pynvml`` in
``sys.modules`` (``fake.install(monkeypatch)``). Constants, ctypes structures and the
``NVMLError_*`` classes are the real ones from ``pynvml`` (so ``except`` clauses written
against the real module match); every ``nvml*`` function is replaced: the ones Rigscope,
gpustat 1.1.1 and nvitop use answer from ``FakeGpu`` state, every other one counts as a
call and answers NotSupported. ``_nvmlGetFunctionPointer`` hands out C-style functions
(return codes, ``byref`` out-parameters) for the calls nvitop and gpustat make directly.

Counting: one entry per NVML API call, keyed by its C symbol. A C-style process query that
first asks for the size and then fills the buffer counts once, as pynvml's wrapper does.
Latency: ``latency_s`` per counted call, by busy-waiting (``latency_mode="busy"``, the
default: a driver ioctl costs the caller CPU time) or sleeping (``"sleep"``).
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pynvml as _real

from tests.fakes import nvml_abi as abi

GIB = 1024**3
MIB = 1024**2
_UTILITIES = ("nvmlExceptionClass", "nvmlStructToFriendlyObject", "nvmlFriendlyObjectToStruct")
_VERSION_SUFFIX = re.compile(r"_v\d+$")


@dataclass
class FakeProcess:
    pid: int
    used_bytes: int | None = 1 * GIB
    kind: str = "compute"  # compute | graphics | both
    #: Per-process utilization (%) the driver samples; all 0: idle, so left out of its answer.
    sm_util: int = 0
    mem_util: int = 0
    enc_util: int = 0
    dec_util: int = 0


@dataclass
class FakeMigInstance:
    """One MIG instance (a MIG device handle under its parent)."""

    name: str = "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
    uuid: str = ""
    gpu_instance_id: int = 1
    compute_instance_id: int = 0
    memory_total_bytes: int = 40 * GIB
    memory_used_bytes: int = 2 * GIB
    processes: list[FakeProcess] = field(default_factory=list)


@dataclass
class FakeGpu:
    """One fake GPU's readings (NVML units: mW, mJ, bytes, KB/s)."""

    name: str = "NVIDIA GeForce RTX 4090 Laptop GPU"
    uuid: str = ""
    memory_total_bytes: int = 16 * GIB
    memory_used_bytes: int = 3 * GIB
    memory_reserved_bytes: int = 300 * MIB
    utilization_gpu: int = 87
    utilization_mem: int = 41
    temperature_c: int = 78
    power_mw: int = 142_000
    energy_mj: int = 5_000_000
    sm_clock_mhz: int = 2040
    mem_clock_mhz: int = 9001
    sm_clock_max_mhz: int = 3105
    mem_clock_max_mhz: int = 9001
    fan_pct: int | None = None  # None: NotSupported, as on most laptops
    pstate: int = 0
    clock_event_reasons: int = 0x4
    #: NVML's time under each clock-event cause since the driver loaded (ns): ``advance`` adds the
    #: time its reason bit is set; a test adds an episode between two samples directly.
    sw_power_cap_ns: int = 0
    sw_thermal_ns: int = 0
    hw_thermal_ns: int = 0
    hw_power_brake_ns: int = 0
    pcie_tx_kb_s: int = 1200
    pcie_rx_kb_s: int = 3400
    pcie_tx_bytes: int = 10 * GIB
    pcie_rx_bytes: int = 30 * GIB
    pcie_gen: int = 4
    pcie_width: int = 8
    pcie_gen_max: int = 4
    pcie_width_max: int = 16
    power_limit_mw: int = 150_000
    power_limit_default_mw: int = 150_000
    power_limit_min_mw: int = 80_000
    power_limit_max_mw: int = 175_000
    power_limit_settable: bool = False  # GeForce laptops refuse GetPowerManagementLimit
    temp_slowdown_c: int = 87
    temp_shutdown_c: int = 95
    #: nvmlDeviceGetTemperatureThreshold(GPU_MAX), absolute; None: NotSupported.
    temp_max_operating_c: int | None = None
    #: "GPU T.Limit Temp": degrees left to the thermal limit (nvmlDeviceGetMarginTemperature); None: NotSupported.
    temp_margin_c: int | None = None
    #: Field values 193-196 (NVML_FI_DEV_TEMPERATURE_*_TLIMIT): offsets from the thermal limit; None: NotSupported.
    tlimit_shutdown_c: int | None = None
    tlimit_slowdown_c: int | None = None
    tlimit_mem_max_c: int | None = None
    tlimit_gpu_max_c: int | None = None
    #: nvmlDeviceGetMigMode's current mode (0/1); None: NotSupported (GeForce).
    mig_mode: int | None = None
    mig_instances: list[FakeMigInstance] = field(default_factory=list)
    vbios: str = "95.03.1F.00.8B"
    persistence: int = 0
    processes: list[FakeProcess] = field(default_factory=list)
    #: C symbols (or their unversioned names) this GPU answers NotSupported for good.
    unsupported: set[str] = field(default_factory=set)
    #: Field ids whose entry in nvmlDeviceGetFieldValues answers NotSupported.
    unsupported_fields: set[int] = field(default_factory=set)
    #: Field id -> the NVML error its entry answers (e.g. 999 UNKNOWN), on every call.
    field_errors: dict[int, int] = field(default_factory=dict)
    #: GPM (Hopper, Blackwell): nvmlGpmQueryDeviceSupport says yes and its samples measure these (%).
    gpm: bool = False
    sm_active_pct: float = 0.0
    tensor_active_pct: float = 0.0
    dram_active_pct: float = 0.0
    graphics_active_pct: float = 0.0
    #: GPM metric id -> active seconds so far, the counters a GPM sample copies (``advance`` adds to them).
    gpm_active_s: dict[int, float] = field(default_factory=dict)


def desktop_gpu(**changes: Any) -> FakeGpu:
    """A desktop card: fan, settable power limit, persistence mode on."""
    base = dict(name="NVIDIA GeForce RTX 4090", memory_total_bytes=24 * GIB, power_mw=380_000,
                power_limit_mw=450_000, power_limit_default_mw=450_000, power_limit_min_mw=150_000,
                power_limit_max_mw=600_000, power_limit_settable=True, fan_pct=55, pcie_width=16, persistence=1)
    base.update(changes)
    return FakeGpu(**base)  # type: ignore[arg-type]


def ada_desktop_gpu(**changes: Any) -> FakeGpu:
    """An RTX 4090 as /work/shared/realdata/nvidia-smi-q/nvsmi_q_RTX4090.txt shows it: current 28 C,
    T.Limit 56 C, shutdown T.Limit -7, slowdown -2, max operating 0 (so limit 84, slowdown 86,
    shutdown 91 C absolute); the absolute threshold call answers NotSupported."""
    base: dict[str, Any] = dict(temperature_c=28, temp_margin_c=56, tlimit_shutdown_c=-7, tlimit_slowdown_c=-2,
                                tlimit_gpu_max_c=0, unsupported={"nvmlDeviceGetTemperatureThreshold"})
    base.update(changes)
    return desktop_gpu(**base)


def hopper_mig_gpu(**changes: Any) -> FakeGpu:
    """An H100 SXM with MIG on (/work/shared/realdata/nvidia-smi-q/nvsmi_q_H100SXMx8.txt for the name,
    memory and thresholds: T.Limit 57 at 30 C, shutdown -8, slowdown -2): two 3g.40gb instances."""
    base: dict[str, Any] = dict(
        name="NVIDIA H100 80GB HBM3", memory_total_bytes=80 * GIB, power_mw=70_000, power_limit_mw=700_000,
        power_limit_default_mw=700_000, power_limit_min_mw=200_000, power_limit_max_mw=700_000,
        power_limit_settable=True, fan_pct=None, pcie_gen=5, pcie_width=16, pcie_gen_max=5, persistence=1,
        temperature_c=30, temp_margin_c=57, tlimit_shutdown_c=-8, tlimit_slowdown_c=-2, tlimit_gpu_max_c=0,
        tlimit_mem_max_c=0, utilization_gpu=0, utilization_mem=0,
        # Under MIG the parent answers no per-process utilization.
        unsupported={"nvmlDeviceGetTemperatureThreshold", "nvmlDeviceGetProcessUtilization",
                     "nvmlDeviceGetProcessesUtilizationInfo"},
        mig_mode=1, mig_instances=[
            FakeMigInstance(uuid="MIG-fake-0001", gpu_instance_id=1, processes=[FakeProcess(4242, 3 * GIB)]),
            FakeMigInstance(uuid="MIG-fake-0002", gpu_instance_id=2, memory_used_bytes=12 * MIB),
        ])
    base.update(changes)
    return FakeGpu(**base)


def hopper_gpu(**changes: Any) -> FakeGpu:
    """An H100 SXM with MIG off and GPM (nvsmi_q_H100SXMx8.txt for the name, memory and limits), busy:
    SM activity 62 %, tensor activity 41 %, DRAM bandwidth 55 %."""
    base: dict[str, Any] = dict(
        name="NVIDIA H100 80GB HBM3", memory_total_bytes=80 * GIB, power_mw=520_000, power_limit_mw=700_000,
        power_limit_default_mw=700_000, power_limit_min_mw=200_000, power_limit_max_mw=700_000,
        power_limit_settable=True, fan_pct=None, pcie_gen=5, pcie_width=16, pcie_gen_max=5, persistence=1,
        sm_clock_mhz=1755, sm_clock_max_mhz=1980, temperature_c=61, utilization_gpu=100, utilization_mem=48,
        gpm=True, sm_active_pct=62.0, tensor_active_pct=41.0, dram_active_pct=55.0, graphics_active_pct=97.0)
    base.update(changes)
    return FakeGpu(**base)


#: GPM metric ids the fake measures, and the FakeGpu field holding each one's activity (%).
_GPM_ACTIVITY = {abi.NVML_GPM_METRIC_SM_UTIL: "sm_active_pct", abi.NVML_GPM_METRIC_ANY_TENSOR_UTIL:
                 "tensor_active_pct", abi.NVML_GPM_METRIC_DRAM_BW_UTIL: "dram_active_pct",
                 abi.NVML_GPM_METRIC_GRAPHICS_UTIL: "graphics_active_pct"}


class _Handle:
    __slots__ = ("generation", "index", "mig")

    def __init__(self, index: int, generation: int, mig: int | None = None) -> None:
        self.index = index
        self.generation = generation
        #: The MIG instance's position under GPU ``index`` for a MIG device handle, else None.
        self.mig = mig

    def __repr__(self) -> str:
        return f"<fake nvmlDevice {self.index}>"


@dataclass
class _Failure:
    func: str
    gpu: int | None
    code: int
    remaining: int | None


class FakeNvml:
    """The fake driver: state, failure injection, counters; ``.module`` is the pynvml stand-in."""

    def __init__(self, gpus: Sequence[FakeGpu] | int = 2, *, latency_s: float = 0.0, latency_mode: str = "busy",
                 driver_version: str = "565.57.01", cuda_version: int = 12070,
                 init_error: int | None = None, switch_file: str | None = None) -> None:
        """``switch_file``: a JSON file read at every ``nvmlInit`` (another process may rewrite it between two):
        ``{"init_error": 18 | null, "driver_version": "..."}``, each key optional; a missing file changes nothing.
        It makes a driver fail and come back under a real program that runs on this fake."""
        if isinstance(gpus, int):
            gpus = [FakeGpu() for _ in range(gpus)]
        self.gpus = list(gpus)
        for i, gpu in enumerate(self.gpus):
            gpu.uuid = gpu.uuid or f"GPU-fake{i:04d}-0000-0000-0000-000000000000"
        self.latency_s = latency_s
        self.latency_mode = latency_mode
        self.driver_version = driver_version
        self.cuda_version = cuda_version
        self.init_error = init_error
        self.switch_file = switch_file
        self.calls: Counter[str] = Counter()
        #: The same calls by (C symbol, GPU index or None for system calls).
        self.calls_by_gpu: Counter[tuple[str, int | None]] = Counter()
        self.init_count = 0
        self._failures: list[_Failure] = []
        self._lost: set[int] = set()
        self._generation = [0] * len(self.gpus)
        self._clock_us = 1_700_000_000_000_000
        #: Allocated GPM samples by address: None until filled, then (GPU index, time µs, active seconds by metric).
        self.gpm_samples: dict[int, tuple[int, int, dict[int, float]] | None] = {}
        self._gpm_buffers: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self.module = self._build_module()

    # --- test API ---------------------------------------------------------------------------

    def fail(self, func: str, gpu: int | None = None, error: int = abi.NVML_ERROR_NOT_SUPPORTED,
             times: int | None = None) -> None:
        """Make ``func`` (C symbol, or its name without ``_vN``) raise ``error`` on ``gpu`` (None: every call)."""
        self._failures.append(_Failure(func, gpu, error, times))

    def clear_failures(self) -> None:
        self._failures.clear()

    def lose(self, gpu: int) -> None:
        """GPU ``gpu`` falls off the bus: every call on it answers GPU_IS_LOST."""
        self._lost.add(gpu)

    def recover(self, gpu: int) -> None:
        """It is back; old handles stay dead (a fresh one must be asked for, as after a reset)."""
        self._lost.discard(gpu)
        self._generation[gpu] += 1

    def advance(self, dt_s: float) -> None:
        """Let ``dt_s`` pass: energy and PCIe counters and field timestamps move on."""
        self._clock_us += int(dt_s * 1e6)
        for gpu in self.gpus:
            gpu.energy_mj += int(gpu.power_mw * dt_s)
            gpu.pcie_tx_bytes += int(gpu.pcie_tx_kb_s * 1024 * dt_s)
            gpu.pcie_rx_bytes += int(gpu.pcie_rx_kb_s * 1024 * dt_s)
            held_ns = int(dt_s * 1e9)
            reasons = gpu.clock_event_reasons
            gpu.sw_power_cap_ns += held_ns if reasons & abi.nvmlClocksEventReasonSwPowerCap else 0
            gpu.sw_thermal_ns += held_ns if reasons & abi.nvmlClocksEventReasonSwThermalSlowdown else 0
            gpu.hw_thermal_ns += held_ns if reasons & abi.nvmlClocksEventReasonHwThermalSlowdown else 0
            gpu.hw_power_brake_ns += held_ns if reasons & abi.nvmlClocksEventReasonHwPowerBrakeSlowdown else 0
            for metric, attr in _GPM_ACTIVITY.items():
                gpu.gpm_active_s[metric] = gpu.gpm_active_s.get(metric, 0.0) + dt_s * getattr(gpu, attr) / 100.0

    def _read_switch(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as handle:
                state = json.load(handle)
        except FileNotFoundError:
            return
        if "init_error" in state:
            self.init_error = state["init_error"]
        if "driver_version" in state:
            self.driver_version = state["driver_version"]

    def install(self, monkeypatch: Any) -> types.ModuleType:
        monkeypatch.setitem(sys.modules, "pynvml", self.module)
        return self.module

    def total_calls(self) -> int:
        return sum(self.calls.values())

    def reset_counts(self) -> None:
        self.calls.clear()
        self.calls_by_gpu.clear()

    # --- plumbing -----------------------------------------------------------------------------

    def _enter(self, name: str, args: tuple[Any, ...]) -> tuple[int | None, FakeGpu | None]:
        """Count the call, wait the latency, apply failures; returns (error code, gpu)."""
        handle = args[0] if args and isinstance(args[0], _Handle) else None
        index = handle.index if handle is not None else None
        self.calls[name] += 1
        self.calls_by_gpu[name, index] += 1
        if self.latency_s > 0:
            if self.latency_mode == "sleep":
                time.sleep(self.latency_s)
            else:
                end = time.perf_counter() + self.latency_s
                while time.perf_counter() < end:
                    pass
        if self.init_count <= 0 and name not in {"nvmlInit", "nvmlInitWithFlags", "nvmlInit_v2"}:
            return abi.NVML_ERROR_UNINITIALIZED, None
        base = _VERSION_SUFFIX.sub("", name)
        for failure in self._failures:
            if failure.func in (name, base) and (failure.gpu is None or failure.gpu == index):
                if failure.remaining is not None:
                    if failure.remaining <= 0:
                        continue
                    failure.remaining -= 1
                return failure.code, None
        if handle is None:
            return None, None
        if index in self._lost or handle.generation != self._generation[handle.index]:
            return abi.NVML_ERROR_GPU_IS_LOST, None
        gpu = self.gpus[handle.index]
        if name in gpu.unsupported or base in gpu.unsupported:
            return abi.NVML_ERROR_NOT_SUPPORTED, None
        return None, gpu

    def _api(self, name: str, body: Callable[..., Any]) -> Callable[..., Any]:
        mig_body = self._mig_bodies().get(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            code, gpu = self._enter(name, args)
            if code is not None:
                raise _real.NVMLError(code)
            if gpu is not None and args[0].mig is not None:
                if mig_body is None:  # most calls answer NotSupported on a MIG device handle
                    raise _real.NVMLError(abi.NVML_ERROR_NOT_SUPPORTED)
                return mig_body(gpu.mig_instances[args[0].mig], *args[1:], **kwargs)
            return body(gpu, *args[1:], **kwargs) if gpu is not None else body(*args, **kwargs)

        call.__name__ = name
        return call

    def _handle(self, index: int) -> _Handle:
        if not 0 <= index < len(self.gpus):
            raise _real.NVMLError(abi.NVML_ERROR_INVALID_ARGUMENT)
        if index in self._lost:
            raise _real.NVMLError(abi.NVML_ERROR_GPU_IS_LOST)
        return _Handle(index, self._generation[index])

    def _field(self, gpu: FakeGpu, value: Any) -> None:
        fid = int(value.fieldId)
        value.timestamp = self._clock_us
        readings = {
            abi.NVML_FI_DEV_POWER_AVERAGE: (1, gpu.power_mw), abi.NVML_FI_DEV_POWER_INSTANT: (1, gpu.power_mw),
            abi.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: (3, gpu.energy_mj),
            abi.NVML_FI_DEV_PCIE_COUNT_TX_BYTES: (3, gpu.pcie_tx_bytes),
            abi.NVML_FI_DEV_PCIE_COUNT_RX_BYTES: (3, gpu.pcie_rx_bytes),
            abi.NVML_FI_DEV_POWER_CURRENT_LIMIT: (1, gpu.power_limit_mw),
            # Clock-event counters, unsigned long long ns: 74/75 are the perf-policy ids older drivers
            # answer (74 is also the SW power cap counter's id today), 269-271 those of nvidia-ml-py 13.x
            # (R580.82+; the fake's "565" driver is an ambiguous version to Rigscope, which asks 251-253
            # too and finds them NotSupported here). tests/fakes/personalities_counters.py has the real branches.
            abi.NVML_FI_DEV_PERF_POLICY_POWER: (3, gpu.sw_power_cap_ns),
            abi.NVML_FI_DEV_PERF_POLICY_THERMAL: (3, gpu.sw_thermal_ns),
            abi.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN: (3, gpu.sw_thermal_ns),
            abi.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN: (3, gpu.hw_thermal_ns),
            abi.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN: (3, gpu.hw_power_brake_ns),
        }
        # T.Limit offsets are signed (-7 C); valueType 5 is NVML_VALUE_TYPE_SIGNED_INT.
        for fid_t, offset in ((abi.NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT, gpu.tlimit_shutdown_c),
                              (abi.NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT, gpu.tlimit_slowdown_c),
                              (abi.NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT, gpu.tlimit_mem_max_c),
                              (abi.NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT, gpu.tlimit_gpu_max_c)):
            if offset is not None:
                readings[fid_t] = (5, offset)
        if fid in gpu.field_errors:
            value.nvmlReturn = gpu.field_errors[fid]
            return
        if fid in gpu.unsupported_fields or fid not in readings:
            value.nvmlReturn = abi.NVML_ERROR_NOT_SUPPORTED
            return
        value_type, number = readings[fid]
        value.valueType = value_type
        value.nvmlReturn = abi.NVML_SUCCESS
        if value_type == 1:
            value.value.uiVal = number
        elif value_type == 5:
            value.value.siVal = number
        else:
            value.value.ullVal = number

    def _procs(self, gpu: FakeGpu, kind: str) -> list[FakeProcess]:
        return [p for p in gpu.processes if p.kind == kind or (p.kind == "both" and kind != "mps")]

    # --- the module -----------------------------------------------------------------------------

    def _build_module(self) -> types.ModuleType:
        mod = types.ModuleType("pynvml", "Fake pynvml (tests/fakes/fake_pynvml.py)")
        for name, value in vars(_real).items():
            if name.startswith("__"):
                continue
            if name.startswith("nvml") and isinstance(value, types.FunctionType) and name not in _UTILITIES:
                mod.__dict__[name] = self._api(name, _not_supported)
            elif not (isinstance(value, types.FunctionType) and name.startswith("_")):
                mod.__dict__[name] = value
        # The fake is a binding of its own: the newest one's ids and structs whatever pynvml is installed
        # (12.535 lacks the 24-byte c_nvmlProcessInfo_v3_t, so the app would take the C path there).
        mod.__dict__.update(abi.BINDING_NAMES)
        mod.__dict__["c_nvmlProcessInfo_t"] = abi.c_nvmlProcessInfo_v3_t
        for name, body in self._bodies().items():
            mod.__dict__[name] = self._api(name, body)
        mod.__dict__["nvmlDeviceGetMemoryInfo"] = self._memory_info
        mod.__dict__["nvmlDeviceGetFieldValues"] = self._field_values
        cfuncs = self._c_functions()

        def _nvmlGetFunctionPointer(name: str) -> Callable[..., int]:
            if name not in cfuncs:
                raise _real.NVMLError(abi.NVML_ERROR_FUNCTION_NOT_FOUND)
            return cfuncs[name]

        mod.__dict__["_nvmlGetFunctionPointer"] = _nvmlGetFunctionPointer
        mod.__dict__["_nvmlGetFunctionPointer_cache"] = {}
        mod.__dict__["_nvmlCheckReturn"] = _check
        mod.__dict__["fake"] = self
        return mod

    def _memory_info(self, handle: Any, version: int | None = None) -> Any:
        name = "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo"
        code, gpu = self._enter(name, (handle,))
        if code is not None:
            raise _real.NVMLError(code)
        assert gpu is not None
        memory = abi.c_nvmlMemory_v2_t() if version else abi.c_nvmlMemory_t()
        if handle.mig is not None:
            instance = gpu.mig_instances[handle.mig]
            memory.total, memory.used = instance.memory_total_bytes, instance.memory_used_bytes
            memory.free = instance.memory_total_bytes - instance.memory_used_bytes
            return memory
        self._fill_memory(gpu, memory, v2=bool(version))
        return memory

    @staticmethod
    def _fill_memory(gpu: FakeGpu, memory: Any, v2: bool) -> None:
        memory.total = gpu.memory_total_bytes
        memory.used = gpu.memory_used_bytes + (0 if v2 else gpu.memory_reserved_bytes)
        memory.free = gpu.memory_total_bytes - gpu.memory_used_bytes - gpu.memory_reserved_bytes
        if v2:
            memory.reserved = gpu.memory_reserved_bytes

    def _field_values(self, handle: Any, field_ids: Sequence[Any]) -> Any:
        code, gpu = self._enter("nvmlDeviceGetFieldValues", (handle,))
        if code is not None:
            raise _real.NVMLError(code)
        assert gpu is not None
        values = (abi.c_nvmlFieldValue_t * len(field_ids))()
        for i, fid in enumerate(field_ids):
            values[i].fieldId, values[i].scopeId = fid if isinstance(fid, tuple) else (fid, 0)
            self._field(gpu, values[i])
        return values

    def _bodies(self) -> dict[str, Callable[..., Any]]:
        def init(*_: Any) -> None:
            if self.switch_file is not None:
                self._read_switch(self.switch_file)
            if self.init_error is not None:
                raise _real.NVMLError(self.init_error)
            self.init_count += 1

        def shutdown() -> None:
            self.init_count -= 1

        def by_uuid(uuid: Any) -> _Handle:
            text = uuid.decode() if isinstance(uuid, bytes) else uuid
            for i, gpu in enumerate(self.gpus):
                if gpu.uuid == text:
                    return self._handle(i)
            raise _real.NVMLError(abi.NVML_ERROR_NOT_FOUND)

        def by_bus(bus: Any) -> _Handle:
            text = bus.decode() if isinstance(bus, bytes) else bus
            for i in range(len(self.gpus)):
                if _bus_id(i) == text:
                    return self._handle(i)
            raise _real.NVMLError(abi.NVML_ERROR_NOT_FOUND)

        def utilization(g: FakeGpu) -> Any:
            return abi.c_nvmlUtilization_t(gpu=g.utilization_gpu, memory=g.utilization_mem)

        def fan(g: FakeGpu, *_: Any) -> int:
            if g.fan_pct is None:
                raise _real.NVMLError(abi.NVML_ERROR_NOT_SUPPORTED)
            return g.fan_pct

        def power_limit(g: FakeGpu) -> int:
            if not g.power_limit_settable:
                raise _real.NVMLError(abi.NVML_ERROR_NOT_SUPPORTED)
            return g.power_limit_mw

        def clock(g: FakeGpu, kind: int, *_: Any) -> int:
            return {abi.NVML_CLOCK_GRAPHICS: g.sm_clock_mhz, abi.NVML_CLOCK_SM: g.sm_clock_mhz,
                    abi.NVML_CLOCK_MEM: g.mem_clock_mhz, abi.NVML_CLOCK_VIDEO: 1800}[kind]

        def max_clock(g: FakeGpu, kind: int) -> int:
            return {abi.NVML_CLOCK_GRAPHICS: g.sm_clock_max_mhz, abi.NVML_CLOCK_SM: g.sm_clock_max_mhz,
                    abi.NVML_CLOCK_MEM: g.mem_clock_max_mhz, abi.NVML_CLOCK_VIDEO: 2000}[kind]

        def threshold(g: FakeGpu, kind: int) -> int:
            if kind == abi.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
                return g.temp_slowdown_c
            if kind == abi.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
                return g.temp_shutdown_c
            if kind == abi.NVML_TEMPERATURE_THRESHOLD_GPU_MAX and g.temp_max_operating_c is not None:
                return g.temp_max_operating_c
            raise _real.NVMLError(abi.NVML_ERROR_NOT_SUPPORTED)

        def margin(g: FakeGpu) -> int:
            if g.temp_margin_c is None:
                raise _real.NVMLError(abi.NVML_ERROR_NOT_SUPPORTED)
            return g.temp_margin_c

        def mig_mode(g: FakeGpu) -> list[int]:
            if g.mig_mode is None:
                raise _real.NVMLError(abi.NVML_ERROR_NOT_SUPPORTED)
            return [g.mig_mode, g.mig_mode]

        def mig_count(g: FakeGpu) -> int:
            if g.mig_mode is None:
                raise _real.NVMLError(abi.NVML_ERROR_NOT_SUPPORTED)
            return 7  # the most instances an H100 can hold; empty slots answer NOT_FOUND

        def mig_handle(g: FakeGpu, slot: int) -> _Handle:
            if not g.mig_mode or not 0 <= slot < len(g.mig_instances):
                raise _real.NVMLError(abi.NVML_ERROR_NOT_FOUND)
            index = self.gpus.index(g)
            return _Handle(index, self._generation[index], mig=slot)

        def pci_info(g: FakeGpu) -> Any:
            info = abi.nvmlPciInfo_t()
            bus = _bus_id(self.gpus.index(g)).encode()
            info.busId = bus
            info.busIdLegacy = bus
            return info

        def processes(kind: str) -> Callable[[FakeGpu], list[Any]]:
            def body(g: FakeGpu) -> list[Any]:
                return [_real.nvmlStructToFriendlyObject(abi.c_nvmlProcessInfo_v3_t(
                    pid=p.pid, usedGpuMemory=p.used_bytes if p.used_bytes is not None else 2**64 - 1,
                    gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)) for p in self._procs(g, kind)]
            return body

        def process_samples(g: FakeGpu, last_seen_us: int) -> list[tuple[int, FakeProcess]]:
            """The driver's 1 s samples newer than ``last_seen_us`` (the last 5 s at the first ask), one per
            process that used the GPU, with its current utilization."""
            if self._clock_us <= last_seen_us:
                return []
            busy = [p for p in g.processes if (p.sm_util, p.mem_util, p.enc_util, p.dec_util) != (0, 0, 0, 0)]
            period = 1_000_000
            oldest = last_seen_us if last_seen_us else self._clock_us - 5 * period
            instants = [self._clock_us - k * period for k in range(round((self._clock_us - oldest) / period))]
            return [(ts, p) for ts in sorted(instants) for p in busy]

        def process_utilization(g: FakeGpu, last_seen_us: int) -> list[Any]:
            samples = process_samples(g, last_seen_us)
            if not samples:
                raise _real.NVMLError(abi.NVML_ERROR_NOT_FOUND)  # no sample newer than last_seen_us
            return [abi.c_nvmlProcessUtilizationSample_t(pid=p.pid, timeStamp=ts, smUtil=p.sm_util,
                                                           memUtil=p.mem_util, encUtil=p.enc_util,
                                                           decUtil=p.dec_util) for ts, p in samples]

        def processes_utilization_info(g: FakeGpu, last_seen_us: int) -> list[Any]:
            samples = process_samples(g, last_seen_us)
            if not samples:
                raise _real.NVMLError(abi.NVML_ERROR_NOT_FOUND)
            return [abi.c_nvmlProcessUtilizationInfo_v1_t(timeStamp=ts, pid=p.pid, smUtil=p.sm_util,
                                                            memUtil=p.mem_util, encUtil=p.enc_util,
                                                            decUtil=p.dec_util, jpgUtil=0, ofaUtil=0)
                    for ts, p in samples]

        def pcie(g: FakeGpu, counter: int) -> int:
            return g.pcie_tx_kb_s if counter == abi.NVML_PCIE_UTIL_TX_BYTES else g.pcie_rx_kb_s

        def gpm_support(g: FakeGpu) -> Any:
            return abi.c_nvmlGpmSupport_t(version=abi.NVML_GPM_SUPPORT_VERSION, isSupportedDevice=int(g.gpm))

        def address(sample: Any) -> int:
            return ctypes.cast(sample, ctypes.c_void_p).value or 0

        def gpm_alloc() -> Any:
            buffer = ctypes.create_string_buffer(16)
            key = ctypes.addressof(buffer)
            self._gpm_buffers[key], self.gpm_samples[key] = buffer, None
            return ctypes.cast(buffer, _real.c_nvmlGpmSample_t)

        def gpm_free(sample: Any) -> None:
            key = address(sample)
            if key not in self.gpm_samples:
                raise _real.NVMLError(abi.NVML_ERROR_INVALID_ARGUMENT)  # freed twice, or never allocated
            del self.gpm_samples[key], self._gpm_buffers[key]

        def gpm_sample(g: FakeGpu, sample: Any) -> Any:
            key = address(sample)
            if not g.gpm or g.mig_mode:
                raise _real.NVMLError(abi.NVML_ERROR_NOT_SUPPORTED)  # under MIG: per GPU instance only
            if key not in self.gpm_samples:
                raise _real.NVMLError(abi.NVML_ERROR_INVALID_ARGUMENT)
            self.gpm_samples[key] = (self.gpus.index(g), self._clock_us, dict(g.gpm_active_s))
            return sample

        def gpm_metrics(request: Any) -> Any:
            first, second = self.gpm_samples.get(address(request.sample1)), self.gpm_samples.get(
                address(request.sample2))
            if request.version != abi.NVML_GPM_METRICS_GET_VERSION:
                raise _real.NVMLError(abi.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            if first is None or second is None or first[0] != second[0] or second[1] <= first[1]:
                raise _real.NVMLError(abi.NVML_ERROR_INVALID_ARGUMENT)
            elapsed_s = (second[1] - first[1]) / 1e6
            for slot in range(request.numMetrics):
                entry = request.metrics[slot]
                if entry.metricId not in _GPM_ACTIVITY:
                    entry.nvmlReturn = abi.NVML_ERROR_NOT_SUPPORTED
                    continue
                active_s = second[2].get(entry.metricId, 0.0) - first[2].get(entry.metricId, 0.0)
                entry.value, entry.nvmlReturn = 100.0 * active_s / elapsed_s, abi.NVML_SUCCESS
            return request

        return {
            "nvmlInit": init, "nvmlInitWithFlags": init, "nvmlInit_v2": init, "nvmlShutdown": shutdown,
            "nvmlDeviceGetCount": lambda: len(self.gpus),
            "nvmlSystemGetDriverVersion": lambda: self.driver_version,
            "nvmlSystemGetNVMLVersion": lambda: "12." + self.driver_version,
            "nvmlSystemGetCudaDriverVersion": lambda: self.cuda_version,
            "nvmlSystemGetCudaDriverVersion_v2": lambda: self.cuda_version,
            "nvmlSystemGetProcessName": lambda pid: f"process-{pid}",
            "nvmlDeviceGetHandleByIndex": self._handle, "nvmlDeviceGetHandleByUUID": by_uuid,
            "nvmlDeviceGetHandleByPciBusId": by_bus,
            "nvmlDeviceGetName": lambda g: g.name, "nvmlDeviceGetUUID": lambda g: g.uuid,
            "nvmlDeviceGetIndex": lambda g: self.gpus.index(g),
            "nvmlDeviceGetUtilizationRates": utilization,
            "nvmlDeviceGetEncoderUtilization": lambda g: [0, 167000],
            "nvmlDeviceGetDecoderUtilization": lambda g: [0, 167000],
            "nvmlDeviceGetPowerUsage": lambda g: g.power_mw,
            "nvmlDeviceGetTotalEnergyConsumption": lambda g: g.energy_mj,
            "nvmlDeviceGetEnforcedPowerLimit": lambda g: g.power_limit_mw,
            "nvmlDeviceGetPowerManagementLimit": power_limit,
            "nvmlDeviceGetPowerManagementDefaultLimit": lambda g: g.power_limit_default_mw,
            "nvmlDeviceGetPowerManagementLimitConstraints": lambda g: [g.power_limit_min_mw, g.power_limit_max_mw],
            "nvmlDeviceGetTemperature": lambda g, sensor: g.temperature_c,
            "nvmlDeviceGetTemperatureV": lambda g, sensor, *_: g.temperature_c,
            "nvmlDeviceGetTemperatureThreshold": threshold,
            "nvmlDeviceGetMarginTemperature": margin,
            "nvmlDeviceGetMigMode": mig_mode, "nvmlDeviceGetMaxMigDeviceCount": mig_count,
            "nvmlDeviceGetMigDeviceHandleByIndex": mig_handle,
            "nvmlDeviceGetFanSpeed": fan, "nvmlDeviceGetFanSpeed_v2": fan,
            "nvmlDeviceGetClockInfo": clock, "nvmlDeviceGetClock": clock, "nvmlDeviceGetMaxClockInfo": max_clock,
            "nvmlDeviceGetPerformanceState": lambda g: g.pstate,
            "nvmlDeviceGetPowerState": lambda g: g.pstate,
            "nvmlDeviceGetCurrentClocksEventReasons": lambda g: g.clock_event_reasons,
            "nvmlDeviceGetCurrentClocksThrottleReasons": lambda g: g.clock_event_reasons,
            "nvmlDeviceGetSupportedClocksEventReasons": lambda g: 0x1FF,
            "nvmlDeviceGetPcieThroughput": pcie,
            "nvmlDeviceGetCurrPcieLinkGeneration": lambda g: g.pcie_gen,
            "nvmlDeviceGetCurrPcieLinkWidth": lambda g: g.pcie_width,
            "nvmlDeviceGetMaxPcieLinkGeneration": lambda g: g.pcie_gen_max,
            "nvmlDeviceGetMaxPcieLinkWidth": lambda g: g.pcie_width_max,
            "nvmlDeviceGetPciInfo": pci_info, "nvmlDeviceGetPciInfo_v3": pci_info,
            "nvmlDeviceGetVbiosVersion": lambda g: g.vbios,
            "nvmlDeviceGetPersistenceMode": lambda g: g.persistence,
            "nvmlDeviceGetDisplayActive": lambda g: 0, "nvmlDeviceGetDisplayMode": lambda g: 0,
            "nvmlDeviceGetComputeMode": lambda g: abi.NVML_COMPUTEMODE_DEFAULT,
            "nvmlDeviceGetCudaComputeCapability": lambda g: (8, 9),
            "nvmlDeviceGetComputeRunningProcesses": processes("compute"),
            "nvmlDeviceGetGraphicsRunningProcesses": processes("graphics"),
            "nvmlDeviceGetMPSComputeRunningProcesses": processes("mps"),
            "nvmlDeviceGetProcessUtilization": process_utilization,
            "nvmlDeviceGetProcessesUtilizationInfo": processes_utilization_info,
            "nvmlGpmQueryDeviceSupport": gpm_support, "nvmlGpmSampleAlloc": gpm_alloc,
            "nvmlGpmSampleFree": gpm_free, "nvmlGpmSampleGet": gpm_sample, "nvmlGpmMetricsGet": gpm_metrics,
        }

    def _mig_bodies(self) -> dict[str, Callable[..., Any]]:
        """What a MIG device handle answers (every other call: NotSupported)."""

        def processes(m: FakeMigInstance) -> list[Any]:
            return [_real.nvmlStructToFriendlyObject(abi.c_nvmlProcessInfo_v3_t(
                pid=p.pid, usedGpuMemory=p.used_bytes if p.used_bytes is not None else 2**64 - 1,
                gpuInstanceId=m.gpu_instance_id, computeInstanceId=m.compute_instance_id)) for p in m.processes]

        return {
            "nvmlDeviceGetName": lambda m: m.name, "nvmlDeviceGetUUID": lambda m: m.uuid,
            "nvmlDeviceGetGpuInstanceId": lambda m: m.gpu_instance_id,
            "nvmlDeviceGetComputeInstanceId": lambda m: m.compute_instance_id,
            "nvmlDeviceGetComputeRunningProcesses": processes,
        }

    def _c_functions(self) -> dict[str, Callable[..., int]]:
        """C-style entry points (return code, out-parameters by ``byref``) as nvitop/gpustat call them."""

        def entered(name: str, handle: Any) -> tuple[int, FakeGpu | None]:
            code, gpu = self._enter(name, (handle,))
            return (code, None) if code is not None else (abi.NVML_SUCCESS, gpu)

        def memory(name: str, v2: bool) -> Callable[..., int]:
            def fn(handle: Any, ref: Any) -> int:
                code, gpu = entered(name, handle)
                if gpu is not None:
                    self._fill_memory(gpu, ref._obj, v2=v2)
                return code
            return fn

        def processes(name: str, kind: str) -> Callable[..., int]:
            def fn(handle: Any, count_ref: Any, array: Any) -> int:
                if array is None:  # the size query starts the (single, counted) call
                    code, gpu = entered(name, handle)
                    if gpu is None:
                        return code
                    count_ref._obj.value = len(self._procs(gpu, kind))
                    return abi.NVML_ERROR_INSUFFICIENT_SIZE if count_ref._obj.value else abi.NVML_SUCCESS
                gpu = self.gpus[handle.index]
                procs = self._procs(gpu, kind)[: count_ref._obj.value]
                for i, p in enumerate(procs):
                    array[i].pid = p.pid
                    array[i].usedGpuMemory = p.used_bytes if p.used_bytes is not None else 2**64 - 1
                    array[i].gpuInstanceId = array[i].computeInstanceId = 0xFFFFFFFF
                count_ref._obj.value = len(procs)
                return abi.NVML_SUCCESS
            return fn

        def field_values(handle: Any, count: Any, ref: Any) -> int:
            code, gpu = entered("nvmlDeviceGetFieldValues", handle)
            if gpu is not None:
                for i in range(count.value):
                    self._field(gpu, ref._obj[i])
            return code

        def temperature_v(handle: Any, ref: Any) -> int:
            code, gpu = entered("nvmlDeviceGetTemperatureV", handle)
            if gpu is not None:
                ref._obj.temperature = gpu.temperature_c
            return code

        def temperature(handle: Any, _sensor: Any, ref: Any) -> int:
            code, gpu = entered("nvmlDeviceGetTemperature", handle)
            if gpu is not None:
                ref._obj.value = gpu.temperature_c
            return code

        def not_supported(name: str) -> Callable[..., int]:
            def fn(handle: Any, *_: Any) -> int:
                code, gpu = entered(name, handle)
                return code if gpu is None else abi.NVML_ERROR_NOT_SUPPORTED
            return fn

        out: dict[str, Callable[..., int]] = {
            "nvmlDeviceGetMemoryInfo": memory("nvmlDeviceGetMemoryInfo", False),
            "nvmlDeviceGetMemoryInfo_v2": memory("nvmlDeviceGetMemoryInfo_v2", True),
            "nvmlDeviceGetFieldValues": field_values,
            "nvmlDeviceGetTemperatureV": temperature_v,
            "nvmlDeviceGetTemperature": temperature,
            "nvmlDeviceGetDriverModel": not_supported("nvmlDeviceGetDriverModel"),
            "nvmlDeviceGetDriverModel_v2": not_supported("nvmlDeviceGetDriverModel_v2"),
        }
        for kind in ("Compute", "Graphics", "MPSCompute"):
            for suffix in ("", "_v2", "_v3"):
                name = f"nvmlDeviceGet{kind}RunningProcesses{suffix}"
                out[name] = processes(name, kind.lower() if kind != "MPSCompute" else "mps")
        return out


def _bus_id(index: int) -> str:
    return f"00000000:{index + 1:02X}:00.0"


def _not_supported(*_: Any, **__: Any) -> Any:
    raise _real.NVMLError(abi.NVML_ERROR_NOT_SUPPORTED)


def _check(ret: int) -> int:
    if ret != abi.NVML_SUCCESS:
        raise _real.NVMLError(ret)
    return ret


#: Every NVML error code the real bindings know (for "any error on any call" tests).
ALL_ERROR_CODES: tuple[int, ...] = tuple(sorted({v for k, v in vars(_real).items()
                                                 if k.startswith("NVML_ERROR_") and isinstance(v, int)}))
