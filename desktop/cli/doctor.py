"""`rigscope doctor`: what Rigscope can read on this machine, what it cannot, and what it falls back to."""

from __future__ import annotations

import argparse
import json
from typing import Any

from advisor.safetext import printable
from desktop.cli.common import add_json, add_simulate, open_backend, text_table
from desktop.telemetry.model import GPU_METRIC_NAMES, METRICS_BY_NAME
from desktop.telemetry.no_gpu import NVML_RETRY_PERIOD_S

HELP = "check the driver, GPUs and supported metrics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json(parser)
    add_simulate(parser)


def main(args: argparse.Namespace) -> int:
    from desktop.telemetry.doctor import collect

    # No usable driver: the GPU is said to be unavailable, with NVML's reason (no simulated GPU is described).
    backend = open_backend(args.simulate, fallback="unavailable")
    try:
        report = collect(backend, simulate_requested=args.simulate is not None)
    finally:
        backend.close()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0


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


_BUILDS = {"cuda": "CUDA", "cpu": "CPU only (no CUDA)", "rocm": "ROCm", None: "unknown"}


def _pytorch_lines(torch: dict[str, Any] | None) -> list[str]:
    """The stress test's PyTorch: version, build, the CUDA it needs against the driver's, and the fix."""
    if torch is None:
        return []
    build = _BUILDS.get(torch["build"], str(torch["build"]))
    if torch["build"] == "cuda" and torch["cuda_runtime"]:
        build = f"CUDA {torch['cuda_runtime']}"
    rows: list[tuple[str, ...]] = [("version", torch["version"] or "not installed")]
    if torch["installed"]:
        rows.append(("build", build))
        if torch["build"] == "cuda" or torch["driver_cuda"]:
            needed, driver = _yes_no(torch["cuda_runtime"]), _yes_no(torch["driver_cuda"])
            rows.append(("CUDA needed / driver's", f"{needed} / {driver}"))
    lines = ["PyTorch (the stress test)", text_table(rows)]
    if torch["problem"]:
        lines.append(f"  PROBLEM: {printable(torch['problem'])}")
    if torch["fix"]:
        lines.append(f"  fix: {printable(torch['fix'])}")
    return [*lines, ""]


def _source_text(value: Any, fallback: str = "n/a") -> str:
    return fallback if value is None else printable(str(value))


def _firmware_rows(env: dict[str, Any]) -> list[tuple[str, ...]]:
    """The firmware's mode and fans (msi-ec), or the ACPI platform profile, or that neither is there."""
    rows: list[tuple[str, ...]] = []
    if env["msi_shift_mode"] is not None:
        choices = ", ".join(printable(m) for m in env["msi_shift_modes"])
        rows.append(("firmware mode", f"{printable(env['firmware_mode_name'])} (msi-ec shift_mode "
                                      f"{printable(env['msi_shift_mode'])}; available: {choices or 'n/a'})"))
        fans = [f"{name} {env[key]:.0f} %" for name, key in (("CPU", "cpu_fan_pct"), ("GPU", "gpu_fan_pct"))
                if env[key] is not None]
        boost = {True: "on", False: "off", None: "n/a"}[env["msi_cooler_boost"]]
        rows.append(("fans (EC)", f"mode {_source_text(env['msi_fan_mode'])}, Cooler Boost {boost}"
                                  + (f", {', '.join(fans)}" if fans else "")))
    if env["platform_profile"] is not None:
        choices = ", ".join(printable(m) for m in env["platform_profile_choices"])
        rows.append(("platform_profile", f"{printable(env['platform_profile'])} (choices: {choices or 'n/a'})"))
    elif env["msi_shift_mode"] is None:
        rows.append(("firmware mode", "n/a (no msi-ec, no ACPI platform_profile)"))
    return rows


def _envelope_lines(env: dict[str, Any] | None) -> list[str]:
    """The laptop power envelope: every source read, then per GPU the one line on its power limit."""
    if env is None:
        return []
    rows: list[tuple[str, ...]] = []
    power = "n/a" if env["on_ac"] is None else "AC" if env["on_ac"] else "battery"
    if env["battery_pct"] is not None:
        power += f", battery {env['battery_pct']:.0f} %"
        if env["battery_status"]:
            power += f" ({printable(env['battery_status'])})"
    rows.append(("power", power))
    rows += _firmware_rows(env)
    powerd = {True: "running", False: "not running", None: "n/a (/proc does not show other processes)"}
    installed = {True: ", unit installed", False: ", not installed", None: ""}[env["powerd_installed"]]
    rows.append(("nvidia-powerd", powerd[env["powerd_running"]] + installed))
    cpu = [f"{env['cpu_package_temp_c']:.0f} °C" if env["cpu_package_temp_c"] is not None else "temperature n/a",
           f"{env['cpu_package_power_w']:.0f} W" if env["cpu_package_power_w"] is not None
           else "power n/a (RAPL absent or root only)"]
    rows.append(("CPU package", ", ".join(cpu)))
    display = {"display": "the NVIDIA GPU drives the display", "offload": "another GPU drives the display "
               "(hybrid, PRIME offload)", None: "n/a"}.get(env["gpu_display"], printable(str(env["gpu_display"])))
    rows.append(("display GPU", display))
    rows.append(("MUX mode", printable(env["mux_note"])))
    for gpu in env["gpus"]:
        rows.append((f"GPU {gpu['index']} power limit", printable(gpu["line"])))
        if gpu["rated_w"] is not None:
            rated = f"{gpu['rated_w']:.0f} W ({printable(gpu['rated_source'])})"
            rows.append((f"GPU {gpu['index']} rated power", rated))
        if gpu.get("dynamic_boost_w") is not None:
            boost = (f"up to {gpu['dynamic_boost_w']:.0f} W ({printable(gpu['dynamic_boost_source'])})"
                     if gpu["dynamic_boost_w"] > 0 else "none (max limit = default)")
            rows.append((f"GPU {gpu['index']} Dynamic Boost", boost))
    title = "Power envelope" + (" (simulated laptop)" if env.get("simulated") else "")
    lines = [title, text_table(rows)]
    for gpu in env["gpus"]:
        if gpu["action"]:
            lines.append(f"  GPU {gpu['index']} fix: {printable(gpu['action'])}")
    return [*lines, ""]


def _gpu_lines(gpus: list[dict[str, Any]]) -> list[str]:
    """Per GPU: what it is and reads, the metrics it supports (and those erring now), its MIG instances."""
    if not gpus:
        return []
    lines: list[str] = []
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
    rows.append(("effective load", *(g["effective_load"] for g in gpus)))
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
    return lines


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
    lines += _pytorch_lines(report.get("pytorch"))
    if report["source"]["kind"] == "unavailable":
        lines += ["GPU UNAVAILABLE: NVML cannot be used, so no GPU is read", f"  why: {printable(fallback['reason'])}",
                  "  `rigscope record` and the recorder service record the host (CPU, RAM) only, store an event with "
                  f"this reason and try NVML again every {NVML_RETRY_PERIOD_S:g} s; nothing simulated is recorded "
                  "(--simulate shows the simulated GPU)", ""]
    elif fallback["active"]:
        lines += [f"FALLBACK: using the {fallback['uses']}", f"  why: {fallback['reason']}", ""]
    elif fallback["reason"]:
        lines += [f"WARNING: {fallback['reason']}", ""]
    lines += _gpu_lines(report["gpus"])
    lines += _envelope_lines(report.get("power_envelope"))
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
