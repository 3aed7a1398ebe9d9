"""`rigscope doctor`: what Rigscope can read on this machine, what it cannot, and what it falls back to."""

from __future__ import annotations

import argparse
import dataclasses
import glob
import importlib.metadata
import json
import os
import platform
import sys
import time
from typing import Any

from desktop.telemetry.backend import GpuBackend
from desktop.telemetry.model import GPU_METRIC_NAMES, METRICS_BY_NAME, DeviceState, GpuInfo, GpuSample
from desktop.telemetry.sampler import DEFAULT_REINIT_PERIOD_S, open_gpu_backend


def main(args: argparse.Namespace) -> int:
    backend = open_gpu_backend(args.simulate)
    try:
        report = collect(backend, simulate_requested=args.simulate is not None)
    finally:
        backend.close()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0


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


# --- the readable table -----------------------------------------------------------------------


def text_table(rows: list[tuple[str, ...]], indent: str = "  ") -> str:
    """Rows of cells as left-aligned columns (the first row is the header)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def _yes_no(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.0f}"
    return str(value)


def _threshold(gpu: dict[str, Any], key: str) -> str:
    """An absolute threshold, marked where the GPU gave it relative to its thermal limit."""
    text = _yes_no(gpu[key])
    return f"{text} (from T.Limit)" if gpu[key] is not None and gpu["temp_thresholds_relative"] else text


def render(report: dict[str, Any]) -> str:
    lines = ["Rigscope doctor", ""]
    fallback = report["fallback"]
    summary: list[tuple[str, ...]] = [
        ("source", report["source"]["detail"]),
        ("driver", _yes_no(report["driver_version"])),
        ("CUDA (driver)", _yes_no(report["cuda_version"])),
        ("NVML library", _yes_no(report["nvml_library_version"])),
        ("nvidia-ml-py", _yes_no(report["nvml_bindings_version"])),
        ("platform", f"{report['platform']}, Python {report['python']}"),
    ]
    lines += [text_table(summary), ""]
    if fallback["active"]:
        lines += [f"FALLBACK: using the {fallback['uses']}", f"  why: {fallback['reason']}", ""]
    elif fallback["reason"]:
        lines += [f"WARNING: {fallback['reason']}", ""]
    gpus = report["gpus"]
    if gpus:
        header = ("", *(f"GPU {g['index']}" for g in gpus))
        rows: list[tuple[str, ...]] = [header]
        rows.append(("name", *(g["name"] for g in gpus)))
        rows.append(("state", *(g["state"] + (f" ({g['state_detail']})" if g["state_detail"] else "") for g in gpus)))
        rows.append(("VRAM MiB", *(_yes_no(g["vram_total_mib"]) for g in gpus)))
        rows.append(("laptop", *(_yes_no(g["laptop"]) for g in gpus)))
        rows.append(("persistence mode", *(_yes_no(g["persistence_mode"]) for g in gpus)))
        rows.append(("power limit W", *(_yes_no(g["power_limit_w"]) for g in gpus)))
        rows.append(("limit settable", *(_yes_no(g["power_limit_settable"]) for g in gpus)))
        rows.append(("PCI bus", *(g["pci_bus_id"] or "n/a" for g in gpus)))
        rows.append(("temperature °C", *(_yes_no(g["temperature_c"]) for g in gpus)))
        rows.append(("slowdown °C", *(_threshold(g, "temp_slowdown_c") for g in gpus)))
        rows.append(("headroom to slowdown °C", *(_yes_no(g["slowdown_headroom_c"]) for g in gpus)))
        rows.append(("max operating °C", *(_threshold(g, "temp_max_operating_c") for g in gpus)))
        rows.append(("shutdown °C", *(_threshold(g, "temp_shutdown_c") for g in gpus)))
        rows.append(("MIG", *(_yes_no(g["mig_enabled"]) for g in gpus)))
        lines += ["GPUs", text_table(rows), "", "Supported metrics"]
        metric_rows: list[tuple[str, ...]] = [header]
        for name in GPU_METRIC_NAMES:
            metric = METRICS_BY_NAME[name]
            label = f"{metric.label} ({metric.unit})" if metric.unit and metric.unit != "mask" else metric.label
            # A failing sensor is "ERR!" as nvidia-smi writes it: supported, but erring now.
            metric_rows.append((label, *("ERR!" if name in g["metric_errors"] else "yes" if g["metrics"][name]
                                         else "no" for g in gpus)))
        lines += [text_table(metric_rows), ""]
        for g in gpus:
            for name, error in g["metric_errors"].items():
                lines.append(f"GPU {g['index']} {METRICS_BY_NAME[name].label}: {error} (asked again later)")
            if g["mig_instances"]:
                lines.append(f"GPU {g['index']} MIG instances")
                mig_rows: list[tuple[str, ...]] = [("", "name", "UUID", "GI/CI", "VRAM MiB used / total", "PIDs")]
                for m in g["mig_instances"]:
                    mig_rows.append((str(m["index"]), m["name"], m["uuid"] or "n/a",
                                     f"{_yes_no(m['gpu_instance_id'])}/{_yes_no(m['compute_instance_id'])}",
                                     f"{_yes_no(m['vram_used_mib'])} / {_yes_no(m['vram_total_mib'])}",
                                     ", ".join(str(p) for p in m["pids"]) or "none"))
                lines.append(text_table(mig_rows))
        if any(g["metric_errors"] or g["mig_instances"] for g in gpus):
            lines.append("")
    perms = report["permissions"]
    lines.append("Permissions")
    perm_rows: list[tuple[str, ...]] = []
    for node in perms.get("device_nodes", []):
        access = ("read" if node["readable"] else "") + ("/write" if node["writable"] else "")
        perm_rows.append((node["path"], access.strip("/") or "no access"))
    if "device_nodes_note" in perms:
        perm_rows.append(("/dev/nvidia*", perms["device_nodes_note"]))
    perm_rows.append(("administrator", _yes_no(perms["administrator"])))
    for change in perms["power_limit"]:
        perm_rows.append((f"change GPU {change['gpu']} power limit", change["power_limit_change"]))
    lines.append(text_table(perm_rows))
    if report["unknown_nvml_functions"]:
        lines += ["", "NVML functions missing in this driver: " + ", ".join(report["unknown_nvml_functions"])]
    return "\n".join(lines)
