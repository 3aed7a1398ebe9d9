"""`rigscope sample`: live readings as one JSON line per tick, or a refreshing table with units."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from datetime import datetime

from desktop.cli.common import check_interval, open_backend, text_table
from desktop.errors import UserError
from desktop.telemetry.doctor import slowdown_headroom_c
from desktop.telemetry.live import snapshot_json
from desktop.telemetry.loop import run_every
from desktop.telemetry.model import METRICS, ClockEventReason, GpuSample, Metric, Snapshot, format_value
from desktop.telemetry.sampler import Sampler, open_host_backend

_CLEAR = "\x1b[H\x1b[2J"


def main(args: argparse.Namespace) -> int:
    count = int(args.count or 0)
    interval_s = float(args.interval if args.interval is not None else 1.0)
    if count < 0:
        raise UserError("--count must be 0 (run until Ctrl+C) or a positive number of samples")
    check_interval(interval_s)  # the one range record, serve and Settings allow
    sampler = Sampler(open_backend(args.simulate), open_host_backend())
    out = sys.stdout
    refresh = not args.json and out.isatty()
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        snapshot = sampler.tick()
        if args.json:
            out.write(json.dumps(snapshot_json(snapshot)) + "\n")
        else:
            # The fallback reason once: on the first table when they scroll, on the one screen when it redraws.
            text = render(snapshot, with_reason=refresh or ticks == 0)
            out.write((_CLEAR if refresh else "") + text + ("\n" if refresh else "\n\n"))
        ticks += 1
        out.flush()

    try:
        run_every(interval_s, tick, threading.Event(), max_ticks=count or None)
    except KeyboardInterrupt:
        return 0  # Ctrl+C is how an endless `sample` is meant to end
    finally:
        sampler.close()
    return 0  # a closed pipe (`| head`) ends in the dispatcher, quietly


def clock_event_text(mask: int | None) -> str:
    """A clock-event mask in words ("SW thermal, Power cap"), from the one vocabulary; "none" when clear."""
    if mask is None:
        return "n/a"
    return ", ".join(reason.label for reason in ClockEventReason.decode(mask)) or "none"


def _cell(metric: Metric, sample: GpuSample | None) -> str:
    if sample is None:
        return "n/a"
    value = getattr(sample, metric.name)
    if metric.name == "clock_event_reasons":
        return clock_event_text(value)
    return format_value(metric, value, 1 if metric.unit in ("°C", "W") else 0)


def render(snapshot: Snapshot, *, with_reason: bool = True) -> str:
    """The readable table: one row per metric, one column per GPU, then the host and processes.
    ``with_reason``: say why this is the simulated GPU (once per run, not on every refresh)."""
    stamp = datetime.fromtimestamp(snapshot.time_s).strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"{stamp}  {snapshot.source.detail}"]
    if with_reason and snapshot.source.fallback_reason:
        lines.append(f"(simulated: {snapshot.source.fallback_reason})")
    rows: list[tuple[str, ...]] = [("", *(f"GPU {r.info.index}" for r in snapshot.gpus))]
    rows.append(("name", *(r.info.name for r in snapshot.gpus)))
    rows.append(("state", *(r.state.value + (f": {r.state_detail}" if r.state_detail else "")
                            for r in snapshot.gpus)))
    for metric in METRICS:
        rows.append((metric.label, *(_cell(metric, r.sample) for r in snapshot.gpus)))
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
        proc_rows: list[tuple[str, ...]] = [("GPU", "PID", "VRAM", "SM", "mem", "enc", "dec", "kind", "user",
                                             "name")]
        for p in snapshot.processes:
            vram = f"{p.vram_mib:,.0f} MiB" if p.vram_mib is not None else "n/a"
            # Per-process utilization: n/a where the GPU does not report it (never 0 for unknown).
            util = tuple(f"{v:.0f} %" if v is not None else "n/a"
                         for v in (p.sm_util_pct, p.mem_util_pct, p.enc_util_pct, p.dec_util_pct))
            proc_rows.append((str(p.gpu_index), str(p.pid), vram, *util, p.kind, p.user or "?", p.name))
        lines.append(text_table(proc_rows))
    return "\n".join(lines)
