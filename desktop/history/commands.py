"""`rigscope import`, `rigscope export` and `rigscope demo`: the history commands of the CLI."""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from desktop.errors import UserError
from desktop.paths import default_db_path, demo_db_path
from desktop.telemetry.model import GPU_METRIC_NAMES

if TYPE_CHECKING:
    from desktop.history.nvsmi_csv import ImportResult

_RELATIVE = re.compile(r"^-(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PROGRESS_MIN_BYTES = 4 << 20
_SKIPS_SHOWN = 20


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
        return now_s - float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UserError(f"cannot read the time {text!r}: use an ISO date/time (2026-11-20 or 2026-11-20T14:00) "
                        "or a relative time such as -7d, -24h, -30m") from None


# --- import --------------------------------------------------------------------------------


def import_main(args: argparse.Namespace) -> int:
    from desktop.history.importer import import_result
    from desktop.history.lock import WriterLock
    from desktop.history.nvsmi_csv import parse_nvsmi_csv
    from desktop.history.progress import ProgressBar
    from desktop.history.rollup import run_rollups
    from desktop.history.store import HistoryStore

    path = db_path(args)
    reports: list[dict[str, Any]] = []
    failed = False
    with WriterLock(path), HistoryStore.open(path) as store:
        if store.recovered_from is not None:
            print(f"note: the history database was damaged and was moved to {store.recovered_from}",
                  file=sys.stderr)
        for name in args.files:
            file = Path(name).expanduser()
            try:
                size = file.stat().st_size
                bar = ProgressBar(size, f"reading {file.name}") if size >= _PROGRESS_MIN_BYTES else None
                try:
                    result = parse_nvsmi_csv(file, progress=bar.update if bar else None)
                finally:
                    if bar:
                        bar.close()
            except OSError as exc:
                failed = True
                reports.append({"file": str(file), "error": f"cannot read: {exc.strerror or exc}"})
                continue
            imported = import_result(store, result) if result.series else 0
            reports.append(_import_report(file, result, imported))
        run_rollups(store, args.now_s)
    if args.json:
        print(json.dumps({"db": str(path), "files": reports}, indent=2))
    else:
        for report in reports:
            _print_import(report)
    return 1 if failed else 0


def _import_report(file: Path, result: ImportResult, imported: int) -> dict[str, Any]:
    return {
        "file": str(file),
        "rows": result.rows,
        "imported": imported,
        "gpus": sorted(result.series),
        "skipped": [{"line": line, "reason": reason} for line, reason in result.skipped],
    }


def _print_import(report: dict[str, Any]) -> None:
    if "error" in report:
        print(f"{report['file']}: {report['error']}")
        return
    skipped = report["skipped"]
    print(f"{report['file']}: {report['imported']:,} rows imported from {len(report['gpus'])} GPU(s), "
          f"{report['rows'] - report['imported']:,} already stored or repeated, {len(skipped):,} lines skipped")
    for item in skipped[:_SKIPS_SHOWN]:
        print(f"  line {item['line']}: {item['reason']}")
    if len(skipped) > _SKIPS_SHOWN:
        print(f"  ... and {len(skipped) - _SKIPS_SHOWN:,} more (use --json for all)")


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
                raise UserError(f"cannot write {out_path}: {exc.strerror or exc}") from exc
            print(f"wrote {rows:,} samples to {out_path}", file=sys.stderr)
        else:
            rows = write_export(store, start, end, args.format, sys.stdout)
        if rows == 0:
            span = store.time_range()
            hint = "the database holds no samples yet" if span is None else (
                "raw samples are kept for the retention period (Settings); older history is kept only as "
                "minute and hour aggregates")
            print(f"no samples between {_iso(start)} and {_iso(end)}: {hint}", file=sys.stderr)
    return 0


def _iso(time_s: float) -> str:
    return datetime.fromtimestamp(time_s).astimezone().isoformat(timespec="seconds")


def _export_rows(store: Any, start_s: float, end_s: float) -> Iterator[dict[str, Any]]:
    """Raw samples of every GPU, a day at a time, each GPU's rows in time order."""
    from desktop.history.query import read_raw

    infos = store.gpus()
    day = 86400.0
    t = start_s
    while t < end_s:
        stop = min(end_s, t + day)
        for info in infos:
            gid = store.gpu_id(info.uuid)
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


def write_export(store: Any, start_s: float, end_s: float, fmt: str, out: TextIO) -> int:
    """Write samples in [start_s, end_s) as ``csv`` or ``jsonl``; returns the number of rows."""
    count = 0
    if fmt == "jsonl":
        for row in _export_rows(store, start_s, end_s):
            out.write(json.dumps(row) + "\n")
            count += 1
        return count
    fields = ["time", "time_s", "gpu_index", "gpu_uuid", "gpu_name", *GPU_METRIC_NAMES]
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in _export_rows(store, start_s, end_s):
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
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
