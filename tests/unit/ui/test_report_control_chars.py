"""Every report writer shows hostile names escaped: ESC, BEL, NUL and lone surrogates in process, command,
container and user names never reach an HTML, CSV or JSON report raw (issue 21, defect 10)."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC
from pathlib import Path

import pytest

from desktop import cli, config
from desktop.history.store import HistoryStore
from desktop.report_output import to_csv, to_json
from desktop.report_week import load_week
from desktop.reporting import ReportData, build_report, load_usage_rows
from desktop.telemetry.model import GpuProcess
from desktop.ui.report.report_html import render_html
from tests.unit.history.helpers import FULL_SAMPLE, snapshot

T0 = 1_790_000_040.0  # Mon 2026-09-21 14:14:00 UTC, ISO week 2026-W39
#: What a terminal or a spreadsheet must never get raw: C0 (but LF between rows/lines), DEL, C1, surrogates.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
HOSTILE = GpuProcess(pid=10, gpu_index=0, name="py\x1b]0;pwned\x07", user="ana\x1b[2J", vram_mib=6000.0,
                     sm_util_pct=90.0, command="python\x00 train.py \x1b[31mred", container="docker:evil\x07\x9b1m")
SURROGATE_USER = "bo\udcff\udc9b"


@pytest.fixture()
def history(tmp_path: Path) -> Path:
    db = tmp_path / "h.sqlite"
    sample = dataclasses.replace(FULL_SAMPLE, power_w=200.0, energy_mj=None)
    snaps = [snapshot(T0 + i, sample=sample, processes=() if i % 10 else (HOSTILE,)) for i in range(0, 1800, 2)]
    with HistoryStore.open(db) as store:
        store.write_snapshots(snaps)
    return db


def _report(db: Path) -> ReportData:
    with HistoryStore.open(db, readonly=True) as store:
        label, frame, previous, notes = load_week(store, "2026-W39", UTC, T0 + 7 * 86400)
        rows = load_usage_rows(store, frame)
    report = build_report(frame, previous, config.Settings(), UTC, label, now_s=T0 + 7 * 86400, notes=notes,
                          usage_rows=rows)
    assert report.who and report.who[0].lines and report.summary.top_processes
    # A surrogate-escaped name (psutil decodes /proc with surrogateescape) on top of the stored ones.
    who = tuple(dataclasses.replace(t, lines=(*t.lines, dataclasses.replace(t.lines[0], key=SURROGATE_USER)))
                for t in report.who)
    top = (*report.summary.top_processes,
           dataclasses.replace(report.summary.top_processes[0], name="x\udcff\x00"))
    return dataclasses.replace(report, who=who, summary=dataclasses.replace(report.summary, top_processes=top),
                               notes=(*report.notes, "note \x1b[5m\udcfe"))


def test_every_report_writer_escapes_control_characters_and_surrogates(history: Path) -> None:
    report = _report(history)
    by = {t.by for t in report.who}
    assert {"user", "command", "container"} <= by
    writers = {"html": lambda: render_html(report, lambda key: ""), "csv": lambda: to_csv(report),
               "json": lambda: to_json(report)}
    for name, write in writers.items():
        text = write()
        found = RAW_CONTROL.findall(text)
        assert not found, f"{name} report has raw {found!r}"
        text.encode("utf-8")  # and it can be written
        if name != "json":  # JSON escapes are its own (\u001b): the reader's parser gives back the bytes
            assert "\\x1b]0;pwned\\x07" in text and "ana\\x1b[2J" in text and "bo\\xff\\x9b" in text
            assert "docker:evil\\x07\\x9b1m" in text and "python\\x00 train.py" in text


def test_report_csv_to_standard_output_writes_no_control_characters(
        history: Path, capfd: pytest.CaptureFixture[str]) -> None:
    for fmt in ("csv", "json"):
        assert cli.main(["report", "--db", str(history), "--week", "2026-W39", "--format", fmt, "-o", "-"],
                        now_s=T0 + 7 * 86400) == 0
        out = capfd.readouterr().out
        assert "pwned" in out and not RAW_CONTROL.findall(out), fmt
