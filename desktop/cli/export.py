"""`rigscope export`: raw samples as CSV or JSON lines, to a file or standard output
(or, with --prometheus, what `rigscope serve` does).

A closed or full standard output (``| head``, ``>&-``, ``/dev/full``) ends it cleanly: quietly
for a reader that went away, in one line and exit 2 for a write that failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from advisor.safetext import printable
from desktop.cli.common import (
    STDOUT,
    add_db,
    add_interval,
    add_listen,
    add_range,
    add_simulate,
    check_output,
    db_path,
    drop_stdout,
    iso_local,
    time_range,
)
from desktop.errors import UserError
from desktop.history.export import raw_time_range, write_export

HELP = "export samples as CSV/JSON lines, or serve Prometheus metrics with --prometheus"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_range(parser, "24 h ago")
    parser.add_argument("--format", choices=("csv", "jsonl"), default="csv", help="output format (default csv)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write here instead of standard output (- is standard output too)")
    parser.add_argument("--prometheus", action="store_true",
                        help="serve live metrics for Prometheus instead (the same as `rigscope serve`)")
    add_listen(parser)
    add_interval(parser)
    add_simulate(parser)
    add_db(parser)


def main(args: argparse.Namespace) -> int:
    from desktop.history.filekind import is_sqlite_file

    if getattr(args, "prometheus", False):
        from desktop.cli import serve

        return serve.main(args)
    from desktop.history.store import HistoryStore

    start, end = time_range(args, 86400.0)
    to_file = bool(args.output) and args.output != STDOUT
    if to_file:  # before reading anything: the folder that is missing is named
        check_output(Path(args.output).expanduser(), f"export.{args.format}")
    path = db_path(args)
    with HistoryStore.open(path, readonly=True) as store:
        if to_file:
            out_path = Path(args.output).expanduser()
            if is_sqlite_file(out_path):  # -o h.sqlite would truncate the very database it reads
                raise UserError(f"cannot write {printable(out_path)}: it is an SQLite database; "
                                "give the export its own file name (e.g. export.csv)")
            try:
                with out_path.open("w", encoding="utf-8", newline="") as handle:
                    rows = write_export(store, start, end, args.format, handle)
            except OSError as exc:
                raise UserError(f"cannot write {printable(out_path)}: {exc.strerror or exc}") from exc
            print(f"wrote {rows:,} samples to {printable(out_path)}", file=sys.stderr)
        else:
            written = _export_to_stdout(store, start, end, args.format)
            if written is None:
                return 0
            rows = written
        if rows == 0:
            print(f"no samples between {iso_local(start)} and {iso_local(end)}: {_what_is_held(store, start)}",
                  file=sys.stderr)
    return 0


def _what_is_held(store: Any, start_s: float) -> str:
    """What the database does hold (as `analyze` says it), and retention only where raw samples
    before the range's end were pruned (aggregates older than the first raw sample)."""
    span = store.time_range()
    raw = raw_time_range(store)
    if span is None:
        return "the database holds no samples yet"
    if raw is None:
        return (f"the database holds only minute and hour aggregates ({iso_local(span[0])} .. {iso_local(span[1])}): "
                "raw samples are kept for the retention period (Settings)")
    held = f"the database holds raw samples {iso_local(raw[0])} .. {iso_local(raw[1])}"
    if start_s < raw[0] and span[0] < raw[0]:  # older rows are aggregates only: retention pruned the raw ones
        return (f"{held}; older history is kept only as minute and hour aggregates "
                "(raw samples are kept for the retention period, Settings)")
    return f"{held}; choose the range with --from/--to"


def _export_to_stdout(store: Any, start_s: float, end_s: float, fmt: str) -> int | None:
    """The rows written, or None when the reader went away (``| head``): that is a normal end."""
    out = sys.stdout
    if out is None:  # started with standard output closed (``>&-``)
        raise UserError("standard output is closed: give -o FILE to write the export to a file")
    try:
        rows = write_export(store, start_s, end_s, fmt, out)
        out.flush()
    except BrokenPipeError:
        drop_stdout()
        return None
    except OSError as exc:  # /dev/full, a disk that filled, a closed descriptor
        drop_stdout()
        raise UserError(f"cannot write to standard output: {exc.strerror or exc}") from exc
    return rows
