"""`rigscope sample`: live readings as one JSON line per tick, or a refreshing table with units."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from datetime import datetime

from desktop.cli.common import open_backend, text_table
from desktop.errors import UserError
from desktop.telemetry.doctor import slowdown_headroom_c
from desktop.telemetry.live import snapshot_json
from desktop.telemetry.loop import run_every
from desktop.telemetry.model import METRICS, Snapshot, format_value
from desktop.telemetry.sampler import Sampler, open_host_backend

_CLEAR = "\x1b[H\x1b[2J"


def main(args: argparse.Namespace) -> int:
    count = int(args.count or 0)
    interval_s = float(args.interval if args.interval is not None else 1.0)
    if count < 0:
        raise UserError("--count must be 0 (run until Ctrl+C) or a positive number of samples")
    if not interval_s > 0:
        raise UserError("--interval must be a positive number of seconds")
    sampler = Sampler(open_backend(args.simulate), open_host_backend())
    out = sys.stdout
    refresh = not args.json and out.isatty()

    def tick() -> None:
        snapshot = sampler.tick()
        if args.json:
            out.write(json.dumps(snapshot_json(snapshot)) + "\n")
        else:
            out.write((_CLEAR if refresh else "") + render(snapshot) + ("\n" if refresh else "\n\n"))
        out.flush()

    try:
        run_every(interval_s, tick, threading.Event(), max_ticks=count or None)
    except KeyboardInterrupt:
        return 0  # Ctrl+C is how an endless `sample` is meant to end
    finally:
        sampler.close()
    return 0  # a closed pipe (`| head`) ends in the dispatcher, quietly


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
