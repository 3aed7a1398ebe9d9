"""`rigscope jobs`: the jobs recorded by `rigscope run`, newest first; `rigscope jobs show ID`: one job's card."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from advisor.safetext import printable
from desktop.cli.common import add_db, add_json, db_path, load_settings, text_table
from desktop.errors import UserError

if TYPE_CHECKING:
    from advisor.job_card import JobCard
    from desktop.jobs.model import JobRecord

#: What `rigscope jobs` says when the history holds no job yet.
NO_JOBS = ("No jobs recorded yet. Run one under Rigscope to get its card here: "
           "rigscope run -- python train.py")

HELP = "list the jobs recorded by `rigscope run`, or show one job's card"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", default="list", metavar="list|show",
                        help="list (the default): the newest jobs first; show ID (or just ID): that job's card")
    parser.add_argument("job_id", nargs="?", type=int, metavar="ID", help="the job to show (an ID from the list)")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"list the newest N jobs (default {DEFAULT_LIMIT})")
    parser.add_argument("--all", action="store_true", help="list every job")
    add_db(parser)
    add_json(parser)


#: `rigscope jobs` lists this many of the newest jobs unless told otherwise: a year of jobs lists as fast as a week's.
DEFAULT_LIMIT = 50


def main(args: argparse.Namespace) -> int:
    from desktop.advice import open_history

    if args.action.isdigit() and args.job_id is None:  # `rigscope jobs 7` is `rigscope jobs show 7`
        args.action, args.job_id = "show", int(args.action)
    if args.action not in ("list", "show"):
        raise UserError(f"unknown action {printable(args.action)!r}: `rigscope jobs` lists the jobs, "
                        "`rigscope jobs show ID` shows one")
    if args.action == "show":
        if args.job_id is None:
            raise UserError("which job? `rigscope jobs show ID` (the IDs are in `rigscope jobs`)")
        return _show(args)
    if args.job_id is not None:
        raise UserError(f"`rigscope jobs` lists every job; to see job {args.job_id}: "
                        f"rigscope jobs show {args.job_id}")
    if args.limit < 1:
        raise UserError(f"--limit takes a whole number of jobs, 1 or more (got {args.limit}); --all lists every job")
    store = open_history(db_path(args))
    try:
        # One more than shown says whether older ones exist, without counting them all.
        records = store.jobs(limit=None if args.all else args.limit + 1)
    finally:
        store.close()
    if not args.all and len(records) > args.limit:
        records = records[:args.limit]
        print(f"the newest {args.limit} jobs; older ones: `rigscope jobs --all` lists every one, "
              "`--limit N` the newest N", file=sys.stderr)
    if args.json:
        print(json.dumps([record_json(r) for r in records], indent=2))
    elif not records:
        print(NO_JOBS)
    else:
        print(format_list(records))
    return 0


def _show(args: argparse.Namespace) -> int:
    from desktop.advice import open_history
    from desktop.jobs.card import format_card
    from desktop.sessions.job import read_job_card

    settings, _problems = load_settings()
    store = open_history(db_path(args))
    try:
        read = read_job_card(store, args.job_id, settings.costs, now_s=args.now_s)
        if read is None:
            raise UserError(f"no job {args.job_id} in {printable(store.path)}; `rigscope jobs` lists the recorded ones")
    finally:
        store.close()
    if args.json:
        print(json.dumps({**record_json(read.record), "card": read.card.as_dict()}, indent=2))
    else:
        print(format_card(read.card))
    return 0


def record_json(record: JobRecord) -> dict[str, Any]:
    """The job as JSON: its record (command, times, GPUs, the guard's events) and its stored card (or null)."""
    from desktop.advice import json_safe

    data: dict[str, Any] = json_safe(dataclasses.asdict(record))
    data["duration_s"] = record.duration_s
    return data


def _stored_card(record: JobRecord) -> JobCard | None:
    from advisor.job_card import JobCard

    if record.card is None:
        return None
    try:
        return JobCard.from_dict(record.card)
    except ValueError:
        return None


def format_list(records: list[JobRecord]) -> str:
    """One line per job: when, how long, what, how it ended, and the card's headline figures."""
    from desktop.jobs.card import duration_text, energy_text, job_status, money_text

    rows: list[tuple[str, ...]] = [("ID", "started", "duration", "status", "GPU", "busy", "energy", "cost",
                                    "paused", "name")]
    for record in records:
        card = _stored_card(record)
        gpus = ",".join(str(i) for i in record.gpu_indices) or "-"
        busy = energy = cost = "-"
        if card is not None:
            busy = f"{card.busy_share * 100:.0f} %" if card.busy_share is not None else "n/a"
            if card.energy_wh is not None:
                energy = energy_text(card.energy_wh)
            if card.energy_cost is not None:
                cost = money_text(card.energy_cost, card.currency)
        duration = duration_text(record.duration_s) if record.duration_s is not None else "-"
        paused = duration_text(record.paused_s) if record.paused_s > 0 else "-"
        started = datetime.fromtimestamp(record.started_s).strftime("%Y-%m-%d %H:%M")
        rows.append((str(record.job_id), started, duration, job_status(record), gpus, busy, energy, cost, paused,
                     record.name))
    return text_table(rows, indent="")
