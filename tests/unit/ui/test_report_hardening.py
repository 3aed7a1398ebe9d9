"""Reports against hostile names and odd histories: formulas, bidi, a swapped card, bad -o paths (issue 12)."""

from __future__ import annotations

import csv
import dataclasses
import io
from datetime import UTC
from pathlib import Path

import pytest

from desktop import cli, config
from desktop.report_output import to_csv
from desktop.reporting import ReportData, build_report
from desktop.ui.report.reports import render_charts, to_html
from tests.unit.advisor.demo_db import stored_demo_week
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S, TWO_GPUS, demo_week_frame

RLO_NAME = "invoice\u202egpj.exe"  # reads as "invoiceexe.jpg" where the override is obeyed


def _report(rename: dict[str, str] | None = None, frame_edit: object = None) -> ReportData:
    frame = demo_week_frame(TWO_GPUS)
    procs = frame.processes
    assert procs is not None
    if rename:
        names = tuple(rename.get(n, n) for n in procs.names)
        frame = dataclasses.replace(frame, processes=dataclasses.replace(procs, names=names))
    if callable(frame_edit):
        frame = frame_edit(frame)
    return build_report(frame, None, config.Settings(), UTC, "2026-W47", now_s=DEMO_WEEK_START_S + 8 * 86400)


def _with_process_name(report: ReportData, name: str) -> ReportData:
    procs = report.summary.top_processes
    return dataclasses.replace(report, summary=dataclasses.replace(
        report.summary, top_processes=(dataclasses.replace(procs[0], name=name),)))


@pytest.fixture(scope="module")
def report() -> ReportData:
    return _report()


@pytest.mark.parametrize("name", ["\t=1+2", "\r=cmd|' /C calc'!A0", "=HYPERLINK(1)", "+1+1", "@SUM(A1)", "-2+3"])
def test_report_csv_defuses_every_formula_start(report: ReportData, name: str) -> None:
    rows = list(csv.reader(io.StringIO(to_csv(_with_process_name(report, name)), newline="")))
    (process,) = [r for r in rows if r[0] == "process"]
    # A leading tab or CR is shown as its escape (no raw control character in a report): no formula then.
    assert process[2] == ("'" + name if name[0] not in "\t\r" else name.replace("\t", "\\x09").replace("\r", "\\x0d"))


def test_report_csv_keeps_numbers_as_numbers(report: ReportData) -> None:
    rows = list(csv.reader(io.StringIO(to_csv(_with_process_name(report, "-5")))))
    (process,) = [r for r in rows if r[0] == "process"]
    assert process[2] == "-5" and float(process[3]) >= 0  # a negative number is not a formula


def test_bidi_overrides_are_neutralised_in_html_and_csv() -> None:
    report = _report({"bench.py": RLO_NAME})
    assert any(p.name == RLO_NAME for p in report.summary.top_processes)
    html = to_html(report, {key: b"" for key in report.chart_captions})
    text = to_csv(report)
    for rendered in (html, text):
        assert "\u202e" not in rendered
        assert "invoice\\u202egpj.exe" in rendered  # shown, so the reader sees something was there


def _swap_second_card_in(frame):  # type: ignore[no-untyped-def]
    """GPU 1 becomes a second "GPU 0": the card in slot 0 was swapped during the week."""
    first, second = frame.gpus
    meta = dataclasses.replace(second.meta, index=0, name="NVIDIA GeForce RTX 4090 (new card)")
    return dataclasses.replace(frame, gpus=(first, dataclasses.replace(second, meta=meta)))


def test_a_swapped_card_gets_its_own_charts_and_labels(qapp) -> None:  # qapp: charts need a QApplication
    report = _report(frame_edit=_swap_second_card_in)
    uuids = [g.uuid for g in report.summary.gpus]
    assert len(set(uuids)) == 2 and {g.index for g in report.summary.gpus} == {0}
    assert set(report.series) == set(uuids)  # keyed on the card, not its slot
    pngs = render_charts(report)
    assert len(pngs) == 2 * 5 and len(set(pngs.values())) == len(pngs)
    captions = list(report.chart_captions.values())
    assert sum("new card" in c for c in captions) == 5
    assert sum("NVIDIA GeForce RTX 4090 Laptop GPU" in c for c in captions) == 5
    html = to_html(report, pngs)
    assert html.count("data:image/png;base64,") == 2 * 5


@pytest.fixture(scope="module")
def week_db() -> Path:
    return stored_demo_week()


@pytest.mark.parametrize("where", ["folder", "missing folder"])
def test_a_pdf_to_a_folder_or_a_missing_folder_says_why(week_db: Path, tmp_path: Path, where: str,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    target = tmp_path if where == "folder" else tmp_path / "no" / "such" / "r.pdf"
    rc = cli.main(["report", "--db", str(week_db), "--week", "2026-W47", "--format", "pdf", "-o", str(target)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert ("is a folder" if where == "folder" else "does not exist") in err
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere
