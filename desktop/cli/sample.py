"""`rigscope sample`: live readings as one line per GPU per tick (a header per screen, like
`nvidia-smi dmon`), the full block with ``--detail``, or one JSON line per tick with ``--json``."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Final

from advisor.clock_events import REASON_TABLE
from advisor.safetext import printable
from desktop.cli.common import add_interval, add_json, add_simulate, open_backend, sampling_interval, text_table
from desktop.errors import UserError
from desktop.telemetry.envelope import explain_gpu
from desktop.telemetry.loop import run_every
from desktop.telemetry.model import (
    METRICS,
    ClockEventReason,
    DeviceState,
    GpuReading,
    GpuSample,
    Metric,
    Snapshot,
    format_value,
)

_CLEAR = "\x1b[H\x1b[2J"

#: Each reason in a few letters for the one-line form ("pwrcap,hwtherm"): the full labels
#: ("HW thermal") stay in ``--detail``. Every single reason has one (tests check it).
SHORT_REASONS: Final[dict[ClockEventReason, str]] = {row.reason: row.short for row in REASON_TABLE}

_MISSING = "-"  # dmon's mark for a value the GPU does not report


def _num(value: float | None, digits: int = 0) -> str:
    return _MISSING if value is None else f"{value:.{digits}f}"  # no thousands commas: columns split on blanks


def _headroom_c(r: GpuReading, s: GpuSample | None) -> float | None:
    from desktop.telemetry.doctor import slowdown_headroom_c  # beside the sampler, which costs numpy

    return slowdown_headroom_c(r.info, s)


#: The one-line form's numeric columns, right-aligned: name, unit, width, the cell of one GPU. The
#: time and GPU index come before them; the reasons after, left-aligned and as wide as they need.
_Column = tuple[str, str, int, Callable[[GpuReading, GpuSample], str]]
_COLUMNS: Final[tuple[_Column, ...]] = (
    ("util", "%", 4, lambda r, s: _num(s.utilization_gpu_pct)),
    ("mem", "%", 4, lambda r, s: _num(s.utilization_mem_pct)),
    ("vram", "MiB", 7, lambda r, s: _num(s.vram_used_mib)),
    ("temp", "°C", 4, lambda r, s: _num(s.temperature_c)),
    ("toslow", "°C", 6, lambda r, s: _num(_headroom_c(r, s))),  # headroom to slowdown
    ("power", "W", 6, lambda r, s: _num(s.power_w, 1)),
    ("limit", "W", 5, lambda r, s: _num(r.info.power_limit_enforced_w)),
    ("sm", "MHz", 5, lambda r, s: _num(s.sm_clock_mhz)),
    ("memclk", "MHz", 6, lambda r, s: _num(s.mem_clock_mhz)),
    ("fan", "%", 3, lambda r, s: _num(s.fan_pct)),
    ("pst", "", 3, lambda r, s: _MISSING if s.pstate is None else f"P{s.pstate}"),
)


def short_reasons(mask: int | None) -> str:
    """A clock-event mask in the one-line form: "pwrcap,hwtherm"; "-" when clear or not read."""
    if not mask:
        return _MISSING
    return ",".join(SHORT_REASONS.get(r, r.label) for r in ClockEventReason.decode(mask)) or _MISSING


def line_header() -> str:
    """The two header lines of the one-line form: column names, then their units."""
    names = ["#    time", "gpu", *(name.rjust(width) for name, _, width, _ in _COLUMNS), "reasons"]
    units = ["#hh:mm:ss", "idx", *(unit.rjust(width) for _, unit, width, _ in _COLUMNS), ""]
    return " ".join(names) + "\n" + " ".join(units).rstrip()


def gpu_line(time_s: float, reading: GpuReading) -> str:
    """One GPU's sample as one line under ``line_header`` (a lost or asleep GPU: dashes and its state)."""
    stamp = datetime.fromtimestamp(time_s).strftime("%H:%M:%S")
    sample = reading.sample
    if reading.state is not DeviceState.OK or sample is None:
        cells = [_MISSING.rjust(width) for _, _, width, _ in _COLUMNS]
        last = reading.state.value.upper()
    else:
        cells = [cell(reading, sample).rjust(width) for _, _, width, cell in _COLUMNS]
        last = short_reasons(sample.clock_event_reasons)
    return " ".join([stamp.rjust(9), str(reading.info.index).rjust(3), *cells, last])


class LinePrinter:
    """The one-line form over ticks: the GPUs named once, the header again every screen."""

    def __init__(self, screen_lines: int) -> None:
        self._screen_lines = max(screen_lines, 4)
        self._since_header: int | None = None

    def lines(self, snapshot: Snapshot) -> list[str]:
        out: list[str] = []
        if self._since_header is None:  # the first tick: which GPU each index is, and where it comes from
            out.append(f"# {printable(snapshot.source.detail)}")
            if snapshot.source.fallback_reason:
                out.append(f"# (simulated: {printable(snapshot.source.fallback_reason)})")
            out.extend(f"# GPU {r.info.index}: {printable(r.info.name)}" for r in snapshot.gpus)
        for reading in snapshot.gpus:
            # The header, again once the previous one has scrolled off the screen (dmon does the same).
            if self._since_header is None or self._since_header + 2 >= self._screen_lines:
                out.extend(line_header().split("\n"))
                self._since_header = 0
            out.append(gpu_line(snapshot.time_s, reading))
            self._since_header += 1
        return out


HELP = "print live readings: one line per GPU per sample, the full block, or JSON lines"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json(parser)
    parser.add_argument("--detail", action="store_true",
                        help="every metric, the host and the GPU processes as a block per sample (redrawn in a "
                             "terminal)")
    add_simulate(parser)
    add_interval(parser, 1.0)
    parser.add_argument("--count", type=int, default=0, metavar="N",
                        help="stop after N samples (default: run until Ctrl+C)")


def main(args: argparse.Namespace) -> int:
    from desktop.telemetry.live import snapshot_json
    from desktop.telemetry.sampler import Sampler, open_host_backend

    count = int(args.count or 0)
    if count < 0:
        raise UserError("--count must be 0 (run until Ctrl+C) or a positive number of samples")
    interval_s = sampling_interval(args, default=1.0)  # the one range record, serve and Settings allow
    detail = bool(getattr(args, "detail", False))
    if detail and args.json:
        raise UserError("--detail and --json do not go together: --json carries every metric already")
    sampler = Sampler(open_backend(args.simulate), open_host_backend())
    out = sys.stdout
    refresh = detail and out.isatty()
    printer = LinePrinter(shutil.get_terminal_size((80, 24)).lines)
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        snapshot = sampler.tick()
        if args.json:
            out.write(json.dumps(snapshot_json(snapshot)) + "\n")
        elif detail:
            # The fallback reason once: on the first table when they scroll, on the one screen when it redraws.
            text = render(snapshot, with_reason=refresh or ticks == 0)
            out.write((_CLEAR if refresh else "") + text + ("\n" if refresh else "\n\n"))
        else:
            out.write("".join(line + "\n" for line in printer.lines(snapshot)))
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
            headroom = (_headroom_c(r, r.sample) for r in snapshot.gpus)
            rows.append(("to slowdown", *(f"{h:.0f} °C" if h is not None else "n/a" for h in headroom)))
    lines.append(text_table(rows))
    # Why each GPU's power limit is where it is (the laptop's envelope: AC, firmware mode, nvidia-powerd).
    lines.extend(f"GPU {r.info.index} power limit: {printable(explain_gpu(r.info, snapshot.envelope).line)}"
                 for r in snapshot.gpus if r.info.power_limit_enforced_w is not None)
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
