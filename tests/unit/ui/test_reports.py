"""Weekly reports: HTML (escaped), PDF (opens, has pages, looks right), JSON, CSV and the CLI."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import subprocess
from datetime import UTC
from pathlib import Path

import pytest

from desktop import cli, config
from desktop.report_output import to_csv, to_json
from desktop.report_week import week_bounds
from desktop.reporting import ReportData, build_report
from desktop.ui.report.reports import render_charts, to_html, write_pdf
from tests.integration.tools import require_tool
from tests.unit.advisor.demo_db import stored_demo_week
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S, TWO_GPUS, demo_week_frame

EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def report() -> ReportData:
    frame = demo_week_frame(TWO_GPUS)
    procs = frame.processes
    assert procs is not None
    # the benchmark on battery gets a hostile name: it shows up in the process table and the advice
    names = tuple(EVIL if n == "bench.py" else n for n in procs.names)
    frame = dataclasses.replace(frame, processes=dataclasses.replace(procs, names=names))
    return build_report(frame, None, config.Settings(), UTC, "2026-W47", now_s=DEMO_WEEK_START_S + 8 * 86400)


@pytest.fixture(scope="module")
def pngs(report: ReportData, qapp) -> dict[str, bytes]:  # qapp: a QApplication must exist
    return render_charts(report)


def test_html_escapes_process_names_and_embeds_charts(report: ReportData, pngs: dict[str, bytes]) -> None:
    html = to_html(report, pngs)
    assert EVIL not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("data:image/png;base64,") == 2 * 5  # per GPU: util, temp, power, heatmap, busy hours
    assert "Demo data" in html and "Top recommendations" in html and "Own vs rent" in html
    assert "train_dataloader.py starved by the CPU" in html


def test_pdf_opens_and_has_pages(report: ReportData, pngs: dict[str, bytes], tmp_path: Path) -> None:
    path = tmp_path / "week.pdf"
    pages = write_pdf(report, pngs, path)
    assert pages >= 3
    assert path.read_bytes().startswith(b"%PDF")
    require_tool("pdfinfo", "poppler-utils")  # skips locally without it; fails in CI, which installs it
    require_tool("pdftoppm", "poppler-utils")
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    assert re.search(rf"^Pages:\s+{pages}$", info, re.MULTILINE), info
    subprocess.run(["pdftoppm", "-png", "-r", "60", "-f", "1", "-l", "1", str(path), str(tmp_path / "page")],
                   check=True, capture_output=True)
    (png,) = tmp_path.glob("page*.png")
    assert png.stat().st_size > 10_000  # a rendered page with text and tables, not a blank sheet


def test_json_report(report: ReportData) -> None:
    data = json.loads(to_json(report))
    assert data["week"] == "2026-W47"
    gpu = data["summary"]["gpus"][0]
    # above 10 % utilization (advisor.busy), with the memory-bound run (Tue evening, 4 h)
    assert gpu["busy_hours"] == pytest.approx(68, abs=2)
    assert len(gpu["heatmap_pct"]) == 7 and len(gpu["heatmap_pct"][0]) == 24
    assert {r["rule_id"] for r in data["summary"]["recommendations"]} <= {
        r["rule_id"] for r in data["advice"]["recommendations"]}
    assert EVIL in json.dumps(data, ensure_ascii=False)  # JSON carries the name as data, unescaped


def test_csv_report(report: ReportData) -> None:
    rows = list(csv.reader(io.StringIO(to_csv(report))))
    assert rows[0] == ["section", "gpu", "item", "value", "unit"]
    busy = next(r for r in rows if r[0] == "gpu" and r[2] == "busy")
    assert float(busy[3]) == pytest.approx(68, abs=2)  # busy above 10 % utilization
    assert sum(1 for r in rows if r[0] == "heatmap") == 2 * 7 * 24  # per GPU
    assert any(r[0] == "process" and r[2] == EVIL for r in rows)


def test_csv_defuses_formulas(report: ReportData) -> None:
    procs = report.summary.top_processes
    evil = dataclasses.replace(report, summary=dataclasses.replace(
        report.summary, top_processes=(dataclasses.replace(procs[0], name="=HYPERLINK(1)"),)))
    assert "'=HYPERLINK(1)" in to_csv(evil)


def test_week_bounds() -> None:
    start, end = week_bounds("2026-W47", UTC)
    assert start == DEMO_WEEK_START_S and end - start == 7 * 86400
    from desktop.errors import UserError

    with pytest.raises(UserError, match="ISO week"):
        week_bounds("last week", UTC)


@pytest.fixture
def two_week_db() -> Path:
    """The demo week plus the last day of the week before (enough for "against the previous week")."""
    return stored_demo_week()


def test_report_cli_writes_each_format(two_week_db: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    for fmt in ("json", "csv", "html", "pdf"):
        out = tmp_path / f"r.{fmt}"
        assert cli.main(["report", "--db", str(two_week_db), "--week", "2026-W47", "--format", fmt,
                         "-o", str(out)]) == 0
        assert out.stat().st_size > 1000
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["summary"]["has_previous"] is True  # W46's Sunday is stored too
    # Only W46's Sunday is stored: a partial week, its sums compared per recorded day and said so (issue 24).
    assert any(c["label"] == "Busy hours per recorded day" for c in data["summary"]["changes"])
    assert "compared per recorded day" in data["summary"]["changes_note"]
    assert "wrote" in capsys.readouterr().err  # status on stderr, stdout only for results


def test_default_week_is_the_last_full_week_or_the_newest_with_data(two_week_db: Path) -> None:
    from desktop.history.store import HistoryStore
    from desktop.report_week import load_week

    with HistoryStore.open(two_week_db, readonly=True) as store:
        label, frame, previous, notes = load_week(store, None, UTC, DEMO_WEEK_START_S + 9 * 86400)
        assert (label, notes) == ("2026-W47", ()) and frame.gpus and previous is not None
        label, _, _, notes = load_week(store, None, UTC, DEMO_WEEK_START_S + 60 * 86400)
        assert label == "2026-W47" and "newest week with data" in notes[0]


def test_report_cli_default_week_and_errors(two_week_db: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    out = tmp_path / "r.json"
    # "now" is passed in: the default week (the last full one) must not depend on today's date.
    wednesday_after = DEMO_WEEK_START_S + 9 * 86400
    assert cli.main(["report", "--db", str(two_week_db), "--format", "json", "-o", str(out)],
                    now_s=wednesday_after) == 0
    report = json.loads(out.read_text())
    assert report["week"] == "2026-W47"
    assert report["generated_s"] == wednesday_after
    assert cli.main(["report", "--db", str(two_week_db), "--week", "2020-W01", "--format", "json",
                     "-o", str(out)]) == 2
    assert "no history recorded in 2020-W01" in capsys.readouterr().err
    assert cli.main(["report", "--db", str(tmp_path / "none.sqlite"), "-o", str(out)]) == 2
    assert "rigscope demo" in capsys.readouterr().err
    assert cli.main(["report", "--db", str(two_week_db), "--week", "2026-W47", "--format", "json",
                     "-o", str(tmp_path / "no" / "such" / "dir.json")]) == 2
    assert "cannot write" in capsys.readouterr().err
