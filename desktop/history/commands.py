"""`rigscope import`, `rigscope export` and `rigscope demo`: the history commands of the CLI.

What the environment does to them (a read-only database or folder, a full disk, a closed or
full standard output) is a one-line message and exit 2, never a traceback; an import that
fails half-way keeps what it committed (each chunk is a transaction) and a rerun adds the rest.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sqlite3
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from desktop.csvsafe import CsvWriter
from desktop.errors import UserError
from desktop.paths import default_db_path, demo_db_path
from desktop.safetext import printable
from desktop.telemetry.model import GPU_METRIC_NAMES

if TYPE_CHECKING:
    from desktop.history.nvsmi_csv import ImportResult

_RELATIVE = re.compile(r"^-(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PROGRESS_MIN_BYTES = 4 << 20
_SKIPS_SHOWN = 20
#: Times a range may name: the epoch to the last day every local time zone can still print.
_EARLIEST_S = 0.0
_LATEST_S = datetime(9999, 12, 30, tzinfo=UTC).timestamp()


def db_path(args: argparse.Namespace, demo: bool = False) -> Path:
    given = getattr(args, "db", None)
    if given:
        return Path(given).expanduser()
    return demo_db_path() if demo else default_db_path()


def parse_time(text: str, now_s: float) -> float:
    """``-7d``, ``-24h``, ``-30m``, ``now``, an ISO date or date-time (local time unless it says otherwise)."""
    text = text.strip()
    if text.lower() == "now":
        return now_s
    match = _RELATIVE.match(text.lower())
    if match:
        return _clamp(now_s - float(match.group(1)) * _UNIT_S[match.group(2)])
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"cannot read the time {printable(text)!r}: use an ISO date/time (2026-11-20 or "
                        "2026-11-20T14:00) or a relative time such as -7d, -24h, -30m") from None
    try:
        return _clamp(stamp.timestamp())
    except (OverflowError, OSError, ValueError):  # year 1 in a zone east of UTC, and the like
        return _EARLIEST_S if stamp.year < 1970 else _LATEST_S


def _clamp(time_s: float) -> float:
    """``-1000000d`` means "everything": a far time is the edge of what can be stored and printed."""
    return min(max(time_s, _EARLIEST_S), _LATEST_S)


# --- import --------------------------------------------------------------------------------


def import_main(args: argparse.Namespace) -> int:
    from desktop.history.importer import import_result
    from desktop.history.lock import WriterLock
    from desktop.history.nvsmi_csv import parse_nvsmi_csv
    from desktop.history.progress import ProgressBar
    from desktop.history.rollup import run_rollups
    from desktop.history.store import HistoryStore

    path = db_path(args)
    machine = getattr(args, "machine", None)
    reports: list[dict[str, Any]] = []
    failed = False
    try:
        with WriterLock(path), HistoryStore.open(path) as store:
            if store.recovered_from is not None:
                print(f"note: the history database was damaged and was moved to {printable(store.recovered_from)}",
                      file=sys.stderr)
            for name in args.files:
                file = Path(name).expanduser()
                try:
                    size = file.stat().st_size
                    bar = ProgressBar(size, f"reading {printable(file.name)}") if size >= _PROGRESS_MIN_BYTES else None
                    try:
                        result = parse_nvsmi_csv(file, progress=bar.update if bar else None, now_s=args.now_s)
                    finally:
                        if bar:
                            bar.close()
                except OSError as exc:
                    failed = True
                    reports.append({"file": str(file), "error": f"cannot read: {exc.strerror or exc}"})
                    continue
                imported = import_result(store, result, machine=machine) if result.series else 0
                reports.append(_import_report(file, result, imported, machine))
            run_rollups(store, args.now_s)
    except sqlite3.Error as exc:
        reason = _environment_problem(exc)
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
    return 1 if failed else 0


_KEPT = "; rows already written are kept, and running the import again adds only the rest"


def _environment_problem(exc: sqlite3.Error) -> str | None:
    """The user's words for a database error the environment caused; None for a bug."""
    from desktop.history import codec

    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith("SQLITE_FULL") or "database or disk is full" in str(exc).lower():
        return "the disk is full (or the database reached its size limit)"
    return codec.environment_problem(exc)


