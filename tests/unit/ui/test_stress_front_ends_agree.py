"""Issue 35's Done-when for the stress path: one run through each front end, the Stress page under pytest-qt and
`rigscope stress` on the command line, on the same simulated laptop for the same length, and what each stored
compared: the same session (``StressSession.finish``) judges and stores both, so the rows, the stored series
and the verdicts agree."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pytestqt.qtbot import QtBot

from desktop.cli import main
from desktop.history.store import HistoryStore
from desktop.sessions.stress_device import device_for, window_runners
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from desktop.ui.pages.stress_page import StressPage
from desktop.ui.theme import resolve
from desktop.ui.widgets import stress_controls

#: Both runs' length: long enough for a few samples at 1 Hz, short enough for a unit test in real time (the
#: command line's runner takes real time; the page is given the same clock, the app's default).
RUN_S = 3.0


def _stored(db: Path) -> tuple[dict[str, object], set[str], int, str]:
    with HistoryStore.open(db, readonly=True) as store:
        (run,) = store.stress_runs()
        time_s, columns = store.stress_points(run.run_id)
        extra = json.loads(store.stress_run_extra(run.run_id) or "{}")
    row = {k: getattr(run, k) for k in ("gpu_uuid", "gpu_name", "workload", "dtype", "unit", "device", "throttled",
                                        "errors", "aborted", "driver_version")}
    return row, {k for k, v in columns.items() if np.isfinite(v).any()}, int(time_s.size), \
        str(extra.get("power_limit_line", ""))


def test_the_stress_page_and_rigscope_stress_store_the_same_run(qtbot: QtBot, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # The command line: `rigscope stress --simulate` for RUN_S seconds.
    cli_db = tmp_path / "cli.sqlite"
    code = main(["stress", "--simulate", "--minutes", str(RUN_S / 60.0), "--json", "--db", str(cli_db)])
    cli = json.loads(capsys.readouterr().out)
    assert code == cli["exit_code"]
    # The window: the app's wiring of the page (the session's runners and device for the window's backend),
    # a preset of the same length.
    monkeypatch.setattr(stress_controls, "PRESETS", (("Test", RUN_S), *stress_controls.PRESETS[1:]))
    backend = SimulatedBackend(parse_profile_list(None))
    page_db = tmp_path / "page.sqlite"
    page = StressPage(resolve("light"), window_runners(backend), db_path=page_db, device=device_for(backend))
    qtbot.addWidget(page)
    page.controls.presets.button(0).setChecked(True)
    with qtbot.waitSignal(page.finished, timeout=60_000) as blocker:
        page.start()
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)
    backend.close()
    verdict = blocker.args[0]

    cli_row, cli_columns, cli_points, cli_line = _stored(cli_db)
    page_row, page_columns, page_points, page_line = _stored(page_db)
    assert page_row == cli_row  # the same GPU, workload, precision, unit, device and outcome, stored the same way
    assert page_columns == cli_columns and "temperature_c" in page_columns and "throughput" in page_columns
    assert abs(page_points - cli_points) <= 1  # once a second for the same length (a tick either way)
    assert page_line == cli_line and page_line  # the power-limit line kept with the run
    assert verdict.status == cli["verdict"]["status"] and verdict.throttled == cli["verdict"]["throttled"]
    assert verdict.sustained == pytest.approx(cli["verdict"]["sustained"], rel=0.05)
