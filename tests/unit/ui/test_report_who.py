"""The weekly report's "Who used the GPU" table and chart, from a real history file with two users."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from datetime import UTC
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from desktop import config
from desktop.history.store import HistoryStore
from desktop.report_output import to_csv, to_json
from desktop.report_week import load_week
from desktop.reporting import ReportData, build_report, chart_key, load_usage_rows
from desktop.telemetry.model import GpuProcess
from tests.unit.history.helpers import FULL_SAMPLE, snapshot

T0 = 1_790_000_040.0  # Mon 2026-09-21 14:14:00 UTC, in ISO week 2026-W39: on a minute, as the rollups are
ANA = GpuProcess(pid=10, gpu_index=0, name="python3", user="ana", vram_mib=6000.0, sm_util_pct=90.0,
                 command="python train.py --cfg a.yaml", container="docker:trainer (3f2a9c1b4e5d)")
BO = GpuProcess(pid=20, gpu_index=0, name="python3", user="bo", vram_mib=2000.0, sm_util_pct=20.0,
                command="python infer.py")


@pytest.fixture()
def history(tmp_path: Path) -> Path:
    """One hour at a steady 200 W (200 Wh), sampled every 2 s, processes polled every 10 s:
    the first half hour ana trains alone (100 Wh, all hers); the second bo's inference joins, ana at
    60 % SM and bo at 20 % (100 Wh split 3:1: ana 75, bo 25). ana: 175 Wh, 1 GPU-h; bo: 25 Wh, 0.5 GPU-h."""
    db = tmp_path / "h.sqlite"
    sample = dataclasses.replace(FULL_SAMPLE, power_w=200.0, energy_mj=None)
    shared = dataclasses.replace(ANA, sm_util_pct=60.0)
    snaps = []
    for i in range(0, 3600, 2):
        procs = () if i % 10 else ((ANA,) if i < 1800 else (shared, BO))
        snaps.append(snapshot(T0 + i, sample=sample, processes=procs))
    with HistoryStore.open(db) as store:
        store.write_snapshots(snaps)
    return db


def _settings() -> config.Settings:
    settings = config.Settings()
    return dataclasses.replace(settings, costs=dataclasses.replace(settings.costs, electricity_price_per_kwh=0.4,
                                                                   currency="EUR"))


@pytest.fixture()
def report(history: Path) -> ReportData:
    db = history
    settings = _settings()
    with HistoryStore.open(db, readonly=True) as store:
        label, frame, previous, notes = load_week(store, "2026-W39", UTC, T0 + 7 * 86400)
        rows = load_usage_rows(store, frame)
    return build_report(frame, previous, settings, UTC, label, now_s=T0 + 7 * 86400, notes=notes, usage_rows=rows)


def test_who_tables_split_the_shared_half_hour_by_sm_share(report: ReportData) -> None:
    by_user, by_command, by_container = report.who
    assert [line.key for line in by_user.lines] == ["ana", "bo"]
    ana, bo = by_user.lines
    assert ana.energy_wh == pytest.approx(175.0, abs=1.0) and bo.energy_wh == pytest.approx(25.0, abs=1.0)
    assert ana.gpu_hours == pytest.approx(1.0, abs=0.01) and bo.gpu_hours == pytest.approx(0.5, abs=0.01)
    assert ana.cost == pytest.approx(0.175 * 0.4, abs=0.001)
    assert by_user.basis == "sm"
    assert [line.key for line in by_command.lines] == ["python train.py --cfg a.yaml", "python infer.py"]
    assert [line.key for line in by_container.lines] == ["docker:trainer (3f2a9c1b4e5d)", "(no container)"]


def test_the_html_report_shows_who_used_the_gpu_and_its_chart(report: ReportData) -> None:
    from desktop.ui.report.reports import render_charts, to_html

    pngs = render_charts(report)
    assert pngs[chart_key("who", 0)].startswith(b"\x89PNG")
    text = to_html(report, pngs)
    section = text[text.index("<h2><a name=\"who\"></a>Who used the GPU</h2>"):text.index("<h2>Own vs rent</h2>")]
    assert "<td>ana</td><td class=\"num\">1.0 GPU-h</td><td class=\"num\">175 Wh</td>" in section
    assert "<td>bo</td><td class=\"num\">30 GPU-min</td><td class=\"num\">25.0 Wh</td>" in section
    assert "docker:trainer (3f2a9c1b4e5d)" in section and "split by each process&#x27;s SM share" in section
    assert "Who used the GPU: energy per user" in text  # the chart's caption, among the charts


def test_json_and_csv_carry_the_who_tables(report: ReportData) -> None:
    payload = json.loads(to_json(report))
    tables = {t["by"]: t for t in payload["who_used_the_gpu"]}
    assert set(tables) == {"user", "command", "container"}
    assert [line["key"] for line in tables["user"]["lines"]] == ["ana", "bo"]
    rows = list(csv.reader(io.StringIO(to_csv(report))))
    energy = {r[2]: float(r[3]) for r in rows if r[0] == "who by user" and r[4] == "Wh"}
    assert energy == pytest.approx({"ana: energy": 175.0, "bo: energy": 25.0}, abs=1.0)


def test_a_week_without_process_rows_has_no_who_section(report: ReportData) -> None:
    from desktop.ui.report.reports import render_charts, to_html

    bare = dataclasses.replace(report, who=(), chart_captions={k: v for k, v in report.chart_captions.items()
                                                               if not k.startswith("who")})
    text = to_html(bare, render_charts(bare))
    assert "Who used the GPU" not in text


def test_the_history_page_shows_who_used_the_gpu_from_the_database(qtbot: QtBot, history: Path) -> None:
    from desktop.reporting import HistorySource
    from desktop.ui.pages.advisor_history import HistoryPage

    source = HistorySource(history, _settings())
    page = HistoryPage(source.weeks, source.report)
    qtbot.addWidget(page)
    page.resize(1100, 760)
    page.show()
    qtbot.waitExposed(page)
    assert not page.who_button.isEnabled()
    page.page_shown()
    qtbot.waitUntil(lambda: not page.loading, timeout=20_000)
    text = page.view.toPlainText()
    assert "Who used the GPU" in text and "docker:trainer (3f2a9c1b4e5d)" in text
    assert page.who_button.isEnabled()
    bar = page.view.verticalScrollBar()
    top = bar.value()
    page.who_button.click()  # Alt+W: the section's anchor
    assert bar.value() > top
    page.grab().save(str(history.parent / "history_who.png"))
