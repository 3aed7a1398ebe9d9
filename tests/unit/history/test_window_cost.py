"""A window's read costs what the window holds, not what the history holds (issue 38).

Counted, not timed: every SQLite connection the reads open counts its virtual-machine instructions (a
progress handler), which is the work SQLite does for them, the same on any machine however busy. A history
of 15 days and one of 120 days end at the same instant with the same last fortnight; each read of a window
inside that fortnight must cost on the long one within 1.3x of the short one. Before issue 38 the span query
(``time_range``: min(ts) and max(ts) in one statement) walked every row, and `jobs` read every job.
The timed figures on a year-long history are in tests/bench/test_bench_long_history.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from desktop import cli, config
from desktop.config import RetentionSettings
from desktop.history.store import HistoryStore
from desktop.report_week import SystemLocalTime, week_label
from desktop.reporting import HistorySource
from tests.bench.long_history import build_long_history

NOW_S = 1_796_608_800.0  # Monday 2026-12-07 02:00 UTC
DAY_S = 86400.0
RETENTION = RetentionSettings(raw_days=1, minute_days=60)
STEP = 100  # instructions per progress-handler call


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("window_cost")
    out = {}
    for name, days in (("short", 15), ("long", 120)):
        out[name] = folder / f"{name}.sqlite"
        build_long_history(out[name], days, NOW_S, retention=RETENTION)
    return out


@contextlib.contextmanager
def _counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Count the VM instructions of every connection opened inside (in units of ``STEP``)."""
    count = [0]
    real = sqlite3.connect

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real(*args, **kwargs)  # type: ignore[arg-type]

        def tick() -> int:
            count[0] += 1
            return 0
        conn.set_progress_handler(tick, STEP)
        return conn

    with monkeypatch.context() as m:
        m.setattr(sqlite3, "connect", connect)
        yield count


def _cli(*argv: str) -> Callable[[Path], None]:
    def run(db: Path) -> None:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert cli.main([*argv, "--db", str(db)], now_s=NOW_S) == 0
    return run


def _history_page(db: Path) -> None:
    source = HistorySource(db, config.Settings())
    source.weeks()
    source.report(source.default_week(NOW_S) or "")


def _dashboard_week(db: Path) -> None:
    from desktop.ui.pages.dashboard_history import HistoryRead, read_history

    with HistoryStore.open(db, readonly=True) as store:
        read_history(store, [HistoryRead(0, store.gpus()[0].uuid, NOW_S - 7 * DAY_S, NOW_S)])


WEEK = week_label(NOW_S - 7 * DAY_S, SystemLocalTime())
READS: dict[str, Callable[[Path], None]] = {
    "report": _cli("report", "--week", WEEK, "--format", "json", "-o", os.devnull),
    "advise": _cli("advise", "--days", "7", "--json"),
    "usage": _cli("usage", "--json"),
    "export last hour": _cli("export", "--from", "-1h", "-o", os.devnull),
    "jobs": _cli("jobs", "--limit", "10", "--json"),  # both hold more than 10
    "dashboard 7 d": _dashboard_week,
    "history page": _history_page,
}


@pytest.mark.parametrize("read", list(READS))
def test_a_window_read_costs_the_window_not_the_history(histories: dict[str, Path], read: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cost = {}
    for name, db in histories.items():
        with _counted(monkeypatch) as count:
            READS[read](db)
        cost[name] = count[0] * STEP
    assert cost["short"] > 0
    assert cost["long"] <= 1.3 * cost["short"], f"{read}: {cost['long']:,} vs {cost['short']:,} instructions"


#: Tables that hold a few rows whatever the history's length: a scan of them is no cost.
SMALL_TABLES = {"gpus", "meta", "sqlite_master", "sqlite_schema"}


def _unbounded_scans(statements: list[str], db: Path) -> set[tuple[str, str]]:
    """``(plan step, statement)`` for each read that walks a history table: a SCAN not of a small table, not
    of a partial index, and not one a LIMIT stops."""
    found = set()
    with contextlib.closing(sqlite3.connect(db)) as check:
        for sql in statements:
            text = sql.strip()
            if not text.upper().startswith(("SELECT", "WITH")):
                continue
            for _, _, _, step in check.execute("EXPLAIN QUERY PLAN " + text):
                words = step.split()
                if words[0] != "SCAN" or words[1] in SMALL_TABLES or "jobs_running" in step:
                    continue
                if " LIMIT " in text.upper() and "USING" in step:  # newest-first along an index, then stops
                    continue
                found.add((step, text[:120]))
    return found


@pytest.mark.parametrize("read", list(READS))
def test_no_window_read_walks_a_history_table(histories: dict[str, Path], read: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # EXPLAIN QUERY PLAN of every statement the read runs: each history table is searched along its key or an
    # index, so the rows visited are the window's (a `SCAN` walks the table: stress runs and jobs did).
    statements: list[str] = []
    real = sqlite3.connect

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real(*args, **kwargs)  # type: ignore[arg-type]
        conn.set_trace_callback(statements.append)  # with the bound values written in
        return conn

    with monkeypatch.context() as m:
        m.setattr(sqlite3, "connect", connect)
        READS[read](histories["long"])
    assert statements
    assert _unbounded_scans(statements, histories["long"]) == set()
