"""Reading one GPU's static facts: names, limits, max clocks, temperature thresholds, MIG mode.

Apart from the per-tick reading because it runs once per device (and again when a GPU comes
back); it calls NVML only through the gateway, under call keys of its own ("static.*").
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from desktop.telemetry.model import GpuInfo
from desktop.telemetry.nvml.device import NvmlDevice
from desktop.telemetry.nvml.gateway import NvmlGateway
from desktop.telemetry.nvml.outcomes import MISSING
from desktop.telemetry.nvml.values import as_int, as_mib, as_number, as_text, field_number

_LAPTOP_NAME = re.compile(r"laptop|mobile|max-q", re.IGNORECASE)

# Thresholds relative to the thermal limit (Ada, Hopper, Blackwell): offsets in °C, e.g. -7 for
# "GPU Shutdown T.Limit Temp: -7 C" (/work/shared/realdata/nvidia-smi-q/nvsmi_q_RTX4090.txt).
FIELD_TLIMIT_SHUTDOWN: Final = 193  # NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT
FIELD_TLIMIT_SLOWDOWN: Final = 194  # NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT
FIELD_TLIMIT_GPU_MAX: Final = 196  # NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT
_INT32: Final = 2**32
#: A thermal limit outside this range is a misread, not a GPU: use the absolute thresholds instead.
_PLAUSIBLE_LIMIT_C: Final = (30.0, 130.0)


class _MarginTemperatureV1(ctypes.Structure):
    """nvmlMarginTemperature_v1_t (nvml.h): the distance to the thermal limit, in °C."""

    _fields_ = (("version", ctypes.c_uint), ("marginTemperature", ctypes.c_int))


_MARGIN_V1: Final = ctypes.sizeof(_MarginTemperatureV1) | 1 << 24  # NVML_STRUCT_VERSION(MarginTemperature, 1)


@dataclass(frozen=True, slots=True)
class DriverVersions:
    """What the whole NVML session reports, copied into every GpuInfo."""

    driver: str | None = None
    cuda: str | None = None


def is_laptop_gpu(name: str) -> bool:
    """GeForce laptop parts carry "Laptop GPU", older ones "Max-Q" or "Mobile", in their NVML name."""
    return bool(_LAPTOP_NAME.search(name))


def _caller(gateway: NvmlGateway, dev: NvmlDevice) -> Callable[..., Any]:
    def call(key: str, func: str, *args: Any, **kwargs: Any) -> Any:
        return gateway.device_call(dev.calls, f"static.{key}", func, dev.handle, *args, **kwargs)

    return call


def read_bus_id(gateway: NvmlGateway, dev: NvmlDevice) -> str | None:
    """The GPU's PCI bus id as NVML writes it ("00000000:01:00.0")."""
    pci = _caller(gateway, dev)("pci", "nvmlDeviceGetPciInfo")
    if pci is MISSING:
        return None
    return as_text(getattr(pci, "busId", None)) or as_text(getattr(pci, "busIdLegacy", None))


def read_identity(gateway: NvmlGateway, dev: NvmlDevice, versions: DriverVersions) -> GpuInfo:
    """Who the GPU is (name, UUID, bus id), without the queries that need it awake."""
    call = _caller(gateway, dev)
    name = as_text(call("name", "nvmlDeviceGetName")) or f"GPU {dev.index}"
    uuid = as_text(call("uuid", "nvmlDeviceGetUUID")) or dev.info.uuid
    return replace(dev.info, name=name, uuid=uuid, driver_version=versions.driver,
                   cuda_version=versions.cuda, is_laptop=is_laptop_gpu(name), simulated=False)