def _import_report(file: Path, result: ImportResult, imported: int, machine: str | None) -> dict[str, Any]:
    from desktop.history.importer import machine_of, needs_machine

    report: dict[str, Any] = {
        "file": str(file),
        "rows": result.rows,
        "imported": imported,
        "gpus": sorted(result.series),
        "skipped": [{"line": line, "reason": reason} for line, reason in result.skipped],
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
        lines.append(f"{report['file']}: {report['imported']:,} rows imported from {len(report['gpus'])} GPU(s), "
                     f"{report['rows'] - report['imported']:,} already stored or repeated, "
                     f"{len(skipped):,} lines skipped")
        if "machine" in report:
            lines.append(f"  no uuid or pci.bus_id in this log: its GPUs are filed as machine {report['machine']!r}, "
                         "apart from every other log's (--machine NAME files logs of one machine together)")
        lines.extend(f"  line {item['line']}: {item['reason']}" for item in skipped[:_SKIPS_SHOWN])
        if len(skipped) > _SKIPS_SHOWN:
            lines.append(f"  ... and {len(skipped) - _SKIPS_SHOWN:,} more (use --json for all)")
    for line in lines:
        print(printable(line))


# --- export --------------------------------------------------------------------------------


def export_main(args: argparse.Namespace) -> int:
    if getattr(args, "prometheus", False):
        from desktop.exporter import serve_main

        return serve_main(args)
    from desktop.history.store import HistoryStore

    now = args.now_s
    start = parse_time(args.from_, now) if args.from_ else now - 86400.0
    end = parse_time(args.to, now) if args.to else now
    if end <= start:
        raise UserError("--to must be after --from")
    path = db_path(args)
    with HistoryStore.open(path, readonly=True) as store:
        if args.output:
            out_path = Path(args.output).expanduser()
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
            span = store.time_range()
            hint = "the database holds no samples yet" if span is None else (
                "raw samples are kept for the retention period (Settings); older history is kept only as "
                "minute and hour aggregates")
            print(f"no samples between {_iso(start)} and {_iso(end)}: {hint}", file=sys.stderr)
    return 0


def _export_to_stdout(store: Any, start_s: float, end_s: float, fmt: str) -> int | None:
    """The rows written, or None when the reader went away (``| head``): that is a normal end."""
    out = sys.stdout
    if out is None:  # started with standard output closed (``>&-``)
        raise UserError("standard output is closed: give -o FILE to write the export to a file")
    try:
        rows = write_export(store, start_s, end_s, fmt, out)
        out.flush()
    except BrokenPipeError:
        _drop_stdout()
        return None
    except OSError as exc:  # /dev/full, a disk that filled, a closed descriptor
        _drop_stdout()
        raise UserError(f"cannot write to standard output: {exc.strerror or exc}") from exc
    return rows


def _drop_stdout() -> None:
    """Point standard output at the null device: Python's flush at exit must not fail (and print) again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _iso(time_s: float) -> str:
    return datetime.fromtimestamp(time_s).astimezone().isoformat(timespec="seconds")


def _export_rows(store: Any, start_s: float, end_s: float) -> Iterator[dict[str, Any]]:
    """Raw samples of every GPU, a day at a time, each GPU's rows in time order."""
    from desktop.history.query import read_raw

    infos = [(info, store.gpu_id(info.uuid)) for info in store.gpus()]
    day = 86400.0
    t = start_s
    while t < end_s:
        # Jump to the next day that holds a sample: `--from -1000000d` or a stray sample from
        # year 9999 must not make the export walk millions of empty days.
        t = max(t, _next_sample_s(store, [gid for _, gid in infos], t) or end_s)
        stop = min(end_s, t + day)
        for info, gid in infos:
            time_s, cols = read_raw(store, gid, t, stop)
            for i in range(len(time_s)):
                row: dict[str, Any] = {
                    "time": datetime.fromtimestamp(float(time_s[i]), UTC).isoformat(timespec="milliseconds"),
                    "time_s": round(float(time_s[i]), 3),
                    "gpu_index": info.index, "gpu_uuid": info.uuid, "gpu_name": info.name,
                }
                for m in GPU_METRIC_NAMES:
                    v = float(cols[m][i])
                    row[m] = None if math.isnan(v) else (int(v) if v.is_integer() else round(v, 3))
                yield row
        t = stop


def _next_sample_s(store: Any, gpu_ids: list[int], from_s: float) -> float | None:
    """The first raw sample time at or after ``from_s`` over ``gpu_ids`` (one index lookup each)."""
    from desktop.history import codec

    found = [row[0] for gid in gpu_ids for row in store.conn.execute(
        "SELECT min(ts) FROM gpu_samples WHERE gpu = ? AND ts >= ?", (gid, codec.to_ms(from_s))) if row[0] is not None]
    return min(found) / 1000.0 if found else None


def write_export(store: Any, start_s: float, end_s: float, fmt: str, out: TextIO) -> int:
    """Write samples in [start_s, end_s) as ``csv`` or ``jsonl``; returns the number of rows."""
    count = 0
    if fmt == "jsonl":
        for row in _export_rows(store, start_s, end_s):
            out.write(json.dumps(row) + "\n")
            count += 1
        return count
    fields = ["time", "time_s", "gpu_index", "gpu_uuid", "gpu_name", *GPU_METRIC_NAMES]
    writer = CsvWriter(out)  # a GPU name from an imported log may be "=HYPERLINK(...)"
    writer.writerow(fields)
    for row in _export_rows(store, start_s, end_s):
        writer.writerow(row[f] for f in fields)
        count += 1
    return count


# --- demo ----------------------------------------------------------------------------------


def demo_main(args: argparse.Namespace) -> int:
    from desktop.history.demo import write_demo
    from desktop.telemetry.simulated import parse_profile_list

    try:
        profiles = parse_profile_list(args.gpus)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    path = db_path(args, demo=True)
    summary = write_demo(path, profiles, days=float(args.days), seed=int(args.seed))
    if args.json:
        print(json.dumps({"db": str(summary.path), "demo": True, "start_s": summary.start_s, "end_s": summary.end_s,
                          "gpus": summary.gpus, "rows": summary.counts, "seconds": round(summary.seconds, 2)},
                         indent=2))
    else:
        days = (summary.end_s - summary.start_s) / 86400.0
        print(f"Demo history written to {summary.path} (clearly labelled as demo data): {days:g} days, "
              f"{len(summary.gpus)} simulated GPU(s) ({', '.join(summary.gpus)}), "
              f"{summary.counts['gpu_samples']:,} GPU samples, {summary.counts['events']:,} events, "
              f"in {summary.seconds:.1f} s.")
        print(f"Open it with: rigscope --db {summary.path}    or    rigscope advise --db {summary.path}")
    return 0
