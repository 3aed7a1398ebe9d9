"""`rigscope demo`: a simulated week in a separate database, clearly labelled as demo data."""

from __future__ import annotations

import argparse
import json

from advisor.wording import count_text, duration_text
from desktop.cli.common import add_db, add_json, db_path
from desktop.errors import UserError

#: The history `demo` writes: at least a quarter hour, at most a year.
DAYS_MIN = 0.01
DAYS_MAX = 366.0


HELP = "write a simulated week into a separate demo database"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=float, default=7.0,
                        help=f"how many days of history to simulate, {DAYS_MIN:g} to {DAYS_MAX:g} "
                             "(default %(default)g)")
    parser.add_argument("--seed", type=int, default=0, help="random seed: the same seed writes the same history")
    parser.add_argument("--gpus", default="rtx4090-laptop", metavar="PROFILES",
                        help="simulated GPU profiles, comma-separated (default rtx4090-laptop)")
    add_db(parser, "the demo database to write (default: demo-history.sqlite in your data folder, beside but never "
                   "in the real history; a file that holds real history is refused)")
    add_json(parser)


def main(args: argparse.Namespace) -> int:
    from desktop.jobs.demo_jobs import write_demo_week
    from desktop.telemetry.simulated import parse_profile_list

    try:
        profiles = parse_profile_list(args.gpus)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    days = float(args.days)
    if not DAYS_MIN <= days <= DAYS_MAX:  # also NaN
        raise UserError(f"--days {args.days:g}: choose between {DAYS_MIN:g} (about 15 minutes) and {DAYS_MAX:g} days")
    path = db_path(args, demo=True)
    summary = write_demo_week(path, profiles, days=days, seed=int(args.seed), now_s=args.now_s)
    if args.json:
        print(json.dumps({"db": str(summary.path), "demo": True, "start_s": summary.start_s, "end_s": summary.end_s,
                          "gpus": summary.gpus, "rows": summary.counts, "seconds": round(summary.seconds, 2)},
                         indent=2))
    else:
        span = duration_text(summary.end_s - summary.start_s)
        print(f"Demo history written to {summary.path} (clearly labelled as demo data): {span}, "
              f"{count_text(len(summary.gpus), 'simulated GPU')} ({', '.join(summary.gpus)}), "
              f"{summary.counts['gpu_samples']:,} GPU samples, {summary.counts['events']:,} events, "
              f"{count_text(summary.counts.get('jobs', 0), 'job')} (rigscope jobs --db {summary.path}), "
              f"in {summary.seconds:.1f} s.")
        print(f"Open it with: rigscope --db {summary.path}    or    rigscope advise --db {summary.path}")
    return 0
