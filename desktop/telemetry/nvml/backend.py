"""The NVML backend: reads real NVIDIA GPUs with few calls and no escaping errors.

It talks to NVML only through ``NvmlGateway``. Per tick and GPU it makes six calls (see
``reading``), two more where GPM measures SM activity (``gpm``); process lists only when the
sampler asks. A call that answers NotSupported is
remembered per device and never retried; one that fails otherwise (UNKNOWN, a string that does
not decode) leaves its metric n/a and is asked again after ``FAILED_RETRY_S``. Only GPU_IS_LOST
& co., a handle that cannot be got, or a read where every query failed turn the device LOST
until ``reinit()``. A laptop GPU that the driver has put to sleep (runtime PM) is not asked at
all until it wakes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
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
    MigInstance,
    SourceInfo,
)
from desktop.telemetry.nvml.counters import CounterTracker
from desktop.telemetry.nvml.device import NvmlDevice
from desktop.telemetry.nvml.gateway import NvmlGateway, load_module
from desktop.telemetry.nvml.gpm import close_gpm, open_gpm, read_gpm
from desktop.telemetry.nvml.info import DriverVersions, read_bus_id, read_identity, read_info, read_limits
from desktop.telemetry.nvml.mig import read_mig_instances
from desktop.telemetry.nvml.outcomes import MISSING, NvmlLost
from desktop.telemetry.nvml.processes import device_processes
from desktop.telemetry.nvml.reading import read_sample
from desktop.telemetry.nvml.sleep import ASLEEP_DETAIL, default_sysfs_root, device_asleep
from desktop.telemetry.nvml.values import METRIC_SOURCES, as_text

log = logging.getLogger(__name__)

DEFAULT_SLOW_PERIOD_S: Final = 5.0
#: How often the limits that move (enforced power limit, temperature thresholds) are read again: three
#: calls and a field batch per GPU a minute. ``refresh_limits()`` asks at the next tick (AC/battery).
LIMITS_PERIOD_S: Final = 60.0
#: The kernel release; under WSL2 it names Microsoft's kernel ("5.15.153.1-microsoft-standard-WSL2").
OSRELEASE: Final = Path("/proc/sys/kernel/osrelease")
WSL_PROCESSES_NOTE: Final = (
    "Under WSL2 the NVIDIA driver lists no GPU processes: the Windows driver (WDDM) keeps them on the "
    "Windows side, so this list stays empty while your jobs run. nvidia-smi or Task Manager in Windows shows them.")


def wsl_processes_note(osrelease: Path = OSRELEASE) -> str | None:
    """The Processes page's explanation where this is WSL2 (NVML lists no processes there), else None."""
    try:
        release = osrelease.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return WSL_PROCESSES_NOTE if "microsoft" in release.lower() else None


