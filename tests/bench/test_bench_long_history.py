"""Benchmark: a year of history costs what a week does (issue 38).

Two histories ending at the same instant, built in the same run: a one-week `rigscope demo`, and a year at
the shipped retention (raw samples for 14 days, minutes for a year, hours for ever: ``long_history``). On
each, the reads a user makes of one window: the week report (JSON), the advice over the last 7 days, the
Dashboard's 7-day read, the History page opening (its week list, default week and report), usage over 7
days, an export of the last hour, and the jobs list; medians of three, in-process (no start-up cost).
Beside them: the database size and the peak memory of building each (in a child process), and `demo`'s
peak memory and time for 7 and 42 days. Budgets, printed beside the figures, not asserted: each read on
the year within 1.3x of the week, demo memory within 1.5x whatever the length, under 1 GB per GPU.
Run: `make bench` (or `python -m pytest -q tests/bench/test_bench_long_history.py -s --benchmark-enable`).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from desktop import cli, config
from desktop.history.store import HistoryStore
from desktop.report_week import SystemLocalTime, week_label
from desktop.reporting import HistorySource
from desktop.ui.pages.dashboard_history import HistoryRead, read_history
from tests.bench.timing import median_s

NOW_S = 1_796_608_800.0  # Monday 2026-12-07 02:00 UTC: the last 7 days hold the whole of 2026-W49
DAY_S = 86400.0
REPO = Path(__file__).resolve().parents[2]


def _median_s(fn: Callable[[], object], repeat: int = 3) -> float:
    return median_s(fn, repeat)


def _built_in_child(code: str) -> tuple[float, float]:
    """Run ``code`` in a fresh interpreter: (seconds, its peak resident MiB)."""
    tail = "\nimport resource, sys\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code) + tail], check=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    return seconds, int(done.stderr.strip().splitlines()[-1]) / 1024.0  # ru_maxrss is in KiB on Linux


def _nvsmi_log(path: Path, rows: int) -> None:
    """An nvidia-smi CSV log of ``rows`` seconds of one busy H100."""
    head = "timestamp, index, name, pci.bus_id, utilization.gpu [%], temperature.gpu, power.draw [W], clocks.sm [MHz]\n"
    start = NOW_S - rows - 3600.0
    with path.open("w") as out:
        out.write(head)
        for i in range(rows):
            stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(start + i))
            u = (i * 7) % 101
            out.write(f"{stamp}.000, 0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, {u} %, {35 + u // 3}, "
                      f"{100 + u * 5:.2f} W, {1000 + u * 9} MHz\n")


def _cli(*argv: str) -> Callable[[], object]:
    def run() -> object:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(list(argv), now_s=NOW_S)
        assert code == 0, argv
        return code
    return run


def _reads(db: Path) -> dict[str, float]:
    settings = config.Settings()
    tz = SystemLocalTime()
    week = week_label(NOW_S - 7 * DAY_S, tz)
    with HistoryStore.open(db, readonly=True) as store:
        uuid = store.gpus()[0].uuid

        def dashboard() -> object:
            return read_history(store, [HistoryRead(0, uuid, NOW_S - 7 * DAY_S, NOW_S)])

        dashboard_s = _median_s(dashboard)
    source = HistorySource(db, settings)

    def history_page() -> object:
        source.weeks()
        source.default_week(NOW_S)
        return source.report(week)

    return {
        "week report (JSON)": _median_s(_cli("report", "--db", str(db), "--week", week, "--format", "json",
                                             "-o", os.devnull)),
        "advice, last 7 days": _median_s(_cli("advise", "--db", str(db), "--days", "7", "--json")),
        "Dashboard 7 d read": dashboard_s,
        "History page open": _median_s(history_page),
        "usage, last 7 days": _median_s(_cli("usage", "--db", str(db), "--json")),
        "export, last hour": _median_s(_cli("export", "--db", str(db), "--from", "-1h", "-o", os.devnull)),
        "jobs list": _median_s(_cli("jobs", "--db", str(db), "--json")),
    }


def test_bench_long_history(tmp_path: Path) -> None:
    week_db, year_db = tmp_path / "week.sqlite", tmp_path / "year.sqlite"
    build = """
        from pathlib import Path
        from tests.bench.long_history import build_long_history
        build_long_history(Path({path!r}), {days}, {now})
    """
    week_build = _built_in_child(build.format(path=str(week_db), days=7, now=NOW_S))
    year_build = _built_in_child(build.format(path=str(year_db), days=365, now=NOW_S))
    demo = """
        from pathlib import Path
        from desktop.jobs.demo_jobs import write_demo_week
        from desktop.telemetry.simulated import parse_profile_list
        write_demo_week(Path({path!r}), parse_profile_list("rtx4090-laptop"), days={days}, now_s={now})
    """
    demo7 = _built_in_child(demo.format(path=str(tmp_path / "d7.sqlite"), days=7, now=NOW_S))
    demo42 = _built_in_child(demo.format(path=str(tmp_path / "d42.sqlite"), days=42, now=NOW_S))

    imports = {}
    for rows in (100_000, 800_000):
        log = tmp_path / f"log{rows}.csv"
        _nvsmi_log(log, rows)
        imports[rows] = _built_in_child(f"""
            from desktop import cli
            assert cli.main(["import", "--db", {str(tmp_path / f"imp{rows}.sqlite")!r}, {str(log)!r}]) == 0
        """)

    week, year = _reads(week_db), _reads(year_db)
    print("\n\nIssue 38: one window read on a week-long and a year-long history (1 GPU, medians of 3)")
    print(f"{'read':<24}{'1 week':>10}{'1 year':>10}{'ratio':>8}  budget <= 1.30x")
    for name in week:
        ratio = year[name] / week[name]
        print(f"{name:<24}{week[name] * 1e3:>8.0f}ms{year[name] * 1e3:>8.0f}ms{ratio:>7.2f}x  "
              f"{'ok' if ratio <= 1.3 else 'OVER'}")
    sizes = {db: db.stat().st_size / 2**20 for db in (week_db, year_db)}
    print(f"{'database size':<24}{sizes[week_db]:>8.0f}MB{sizes[year_db]:>8.0f}MB"
          f"{'':>8}  budget < 1024 MB per GPU: {'ok' if sizes[year_db] < 1024 else 'OVER'}")
    print(f"{'build (s, peak MiB)':<24}{week_build[0]:>7.1f}s {year_build[0]:>7.1f}s  "
          f"peak {week_build[1]:.0f} / {year_build[1]:.0f} MiB")
    ratio = demo42[1] / demo7[1]
    print(f"demo peak memory: 7 days {demo7[1]:.0f} MiB ({demo7[0]:.1f} s), 42 days {demo42[1]:.0f} MiB "
          f"({demo42[0]:.1f} s): {ratio:.2f}x, budget <= 1.50x: {'ok' if ratio <= 1.5 else 'OVER'}")
    small, large = imports[100_000], imports[800_000]
    ratio = large[1] / small[1]
    print(f"import peak memory: 100,000 rows {small[1]:.0f} MiB ({small[0]:.1f} s), 800,000 rows {large[1]:.0f} MiB "
          f"({large[0]:.1f} s): {ratio:.2f}x, budget <= 1.50x: {'ok' if ratio <= 1.5 else 'OVER'}")
