"""The NVML backend: reads real NVIDIA GPUs through pynvml with few calls and no escaping errors.

The only module that imports ``pynvml`` (lazily, so tests can hand in a fake). Per tick and
GPU it makes six calls: one ``nvmlDeviceGetFieldValues`` batch (power, energy, PCIe byte
counters) plus utilization, memory, temperature, SM clock and clock-event reasons. The
memory clock, fan and P-state are refreshed on a slower period, the PCIe link on a slower
one still; process lists only when the sampler asks. A call that answers NotSupported is remembered per device and
never retried; a GpuIsLost/Unknown answer turns that device LOST until ``reinit()``.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Final

from desktop.telemetry.backend import BackendUnavailable
from desktop.telemetry.model import (
    GPU_METRIC_NAMES,
    DeviceState,
    GpuInfo,
    GpuProcess,
    GpuReading,
    GpuSample,
    ProcessKind,
    SourceInfo,
)
from desktop.telemetry.nvml_codes import (
    FIELD_ENERGY_MJ,
    FIELD_PCIE_RX_BYTES,
    FIELD_PCIE_TX_BYTES,
    FIELD_POWER_AVERAGE_MW,
    FUNCTION_NOT_FOUND,
    METRIC_SOURCES,
    MISSING,
    MISSING_CODES,
    TICK_FIELDS,
    TRANSIENT_CODES,
    as_float,
    as_int,
    as_mib,
    as_number,
    as_text,
    field_number,
    reason_for_init_error,
)

log = logging.getLogger(__name__)

DEFAULT_SLOW_PERIOD_S: Final = 5.0
#: The PCIe link (gen/width) is re-read on every n-th slow refresh: it mostly answers "is my
#: GPU on the link it should be", and its two calls would otherwise cost more than the fan.
LINK_EVERY_SLOW: Final = 4


_PROCESS_CALLS: Final[tuple[tuple[ProcessKind, str, str], ...]] = (
    ("compute", "procs_compute", "nvmlDeviceGetComputeRunningProcesses"),
    ("graphics", "procs_graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
)


class _NoSuchError(Exception):
    """Stands in for ``NVMLError`` when handed a module without it (never raised)."""


class _Lost(Exception):
    """A fatal per-device NVML error: the device is LOST until ``reinit()``."""


@dataclass(slots=True)
class _Device:
    index: int
    handle: Any
    info: GpuInfo
    lost_detail: str | None = None
    #: Call keys (and "field:N") this device answered NotSupported & co.: never asked again.
    unsupported: set[str] = field(default_factory=set)
    #: Slow metrics last read (mem clock, fan, pstate, link, PCIe throughput fallback).
    slow: dict[str, float | int | None] = field(default_factory=dict)
    slow_at_s: float | None = None
    slow_count: int = 0
    #: (time_s, tx_bytes, rx_bytes) of the previous PCIe counter reading.
    pcie_prev: tuple[float, float, float] | None = None


class NvmlBackend:
    """The GpuBackend over NVML. Create it with ``NvmlBackend.open()``."""

    def __init__(self, nvml: ModuleType, *, slow_period_s: float = DEFAULT_SLOW_PERIOD_S) -> None:
        self._nvml = nvml
        error_type = getattr(nvml, "NVMLError", None)
        self._error_type: type[BaseException] = (
            error_type if isinstance(error_type, type) and issubclass(error_type, BaseException) else _NoSuchError)
        self._slow_period_s = slow_period_s
        self._lock = threading.RLock()
        self._initialized = False
        self._closed = False
        self._unknown_functions: set[str] = set()
        self._devices: list[_Device] = []
        self.driver_version: str | None = None
        self.cuda_version: str | None = None
        self.library_version: str | None = None
        self._source = SourceInfo(kind="nvml", detail="NVML")

    # --- opening and closing ---------------------------------------------------------

    @classmethod
    def open(cls, module: ModuleType | None = None, *, slow_period_s: float = DEFAULT_SLOW_PERIOD_S) -> NvmlBackend:
        """Start NVML and read every GPU's static info; ``BackendUnavailable`` says why it cannot."""
        if module is None:
            try:
                # Imported here, not at module level: a machine without the bindings still
                # starts (on the simulated GPU), and tests hand in a fake via ``module``.
                import pynvml
            except ImportError as exc:
                raise BackendUnavailable(
                    "The NVML Python bindings are missing (pip package nvidia-ml-py, module pynvml): "
                    f"{exc}") from exc
            module = pynvml
        backend = cls(module, slow_period_s=slow_period_s)
        backend._start()
        return backend

    def _start(self) -> None:
        nvml = self._nvml
        with self._lock:
            if self._initialized:
                return
            try:
                nvml.nvmlInit()
            except Exception as exc:
                # Any failure here (NVMLError, a broken ctypes load, AttributeError on a stub
                # module) means "no NVML"; the user sees the reason, never a traceback.
                reason = reason_for_init_error(self._code(exc), str(exc) or type(exc).__name__)
                raise BackendUnavailable(reason) from exc
            self._initialized = True
            atexit.register(self.close)
            try:
                count = int(nvml.nvmlDeviceGetCount())
            except Exception as exc:
                self.close()
                raise BackendUnavailable(reason_for_init_error(self._code(exc), str(exc))) from exc
            if count <= 0:
                self.close()
                raise BackendUnavailable("NVML started but found no NVIDIA GPU.")
            self.driver_version = self._system_str("nvmlSystemGetDriverVersion")
            self.library_version = self._system_str("nvmlSystemGetNVMLVersion")
            cuda = self._system_value("nvmlSystemGetCudaDriverVersion_v2")
            if cuda is MISSING:
                cuda = self._system_value("nvmlSystemGetCudaDriverVersion")
            if isinstance(cuda, int) and cuda > 0:
                self.cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}"
            self._devices = [self._open_device(i) for i in range(count)]
            names = ", ".join(d.info.name for d in self._devices)
            self._source = SourceInfo(kind="nvml", detail=f"NVML {self.driver_version or '?'}: {names}")

    def close(self) -> None:
        """Shut NVML down (once); also runs at interpreter exit."""
        with self._lock:
            if self._closed or not self._initialized:
                self._closed = True
                return
            self._closed = True
            atexit.unregister(self.close)
            try:
                self._nvml.nvmlShutdown()
            except Exception as exc:  # shutting down: nothing useful to do with an error
                log.debug("nvmlShutdown failed: %s", exc)

    # --- the GpuBackend protocol ------------------------------------------------------

    @property
    def source(self) -> SourceInfo:
        return self._source

    def devices(self) -> Sequence[GpuInfo]:
        return [d.info for d in self._devices]

    def sample(self, now_s: float) -> list[GpuReading]:
        with self._lock:
            readings = []
            for dev in self._devices:
                if dev.lost_detail is None and not self._closed:
                    try:
                        sample = self._read(dev, now_s)
                        readings.append(GpuReading(dev.info, DeviceState.OK, sample))
                        continue
                    except _Lost as exc:
                        self._mark_lost(dev, str(exc))
                    except Exception as exc:  # a driver/binding fault we did not foresee: contain it
                        log.exception("reading GPU %d failed", dev.index)
                        self._mark_lost(dev, f"{type(exc).__name__}: {exc}")
                detail = dev.lost_detail or "NVML is shut down"
                readings.append(GpuReading(dev.info, DeviceState.LOST, None, detail))
            return readings

    def processes(self) -> list[GpuProcess]:
        with self._lock:
            out: list[GpuProcess] = []
            for dev in self._devices:
                if dev.lost_detail is not None or self._closed:
                    continue
                try:
                    out.extend(self._processes(dev))
                except _Lost as exc:
                    self._mark_lost(dev, str(exc))
                except Exception as exc:
                    log.exception("listing processes of GPU %d failed", dev.index)
                    self._mark_lost(dev, f"{type(exc).__name__}: {exc}")
            return out

    def supported_metrics(self, index: int) -> dict[str, bool]:
        with self._lock:
            dev = self._devices[index] if 0 <= index < len(self._devices) else None
            if dev is None or dev.lost_detail is not None:
                return dict.fromkeys(GPU_METRIC_NAMES, False)
            return {name: any(key not in dev.unsupported for key in keys)
                    for name, keys in METRIC_SOURCES.items()}

    def reinit(self) -> None:
        """Re-acquire the handles of lost GPUs (by UUID when known) and re-read their static info."""
        with self._lock:
            if self._closed:
                return
            if self._devices and all(d.lost_detail is not None for d in self._devices):
                self._restart()
            for pos, dev in enumerate(self._devices):
                if dev.lost_detail is None:
                    continue
                fresh = self._open_device(dev.index, uuid=dev.info.uuid or None)
                if fresh.lost_detail is None:
                    log.info("GPU %d is back", dev.index)
                    self._devices[pos] = fresh
                else:
                    dev.lost_detail = fresh.lost_detail

    def _restart(self) -> None:
        """Every GPU lost (a driver reload, a reset): the NVML session itself may be stale, so renew it."""
        try:
            self._nvml.nvmlShutdown()
        except Exception as exc:
            log.debug("nvmlShutdown before re-init failed: %s", exc)
        self._initialized = False
        try:
            self._nvml.nvmlInit()
        except Exception as exc:
            log.warning("NVML could not be restarted: %s", exc)
            return
        self._initialized = True

    @property
    def unknown_functions(self) -> frozenset[str]:
        """NVML functions this pynvml/driver lacks (for `doctor`)."""
        return frozenset(self._unknown_functions)

    # --- calling NVML -----------------------------------------------------------------

    @staticmethod
    def _code(exc: BaseException) -> int | None:
        value = getattr(exc, "value", None)
        return value if isinstance(value, int) else None

    def _call(self, dev: _Device | None, key: str, func: str, *args: Any, **kwargs: Any) -> Any:
        """One NVML call: its value, or MISSING; raises ``_Lost`` for a fatal per-device error."""
        if dev is not None and key in dev.unsupported:
            return MISSING
        fn = getattr(self._nvml, func, None)
        if fn is None:
            self._note_unknown(func)
            if dev is not None:
                dev.unsupported.add(key)
            return MISSING
        try:
            return fn(*args, **kwargs)
        except self._error_type as exc:
            code = self._code(exc)
            if code == FUNCTION_NOT_FOUND:
                self._note_unknown(func)
            if code in MISSING_CODES:
                if dev is not None:
                    dev.unsupported.add(key)
                return MISSING
            if code in TRANSIENT_CODES or dev is None:
                return MISSING
            raise _Lost(f"{exc} ({func})") from exc
        except (NotImplementedError, AttributeError) as exc:
            # pynvml raises NVMLLibraryMismatchError (not an NVMLError) for an unversioned
            # call the driver lacks; an AttributeError means a binding without the symbol.
            self._note_unknown(func)
            log.debug("%s unavailable: %s", func, exc)
            if dev is not None:
                dev.unsupported.add(key)
            return MISSING
        except Exception as exc:
            if type(exc).__name__ == "NVMLLibraryMismatchError":
                self._note_unknown(func)
                if dev is not None:
                    dev.unsupported.add(key)
                return MISSING
            raise _Lost(f"{type(exc).__name__}: {exc} ({func})") from exc

    def _first(self, dev: _Device, attempts: Sequence[tuple[str, str, tuple[Any, ...], dict[str, Any]]]) -> Any:
        """The first attempt that answers; a newer call remembered as missing falls back to the older."""
        for key, func, args, kwargs in attempts:
            if key in dev.unsupported:
                continue
            value = self._call(dev, key, func, dev.handle, *args, **kwargs)
            if value is not MISSING or key not in dev.unsupported:
                return value  # answered, or failed transiently: no point asking the older call now
        return MISSING

    def _note_unknown(self, func: str) -> None:
        if func not in self._unknown_functions:
            self._unknown_functions.add(func)
            # INFO, not WARNING: most have an older stand-in, and `doctor` lists the rest.
            log.info("NVML function %s is not available here (older driver or bindings): "
                     "using its older stand-in, or leaving its metric n/a", func)

    def _system_value(self, func: str) -> Any:
        try:
            return self._call(None, func, func)
        except _Lost:
            return MISSING

    def _system_str(self, func: str) -> str | None:
        return as_text(self._system_value(func))

    def _const(self, name: str, default: int) -> int:
        value = getattr(self._nvml, name, default)
        return value if isinstance(value, int) else default

    def _mark_lost(self, dev: _Device, detail: str) -> None:
        if dev.lost_detail is None:
            log.warning("GPU %d is lost: %s", dev.index, detail)
        dev.lost_detail = detail
        dev.handle = None

    # --- per-device work ----------------------------------------------------------------

    def _open_device(self, index: int, uuid: str | None = None) -> _Device:
        dev = _Device(index=index, handle=None, info=GpuInfo(index=index, uuid=uuid or "", name=f"GPU {index}"))
        try:
            handle = MISSING
            if uuid:
                handle = self._call(dev, "handle_uuid", "nvmlDeviceGetHandleByUUID", uuid)
            if handle is MISSING:
                handle = self._call(dev, "handle", "nvmlDeviceGetHandleByIndex", index)
            if handle is MISSING:
                raise _Lost("no handle for this GPU")
            dev.handle = handle
            dev.info = self._read_info(dev)
            dev.unsupported.clear()  # static calls do not predict sample calls
            self._read(dev, now_s=None)  # prime the PCIe counters and learn what the GPU answers
        except _Lost as exc:
            dev.lost_detail = str(exc)
            dev.handle = None
        except Exception as exc:
            log.exception("opening GPU %d failed", index)
            dev.lost_detail = f"{type(exc).__name__}: {exc}"
            dev.handle = None
        return dev

    def _read_info(self, dev: _Device) -> GpuInfo:
        from desktop.telemetry.nvml_info import read_info  # split out for size; pure over _call

        return read_info(self, dev)

    def _field_values(self, dev: _Device) -> dict[int, tuple[float, float | None]]:
        """Ask the batch call for every field this GPU still answers: {field id: (value, timestamp_s)}."""
        wanted = [f for f in TICK_FIELDS if f"field:{f}" not in dev.unsupported]
        if not wanted:
            return {}
        values = self._call(dev, "fields", "nvmlDeviceGetFieldValues", dev.handle, wanted)
        if values is MISSING:
            if "fields" in dev.unsupported:  # the driver has no batch call: every field falls back
                dev.unsupported.update(f"field:{f}" for f in TICK_FIELDS)
            return {}
        out: dict[int, tuple[float, float | None]] = {}
        for requested, entry in zip(wanted, values, strict=False):
            ret = int(getattr(entry, "nvmlReturn", 999))
            if ret != 0:
                if ret in MISSING_CODES:
                    dev.unsupported.add(f"field:{requested}")
                elif ret not in TRANSIENT_CODES:
                    raise _Lost(f"field {requested} answered NVML error {ret}")
                continue
            value = field_number(entry)
            if value is not None:
                stamp_us = getattr(entry, "timestamp", 0)
                out[requested] = (value, stamp_us / 1e6 if stamp_us else None)
        return out

    def _read(self, dev: _Device, now_s: float | None) -> GpuSample:
        """One reading; ``now_s=None`` is the priming read at open (everything, slow metrics too)."""
        h = dev.handle
        fields = self._field_values(dev)
        slow = now_s is None or dev.slow_at_s is None or not 0 <= now_s - dev.slow_at_s < self._slow_period_s
        if slow:
            dev.slow_at_s = now_s
            self._read_slow(dev, has_pcie_counters=FIELD_PCIE_TX_BYTES in fields and FIELD_PCIE_RX_BYTES in fields)

        power = fields.get(FIELD_POWER_AVERAGE_MW)
        power_mw = power[0] if power else as_number(self._call(dev, "power", "nvmlDeviceGetPowerUsage", h))
        energy = fields.get(FIELD_ENERGY_MJ)
        energy_mj = (energy[0] if energy
                     else as_number(self._call(dev, "energy", "nvmlDeviceGetTotalEnergyConsumption", h)))
        rx_kib_s, tx_kib_s = self._pcie_rates(dev, fields, now_s)

        util = self._call(dev, "util", "nvmlDeviceGetUtilizationRates", h)
        mem_attempts: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = []
        version = getattr(self._nvml, "nvmlMemory_v2", None)
        if version is not None:
            mem_attempts.append(("mem_v2", "nvmlDeviceGetMemoryInfo", (), {"version": version}))
        else:
            dev.unsupported.add("mem_v2")
        mem_attempts.append(("mem_v1", "nvmlDeviceGetMemoryInfo", (), {}))
        mem = self._first(dev, mem_attempts)
        sensor = self._const("NVML_TEMPERATURE_GPU", 0)
        temp = self._first(dev, [("temp_v", "nvmlDeviceGetTemperatureV", (sensor,), {}),
                                 ("temp_legacy", "nvmlDeviceGetTemperature", (sensor,), {})])
        sm_clock = self._call(dev, "sm_clock", "nvmlDeviceGetClockInfo", h, self._const("NVML_CLOCK_SM", 1))
        reasons = self._first(dev, [("reasons", "nvmlDeviceGetCurrentClocksEventReasons", (), {}),
                                    ("reasons_legacy", "nvmlDeviceGetCurrentClocksThrottleReasons", (), {})])
        return GpuSample(
            utilization_gpu_pct=as_number(getattr(util, "gpu", None)) if util is not MISSING else None,
            utilization_mem_pct=as_number(getattr(util, "memory", None)) if util is not MISSING else None,
            vram_used_mib=as_mib(getattr(mem, "used", None)) if mem is not MISSING else None,
            vram_free_mib=as_mib(getattr(mem, "free", None)) if mem is not MISSING else None,
            temperature_c=as_number(temp),
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            energy_mj=energy_mj,
            sm_clock_mhz=as_number(sm_clock),
            mem_clock_mhz=as_float(dev.slow.get("mem_clock")),
            fan_pct=as_float(dev.slow.get("fan")),
            clock_event_reasons=as_int(reasons),
            pcie_rx_kib_s=rx_kib_s,
            pcie_tx_kib_s=tx_kib_s,
            pcie_gen=as_int(dev.slow.get("pcie_gen")),
            pcie_width=as_int(dev.slow.get("pcie_width")),
            pstate=as_int(dev.slow.get("pstate")),
        )

    def _read_slow(self, dev: _Device, *, has_pcie_counters: bool) -> None:
        h = dev.handle
        slow = dev.slow
        slow["mem_clock"] = as_number(self._call(dev, "mem_clock", "nvmlDeviceGetClockInfo", h,
                                            self._const("NVML_CLOCK_MEM", 2)))
        slow["fan"] = as_number(self._call(dev, "fan", "nvmlDeviceGetFanSpeed", h))
        pstate = as_int(self._call(dev, "pstate", "nvmlDeviceGetPerformanceState", h))
        slow["pstate"] = pstate if pstate is not None and 0 <= pstate <= 15 else None  # 32 = unknown
        if dev.slow_count % LINK_EVERY_SLOW == 0:
            slow["pcie_gen"] = as_int(self._call(dev, "pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", h))
            slow["pcie_width"] = as_int(self._call(dev, "pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", h))
        dev.slow_count += 1
        if not has_pcie_counters:
            # The dedicated throughput call samples for 20 ms each: only on the slow period.
            slow["pcie_tx"] = as_number(self._call(dev, "pcie_tx", "nvmlDeviceGetPcieThroughput", h,
                                              self._const("NVML_PCIE_UTIL_TX_BYTES", 0)))
            slow["pcie_rx"] = as_number(self._call(dev, "pcie_rx", "nvmlDeviceGetPcieThroughput", h,
                                              self._const("NVML_PCIE_UTIL_RX_BYTES", 1)))

    def _pcie_rates(self, dev: _Device, fields: dict[int, tuple[float, float | None]],
                    now_s: float | None) -> tuple[float | None, float | None]:
        tx, rx = fields.get(FIELD_PCIE_TX_BYTES), fields.get(FIELD_PCIE_RX_BYTES)
        if tx is None or rx is None:
            dev.pcie_prev = None
            return as_float(dev.slow.get("pcie_rx")), as_float(dev.slow.get("pcie_tx"))
        stamp = tx[1] if tx[1] is not None else now_s
        prev, dev.pcie_prev = dev.pcie_prev, (stamp, tx[0], rx[0]) if stamp is not None else None
        if prev is None or stamp is None or stamp <= prev[0]:
            return None, None
        dt_s = stamp - prev[0]
        d_tx, d_rx = tx[0] - prev[1], rx[0] - prev[2]
        if d_tx < 0 or d_rx < 0:  # counter reset (driver reload)
            return None, None
        return d_rx / dt_s / 1024.0, d_tx / dt_s / 1024.0

    def _processes(self, dev: _Device) -> list[GpuProcess]:
        merged: dict[int, GpuProcess] = {}
        for kind, key, func in _PROCESS_CALLS:
            found = self._call(dev, key, func, dev.handle)
            if found is MISSING:
                continue
            for entry in found:
                pid = as_int(getattr(entry, "pid", None))
                if pid is None:
                    continue
                vram = as_mib(getattr(entry, "usedGpuMemory", None))
                seen = merged.get(pid)
                if seen is None:
                    merged[pid] = GpuProcess(pid=pid, gpu_index=dev.index, name=f"pid {pid}", vram_mib=vram,
                                             kind=kind)
                else:
                    both: ProcessKind = "mixed" if seen.kind != kind else seen.kind
                    best = max((v for v in (seen.vram_mib, vram) if v is not None), default=None)
                    merged[pid] = replace(seen, kind=both, vram_mib=best)
        return list(merged.values())