class NvmlBackend:
    """The GpuBackend over NVML. Create it with ``NvmlBackend.open()``."""

    def __init__(self, nvml: ModuleType, *, slow_period_s: float = DEFAULT_SLOW_PERIOD_S,
                 monotonic: Callable[[], float] = time.monotonic, sysfs_root: Path | None = None,
                 osrelease: Path = OSRELEASE) -> None:
        self._gateway = NvmlGateway(nvml, monotonic=monotonic)
        self._osrelease = osrelease
        self._sysfs_root = sysfs_root if sysfs_root is not None else default_sysfs_root()
        self._slow_period_s = slow_period_s
        # One lock for the backend and the NVML session: a read never overlaps the shutdown.
        self._lock = self._gateway.lock
        self._devices: list[NvmlDevice] = []
        self.driver_version: str | None = None
        self.cuda_version: str | None = None
        self.library_version: str | None = None
        self._source = SourceInfo(kind="nvml", detail="NVML")

    # --- opening and closing ---------------------------------------------------------

    @classmethod
    def open(cls, module: ModuleType | None = None, *, slow_period_s: float = DEFAULT_SLOW_PERIOD_S,
             monotonic: Callable[[], float] = time.monotonic, sysfs_root: Path | None = None,
             osrelease: Path = OSRELEASE) -> NvmlBackend:
        """Start NVML and read every GPU's static info; ``BackendUnavailable`` says why it cannot."""
        backend = cls(module if module is not None else load_module(), slow_period_s=slow_period_s,
                      monotonic=monotonic, sysfs_root=sysfs_root, osrelease=osrelease)
        backend._start()
        return backend

    def _start(self) -> None:
        gateway = self._gateway
        with self._lock:
            gateway.start()
            try:
                count = gateway.device_count()
            except BackendUnavailable:
                self.close()
                raise
            if count <= 0:
                self.close()
                raise BackendUnavailable("NVML started but found no NVIDIA GPU.")
            self._read_versions()
            self._devices = [self._open_device(i) for i in range(count)]
            self._describe_source()

    def _read_versions(self) -> None:
        """The driver, NVML and CUDA versions: at the start, and again when the session is renewed (a driver
        reloaded underneath is another driver; the GPUs' info carries it, and the history stores the change)."""
        gateway = self._gateway
        # A session that could not be renewed answers nothing: the versions known stay until one answers.
        self.driver_version = as_text(gateway.call("nvmlSystemGetDriverVersion")) or self.driver_version
        self.library_version = as_text(gateway.call("nvmlSystemGetNVMLVersion")) or self.library_version
        cuda = gateway.call("nvmlSystemGetCudaDriverVersion_v2")
        if cuda is MISSING:
            cuda = gateway.call("nvmlSystemGetCudaDriverVersion")
        if isinstance(cuda, int) and cuda > 0:
            self.cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}"

    def _describe_source(self) -> None:
        names = ", ".join(d.info.name for d in self._devices)
        self._source = SourceInfo(kind="nvml", detail=f"NVML {self.driver_version or '?'}: {names}",
                                  processes_note=wsl_processes_note(self._osrelease))

    def close(self) -> None:
        """Free the GPM samples and shut NVML down (once); also runs at interpreter exit."""
        with self._lock:
            if not self._gateway.closed:
                for dev in self._devices:
                    close_gpm(self._gateway, dev)
            self._gateway.shutdown()

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
                if dev.lost_detail is None and not self._gateway.closed:
                    if self._asleep(dev):
                        readings.append(GpuReading(dev.info, DeviceState.ASLEEP, None, ASLEEP_DETAIL))
                        continue
                    try:
                        if dev.info_pending:
                            self._complete_info(dev)
                        self._refresh_limits_if_due(dev, now_s)
                        sample = read_sample(self._gateway, dev, now_s, self._slow_period_s)
                        activity = read_gpm(self._gateway, dev)
                        if activity is not None:  # measured SM activity: the sampler keeps it, no estimate
                            sample = replace(sample, effective_load_pct=activity.sm_active_pct)
                        readings.append(GpuReading(dev.info, DeviceState.OK, sample, activity=activity,
                                                   memory_temperature_c=dev.memory_temperature_c))
                        continue
                    except NvmlLost as exc:
                        self._mark_lost(dev, str(exc))
                    except Exception as exc:  # a driver/binding fault we did not foresee: contain it
                        log.exception("reading GPU %d failed", dev.index)
                        self._mark_lost(dev, f"{type(exc).__name__}: {exc}")
                detail = dev.lost_detail or "NVML is shut down"
                readings.append(GpuReading(dev.info, DeviceState.LOST, None, detail))
            return readings

    def refresh_limits(self) -> None:
        """Read every GPU's moving limits again at the next tick (the power source changed, say)."""
        with self._lock:
            for dev in self._devices:
                dev.limits_due = True

    def _refresh_limits_if_due(self, dev: NvmlDevice, now_s: float) -> None:
        if dev.limits_at_s is None and not dev.limits_due:
            dev.limits_at_s = now_s  # the open has just read them
            return
        if dev.limits_due or dev.limits_at_s is None or not 0 <= now_s - dev.limits_at_s < LIMITS_PERIOD_S:
            dev.info = read_limits(self._gateway, dev)
            dev.limits_at_s, dev.limits_due = now_s, False

    def processes(self) -> list[GpuProcess]:
        with self._lock:
            out: list[GpuProcess] = []
            for dev in self._devices:
                if dev.lost_detail is not None or self._gateway.closed or dev.info_pending or self._asleep(dev):
                    continue
                try:
                    out.extend(device_processes(self._gateway, dev))
                except NvmlLost as exc:
                    self._mark_lost(dev, str(exc))
                except Exception as exc:
                    log.exception("listing processes of GPU %d failed", dev.index)
                    self._mark_lost(dev, f"{type(exc).__name__}: {exc}")
            return out

    def supported_metrics(self, index: int) -> dict[str, bool]:
        with self._lock:
            dev = self._device(index)
            if dev is None or dev.lost_detail is not None:
                return dict.fromkeys(GPU_METRIC_NAMES, False)
            calls = dev.calls
            out = {name: any(not calls.is_unsupported(key) for key in keys) for name, keys in METRIC_SOURCES.items()}
            if dev.info.mig_enabled:  # under MIG the parent has no utilization (per instance only)
                out["utilization_gpu_pct"] = out["utilization_mem_pct"] = False
            return out

    def metric_errors(self, index: int) -> dict[str, str]:
        """Metrics of GPU ``index`` that are n/a because their query fails (nvidia-smi's ERR!), with the error."""
        with self._lock:
            dev = self._device(index)
            if dev is None or dev.lost_detail is not None:
                return {}
            out = {}
            for name, keys in METRIC_SOURCES.items():
                messages = [dev.calls.failure(key) for key in keys if not dev.calls.is_unsupported(key)]
                failed = [message for message in messages if message is not None]
                if failed and len(failed) == len(messages):
                    out[name] = failed[0]
            return out

    def counter_fields(self, index: int) -> dict[str, dict[str, Any]]:
        """Per clock-event cause: the NVML field ids asked and the one proven to count (nvml/counters.py)."""
        with self._lock:
            dev = self._device(index)
            if dev is None or dev.lost_detail is not None:
                return {}
            unsupported = {int(k[6:]) for k in dev.calls.unsupported if k.startswith("field:") and k[6:].isdigit()}
            return dev.counters.describe(unsupported)

    def mig_instances(self, index: int) -> list[MigInstance]:
        """The MIG instances of GPU ``index`` with their memory and processes, read now (empty: no MIG)."""
        with self._lock:
            dev = self._device(index)
            if dev is None or dev.lost_detail is not None or not dev.info.mig_enabled or self._asleep(dev):
                return []
            return read_mig_instances(self._gateway, dev)

    def reinit(self) -> None:
        """Re-acquire the handles of lost GPUs (by UUID when known) and re-read their static info."""
        with self._lock:
            if self._gateway.closed:
                return
            renewed = bool(self._devices) and all(d.lost_detail is not None for d in self._devices)
            if renewed:
                # Every GPU lost (a driver reload, a reset): the NVML session itself may be stale, the driver new.
                self._gateway.restart()
                self._read_versions()
            for pos, dev in enumerate(self._devices):
                if dev.lost_detail is None:
                    continue
                fresh = self._open_device(dev.index, uuid=dev.info.uuid or None)
                if fresh.lost_detail is None:
                    log.info("GPU %d is back", dev.index)
                    self._devices[pos] = fresh
                else:
                    dev.lost_detail = fresh.lost_detail
            if renewed:
                self._describe_source()

    @property
    def unknown_functions(self) -> frozenset[str]:
        """NVML functions this pynvml/driver lacks (for `doctor`)."""
        return self._gateway.unknown_functions

    # --- per-device work ----------------------------------------------------------------

    def _device(self, index: int) -> NvmlDevice | None:
        return self._devices[index] if 0 <= index < len(self._devices) else None

    @property
    def _versions(self) -> DriverVersions:
        return DriverVersions(driver=self.driver_version, cuda=self.cuda_version)

    def _open_device(self, index: int, uuid: str | None = None) -> NvmlDevice:
        dev = NvmlDevice(index=index, handle=None, info=GpuInfo(index=index, uuid=uuid or "", name=f"GPU {index}"),
                         counters=CounterTracker(self.driver_version))
        gateway = self._gateway
        try:
            handle = MISSING
            if uuid:
                handle = gateway.device_call(dev.calls, "handle_uuid", "nvmlDeviceGetHandleByUUID", uuid)
            if handle is MISSING:
                handle = gateway.device_call(dev.calls, "handle", "nvmlDeviceGetHandleByIndex", index)
            if handle is MISSING:
                raise NvmlLost("no handle for this GPU")
            dev.handle = handle
            dev.info = replace(dev.info, pci_bus_id=read_bus_id(gateway, dev))
            if self._asleep(dev):
                # Who it is, and nothing that would wake it: the rest is read when it wakes.
                dev.info = read_identity(gateway, dev, self._versions)
                dev.info_pending = True
                return dev
            self._complete_info(dev)
            read_sample(gateway, dev, None, self._slow_period_s)  # prime the PCIe counters, learn what it answers
            read_gpm(gateway, dev)  # the first GPM sample: the first tick measures against it
        except NvmlLost as exc:
            dev.lost_detail = str(exc)
            dev.handle = None
        except Exception as exc:
            log.exception("opening GPU %d failed", index)
            dev.lost_detail = f"{type(exc).__name__}: {exc}"
            dev.handle = None
        if dev.lost_detail is not None:
            close_gpm(gateway, dev)
        return dev

    def _complete_info(self, dev: NvmlDevice) -> None:
        dev.info = read_info(self._gateway, dev, self._versions)
        dev.calls.forget_unsupported()  # static calls do not predict sample calls
        dev.info_pending = False
        open_gpm(self._gateway, dev)

    def _asleep(self, dev: NvmlDevice) -> bool:
        return device_asleep(dev, self._sysfs_root)

    def _mark_lost(self, dev: NvmlDevice, detail: str) -> None:
        if dev.lost_detail is None:
            log.warning("GPU %d is lost: %s", dev.index, detail)
        dev.lost_detail = detail
        dev.handle = None
        close_gpm(self._gateway, dev)  # a fresh handle at reinit allocates its own
