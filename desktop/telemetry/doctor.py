"""What Rigscope can read on this machine, what it cannot, and what it falls back to (`rigscope doctor`)."""

from __future__ import annotations

import dataclasses
import glob
import importlib.metadata
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from advisor.envelope import dynamic_boost_w, firmware_mode_name
from desktop.telemetry.backend import GpuBackend
from desktop.telemetry.envelope import PowerEnvelope, envelope_of, explain_gpu, limits_of
from desktop.telemetry.model import GPU_METRIC_NAMES, DeviceState, GpuInfo, GpuSample
from desktop.telemetry.sampler import DEFAULT_REINIT_PERIOD_S


def collect(backend: GpuBackend, *, simulate_requested: bool = False) -> dict[str, Any]:
    """Everything `doctor` shows, as plain JSON-ready data."""
    source = backend.source
    readings = {r.info.index: r for r in backend.sample(time.time())}
    gpus = []
    errors_of = getattr(backend, "metric_errors", None)  # NVML only: the simulated GPU has no failing sensor
    mig_of = getattr(backend, "mig_instances", None)
    counters_of = getattr(backend, "counter_fields", None)  # NVML only: which field ids count each cause
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
            "memory_temperature_c": reading.memory_temperature_c if reading else None,
            "temp_memory_max_c": info.temp_memory_max_c,
            "clock_event_counter_fields": dict(counters_of(info.index)) if counters_of is not None else {},
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
        "pytorch": torch_report(None if source.simulated else (first.cuda_version if first else None),
                                nvidia_gpu=not source.simulated and bool(gpus)),
        "power_envelope": power_envelope_section(backend.devices(), envelope_of(backend)),
    }


#: Why the MUX mode is not a field of its own: no Linux interface shows it (vga_switcheroo is for old
#: muxed laptops and needs debugfs); which GPU drives the display stands for it.
MUX_NOTE = "not readable on Linux; gpu_display says which GPU drives the display"


def power_envelope_section(infos: Sequence[GpuInfo], envelope: PowerEnvelope) -> dict[str, Any]:
    """The laptop power envelope: every source read (None: not readable here) and, per GPU, the one line
    saying why its limit is where it is, with the rated power and where that comes from."""
    fields = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(envelope).items()}
    gpus = []
    for info in infos:
        cap = explain_gpu(info, envelope)
        boost_w, boost_source = dynamic_boost_w(limits_of(info))
        gpus.append({"index": info.index, "line": cap.line, "cause": cap.cause, "capped": cap.capped,
                     "dynamic_boost_w": boost_w, "dynamic_boost_source": boost_source,
                     "enforced_w": cap.enforced_w, "default_w": info.power_limit_default_w,
                     "min_w": info.power_limit_min_w, "max_w": info.power_limit_max_w,
                     "rated_w": cap.rated_w, "rated_source": cap.rated_source, "action": cap.action})
    return {**fields, "firmware_mode": envelope.firmware_mode, "firmware_mode_name": firmware_mode_name(envelope),
            "any_source": envelope.any_source, "mux_mode": None, "mux_note": MUX_NOTE, "gpus": gpus}


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
    if source.unavailable:  # `record`, the service and `serve` record the host only and try NVML again
        reason = source.fallback_reason or "NVML cannot start"
        return {"active": True, "uses": "no GPU (the host only)", "reason": reason}
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


# --- PyTorch (the stress test's workload) -------------------------------------------------

#: The CUDA versions PyTorch publishes wheels for, oldest first: https://download.pytorch.org/whl/cuXYZ.
TORCH_CUDA_BUILDS = ("11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0")
_TORCH_INDEX = "https://download.pytorch.org/whl/"
_VERSION_FILE_FIELD = re.compile(r"^(cuda|hip)\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)\s*$", re.MULTILINE)


