"""The NVML backend: reads real NVIDIA GPUs through pynvml with few calls and no escaping errors.

The only module that imports ``pynvml`` (lazily, so tests can hand in a fake). Per tick and
GPU it makes six calls: one ``nvmlDeviceGetFieldValues`` batch (power, energy, PCIe byte
counters) plus utilization, memory, temperature, SM clock and clock-event reasons. The
memory clock, fan and P-state are refreshed on a slower period, the PCIe link on a slower
one still; process lists only when the sampler asks. A call that answers NotSupported is remembered per device and
never retried; one that fails otherwise (UNKNOWN, a string that does not decode) leaves its metric
n/a and is asked again after ``FAILED_RETRY_S``. Only GPU_IS_LOST & co., a handle that cannot be
got, or a read where every query failed turn the device LOST until ``reinit()``. A laptop GPU
that the driver has put to sleep (runtime PM) is not asked at all until it wakes.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
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
    MigInstance,
    ProcessKind,
    SourceInfo,
)
from desktop.telemetry.nvml_codes import (
    COUNTER_FIELD_IDS,
    COUNTER_FIELDS,
    FIELD_ENERGY_MJ,
    FIELD_PCIE_RX_BYTES,
    FIELD_PCIE_TX_BYTES,
    FIELD_POWER_AVERAGE_MW,
    FUNCTION_NOT_FOUND,
    LOST_CODES,
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
    plausible_power_w,
    reason_for_init_error,
    tick_fields,
)
from desktop.telemetry.nvml_info import (
    ASLEEP_DETAIL,
    is_asleep,
    read_bus_id,
    read_identity,
    read_info,
    read_mig_instances,
    runtime_status_file,
)
from desktop.telemetry.nvml_processes import RunningProcess, binding_function, detect_layout, running_processes

log = logging.getLogger(__name__)

DEFAULT_SLOW_PERIOD_S: Final = 5.0
#: The PCIe link (gen/width) is re-read on every n-th slow refresh: it mostly answers "is my
#: GPU on the link it should be", and its two calls would otherwise cost more than the fan.
LINK_EVERY_SLOW: Final = 4
#: A query that failed with an error that is neither "not supported" nor "lost" (UNKNOWN: a
#: sensor nvidia-smi shows as ERR!, OPERATING_SYSTEM, IRQ_ISSUE, a string that does not decode)
#: leaves that metric n/a and is asked again only after this long.
FAILED_RETRY_S: Final = 300.0
#: Where Linux shows each PCI device's runtime power state; RIGSCOPE_SYSFS_ROOT moves it (tests
#: point it at a folder of their own, so that a real sleeping GPU of the machine cannot leak in).
SYSFS_ROOT_ENV: Final = "RIGSCOPE_SYSFS_ROOT"
_COUNTER_32_BIT: Final = 2.0**32


_PROCESS_CALLS: Final[tuple[tuple[ProcessKind, str, str], ...]] = (
    ("compute", "procs_compute", "nvmlDeviceGetComputeRunningProcesses"),
    ("graphics", "procs_graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
)


def _counter_delta(now: float, before: float) -> float | None:
    """How far a cumulative byte counter moved; None when it was reset.

    Some drivers keep the PCIe byte counters in 32 bits inside the 64-bit field: they wrap at
    2^32, so a counter below 2^32 that went back moved on modulo 2^32 (a reset there cannot be
    told from a wrap, and costs at most one reading of under 4 GiB). A counter already past 2^32
    that went back was reset (a driver reload).
    """
    if now >= before:
        return now - before
    if before < _COUNTER_32_BIT:
        return now - before + _COUNTER_32_BIT
    return None


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
    #: Per clock-event counter metric: (field id, value ns, time_s) of the previous sample.
    counters_prev: dict[str, tuple[int, float, float | None]] = field(default_factory=dict)
    #: Call keys that failed with neither "missing" nor "lost": (monotonic time, message). Asked
    #: again after FAILED_RETRY_S.
    failed: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: Queries answered, and errors met, in the current read: a read where all failed is a lost GPU.
    answered: int = 0
    errors: list[str] = field(default_factory=list)
    #: The GPU's sysfs runtime_status file (resolved once; None: nothing to look at).
    sleep_file: Path | None = None
    sleep_file_resolved: bool = False
    #: The GPU slept when it was opened: its static info is read when it wakes.
    info_pending: bool = False
    #: A bogus power reading was logged for this GPU (said once, the reading is n/a every time).
    bogus_power_logged: bool = False


class NvmlBackend:
    """The GpuBackend over NVML. Create it with ``NvmlBackend.open()``."""

    def __init__(self, nvml: ModuleType, *, slow_period_s: float = DEFAULT_SLOW_PERIOD_S,
                 monotonic: Callable[[], float] = time.monotonic, sysfs_root: Path | None = None) -> None:
        self._nvml = nvml
        self._monotonic = monotonic
        self._sysfs_root = sysfs_root if sysfs_root is not None else Path(os.environ.get(SYSFS_ROOT_ENV) or "/sys")
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
    def open(cls, module: ModuleType | None = None, *, slow_period_s: float = DEFAULT_SLOW_PERIOD_S,
             monotonic: Callable[[], float] = time.monotonic, sysfs_root: Path | None = None) -> NvmlBackend:
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
        backend = cls(module, slow_period_s=slow_period_s, monotonic=monotonic, sysfs_root=sysfs_root)
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
                    if self._asleep(dev):
                        readings.append(GpuReading(dev.info, DeviceState.ASLEEP, None, ASLEEP_DETAIL))
                        continue
                    try:
                        if dev.info_pending:
                            self._complete_info(dev)
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
                if dev.lost_detail is not None or self._closed or dev.info_pending or self._asleep(dev):
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
            out = {name: any(key not in dev.unsupported for key in keys) for name, keys in METRIC_SOURCES.items()}
            if dev.info.mig_enabled:  # under MIG the parent has no utilization (per instance only)
                out["utilization_gpu_pct"] = out["utilization_mem_pct"] = False
            return out

    def metric_errors(self, index: int) -> dict[str, str]:
        """Metrics of GPU ``index`` that are n/a because their query fails (nvidia-smi's ERR!), with the error."""
        with self._lock:
            dev = self._devices[index] if 0 <= index < len(self._devices) else None
            if dev is None or dev.lost_detail is not None:
                return {}
            out = {}
            for name, keys in METRIC_SOURCES.items():
                live = [key for key in keys if key not in dev.unsupported]
                if live and all(key in dev.failed for key in live):
                    out[name] = dev.failed[live[0]][1]
            return out

    def mig_instances(self, index: int) -> list[MigInstance]:
        """The MIG instances of GPU ``index`` with their memory and processes, read now (empty: no MIG)."""
        with self._lock:
            dev = self._devices[index] if 0 <= index < len(self._devices) else None
            if dev is None or dev.lost_detail is not None or not dev.info.mig_enabled or self._asleep(dev):
                return []
            return read_mig_instances(self, dev)

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
        if dev is not None and (key in dev.unsupported or self._resting(dev, key)):
            return MISSING
        fn = getattr(self._nvml, func, None)
        if fn is None:
            self._note_unknown(func)
            if dev is not None:
                dev.unsupported.add(key)
            return MISSING
        try:
            value = fn(*args, **kwargs)
        except self._error_type as exc:
            return self._failure(dev, key, func, str(exc) or type(exc).__name__, self._code(exc), exc)
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
            # A binding fault (a string that does not decode, a garbled struct), or an NVMLError
            # of a module whose class could not be matched: judged by its code where it has one.
            return self._failure(dev, key, func, f"{type(exc).__name__}: {exc}", self._code(exc), exc)
        if dev is not None:
            dev.answered += 1
            if dev.failed.pop(key, None) is not None:
                log.info("GPU %d: %s answers again", dev.index, func)
        return value

    def _failure(self, dev: _Device | None, key: str, func: str, text: str,  # noqa: PLR0917
                 code: int | None, exc: BaseException) -> Any:
        """MISSING for an error that costs only this metric; raises ``_Lost`` for one that costs the GPU."""
        if code == FUNCTION_NOT_FOUND:
            self._note_unknown(func)
        if code in MISSING_CODES:
            if dev is not None:
                dev.unsupported.add(key)
            return MISSING
        if code in TRANSIENT_CODES:
            return MISSING
        if code in LOST_CODES:
            raise _Lost(f"{text} ({func})") from exc
        if dev is None:  # a system-wide call: its value is simply unknown
            log.debug("%s failed: %s", func, text)
            return MISSING
        self._note_failed(dev, key, f"{text} ({func})")
        return MISSING

    def _note_failed(self, dev: _Device, key: str, message: str) -> None:
        if key not in dev.failed:
            log.warning("GPU %d: %s; that metric is n/a, asked again in %.0f s", dev.index, message, FAILED_RETRY_S)
        dev.failed[key] = (self._monotonic(), message)
        dev.errors.append(message)

    def _resting(self, dev: _Device, key: str) -> bool:
        """True while ``key`` failed less than FAILED_RETRY_S ago (a failing sensor is not asked every tick)."""
        entry = dev.failed.get(key)
        return entry is not None and 0.0 <= self._monotonic() - entry[0] < FAILED_RETRY_S

    def _first(self, dev: _Device, attempts: Sequence[tuple[str, str, tuple[Any, ...], dict[str, Any]]]) -> Any:
        """The first attempt that answers; a newer call missing or failing falls back to the older."""
        for key, func, args, kwargs in attempts:
            if key in dev.unsupported or self._resting(dev, key):
                continue
            value = self._call(dev, key, func, dev.handle, *args, **kwargs)
            if value is not MISSING or (key not in dev.unsupported and key not in dev.failed):
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
            dev.info = replace(dev.info, pci_bus_id=read_bus_id(self, dev))
            if self._asleep(dev):
                # Who it is, and nothing that would wake it: the rest is read when it wakes.
                dev.info = read_identity(self, dev)
                dev.info_pending = True
                return dev
            self._complete_info(dev)
            self._read(dev, now_s=None)  # prime the PCIe counters and learn what the GPU answers
        except _Lost as exc:
            dev.lost_detail = str(exc)
            dev.handle = None
        except Exception as exc:
            log.exception("opening GPU %d failed", index)
            dev.lost_detail = f"{type(exc).__name__}: {exc}"
            dev.handle = None
        return dev

    def _complete_info(self, dev: _Device) -> None:
        dev.info = read_info(self, dev)
        dev.unsupported.clear()  # static calls do not predict sample calls
        dev.info_pending = False

    def _asleep(self, dev: _Device) -> bool:
        """True while the driver keeps this GPU asleep (runtime PM): a plain file read, no NVML call."""
        if not dev.sleep_file_resolved:
            dev.sleep_file_resolved = True
            dev.sleep_file = runtime_status_file(self._sysfs_root, dev.info.pci_bus_id)
        return dev.sleep_file is not None and is_asleep(dev.sleep_file)

    def _field_values(self, dev: _Device) -> dict[int, tuple[float, float | None]]:
        """Ask the batch call for every field this GPU still answers: {field id: (value, timestamp_s)}."""
        wanted = [f for f in tick_fields(dev.unsupported) if not self._resting(dev, f"field:{f}")]
        if not wanted:
            return {}
        values = self._call(dev, "fields", "nvmlDeviceGetFieldValues", dev.handle, wanted)
        if values is MISSING:
            if "fields" in dev.unsupported:
                if COUNTER_FIELD_IDS.intersection(wanted):
                    # Perhaps refused whole over a counter id this driver does not know: once more without them.
                    dev.unsupported.discard("fields")
                    dev.unsupported.update(f"field:{f}" for f in COUNTER_FIELD_IDS)
                    return self._field_values(dev)
                # The driver has no batch call: every field falls back.
                dev.unsupported.update(f"field:{f}" for f in (*TICK_FIELDS, *COUNTER_FIELD_IDS))
            return {}
        out: dict[int, tuple[float, float | None]] = {}
        for requested, entry in zip(wanted, values, strict=False):
            ret = int(getattr(entry, "nvmlReturn", 999))
            key = f"field:{requested}"
            if ret != 0:
                if ret in MISSING_CODES:
                    dev.unsupported.add(key)
                elif ret in LOST_CODES:
                    raise _Lost(f"field {requested} answered NVML error {ret}")
                elif ret not in TRANSIENT_CODES:
                    self._note_failed(dev, key, f"NVML error {ret} (field {requested})")
                continue
            dev.failed.pop(key, None)
            value = field_number(entry)
            if value is not None:
                stamp_us = getattr(entry, "timestamp", 0)
                out[requested] = (value, stamp_us / 1e6 if stamp_us else None)
        return out

    def _plausible_power_w(self, dev: _Device, power_w: float | None) -> float | None:
        """The reading, or None (logged once per GPU) where it is far above the board's limits."""
        info = dev.info
        checked = plausible_power_w(power_w, info.power_limit_max_w, info.power_limit_enforced_w)
        if checked is None and power_w is not None and not dev.bogus_power_logged:
            dev.bogus_power_logged = True
            log.warning("GPU %d reports %.0f W, far above its %s W limit: shown as n/a", dev.index, power_w,
                        info.power_limit_max_w or info.power_limit_enforced_w)
        return checked

    def _read(self, dev: _Device, now_s: float | None) -> GpuSample:
        """One reading; ``now_s=None`` is the priming read at open (everything, slow metrics too)."""
        h = dev.handle
        dev.answered, dev.errors = 0, []
        fields = self._field_values(dev)
        slow = now_s is None or dev.slow_at_s is None or not 0 <= now_s - dev.slow_at_s < self._slow_period_s
        if slow:
            dev.slow_at_s = now_s
            self._read_slow(dev, has_pcie_counters=FIELD_PCIE_TX_BYTES in fields and FIELD_PCIE_RX_BYTES in fields)

        power = fields.get(FIELD_POWER_AVERAGE_MW)
        power_mw = power[0] if power else as_number(self._call(dev, "power", "nvmlDeviceGetPowerUsage", h))
        power_w = self._plausible_power_w(dev, power_mw / 1000.0 if power_mw is not None else None)
        energy = fields.get(FIELD_ENERGY_MJ)
        energy_mj = (energy[0] if energy
                     else as_number(self._call(dev, "energy", "nvmlDeviceGetTotalEnergyConsumption", h)))
        rx_kib_s, tx_kib_s = self._pcie_rates(dev, fields, now_s)
        counted = self._clock_event_seconds(dev, fields, now_s)

        # Under MIG the parent's utilization is not available (some drivers answer 0): not asked.
        util = MISSING if dev.info.mig_enabled else self._call(dev, "util", "nvmlDeviceGetUtilizationRates", h)
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
        if dev.errors and not dev.answered:
            # Not one failing sensor but the whole GPU (a fall off the bus often answers UNKNOWN):
            # lost, so that reinit() asks for a fresh handle.
            raise _Lost(f"every query failed: {dev.errors[0]}")
        return GpuSample(
            utilization_gpu_pct=as_number(getattr(util, "gpu", None)) if util is not MISSING else None,
            utilization_mem_pct=as_number(getattr(util, "memory", None)) if util is not MISSING else None,
            vram_used_mib=as_mib(getattr(mem, "used", None)) if mem is not MISSING else None,
            vram_free_mib=as_mib(getattr(mem, "free", None)) if mem is not MISSING else None,
            temperature_c=as_number(temp),
            power_w=power_w,
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
            clock_event_sw_power_cap_s=counted["clock_event_sw_power_cap_s"],
            clock_event_sw_thermal_s=counted["clock_event_sw_thermal_s"],
            clock_event_hw_thermal_s=counted["clock_event_hw_thermal_s"],
            clock_event_hw_power_brake_s=counted["clock_event_hw_power_brake_s"],
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
        d_tx, d_rx = _counter_delta(tx[0], prev[1]), _counter_delta(rx[0], prev[2])
        if d_tx is None or d_rx is None:  # counter reset (driver reload): rates again from the next tick
            return None, None
        return d_rx / dt_s / 1024.0, d_tx / dt_s / 1024.0

    def _clock_event_seconds(self, dev: _Device, fields: dict[int, tuple[float, float | None]],
                             now_s: float | None) -> dict[str, float | None]:
        """Seconds under each clock-event cause since the previous sample: deltas of NVML's ns counters.

        None for a cause without a counter, on the first sample (the priming read at open only
        learns what the GPU answers: an interval that is no sample interval would be attributed
        to the first sample), after a counter reset and when the field id answered changed.
        """
        prev, dev.counters_prev = dev.counters_prev, {}
        out: dict[str, float | None] = {}
        for name, ids in COUNTER_FIELDS.items():
            out[name] = None
            fid = next((f for f in ids if f in fields), None)
            if fid is None or now_s is None:
                continue
            value_ns, stamp = fields[fid]
            stamp = stamp if stamp is not None else now_s
            dev.counters_prev[name] = (fid, value_ns, stamp)
            before = prev.get(name)
            if before is None or before[0] != fid or value_ns < before[1]:
                continue  # first sample, the older field took over, or the driver reloaded (reset)
            seconds = (value_ns - before[1]) / 1e9
            elapsed_s = stamp - before[2] if before[2] is not None else None
            if elapsed_s is not None and seconds > 2.0 * max(elapsed_s, 0.0) + 1.0:
                # Far more time than passed: not a time counter on this driver (field ids moved
                # between nvml.h versions). Leave the cause n/a rather than report nonsense.
                log.info("NVML field %d of GPU %d does not behave as a time counter (%.1f s in %.1f s): "
                         "not read again", fid, dev.index, seconds, elapsed_s)
                dev.unsupported.add(f"field:{fid}")
                del dev.counters_prev[name]
                continue
            out[name] = seconds
        return out

    def _processes(self, dev: _Device) -> list[GpuProcess]:
        merged: dict[int, GpuProcess] = {}
        for kind, key, func in _PROCESS_CALLS:
            found = self._running_processes(dev, key, func, dev.handle)
            if found is None:
                continue
            for entry in found:
                pid = entry.pid
                vram = as_mib(entry.used_bytes)
                seen = merged.get(pid)
                if seen is None:
                    merged[pid] = GpuProcess(pid=pid, gpu_index=dev.index, name=f"pid {pid}", vram_mib=vram,
                                             kind=kind)
                else:
                    both: ProcessKind = "mixed" if seen.kind != kind else seen.kind
                    best = max((v for v in (seen.vram_mib, vram) if v is not None), default=None)
                    merged[pid] = replace(seen, kind=both, vram_mib=best)
        return list(merged.values())

    def _running_processes(self, dev: _Device, key: str, func: str, handle: Any) -> list[RunningProcess] | None:
        """One process call (``func`` without its _vN) for ``handle``; None when it gave no list.

        Read in the entry layout this driver writes (see ``nvml_processes``): through the
        binding where its entry type agrees, else through the C symbol with our own type, so
        a binding built for another driver branch cannot garble the list.
        """
        # A few symbol look-ups (cached by pynvml when found), no driver call: cheap at the
        # process period, and right again after a driver reload.
        layout = detect_layout(self._nvml)
        binding = binding_function(self._nvml, layout, func)
        if binding is not None or layout is None:
            found = self._call(dev, key, binding or func, handle)
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
        if key in dev.unsupported or self._resting(dev, key):
            return None
        try:
            listed = running_processes(self._nvml, layout, func, handle)
        except self._error_type as exc:
            self._failure(dev, key, func + layout.suffix, text=str(exc) or type(exc).__name__, code=self._code(exc),
                          exc=exc)
            return None
        dev.failed.pop(key, None)
        return listed
