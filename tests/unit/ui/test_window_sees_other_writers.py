"""Issue 32 item 9: the window shows what other writers put in a history: the demo week's jobs on the Jobs page
after "Load demo week", and a stress run that `rigscope stress` stored from another process in the Stress page's
"Earlier runs" (when the page is shown again, and while it stays shown)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop.sessions.stress import list_runs
from desktop.telemetry.scenarios import WeekScenario, week_start
from desktop.ui.pages.jobs_page import JobsPage
from desktop.ui.pages.stress_page import StressPage
from desktop.ui.theme import DARK
from tests.unit.ui.conftest import FakeClock
from tests.unit.ui.test_stress_page import sim_runners
from tests.waits import DEADLINE_S

#: The simulated 4090 Laptop's VRAM (the demo's scenario is built from it).
VRAM_MIB = 16376.0


def _after_two_finetune_jobs() -> float:
    """A moment just after the demo week's second finetune job ended (so a short demo holds two jobs)."""
    episodes = [e for e in WeekScenario([VRAM_MIB]).episodes(0) if e.kind == "finetune"]
    return week_start(1_790_000_000.0) + episodes[1].end_s + 60.0


def test_load_demo_week_lists_the_demos_jobs_on_the_jobs_page(make_app, tmp_path: Path) -> None:
    h = make_app(clock=FakeClock(start_s=_after_two_finetune_jobs()))
    app = h.app
    app.window.show()
    h.tick(2)
    app.window.show_page("jobs")  # read before the demo: this machine's history has no job
    jobs = app.window.page("jobs")
    assert isinstance(jobs, JobsPage)
    h.app.qt_app.processEvents()
    jobs.list_loader.wait(DEADLINE_S)
    h.app.qt_app.processEvents()
    assert jobs.records == [] and jobs.stack.currentWidget() is jobs.empty
    app.demo_path = tmp_path / "demo.sqlite"
    app.demo_days = 0.09  # 2.2 h: the two finetune runs of Tuesday afternoon
    app.load_demo_week()
    app.demo_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    jobs.list_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    assert [r.name for r in jobs.records] == ["finetune_lora.py", "finetune_lora.py"]
    assert jobs.stack.currentWidget() is not jobs.empty
    assert jobs.status.text() == "2 jobs recorded (newest first)."
    jobs.detail_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    cells = [jobs.card_table.item(r, 1).text() for r in range(jobs.card_table.rowCount())]
    assert any("(Vast.ai, market)" in c for c in cells)  # the card's cloud rows: never "(Vast.ai (market))"
    assert not any("))" in c for c in cells), cells
    shown = jobs.detail
    app.window.show_page("dashboard")
    app.window.show_page("jobs")  # read again on show; nothing new: the card is not read again
    jobs.list_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    assert not jobs.detail_loader.busy and jobs.detail is shown
    app.dashboard.simulated_bar.demo_button.click()  # Leave demo: this machine's (empty) list again
    jobs.list_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    assert jobs.records == [] and jobs.stack.currentWidget() is jobs.empty


def test_jobs_page_built_during_the_demo_reads_the_demo(make_app, tmp_path: Path) -> None:
    h = make_app(clock=FakeClock(start_s=_after_two_finetune_jobs()))
    app = h.app
    h.tick(2)
    app.demo_path = tmp_path / "demo.sqlite"
    app.demo_days = 0.09
    app.load_demo_week()
    app.demo_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    app.window.show_page("jobs")
    jobs = app.window.page("jobs")
    assert isinstance(jobs, JobsPage)
    jobs.list_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    assert len(jobs.records) == 2


def _stress_from_the_cli(db: Path) -> None:
    """`rigscope stress` in another process, storing its run into ``db`` (the CLI's own path)."""
    code = ("import sys\nfrom desktop.cli import main\n"
            f"raise SystemExit(main(['stress', '--device', 'sim', '--minutes', '0.03', '--db', {str(db)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE_S * 3,
                          check=False)
    assert "Saved as run" in done.stdout, done.stderr  # its exit code is the verdict's (7: too short to judge)


def _page(qtbot: QtBot, db: Path) -> StressPage:
    page = StressPage(DARK, sim_runners(), db_path=db)
    qtbot.addWidget(page)
    page.show()
    qtbot.waitUntil(lambda: not page.loading, timeout=DEADLINE_S * 1000)
    return page


def test_a_run_stored_by_the_cli_appears_when_the_page_is_shown_again(qtbot: QtBot, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    _stress_from_the_cli(db)  # the history exists, with one run, before the page opens
    page = _page(qtbot, db)
    assert len(page.earlier_runs.runs) == 1
    page.earlier_runs.timer.stop()  # only showing the page again may read the new run here
    _stress_from_the_cli(db)
    assert len(list_runs(db)) == 2
    page.hide()  # another page of the window
    page.show()
    qtbot.waitUntil(lambda: len(page.earlier_runs.runs) == 2, timeout=DEADLINE_S * 1000)
    assert page.earlier_runs.table.rowCount() == 2
    assert page.earlier_runs.title.text() == "Earlier runs"


def test_a_run_stored_by_the_cli_appears_while_the_page_stays_shown(qtbot: QtBot, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    page = _page(qtbot, db)  # no history yet: the CLI creates it
    assert page.earlier_runs.runs == [] and page.earlier_runs.title.text() == "Earlier runs: none stored yet"
    assert page.earlier_runs.timer.isActive()
    _stress_from_the_cli(db)
    qtbot.waitUntil(lambda: len(page.earlier_runs.runs) == 1, timeout=DEADLINE_S * 1000)
    assert page.earlier_runs.table.rowCount() == 1
    assert page.verdict_card.title.text() != "No test run yet"  # the card before a run names the newest stored
    page.hide()
    assert not page.earlier_runs.timer.isActive()  # nobody looks: no reads


def test_the_windows_stress_page_reads_runs_again_when_shown(make_app, tmp_path: Path) -> None:
    h = make_app()
    app = h.app
    app.db_path = tmp_path / "history.sqlite"  # where the Stress page reads runs, set before it is built
    app.window.show()
    app.window.show_page("stress")
    page = app.stress
    assert page.db_path == app.db_path
    page.earlier_runs.timer.stop()  # only showing the page again may read the new run here
    page.earlier_runs.loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    _stress_from_the_cli(app.db_path)
    app.window.show_page("dashboard")
    app.window.show_page("stress")
    page.earlier_runs.loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    assert len(page.earlier_runs.runs) == 1
