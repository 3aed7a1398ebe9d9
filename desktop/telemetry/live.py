"""`rigscope sample`: live readings as one JSON line per tick, or a refreshing table with units."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from desktop.errors import UserError
from desktop.telemetry.doctor import slowdown_headroom_c, text_table
from desktop.telemetry.model import GPU_METRIC_NAMES, METRICS, Snapshot, format_value
from desktop.telemetry.sampler import Sampler, open_gpu_backend, open_host_backend

_CLEAR = "\x1b[H\x1b[2J"


def main(args: argparse.Namespace) -> int:
    count = int(args.count or 0)
    interval_s = float(args.interval if args.interval is not None else 1.0)
    if count < 0:
        raise UserError("--count must be 0 (run until Ctrl+C) or a positive number of samples")
    if not interval_s > 0:
        raise UserError("--interval must be a positive number of seconds")
    try:
        gpu = open_gpu_backend(args.simulate)
    except ValueError as exc:  # an unknown simulated profile
        raise UserError(str(exc)) from exc
    sampler = Sampler(gpu, open_host_backend())
    out = sys.stdout
    refresh = not args.json and out.isatty()
    try:
        start = time.monotonic()
        done = 0
        while True:
            snapshot = sampler.tick()
            if args.json:
                out.write(json.dumps(snapshot_json(snapshot)) + "\n")
            else:
                out.write((_CLEAR if refresh else "") + render(snapshot) + ("\n" if refresh else "\n\n"))
            out.flush()
            done += 1
            if count and done >= count:
                return 0
            # Sleep to the next multiple of the interval, so output does not drift.
            time.sleep(max(0.0, start + done * interval_s - time.monotonic()))
    except KeyboardInterrupt:
        return 0  # Ctrl+C is how an endless `sample` is meant to end
    except BrokenPipeError:  # `rigscope sample | head`: stop quietly, and keep Python from complaining at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    finally:
        sampler.close()


def snapshot_json(snapshot: Snapshot) -> dict[str, Any]:
    """One tick as JSON-ready data: every GPU metric by registry name (null where unsupported)."""
    gpus = []
    for reading in snapshot.gpus:
        entry: dict[str, Any] = {
            "index": reading.info.index,
            "name": reading.info.name,
            "uuid": reading.info.uuid,
            "state": reading.state.value,
            "state_detail": reading.state_detail,
        }
        for name in GPU_METRIC_NAMES:
            entry[name] = getattr(reading.sample, name) if reading.sample is not None else None
        # Absolute °C on every GPU, also where NVML gave it relative to the thermal limit (Ada and newer).
        entry["temp_slowdown_c"] = reading.info.temp_slowdown_c
        entry["slowdown_headroom_c"] = slowdown_headroom_c(reading.info, reading.sample)
        gpus.append(entry)
    return {
        "time_s": snapshot.time_s,
        "time": datetime.fromtimestamp(snapshot.time_s, UTC).isoformat(timespec="milliseconds"),
        "source": {"kind": snapshot.source.kind, "detail": snapshot.source.detail,
                   "fallback_reason": snapshot.source.fallback_reason},
        "gpus": gpus,
        "host": _plain(dataclasses.asdict(snapshot.host)) if snapshot.host is not None else None,
        "processes": [_plain(dataclasses.asdict(p)) for p in snapshot.processes],
        "processes_fresh": snapshot.processes_fresh,
    }


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def render(snapshot: Snapshot) -> str:
    """The readable table: one row per metric, one column per GPU, then the host and processes."""
    stamp = datetime.fromtimestamp(snapshot.time_s).strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"{stamp}  {snapshot.source.detail}"]
    if snapshot.source.fallback_reason:
        lines.append(f"(simulated: {snapshot.source.fallback_reason})")
    rows: list[tuple[str, ...]] = [("", *(f"GPU {r.info.index}" for r in snapshot.gpus))]
    rows.append(("name", *(r.info.name for r in snapshot.gpus)))
    rows.append(("state", *(r.state.value + (f": {r.state_detail}" if r.state_detail else "")
                            for r in snapshot.gpus)))
    for metric in METRICS:
        digits = 1 if metric.unit in ("°C", "W") else 0
        rows.append((metric.label, *(format_value(metric, getattr(r.sample, metric.name), digits)
                                     if r.sample is not None else "n/a" for r in snapshot.gpus)))
        if metric.name == "temperature_c":
            headroom = (slowdown_headroom_c(r.info, r.sample) for r in snapshot.gpus)
            rows.append(("to slowdown", *(f"{h:.0f} °C" if h is not None else "n/a" for h in headroom)))
    lines.append(text_table(rows))
    host = snapshot.host
    if host is not None:
        ram = (f"{host.ram_used_mib:,.0f} / {host.ram_total_mib:,.0f} MiB"
               if host.ram_used_mib is not None and host.ram_total_mib is not None else "n/a")
        cpu = f"{host.cpu_pct:.0f} %" if host.cpu_pct is not None else "n/a"
        temp = f"{host.cpu_temp_c:.0f} °C" if host.cpu_temp_c is not None else "n/a"
        power = {True: "AC", False: "battery", None: "n/a"}[host.on_ac_power]
        lines.append(f"host  CPU {cpu}  RAM {ram}  CPU temp {temp}  power {power}")
    if snapshot.processes:
        lines.append("processes")
        proc_rows: list[tuple[str, ...]] = [("GPU", "PID", "VRAM", "kind", "user", "name")]
        for p in snapshot.processes:
            vram = f"{p.vram_mib:,.0f} MiB" if p.vram_mib is not None else "n/a"
            proc_rows.append((str(p.gpu_index), str(p.pid), vram, p.kind, p.user or "?", p.name))
        lines.append(text_table(proc_rows))
    return "\n".join(lines)
