"""`rigscope fleet`: every machine and GPU a Prometheus server scrapes, now, most in need of attention first."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from advisor.wording import count_text
from desktop.cli.common import add_json, load_settings, text_table
from desktop.errors import UserError
from desktop.fleet.text import ago, of_limit

if TYPE_CHECKING:
    from desktop.fleet.model import Fleet, FleetGpu, FleetMachine

HELP = "every machine and GPU that a Prometheus server scrapes, now (Rigscope and DCGM exporters alike)"

_ATTENTION_WORDS = {"down": "DOWN", "throttled": "throttled", "hot": "hot", "recorder_down": "recorder not writing",
                    "stress_throttled": "last stress test throttled"}


def _timeout_arg(text: str) -> float:
    from desktop.config import allowed_range

    low, high = allowed_range("fleet.timeout_s")
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not low <= seconds <= high:
        raise argparse.ArgumentTypeError(f"{seconds:g} s is outside {low:g} to {high:g} s")
    return seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from desktop.config import FleetSettings, allowed_range

    low, high = allowed_range("fleet.timeout_s")
    parser.add_argument("--prometheus", metavar="URL",
                        help="the Prometheus server's base URL, e.g. http://prometheus:9090 (default: url under "
                             "[fleet] in settings)")
    parser.add_argument("--timeout", type=_timeout_arg, metavar="S",
                        help=f"seconds each request may take, {low:g} to {high:g} (default: fleet.timeout_s in "
                             f"settings, {FleetSettings().timeout_s:g})")
    parser.add_argument("--advice", action="store_true",
                        help="also the last 7 days: who throttled and why, who sat idle, own vs rent per GPU model "
                             "(5 more queries; \"advice\" in --json)")
    add_json(parser)


def main(args: argparse.Namespace) -> int:
    from desktop.fleet import PrometheusClient, connection_from, read_fleet

    settings, _problems = load_settings()
    connection = connection_from(settings.fleet, url=args.prometheus, timeout_s=args.timeout)
    with PrometheusClient(connection) as client:
        # At the server's "now", not this machine's: a clock that runs ahead or behind must neither hide
        # series (Prometheus looks back 5 min from the time asked) nor skew "last seen".
        fleet = read_fleet(client, hot_c=settings.alerts.temperature_c, at_s=args.now_s)
        if not fleet.machines:
            raise UserError(f"Prometheus at {fleet.server} has no GPU series (DCGM_FI_DEV_* or rigscope_*): does "
                            "it scrape a Rigscope exporter (`rigscope record --prometheus`) or a dcgm-exporter?")
        advice = None
        if args.advice:  # the Fleet page's advice, one computation
            from desktop.fleet.advice import advise

            advice = advise(client, fleet, settings)
    if args.json:
        doc = fleet.to_dict() | ({"advice": advice.to_dict()} if advice is not None else {})
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(format_fleet(fleet))
        if advice is not None:
            from advisor.safetext import printable

            print("\nOver the last 7 days:")
            print("\n".join(f"  {printable(line)}" for line in advice.lines) or "  nothing to advise")
    return 0


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _of(value: float | None, limit: float | None, unit: str) -> str:
    return of_limit(value, limit, unit) or "-"


def _ago(time_s: float | None, now_s: float) -> str:
    return ago(time_s, now_s) or "-"


def _throttle(gpu: FleetGpu) -> str:
    if gpu.throttle_reasons is None:
        return "n/a"
    return ", ".join(gpu.throttle_reasons) if gpu.throttle_reasons else "no"


def _stress(gpu: FleetGpu) -> str:
    verdict = gpu.last_stress
    if verdict is None:
        return "-"
    ratio = f" ({verdict.sustained_ratio * 100:.0f} % of peak)" if verdict.sustained_ratio is not None else ""
    return ("throttled" if verdict.throttled else "held") + ratio


def _recorder(machine: FleetMachine) -> str:
    if machine.source == "dcgm":
        return "n/a"
    return "-" if machine.recorder_up is None else ("writing" if machine.recorder_up else "NOT writing")


def format_fleet(fleet: Fleet) -> str:
    """The table for a terminal (cells through ``printable`` in ``text_table``: host and model names are labels
    anyone who runs an exporter chooses). Ages are from the server's time of the answer."""
    now_s = fleet.queried_at_s
    rows: list[tuple[str, ...]] = [("machine", "GPU", "util", "VRAM", "temp", "power", "SM clock", "throttled now",
                                    "last stress", "recorder", "last seen", "attention")]
    for machine in fleet.machines:
        label = machine.name + (" (DCGM only)" if machine.source == "dcgm" else "")
        if not machine.gpus:
            rows.append((label, "-", "", "", "", "", "", "", "", _recorder(machine), _ago(machine.last_seen_s, now_s),
                         ", ".join(_ATTENTION_WORDS[a] for a in machine.attention)))
        for gpu in machine.gpus:
            name = f"{gpu.index or '?'} {gpu.model or gpu.uuid}"
            vram = "-" if gpu.vram_used_mib is None else (
                f"{gpu.vram_used_mib / 1024:.1f}/{gpu.vram_total_mib / 1024:.0f} GiB" if gpu.vram_total_mib
                else f"{gpu.vram_used_mib / 1024:.1f} GiB")
            attention = set(gpu.attention) | ({"recorder_down"} & set(machine.attention))
            rows.append((label, name, _num(gpu.utilization_pct, "{:.0f} %"), vram, _num(gpu.temperature_c, "{:.0f} °C"),
                         _of(gpu.power_w, gpu.power_limit_w, "W"), _of(gpu.sm_clock_mhz, gpu.sm_clock_max_mhz, "MHz"),
                         _throttle(gpu), _stress(gpu), _recorder(machine), _ago(gpu.last_seen_s, now_s),
                         ", ".join(_ATTENTION_WORDS[a] for a in sorted(attention, key=_ATTENTION_ORDER.index))))
            label = ""
    gpus = sum(len(m.gpus) for m in fleet.machines)
    head = (f"{count_text(len(fleet.machines), 'machine')}, {count_text(gpus, 'GPU')} from Prometheus at "
            f"{fleet.server} ({fleet.requests} queries), most in need of attention first")
    notes = [f"{m.name}: DCGM only (dcgm-exporter): no {', '.join(m.missing)}"
             for m in fleet.machines if m.source == "dcgm"]
    from advisor.safetext import printable

    return "\n".join([printable(head), text_table(rows), *(printable(n) for n in notes)])


_ATTENTION_ORDER = list(_ATTENTION_WORDS)