def read_info(gateway: NvmlGateway, dev: NvmlDevice, versions: DriverVersions) -> GpuInfo:
    """Every GpuInfo field NVML answers for ``dev`` (None where it does not)."""
    call = _caller(gateway, dev)

    def watts(value: Any) -> float | None:
        number = as_number(value)
        return number / 1000.0 if number is not None else None

    identity = read_identity(gateway, dev, versions)
    name, uuid = identity.name, identity.uuid
    version = gateway.binding_attr("nvmlMemory_v2")
    memory = call("mem_v2", "nvmlDeviceGetMemoryInfo", version=version) if version is not None else MISSING
    if memory is MISSING:
        memory = call("mem_v1", "nvmlDeviceGetMemoryInfo")
    constraints = call("limits", "nvmlDeviceGetPowerManagementLimitConstraints")
    limit_min_w = limit_max_w = None
    if isinstance(constraints, (list, tuple)) and len(constraints) == 2:
        limit_min_w, limit_max_w = watts(constraints[0]), watts(constraints[1])
    # GeForce laptops refuse GetPowerManagementLimit (and `nvidia-smi -pl`): remember that, so
    # no advice ever suggests changing the limit there.
    settable_answer = call("limit", "nvmlDeviceGetPowerManagementLimit")
    if settable_answer is not MISSING:
        settable: bool | None = True
    else:
        settable = False if dev.calls.is_unsupported("static.limit") else None
    bus_id = dev.info.pci_bus_id or read_bus_id(gateway, dev)
    persistence = as_int(call("persistence", "nvmlDeviceGetPersistenceMode"))
    enabled = gateway.const("NVML_FEATURE_ENABLED", 1)
    slowdown_c, shutdown_c, max_operating_c, relative = _thresholds(gateway, dev, call)
    mig = call("mig", "nvmlDeviceGetMigMode")
    mig_enabled = None
    if isinstance(mig, (list, tuple)) and mig:
        mig_enabled = as_int(mig[0]) == gateway.const("NVML_DEVICE_MIG_ENABLE", 1)
    return GpuInfo(
        index=dev.index,
        uuid=uuid,
        name=name,
        vram_total_mib=as_mib(getattr(memory, "total", None)) if memory is not MISSING else None,
        power_limit_enforced_w=watts(call("enforced", "nvmlDeviceGetEnforcedPowerLimit")),
        power_limit_default_w=watts(call("default", "nvmlDeviceGetPowerManagementDefaultLimit")),
        power_limit_min_w=limit_min_w,
        power_limit_max_w=limit_max_w,
        power_limit_settable=settable,
        sm_clock_max_mhz=as_number(call("sm_max", "nvmlDeviceGetMaxClockInfo", gateway.const("NVML_CLOCK_SM", 1))),
        mem_clock_max_mhz=as_number(call("mem_max", "nvmlDeviceGetMaxClockInfo", gateway.const("NVML_CLOCK_MEM", 2))),
        temp_slowdown_c=slowdown_c,
        temp_shutdown_c=shutdown_c,
        temp_max_operating_c=max_operating_c,
        temp_thresholds_relative=relative,
        pcie_gen_max=as_int(call("gen_max", "nvmlDeviceGetMaxPcieLinkGeneration")),
        pcie_width_max=as_int(call("width_max", "nvmlDeviceGetMaxPcieLinkWidth")),
        pci_bus_id=bus_id,
        driver_version=versions.driver,
        cuda_version=versions.cuda,
        vbios_version=as_text(call("vbios", "nvmlDeviceGetVbiosVersion")),
        persistence_mode=(persistence == enabled) if persistence is not None else None,
        mig_enabled=mig_enabled,
        is_laptop=is_laptop_gpu(name),
        simulated=False,
        temp_memory_max_c=as_number(call("mem_max_c", "nvmlDeviceGetTemperatureThreshold",
                                         gateway.const("NVML_TEMPERATURE_THRESHOLD_MEM_MAX", 5))),
    )


Thresholds = tuple[float | None, float | None, float | None, bool]


def read_limits(gateway: NvmlGateway, dev: NvmlDevice) -> GpuInfo:
    """``dev.info`` with the limits that move read again: the enforced power limit (AC/battery, Dynamic
    Boost, an admin's ``-pl``) and the temperature thresholds.

    NVML's margin is against the nearest slowdown threshold across the GPU's sensors, so T.Limit
    thresholds read on a busy GPU (hot spot or HBM closer to their limits than the core) come out
    low by that gap: of relative thresholds the highest seen is kept (a later idle read corrects a
    busy start); absolute thresholds are taken as answered.
    """
    call = _caller(gateway, dev)
    info = dev.info
    enforced = as_number(call("enforced", "nvmlDeviceGetEnforcedPowerLimit"))
    slowdown_c, shutdown_c, max_operating_c, relative = _thresholds(gateway, dev, call)
    if relative and info.temp_thresholds_relative:
        slowdown_c, shutdown_c, max_operating_c = (
            max((v for v in (new, old) if v is not None), default=None)
            for new, old in ((slowdown_c, info.temp_slowdown_c), (shutdown_c, info.temp_shutdown_c),
                             (max_operating_c, info.temp_max_operating_c)))
    if slowdown_c is None and shutdown_c is None and max_operating_c is None:
        # Nothing answered this time (a failing query): keep what was known rather than lose the guard's limits.
        slowdown_c, shutdown_c, max_operating_c, relative = (info.temp_slowdown_c, info.temp_shutdown_c,
                                                             info.temp_max_operating_c, info.temp_thresholds_relative)
    return replace(info, power_limit_enforced_w=enforced / 1000.0 if enforced is not None else
                   info.power_limit_enforced_w,
                   temp_slowdown_c=slowdown_c, temp_shutdown_c=shutdown_c, temp_max_operating_c=max_operating_c,
                   temp_thresholds_relative=relative)


