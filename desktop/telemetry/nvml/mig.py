"""Reading the MIG instances of a GPU (Multi-Instance GPU: A100, H100, H200), when asked."""

from __future__ import annotations

from typing import Any

from desktop.telemetry.model import MigInstance
from desktop.telemetry.nvml.call_memory import CallMemory
from desktop.telemetry.nvml.device import NvmlDevice
from desktop.telemetry.nvml.gateway import NvmlGateway
from desktop.telemetry.nvml.outcomes import MISSING, NvmlLost
from desktop.telemetry.nvml.processes import running_processes
from desktop.telemetry.nvml.values import as_int, as_mib, as_text


def read_mig_instances(gateway: NvmlGateway, dev: NvmlDevice) -> list[MigInstance]:
    """Each MIG instance of ``dev``: name, ids, memory and the pids using it (read now).

    Asked with a scratch call memory so that an empty slot (NOT_FOUND) or a failing instance
    query is not remembered against the parent's own calls.
    """
    scratch = CallMemory(label=dev.calls.label)

    def call(key: str, func: str, *args: Any) -> Any:
        return gateway.device_call(scratch, key, func, *args)

    out: list[MigInstance] = []
    try:
        count = as_int(call("count", "nvmlDeviceGetMaxMigDeviceCount", dev.handle)) or 0
        for slot in range(count):
            handle = call(f"{slot}.handle", "nvmlDeviceGetMigDeviceHandleByIndex", dev.handle, slot)
            if handle is MISSING:
                continue
            memory = call(f"{slot}.memory", "nvmlDeviceGetMemoryInfo", handle)
            # In the entry layout the driver writes (an R535 driver's differs from the binding's).
            procs = running_processes(gateway, scratch, f"{slot}.procs", "nvmlDeviceGetComputeRunningProcesses",
                                      handle)
            pids = tuple(p.pid for p in procs or () if p.pid)
            out.append(MigInstance(
                index=slot,
                uuid=as_text(call(f"{slot}.uuid", "nvmlDeviceGetUUID", handle)) or "",
                name=as_text(call(f"{slot}.name", "nvmlDeviceGetName", handle)) or f"MIG {slot}",
                gpu_instance_id=as_int(call(f"{slot}.gi", "nvmlDeviceGetGpuInstanceId", handle)),
                compute_instance_id=as_int(call(f"{slot}.ci", "nvmlDeviceGetComputeInstanceId", handle)),
                vram_total_mib=as_mib(getattr(memory, "total", None)) if memory is not MISSING else None,
                vram_used_mib=as_mib(getattr(memory, "used", None)) if memory is not MISSING else None,
                pids=pids,
            ))
    except NvmlLost:
        pass  # the parent's next sample finds out and marks it lost
    return out
