"""`rigscope advise`: recommendations, workload profiles and costs from the logged history, for a terminal."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import TYPE_CHECKING

from advisor.costs import break_even_text, cost_answer
from advisor.safetext import printable
from advisor.wording import count_text
from desktop.cli.common import add_db, add_json, db_path, load_settings
from desktop.errors import UserError

if TYPE_CHECKING:
    from desktop.advice import Advice

HELP = "recommendations from your logged history"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=float, default=7.0, help="how much history to look at (default %(default)g)")
    parser.add_argument("--week", metavar="YYYY-Www",
                        help="advise on one ISO week instead (e.g. 2026-W48): the window `report --week` shows")
    add_db(parser)
    add_json(parser)


def main(args: argparse.Namespace) -> int:
    from desktop.advice import advice_json, compute_advice, load_recent_frame, open_history

    if args.days <= 0:
        raise UserError("--days must be positive")
    settings, _problems = load_settings()
    store = open_history(db_path(args))
    try:
        if args.week is not None:  # the report's window, by the report's own function: the same figures
            from desktop.report_week import SystemLocalTime, load_week

            _label, frame, _previous, _notes = load_week(store, args.week, SystemLocalTime(), args.now_s)
        else:
            frame = load_recent_frame(store, args.days, args.now_s)
    finally:
        store.close()
    advice = compute_advice(frame, settings)
    if args.json:
        print(json.dumps(advice_json(advice), indent=2))
    else:
        print(format_advice(advice))
    return 0


def local_time(time_s: float, fmt: str = "%a %d %b %H:%M") -> str:
    return datetime.fromtimestamp(time_s).strftime(fmt)


def time_span(start_s: float, end_s: float) -> str:
    """A span of local time: "Mon 23 Nov 22:10 – 23:40" within a day, and both dates when it crosses
    midnight ("Mon 23 Nov 22:10 – Tue 24 Nov 01:30"), never a second time that reads as the first day's."""
    same_day = datetime.fromtimestamp(start_s).date() == datetime.fromtimestamp(end_s).date()
    return f"{local_time(start_s)} – {local_time(end_s, '%H:%M') if same_day else local_time(end_s)}"


def format_advice(advice: Advice) -> str:
    """The advice for a terminal. Process and GPU names are quoted in it, and another user names a
    process: every line goes through ``printable`` (no escape sequence, no bidi override, no
    line break smuggled in a name), so the lines are built without newlines of their own."""
    from advisor.profile import KIND_LABELS, KINDS

    frame = advice.frame
    lines = [f"Rigscope advice for {local_time(frame.start_s, '%Y-%m-%d %H:%M')} .. "
             f"{local_time(frame.end_s, '%Y-%m-%d %H:%M')} ({count_text(len(frame.gpus), 'GPU')})"
             + ("  [demo data: a simulated week]" if frame.demo else "")]
    names = {g.meta.key: g.meta.name for g in frame.gpus}  # by identity: two machines' logs both say GPU 0
    for prof in advice.profiles:
        shares = ", ".join(f"{KIND_LABELS[k]} {prof.shares[k] * 100:.0f} %" for k in KINDS if prof.shares[k] > 0)
        lines.append(f"GPU {prof.gpu_index} ({names.get(prof.gpu_key, '?')}): {prof.busy_s / 3600:.1f} h busy"
                     f"{': ' + shares if shares else ''}; idle {prof.idle_share * 100:.0f} % of the time")
    shortfall = advice.shortfall()  # the same sentence the Advisor, Costs and History pages show
    if shortfall is not None:
        lines += ["", shortfall]
    elif not advice.recommendations:
        lines += ["", "No recommendations: nothing in this history crossed a threshold."]
    for rec in advice.recommendations:
        lines += ["", f"[{rec.severity.upper()}] {rec.title}  ({rec.rule_id})"]
        lines.extend(f"  - {e.text()}" for e in rec.evidence)
        lines.append(f"  Action: {rec.action}")
        if rec.time_ranges:
            spans = ", ".join(f"{time_span(a, b)} ({(b - a) / 3600:.1f} h)"
                              for a, b in rec.time_ranges[:3])
            lines.append(f"  When: {spans}")
    for cost in advice.costs:
        lines += ["", f"Costs, {cost.gpu_name}: {cost_answer(cost)}"]
        for option in cost.options[:3]:
            lines.append(f"  {option.offer.gpu_model} at {option.offer.provider}: {option.relative_speed:.2f}x speed, "
                         f"{option.on_demand_month:,.2f} USD/month on demand, break-even (busy h/month): "
                         f"{break_even_text(cost, option)}")
        lines.extend(f"  note: {n}" for n in cost.notes)
    return "\n".join(printable(line) for line in lines)
