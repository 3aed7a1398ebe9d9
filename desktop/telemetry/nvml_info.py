"""Reading one GPU's static facts (names, limits, max clocks, thresholds) once, through the NVML backend.

Split from ``nvml.py`` because it runs once per device while that module's hot path runs
every tick; it calls NVML only through the backend's error-mapping ``_call``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from desktop.telemetry.model import GpuInfo
from desktop.telemetry.nvml_codes import MISSING, as_int, as_mib, as_number, as_text

if TYPE_CHECKING:
    from desktop.telemetry.nvml import NvmlBackend, _Device

_LAPTOP_NAME = re.compile(r"laptop|mobile|max-q", re.IGNORECASE)


def is_laptop_gpu(name: str) -> bool:
    """GeForce laptop parts carry "Laptop GPU", older ones "Max-Q" or "Mobile", in their NVML name."""
    return bool(_LAPTOP_NAME.search(name))


def read_info(backend: NvmlBackend, dev: _Device) -> GpuInfo:
    """Every GpuInfo field NVML answers for ``dev`` (None where it does not)."""
    h = dev.handle
    nvml = backend._nvml

    def call(key: str, func: str, *args: Any, **kwargs: Any) -> Any:
        return backend._call(dev, f"static.{key}", func, h, *args, **kwargs)

    def watts(value: Any) -> float | None:
        number = as_number(value)
        return number / 1000.0 if number is not None else None

    name = as_text(call("name", "nvmlDeviceGetName")) or f"GPU {dev.index}"
    uuid = as_text(call("uuid", "nvmlDeviceGetUUID")) or dev.info.uuid
    version = getattr(nvml, "nvmlMemory_v2", None)
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
        settable = False if "static.limit" in dev.unsupported else None
    pci = call("pci", "nvmlDeviceGetPciInfo")
    bus_id = None
    if pci is not MISSING:
        bus_id = as_text(getattr(pci, "busId", None)) or as_text(getattr(pci, "busIdLegacy", None))
    persistence = as_int(call("persistence", "nvmlDeviceGetPersistenceMode"))
    enabled = backend._const("NVML_FEATURE_ENABLED", 1)
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
        sm_clock_max_mhz=as_number(call("sm_max", "nvmlDeviceGetMaxClockInfo", backend._const("NVML_CLOCK_SM", 1))),
        mem_clock_max_mhz=as_number(call("mem_max", "nvmlDeviceGetMaxClockInfo", backend._const("NVML_CLOCK_MEM", 2))),
        temp_slowdown_c=as_number(call("slowdown", "nvmlDeviceGetTemperatureThreshold",
                                  backend._const("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1))),
        temp_shutdown_c=as_number(call("shutdown", "nvmlDeviceGetTemperatureThreshold",
                                  backend._const("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0))),
        pcie_gen_max=as_int(call("gen_max", "nvmlDeviceGetMaxPcieLinkGeneration")),
        pcie_width_max=as_int(call("width_max", "nvmlDeviceGetMaxPcieLinkWidth")),
        pci_bus_id=bus_id,
        driver_version=backend.driver_version,
        cuda_version=backend.cuda_version,
        vbios_version=as_text(call("vbios", "nvmlDeviceGetVbiosVersion")),
        persistence_mode=(persistence == enabled) if persistence is not None else None,
        is_laptop=is_laptop_gpu(name),
        simulated=False,
    )