def _torch_version_file() -> str | None:
    """torch/version.py, read as text through the package's metadata: torch itself is never imported
    (importing it takes seconds and, in a CUDA build, starts talking to the driver)."""
    try:
        path = Path(str(importlib.metadata.distribution("torch").locate_file("torch/version.py")))
        return path.read_text(encoding="utf-8")
    except (importlib.metadata.PackageNotFoundError, OSError, AttributeError):
        return None


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def torch_build(version: str, version_file: str | None) -> tuple[str | None, str | None]:
    """("cuda" | "rocm" | "cpu" | None, the CUDA runtime it was built with): from torch/version.py's
    ``cuda``/``hip`` fields, else the version's local tag ("2.3.1+cu121", "2.13.0+cpu")."""
    if version_file is not None:
        fields = {m.group(1): m.group(2) or m.group(3) for m in _VERSION_FILE_FIELD.finditer(version_file)}
        if "cuda" in fields or "hip" in fields:
            if fields.get("cuda"):
                return "cuda", fields["cuda"]
            return ("rocm", None) if fields.get("hip") else ("cpu", None)
    local = version.partition("+")[2].lower()
    if local.startswith("cu") and local[2:].isdigit() and len(local) >= 5:
        return "cuda", f"{int(local[2:-1])}.{local[-1]}"
    if local.startswith("rocm"):
        return "rocm", None
    if local == "cpu":
        return "cpu", None
    return None, None


def _wheel_for(driver_cuda: str) -> str | None:
    """The newest PyTorch CUDA build this driver runs (its CUDA version or older), or None."""
    fitting = [v for v in TORCH_CUDA_BUILDS if _version_key(v) <= _version_key(driver_cuda)]
    return fitting[-1] if fitting else None


def _install_command(python: str, cuda: str | None, *, replace: bool = True) -> str:
    """pip's command for the PyTorch build ``cuda`` (None: pip's default), replacing the installed one."""
    index = f" --index-url {_TORCH_INDEX}cu{cuda.replace('.', '')}" if cuda else ""
    install = f"{python} -m pip install torch{index}"
    # Uninstall first: pip keeps an installed torch of the same version whatever its build.
    return f"{python} -m pip uninstall -y torch && {install}" if replace else install


def torch_report(driver_cuda: str | None, *, nvidia_gpu: bool,
                 version_of: Callable[[str], str | None] | None = None,
                 version_file: Callable[[], str | None] | None = None,
                 python: str | None = None) -> dict[str, Any]:
    """PyTorch as the stress test needs it: its version, whether it is a CUDA build, the CUDA runtime it
    needs against the driver's CUDA version, and the command that fixes a mismatch (``status``:
    ok | not_installed | cpu_build | driver_too_old | no_driver | unknown_build)."""
    version = (version_of or _package_version)("torch")
    python = python or sys.executable
    out: dict[str, Any] = {"installed": version is not None, "version": version, "build": None,
                           "cuda_build": None, "cuda_runtime": None, "driver_cuda": driver_cuda,
                           "status": "ok", "problem": None, "fix": None}
    wheel = _wheel_for(driver_cuda) if driver_cuda else None
    if version is None:
        out.update(status="not_installed", fix=_install_command(python, wheel if nvidia_gpu else None, replace=False),
                   problem="PyTorch is not installed: `rigscope stress` has no workload to run")
        return out
    build, runtime = torch_build(version, (version_file or _torch_version_file)())
    out.update(build=build, cuda_build=None if build is None else build == "cuda", cuda_runtime=runtime)
    if build is None:
        out.update(status="unknown_build", problem="cannot tell whether this PyTorch is a CUDA build")
    elif build == "cpu" and nvidia_gpu:
        out.update(status="cpu_build", fix=_install_command(python, wheel),
                   problem="a CPU build of PyTorch: `rigscope stress --device cuda:0` cannot use the GPU "
                           "(only --device cpu runs)")
    elif build == "cuda" and runtime and not nvidia_gpu:
        out.update(status="no_driver", problem=f"a CUDA {runtime} build of PyTorch, but no NVIDIA driver answers: "
                                               "the stress test can only run with --device cpu")
    elif build == "cuda" and runtime and driver_cuda and _version_key(runtime) > _version_key(driver_cuda):
        out.update(status="driver_too_old",
                   problem=f"this PyTorch needs CUDA {runtime}; the driver supports CUDA {driver_cuda} at most",
                   fix=(_install_command(python, wheel) if wheel else
                        f"update the NVIDIA driver to one for CUDA {runtime} or newer"))
    return out
