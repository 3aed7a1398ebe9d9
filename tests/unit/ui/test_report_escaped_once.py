"""Report HTML escapes a hostile name exactly once in every table (issue 37: the GPU table's header read
``Bob&amp;#x27;s 4090``: escaped by the caller and again by the table)."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC
from pathlib import Path

import pytest

from desktop import config
from desktop.history.store import HistoryStore
from desktop.report_week import load_week
from desktop.reporting import ReportData, build_report, load_usage_rows
from desktop.telemetry.model import GpuProcess
from desktop.ui.report.report_html import e, render_html
from tests.unit.history.helpers import FULL_SAMPLE, snapshot

T0 = 1_790_000_040.0  # Mon 2026-09-21 14:14:00 UTC, ISO week 2026-W39
NAME = "Bob's <b>4090</b> & co"
ONCE = "Bob&#x27;s &lt;b&gt;4090&lt;/b&gt; &amp; co"
#: An entity of the escaped text escaped again: "&amp;#x27;", "&amp;lt;", "&amp;amp;", ...
TWICE = re.compile(r"&amp;(#x27|#39|lt|gt|amp|quot);")


@pytest.fixture()
def report(tmp_path: Path) -> ReportData:
    db = tmp_path / "h.sqlite"
    proc = GpuProcess(pid=10, gpu_index=0, name=NAME, user=NAME, vram_mib=6000.0, sm_util_pct=90.0, command=NAME,
                      container=f"docker:{NAME}")
    sample = dataclasses.replace(FULL_SAMPLE, power_w=200.0, energy_mj=None)
    snaps = [snapshot(T0 + i, sample=sample, processes=(proc,)) for i in range(0, 1800, 2)]
    with HistoryStore.open(db) as store:
        store.write_snapshots(snaps)
    with HistoryStore.open(db, readonly=True) as store:
        label, frame, previous, notes = load_week(store, "2026-W39", UTC, T0 + 7 * 86400)
        rows = load_usage_rows(store, frame)
    data = build_report(frame, previous, config.Settings(), UTC, label, now_s=T0 + 7 * 86400, notes=notes,
                        usage_rows=rows)
    # The GPU's own name (the report labels it "GPU 0 (<name>)"), where it shows in the header and the notes.
    return dataclasses.replace(data, labels={uuid: f"GPU 0 ({NAME})" for uuid in data.labels} or data.labels,
                               notes=(*data.notes, f"{NAME} was renamed"))


def test_escape_is_idempotent_on_what_it_escaped() -> None:
    assert e(NAME) == ONCE and e(e(NAME)) == ONCE


def test_a_hostile_name_is_escaped_once_in_every_table(report: ReportData) -> None:
    html = render_html(report, lambda key: "")
    tables = re.findall(r"<table>.*?</table>", html, re.S)
    assert len(tables) >= 4  # GPUs, processes, and the who tables by user, command, container
    assert report.labels, "the report names no GPU"
    for table in tables:
        if "cloud GPU" in table:  # the offers' names come from the shipped price list
            continue
        assert ONCE in table, table[:300]
    assert not TWICE.search(html), TWICE.search(html)
    assert "<b>4090</b>" not in html and NAME not in html
    assert html.count(ONCE) >= len(tables) - 1
