"""What every `rigscope` subcommand shares, in one copy: the database path, times and ranges,
opening the GPU backend, settings problems, the progress bar, text tables and standard output.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from advisor.safetext import printable
from desktop import config
from desktop.errors import UserError
from desktop.paths import default_db_path, demo_db_path
from desktop.telemetry.backend import GpuBackend

if TYPE_CHECKING:
    from desktop.exporter import ExporterHandle
    from desktop.telemetry.sampler import Fallback

# --- the history database -------------------------------------------------------------------


def db_path(args: argparse.Namespace, demo: bool = False) -> Path:
    """``--db``, else the default database (the demo one for ``demo``), as ``dbfile.resolve_db`` makes it:
    ``~`` expanded, symlinks resolved, checked. The result is what the lock, store and writer take as it is:
    it is resolved once per command (the first call keeps the result in ``args``)."""
    from desktop.history.dbfile import resolve_db

    resolved: dict[bool, Path] = getattr(args, "_db_paths", {})
    if demo not in resolved:
        given = getattr(args, "db", None)
        args._db_paths = {**resolved, demo: resolve_db(given or (demo_db_path() if demo else default_db_path()))}
    path: Path = args._db_paths[demo]
    return path


def check_db_arg(args: argparse.Namespace) -> None:
    """Refuse a ``--db`` that cannot be a history database (a folder, another program's file) before a command
    starts: a stress run would otherwise run for minutes and only then fail to save, and `service install`
    would write a unit that fails."""
    if getattr(args, "db", None):
        db_path(args)
    if getattr(args, "command", None) in OPENS_HISTORY:  # before the command opens it: nothing else has it open
        from desktop.history.store import HistoryStore

        HistoryStore.close_orphaned_jobs_at(db_path(args), getattr(args, "now_s", None) or time.time())


#: Commands that open the history: at their start a job whose `rigscope run` died is closed at its last
#: heartbeat (``HistoryStore.close_orphaned_jobs``), so no card reads it as still running.
OPENS_HISTORY = frozenset({"gui", "record", "import", "export", "serve", "stress", "analyze", "advise", "report",
                           "run", "jobs", "usage"})


# --- output files ---------------------------------------------------------------------------

#: ``-o -``: write to standard output.
STDOUT = "-"


def check_output(path: Path, example: str = "report.html") -> None:
    """Say why ``path`` cannot be written before doing the work, in one line naming what is wrong:
    a folder given as the file, a folder that does not exist, no permission."""
    if path.is_dir():
        raise UserError(f"cannot write {printable(path)}: it is a folder; give a file name such as "
                        f"{printable(path / example)}")
    if not path.parent.is_dir():
        raise UserError(f"cannot write {printable(path)}: the folder {printable(path.parent)} does not exist")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError(f"cannot write {printable(path)}: no permission to write there")


# --- times and ranges -----------------------------------------------------------------------

_RELATIVE = re.compile(r"^-(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
#: Times a range may name: the epoch to the last day every local time zone can still print.
EARLIEST_S = 0.0
LATEST_S = datetime(9999, 12, 30, tzinfo=UTC).timestamp()
TIME_HELP = "ISO date/time (2026-11-20, 2026-11-20T14:00), 'now', or relative: -90s, -15m, -24h, -7d, -1w"


def parse_time(text: str, now_s: float) -> float:
    """``-90s``, ``-15m``, ``-24h``, ``-7d``, ``-1w``, ``now``, an ISO date or date-time (local time
    unless it says otherwise), as epoch seconds; a UserError saying the accepted forms otherwise."""
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
        return EARLIEST_S if stamp.year < 1970 else LATEST_S


def _clamp(time_s: float) -> float:
    """``-1000000d`` means "everything": a far time is the edge of what can be stored and printed."""
    return min(max(time_s, EARLIEST_S), LATEST_S)


def time_range(args: argparse.Namespace, default_span_s: float) -> tuple[float, float]:
    """``--from``/``--to`` as (start_s, end_s): by default the ``default_span_s`` before "now"
    (``args.now_s``) up to now; a UserError when the end is not after the start."""
    now_s = args.now_s
    start_s = parse_time(args.from_, now_s) if args.from_ else now_s - default_span_s
    end_s = parse_time(args.to, now_s) if args.to else now_s
    if end_s <= start_s:
        raise UserError("--to must be after --from")
    return start_s, end_s


def attach_relative_times(argv: Iterable[str]) -> list[str]:
    """``--from -7d`` -> ``--from=-7d``: argparse would take ``-7d`` for an option. Nothing after ``--`` is
    touched: it is another program's command line (`rigscope run -- tool --from -7d`)."""
    out: list[str] = []
    tokens = list(argv)
    for i, token in enumerate(tokens):
        if token == "--":
            return out + tokens[i:]
        if out and out[-1] in ("--from", "--to") and len(token) > 1 and token[0] == "-" and token[1].isdigit():
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def iso_local(time_s: float) -> str:
    return datetime.fromtimestamp(time_s).astimezone().isoformat(timespec="seconds")


# --- the GPU backend and settings -----------------------------------------------------------


def open_backend(simulate: str | None, *, fallback: Fallback = "simulated") -> GpuBackend:
    """The GPU backend for ``--simulate`` (None: NVML; when NVML cannot start, what ``fallback`` says: the
    labelled simulated GPU, or "unavailable" for what records: no GPU, NVML tried again); an unknown
    simulated profile is the user's mistake, said in one line."""
    from desktop.telemetry.sampler import open_gpu_backend

    try:
        return open_gpu_backend(simulate, fallback=fallback)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def interval_problem(seconds: float) -> str:
    """Why ``--interval`` is refused ("" when it is in ``config.INTERVAL_RANGE_S``, the range Settings allows)."""
    low, high = config.INTERVAL_RANGE_S
    if low <= seconds <= high:  # NaN is refused too
        return ""
    return f"--interval {seconds:g}: choose between {low:g} and {high:g} seconds"


def check_interval(seconds: float) -> float:
    """``seconds`` when it is an allowed sampling interval; else a ``UserError`` that gives the range."""
    problem = interval_problem(seconds)
    if problem:
        raise UserError(problem)
    return seconds


def sampling_interval(args: argparse.Namespace, settings: config.Settings | None = None, *,
                      default: float | None = None) -> float:
    """The seconds between samples of a command that samples (record, run, serve, sample): ``--interval``
    (``add_interval``), else ``default``, else the Settings' sampling interval (``settings``; read with
    ``load_settings`` only when neither gives one), checked by ``check_interval``: outside the range, a
    ``UserError`` (one line, exit 2)."""
    seconds = args.interval
    if seconds is None:
        if default is not None:
            seconds = default
        else:
            seconds = (settings if settings is not None else load_settings()[0]).sampling.interval_s
    return check_interval(float(seconds))


def interval_arg(text: str) -> float:
    """argparse ``type`` of ``--interval``: a number of seconds in the one allowed range (else exit 2)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    problem = interval_problem(seconds)
    if problem:
        raise argparse.ArgumentTypeError(problem.removeprefix(f"--interval {seconds:g}: "))
    return seconds


def load_settings() -> tuple[config.Settings, list[config.SettingsProblem]]:
    """The settings, each problem in them said on standard error as ``settings: key: message``
    (the defaults are used for what is wrong)."""
    settings, problems = config.load()
    for key, message in problems:
        print(f"settings: {key}: {message}", file=sys.stderr)
    return settings, problems


def start_prometheus(listen: str) -> ExporterHandle:
    """The Prometheus endpoint on ``listen`` (`serve`, `record --prometheus`), with a note on standard
    error when other machines can reach it: there is no authentication."""
    try:
        from desktop.exporter import is_loopback, start_exporter
    except ImportError as exc:
        raise UserError(f"Prometheus metrics are not available in this build ({exc})") from exc
    handle = start_exporter(listen)
    if not is_loopback(handle.address):
        print(f"Note: {handle.address} is reachable from other machines; anyone who can reach it can read "
              "these GPU metrics (there is no authentication).", file=sys.stderr, flush=True)
    return handle


# --- options several commands take (each command's ``add_arguments`` calls them) -------------

DB_HELP = "history database (default: the one in your data folder)"


def add_db(parser: argparse.ArgumentParser, help_text: str = DB_HELP) -> None:
    """``--db PATH``: every command that reads or writes history takes it (``help_text`` says what for)."""
    parser.add_argument("--db", metavar="PATH", help=help_text)


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: every command that prints results takes it."""
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def add_simulate(parser: argparse.ArgumentParser) -> None:
    """``--simulate[=PROFILES]``: the simulated GPU instead of NVML (``open_backend``)."""
    parser.add_argument("--simulate", nargs="?", const="", default=None, metavar="PROFILES",
                        help="use the simulated GPU (optionally profiles, e.g. rtx4090-laptop,rtx4090)")


def add_interval(parser: argparse.ArgumentParser, default: float | None = None) -> None:
    """``--interval S`` in the range Settings allows (``config.INTERVAL_RANGE_S``); None: the Settings' interval."""
    shown = f"{default:g}" if default is not None else "the sampling interval in Settings"
    low, high = config.INTERVAL_RANGE_S
    parser.add_argument("--interval", type=interval_arg, default=default, metavar="S",
                        help=f"seconds between samples, {low:g} to {high:g} (default: {shown})")


def add_listen(parser: argparse.ArgumentParser) -> None:
    """``--listen ADDR:PORT`` of the Prometheus endpoint."""
    parser.add_argument("--listen", default=config.DEFAULT_LISTEN, metavar="ADDR:PORT",
                        help=f"Prometheus listen address (default {config.DEFAULT_LISTEN}; 0.0.0.0:PORT for every "
                             "interface)")


def add_range(parser: argparse.ArgumentParser, default_from: str) -> None:
    """``--from TIME --to TIME`` in the one grammar (``parse_time``); read them with ``time_range``."""
    parser.add_argument("--from", dest="from_", metavar="TIME", help=f"start: {TIME_HELP}; default: {default_from}")
    parser.add_argument("--to", metavar="TIME", help="end, in the same forms; default: now")


# --- the terminal ---------------------------------------------------------------------------


class ProgressBar:
    """One redrawn line on standard error, drawn only on a terminal: ``label [####------]  42.0%``
    and an optional detail after it. ``update(done)`` redraws at most ten times a second (and
    always at the end); ``close`` ends the line.

    Without a terminal (a log, a CI job) nothing is redrawn; with ``line_every_s`` a plain line
    ``label  42.0%  detail`` is written instead each time that much more time has passed."""

    def __init__(self, total: float, label: str = "", stream: TextIO | None = None, width: int = 30, *,
                 line_every_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total if total > 0 else 1.0
        self.label = label
        # sys.stderr when called, not when this module was imported (it may have been replaced since).
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.line_every_s = line_every_s if line_every_s is not None and line_every_s > 0 else None
        self._clock = clock
        self._started_at = clock()
        self._lines_written = 0
        self._drawn_at: float | None = None
        self._drawn_chars = 0

    def _plain_line(self, done: float, detail: str) -> None:
        """Without a terminal: one line per ``line_every_s`` of elapsed time, none in between."""
        if self.line_every_s is None:
            return
        due = int((self._clock() - self._started_at) // self.line_every_s)
        if due <= self._lines_written:
            return
        self._lines_written = due
        share = min(1.0, max(0.0, done / self.total))
        parts = [self.label, f"{share * 100:.1f}%", detail]
        self.stream.write("  ".join(p for p in parts if p) + "\n")
        self.stream.flush()

    def update(self, done: float, detail: str = "") -> None:
        if not self.enabled:
            self._plain_line(done, detail)
            return
        now = self._clock()
        if self._drawn_at is not None and now - self._drawn_at < 0.1 and done < self.total:
            return
        self._drawn_at = now
        share = min(1.0, max(0.0, done / self.total))
        filled = int(share * self.width)
        line = (f"{self.label} " if self.label else "") + f"[{'#' * filled}{'-' * (self.width - filled)}] " \
            f"{share * 100:5.1f}%" + (f"  {detail}" if detail else "")
        # Blank what a longer earlier line left behind (the detail changes length).
        self.stream.write("\r" + line + " " * max(0, self._drawn_chars - len(line)))
        self.stream.flush()
        self._drawn_chars = len(line)

    def close(self) -> None:
        if self._drawn_chars:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn_chars = 0


def text_table(rows: list[tuple[str, ...]], indent: str = "  ") -> str:
    """Rows of cells as left-aligned columns (the first row is the header).

    Cells hold GPU and process names (another user names a process): each goes through
    ``printable``, so no escape sequence or bidi override reaches the terminal."""
    rows = [tuple(printable(cell) for cell in row) for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def drop_stdout() -> None:
    """Point standard output at the null device after its reader went away (``| head``) or it
    failed (``/dev/full``): Python's flush at exit must not fail, and print, again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real descriptor (a test's capture, a closed stdout)
        pass
