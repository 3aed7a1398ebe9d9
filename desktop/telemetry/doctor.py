"""What Rigscope can read on this machine, what it cannot, and what it falls back to (`rigscope doctor`)."""

from __future__ import annotations

import dataclasses
import glob
import importlib.metadata
import os
import platform
import sys
import time
from typing import Any

from desktop.telemetry.backend import GpuBackend
from desktop.telemetry.model import GPU_METRIC_NAMES, DeviceState, GpuInfo, GpuSample
from desktop.telemetry.sampler import DEFAULT_REINIT_PERIOD_S


def collect(backend: GpuBackend, *, simulate_requested: bool = False) -> dict[str, Any]:
    """Everything `doctor` shows, as plain JSON-ready data."""
    source = backend.source
    readings = {r.info.index: r for r in backend.sample(time.time())}
    gpus = []
    errors_of = getattr(backend, "metric_errors", None)  # NVML only: the simulated GPU has no failing sensor
    mig_of = getattr(backend, "mig_instances", None)
    for info in backend.devices():
        reading = readings.get(info.index)
        lost = reading is not None and reading.state is DeviceState.LOST
        supported = backend.supported_metrics(info.index)
        sample = reading.sample if reading is not None else None
        mig = [dataclasses.asdict(m) for m in mig_of(info.index)] if mig_of is not None else []
        gpus.append({
            "index": info.index,
            "name": info.name,
            "uuid": info.uuid,
            "state": reading.state.value if reading else "unknown",
            "state_detail": reading.state_detail if reading else None,
            "pci_bus_id": info.pci_bus_id,
            "vram_total_mib": info.vram_total_mib,
            "laptop": info.is_laptop if info.uuid else None,  # unknown for a GPU lost before it was read
            "persistence_mode": info.persistence_mode,
            "power_limit_w": info.power_limit_enforced_w,
            "power_limit_default_w": info.power_limit_default_w,
            "power_limit_range_w": [info.power_limit_min_w, info.power_limit_max_w],
            "power_limit_settable": info.power_limit_settable,
            "sm_clock_max_mhz": info.sm_clock_max_mhz,
            "temperature_c": sample.temperature_c if sample is not None else None,
            "temp_slowdown_c": info.temp_slowdown_c,
            "temp_shutdown_c": info.temp_shutdown_c,
            "temp_max_operating_c": info.temp_max_operating_c,
            "temp_thresholds_relative": info.temp_thresholds_relative,
            "slowdown_headroom_c": slowdown_headroom_c(info, sample),
            "vbios_version": info.vbios_version,
            "metrics": {name: bool(supported.get(name)) for name in GPU_METRIC_NAMES},
            "effective_load": effective_load_source(info),
            "metric_errors": dict(errors_of(info.index)) if errors_of is not None else {},
            "mig_enabled": info.mig_enabled,
            "mig_instances": [{**m, "pids": list(m["pids"])} for m in mig],
            "lost": lost,
        })
    first = backend.devices()[0] if backend.devices() else None
    unknown = sorted(getattr(backend, "unknown_functions", ()))
    return {
        "platform": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "source": {"kind": source.kind, "detail": source.detail},
        "driver_version": None if source.simulated else (first.driver_version if first else None),
        "cuda_version": None if source.simulated else (first.cuda_version if first else None),
        "nvml_library_version": getattr(backend, "library_version", None),
        "nvml_bindings_version": _package_version("nvidia-ml-py"),
        "unknown_nvml_functions": unknown,
        "gpus": gpus,
        "permissions": _permissions([] if source.simulated else gpus),
        "fallback": _fallback(backend, gpus, simulate_requested),
    }


def effective_load_source(info: GpuInfo) -> str:
    """How the GPU's effective load is known: SM activity measured by NVML GPM, or the power/clock estimate."""
    return "measured (GPM)" if info.gpm_supported else "estimate"


def slowdown_headroom_c(info: GpuInfo, sample: GpuSample | None) -> float | None:
    """Degrees left before the GPU's slowdown temperature (absolute on every GPU), or None."""
    if sample is None or sample.temperature_c is None or info.temp_slowdown_c is None:
        return None
    return info.temp_slowdown_c - sample.temperature_c


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _permissions(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if sys.platform.startswith("linux"):
        nodes = sorted(glob.glob("/dev/nvidia*"))
        out["device_nodes"] = [{"path": path, "readable": os.access(path, os.R_OK),
                                "writable": os.access(path, os.W_OK)} for path in nodes
                               if not os.path.isdir(path)]
        if not nodes:
            out["device_nodes_note"] = "no /dev/nvidia* device nodes: the NVIDIA kernel driver is not loaded"
    out["administrator"] = is_root if hasattr(os, "geteuid") else None
    changes = []
    for gpu in gpus:
        if gpu["power_limit_settable"] is False:
            why = "no: this GPU refuses power-limit changes (GeForce laptops; use the vendor's power modes)"
        elif gpu["power_limit_settable"] is None:
            why = "unknown"
        elif not is_root and sys.platform.startswith("linux"):
            why = "yes, as root (sudo nvidia-smi -pl WATTS)"
        else:
            why = "yes"
        changes.append({"gpu": gpu["index"], "power_limit_change": why})
    out["power_limit"] = changes
    return out


def _fallback(backend: GpuBackend, gpus: list[dict[str, Any]], simulate_requested: bool) -> dict[str, Any]:
    source = backend.source
    if source.simulated:
        reason = source.fallback_reason or ("--simulate was given" if simulate_requested else "no NVIDIA GPU")
        return {"active": True, "uses": source.detail, "reason": reason}
    lost = [g for g in gpus if g["lost"]]
    if lost:
        names = "; ".join(f"GPU {g['index']}: {g['state_detail']}" for g in lost)
        return {"active": False, "uses": "NVML",
                "reason": f"{names} — the other GPUs keep sampling; lost ones are retried every "
                          f"{DEFAULT_REINIT_PERIOD_S:.0f} s"}
    return {"active": False, "uses": "NVML", "reason": None}