def _thresholds(gateway: NvmlGateway, dev: NvmlDevice, call: Callable[..., Any]) -> Thresholds:
    """(slowdown, shutdown, max operating) in absolute °C, and whether the GPU gave them as T.Limit offsets.

    Ada, Hopper and Blackwell give offsets from the thermal limit and the current distance to
    it ("GPU T.Limit Temp"); the limit is then current + margin, and each threshold limit -
    offset. nvsmi_q_RTX4090.txt: 28 C now, margin 56, slowdown -2, shutdown -7, max operating 0
    => limit 84, slowdown 86, shutdown 91 C. Older GPUs answer absolute values.
    """
    margin = _margin(gateway, dev, call)
    offsets = _tlimit_offsets(call) if margin is not None else {}
    if margin is not None and (FIELD_TLIMIT_SLOWDOWN in offsets or FIELD_TLIMIT_SHUTDOWN in offsets):
        sensor = gateway.const("NVML_TEMPERATURE_GPU", 0)
        current = as_number(call("temp_v", "nvmlDeviceGetTemperatureV", sensor))
        if current is None:
            current = as_number(call("temp", "nvmlDeviceGetTemperature", sensor))
        if current is not None and _PLAUSIBLE_LIMIT_C[0] <= current + margin <= _PLAUSIBLE_LIMIT_C[1]:
            limit_c = current + margin

            def absolute(field_id: int) -> float | None:
                offset = offsets.get(field_id)
                return limit_c - offset if offset is not None else None

            max_operating = absolute(FIELD_TLIMIT_GPU_MAX)
            return (absolute(FIELD_TLIMIT_SLOWDOWN), absolute(FIELD_TLIMIT_SHUTDOWN),
                    max_operating if max_operating is not None else limit_c, True)

    def threshold(key: str, name: str, default: int) -> float | None:
        return as_number(call(key, "nvmlDeviceGetTemperatureThreshold", gateway.const(name, default)))

    return (threshold("slowdown", "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
            threshold("shutdown", "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0),
            threshold("max_operating", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX", 3), False)


def _margin(gateway: NvmlGateway, dev: NvmlDevice, call: Callable[..., Any]) -> float | None:
    """The distance to the thermal limit (°C), through the binding's wrapper or, where it has none, the C symbol.

    nvidia-ml-py 12.535 (the oldest binding declared) has no ``nvmlDeviceGetMarginTemperature``
    though R535 drivers export it: without it Ada and Hopper, which answer their thresholds only as
    T.Limit offsets, would show none.
    """
    if callable(gateway.binding_attr("nvmlDeviceGetMarginTemperature")):
        return as_number(call("margin", "nvmlDeviceGetMarginTemperature"))
    out = _MarginTemperatureV1(version=_MARGIN_V1)
    answered = gateway.c_call(dev.calls, "static.margin", "nvmlDeviceGetMarginTemperature", dev.handle,
                              ctypes.byref(out))
    return float(out.marginTemperature) if answered is True else None


def _tlimit_offsets(call: Callable[..., Any]) -> dict[int, float]:
    """The T.Limit offsets this GPU answers, by field id (signed °C)."""
    wanted = [FIELD_TLIMIT_SHUTDOWN, FIELD_TLIMIT_SLOWDOWN, FIELD_TLIMIT_GPU_MAX]
    values = call("tlimit", "nvmlDeviceGetFieldValues", wanted)
    out: dict[int, float] = {}
    if values is MISSING:
        return out
    for requested, entry in zip(wanted, values, strict=False):
        if int(getattr(entry, "nvmlReturn", 999)) != 0:
            continue
        value = field_number(entry)
        if value is not None:
            # Signed by nature (-7); a driver that types it unsigned gives 2^32 - 7.
            out[requested] = value - _INT32 if value >= _INT32 // 2 else value
    return out
