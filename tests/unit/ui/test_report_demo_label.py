"""The CSV report says when its data is the demo week, as the HTML/PDF report's note does."""

from __future__ import annotations

import csv
import dataclasses
import io
from datetime import UTC

from desktop import config
from desktop.report_output import to_csv
from desktop.reporting import build_report
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S, TWO_GPUS, demo_week_frame


def _rows(demo: bool) -> list[list[str]]:
    frame = dataclasses.replace(demo_week_frame(TWO_GPUS), demo=demo)
    data = build_report(frame, None, config.Settings(), UTC, "2026-W47", now_s=DEMO_WEEK_START_S + 8 * 86400)
    return list(csv.reader(io.StringIO(to_csv(data))))


def test_a_demo_report_carries_a_demo_label_in_its_csv() -> None:
    rows = _rows(demo=True)
    assert rows[0] == ["section", "gpu", "item", "value", "unit"]
    assert rows[1][:3] == ["note", "", "demo"] and "simulated" in rows[1][3]
    assert not any(r[0] == "note" and r[2] == "demo" for r in _rows(demo=False))
