"""`rigscope import`: nvidia-smi CSV logs into the history.

What the environment does to it (a read-only database or folder, a full disk) is a one-line
message and exit 2, never a traceback; an import that fails half-way keeps what it committed
(each chunk is a transaction) and a rerun adds the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.safetext import printable
from advisor.wording import count_text
from desktop.cli.common import ProgressBar, add_db, add_json, db_path
from desktop.errors import UserError

if TYPE_CHECKING:
    from desktop.history.nvsmi_csv import ImportResult
    from desktop.history.store import HistoryStore

_PROGRESS_MIN_BYTES = 4 << 20
_SKIPS_SHOWN = 20


HELP = "import nvidia-smi CSV logs into the history"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="nvidia-smi --query-gpu=... --format=csv logs")
    parser.add_argument("--machine", metavar="NAME",
                        help="for logs without uuid or pci.bus_id: the machine they come from (default: each "
                             "file's name)")
    add_db(parser)
    add_json(parser)


def main(args: argparse.Namespace) -> int:
    import sqlite3

    from desktop.history.dberrors import environment_problem
    from desktop.history.store import HistoryStore

    path = db_path(args)
    machine = getattr(args, "machine", None)
    reports: list[dict[str, Any]] = []
    try:
        # No writer lock: the sample stream's writer (window or recorder) may run; each chunk is a
        # short transaction beside it (docs/architecture.md, "Who writes the database").
        with HistoryStore.open(path) as store:
            if store.recovered_from is not None:
                print(f"note: the history database was damaged and was moved to {printable(store.recovered_from)}",
                      file=sys.stderr)
            reports = [_import_file(store, Path(name).expanduser(), machine, args.now_s) for name in args.files]
            store.run_rollups(args.now_s)
    except sqlite3.Error as exc:
        reason = environment_problem(exc)
        if reason is None:
            raise  # a bug, not the environment: the traceback is wanted
        raise UserError(f"cannot import into {printable(path)}: {reason}{_KEPT}") from exc
    except OSError as exc:  # the lock file in a folder that cannot be written, a full disk
        raise UserError(f"cannot import into {printable(path)}: {exc.strerror or exc}"
                        f"{' (' + printable(exc.filename) + ')' if exc.filename else ''}{_KEPT}") from exc
    if args.json:
        print(json.dumps({"db": str(path), "files": reports}, indent=2))
    else:
        for report in reports:
            _print_import(report)
    failed = any("error" in report for report in reports)
    return 2 if failed else 0  # not 1: that means "throttled" for the commands that judge


_KEPT = "; rows already written are kept, and running the import again adds only the rest"


def _import_file(store: HistoryStore, file: Path, machine: str | None, now_s: float) -> dict[str, Any]:
    """One log into ``store``: its report, with an ``error`` when nothing of it could be imported."""
    from desktop.history.filekind import is_sqlite_file
    from desktop.history.importer import import_result
    from desktop.history.nvsmi_csv import parse_nvsmi_csv

    if is_sqlite_file(file):  # reading the open database by a second descriptor drops its locks
        return {"file": str(file), "error": "is an SQLite database, not an nvidia-smi log; nothing imported"}
    try:
        size = file.stat().st_size
        bar = ProgressBar(size, f"reading {printable(file.name)}") if size >= _PROGRESS_MIN_BYTES else None
        try:
            # Written a chunk at a time as it is read: a year-long log imports in the memory of 100,000 rows.
            result = parse_nvsmi_csv(file, progress=bar.update if bar else None, now_s=now_s,
                                     sink=lambda chunk: import_result(store, chunk, machine=machine))
        finally:
            if bar:
                bar.close()
    except OSError as exc:
        return {"file": str(file), "error": f"cannot read: {exc.strerror or exc}"}
    if not result.gpu_keys():  # binary, /dev/zero, another CSV: no sample in it at all
        reasons = [reason for _, reason in result.skipped]
        why = next((r for r in reasons if "binary" in r), reasons[0] if reasons else "no data lines")
        return {"file": str(file), "error": f"not an nvidia-smi log, nothing imported ({why})"}
    return _import_report(file, result, result.imported, machine)


def _import_report(file: Path, result: ImportResult, imported: int, machine: str | None) -> dict[str, Any]:
    from desktop.history.importer import machine_of, needs_machine

    report: dict[str, Any] = {
        "file": str(file),
        "rows": result.rows,
        "imported": imported,
        "gpus": result.gpu_keys(),
        "skipped": [{"line": line, "reason": reason} for line, reason in result.skipped],
        "notes": list(result.notes),
    }
    if needs_machine(result):
        report["machine"] = machine_of(result, machine)
    return report


def _print_import(report: dict[str, Any]) -> None:
    """The report in lines; every name in it comes from outside, so each line goes through ``printable``."""
    lines: list[str] = []
    if "error" in report:
        lines.append(f"{report['file']}: {report['error']}")
    else:
        skipped = report["skipped"]
        gpus = count_text(len(report["gpus"]), "GPU")
        lines.append(f"{report['file']}: {report['imported']:,} rows imported from {gpus}, "
                     f"{report['rows'] - report['imported']:,} already stored or repeated, "
                     f"{len(skipped):,} lines skipped")
        if "machine" in report:
            lines.append(f"  no uuid or pci.bus_id in this log: its GPUs are filed as machine {report['machine']!r}, "
                         "apart from every other log's (--machine NAME files logs of one machine together)")
        lines.extend(f"  note: {note}" for note in report.get("notes", []))
        lines.extend(f"  line {item['line']}: {item['reason']}" for item in skipped[:_SKIPS_SHOWN])
        if len(skipped) > _SKIPS_SHOWN:
            lines.append(f"  ... and {len(skipped) - _SKIPS_SHOWN:,} more (use --json for all)")
    for line in lines:
        print(printable(line))
