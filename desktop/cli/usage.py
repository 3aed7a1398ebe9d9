"""`rigscope usage`: GPU-hours, energy and cost per user, command or container over a period."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from advisor.safetext import printable
from desktop.cli.common import add_db, add_json, add_range, db_path, iso_local, load_settings, text_table, time_range

if TYPE_CHECKING:
    from advisor.usage import UsageTable

#: The default period: the last week.
DEFAULT_SPAN_S = 7 * 86400.0
_HEADER = {"user": "user", "command": "command", "container": "container"}


HELP = "GPU-hours, energy and cost per user, command or container over a period"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_range(parser, "7 days ago")
    parser.add_argument("--by", choices=("user", "command", "container"), default="user",
                        help="what to total by (default user)")
    add_db(parser)
    add_json(parser)


def main(args: argparse.Namespace) -> int:
    from advisor.usage import account_usage
    from desktop.advice import open_history
    from desktop.reporting import unknown_notes

    start_s, end_s = time_range(args, DEFAULT_SPAN_S)
    settings, _problems = load_settings()
    with open_history(db_path(args)) as store:
        rows = store.process_usage_rows(start_s, end_s)
        table = account_usage(rows, store.gpu_energy(start_s, end_s), args.by, start_s=start_s, end_s=end_s,
                              price_per_kwh=settings.costs.electricity_price_per_kwh, currency=settings.costs.currency)
    if args.json:
        print(json.dumps(table.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_usage(table, unknown_notes(rows)))
    return 0


def format_usage(table: UsageTable, unknown: tuple[str, ...] = ()) -> str:
    """The table for a terminal (every cell through ``printable``: another user names a command)."""
    from advisor.usage import NO_KEY, fmt_cost, fmt_energy, fmt_gpu_hours

    head = f"GPU usage by {table.by}, {iso_local(table.start_s)} .. {iso_local(table.end_s)}"
    if not table.lines:
        return (f"{head}\n  no GPU processes recorded in this period"
                + (f" (the GPUs used {fmt_energy(table.total_wh)})" if table.total_wh > 0 else ""))
    rows: list[tuple[str, ...]] = [(_HEADER[table.by], "GPU time", "energy", "share", "cost", "processes")]
    for line in table.lines:
        rows.append((line.key, fmt_gpu_hours(line.gpu_hours), fmt_energy(line.energy_wh),
                     f"{line.energy_share_pct:.0f} %", fmt_cost(line.cost, table.currency), str(line.processes)))
    if table.unattributed_wh > 0:
        rows.append(("(no process on the GPU)", "", fmt_energy(table.unattributed_wh), "",
                     fmt_cost(table.unattributed_wh / 1000.0 * table.price_per_kwh, table.currency), ""))
    notes = [table.basis_text(),
             f"Cost is the energy at {table.price_per_kwh:g} {table.currency}/kWh (Settings > Costs)."]
    # "(unknown command)" from before commands were stored is not blamed on unreadable processes
    notes += [n for n in unknown if n.startswith(NO_KEY[table.by]) and any(line.key == NO_KEY[table.by]
                                                                           for line in table.lines)]
    return "\n".join([head, text_table(rows), *(printable(n) for n in notes)])
